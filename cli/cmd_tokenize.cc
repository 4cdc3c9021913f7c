// `verlctl tokenize`: a user's way to check a Hugging Face tokenizer: text to ids (HF's
// encode(text, add_special_tokens=False)), ids to text (--decode), chat messages to the prompt
// the chat template renders (--chat); one at a time from the command line or stdin, or one JSON
// value per stdin line (--jsonl). Needs no trainer module: text/ has no torch.
#include <iostream>
#include <iterator>
#include <sstream>

#include "cli/app.h"
#include "cli/output.h"
#include "common/error.h"
#include "text/hf_tokenizer.h"

namespace verl::cli {
namespace {

using Json = nlohmann::ordered_json;

enum class Mode { kEncode, kDecode, kChat };

struct TokenizeArgs {
  std::string model;
  bool chat = false;
  bool decode = false;
  bool jsonl = false;
  bool skip_special_tokens = false;
  bool no_generation_prompt = false;
  std::vector<std::string> inputs;
};

[[noreturn]] void usage(const std::string& what, const std::string& hint) { throw Error{ExitCode::kUsage, what, hint}; }

std::vector<int64_t> parse_ids(const std::vector<std::string>& args) {
  std::vector<int64_t> ids;
  for (const auto& a : args) {
    std::string s = a;
    for (char& c : s) {
      if (c == ',' || c == '[' || c == ']') c = ' ';
    }
    std::istringstream in(s);
    std::string word;
    while (in >> word) {
      size_t used = 0;
      int64_t id = -1;
      try {
        id = std::stoll(word, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != word.size() || id < 0) usage("--decode: \"" + word + "\" is not a token id", "give ids as integers: 9906 4435 or 9906,4435");
      ids.push_back(id);
    }
  }
  return ids;
}

std::vector<int64_t> json_ids(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array()) usage(where + ": expected a JSON array of token ids", "one array per line: [9906, 4435]");
  std::vector<int64_t> ids;
  for (const auto& x : j) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0) usage(where + ": expected a JSON array of token ids", "one array per line: [9906, 4435]");
    ids.push_back(x.get<int64_t>());
  }
  return ids;
}

void print_ids(std::ostream& out, const std::vector<int64_t>& ids) {
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
  out << "\n";
}

// --jsonl: one JSON value per stdin line in, one JSON value per line out.
void run_jsonl(const text::HfTokenizer& tok, Mode mode, const TokenizeArgs& a, std::istream& in, std::ostream& out) {
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::string where = "stdin line " + std::to_string(n);
    // An empty line is an error rather than skipped: output line N always answers input line N.
    if (line.empty() || line == "\r") usage(where + ": empty", "--jsonl reads one JSON value per line");
    nlohmann::json value;
    try {
      value = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      usage(where + ": not JSON (" + std::string(e.what()) + ")", "--jsonl reads one JSON value per line");
    }
    switch (mode) {
      case Mode::kEncode:
        if (!value.is_string()) usage(where + ": expected a JSON string", "one string per line: \"Hello world\"");
        out << Json(tok.encode(value.get<std::string>())).dump() << "\n";
        break;
      case Mode::kDecode:
        out << Json(tok.decode(json_ids(value, where), a.skip_special_tokens)).dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
        break;
      case Mode::kChat:
        out << Json(tok.apply_chat_template(value, !a.no_generation_prompt)).dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
        break;
    }
  }
  out.flush();
}

void run_tokenize(Context& ctx, const TokenizeArgs& a) {
  if (a.chat && a.decode) usage("--chat and --decode exclude each other", "run 'verlctl tokenize --help'");
  if (a.jsonl && !a.inputs.empty()) usage("--jsonl reads stdin: no TEXT arguments", "pipe one JSON value per line into 'verlctl tokenize --jsonl'");
  if (a.decode && !a.jsonl && a.inputs.empty()) usage("--decode needs token ids", "verlctl tokenize --model DIR --decode 9906 4435");
  Mode mode = a.decode ? Mode::kDecode : a.chat ? Mode::kChat : Mode::kEncode;
  auto tok = text::load_hf_tokenizer(a.model);
  std::ostream& out = *ctx.out;
  if (a.jsonl) {
    run_jsonl(*tok, mode, a, std::cin, out);
    return;
  }
  bool json_out = ctx.output == OutputFormat::kJson;
  if (mode == Mode::kDecode) {
    std::vector<int64_t> ids = parse_ids(a.inputs);
    std::string text = tok->decode(ids, a.skip_special_tokens);
    if (json_out) print_json(out, Json{{"ids", ids}, {"text", text}});
    else out << text << "\n";
    return;
  }
  std::vector<std::string> inputs = a.inputs;
  if (inputs.empty()) inputs.push_back(std::string(std::istreambuf_iterator<char>(std::cin), {}));
  if (mode == Mode::kChat) {
    if (inputs.size() != 1) usage("--chat takes one JSON messages list", "verlctl tokenize --model DIR --chat '[{\"role\": \"user\", \"content\": \"Hi\"}]'");
    nlohmann::json messages;
    try {
      messages = nlohmann::json::parse(inputs[0]);
    } catch (const nlohmann::json::exception& e) {
      usage("--chat: the messages are not JSON (" + std::string(e.what()) + ")", "give a list: [{\"role\": \"user\", \"content\": \"Hi\"}]");
    }
    std::string prompt = tok->apply_chat_template(messages, !a.no_generation_prompt);
    if (json_out) print_json(out, Json{{"prompt", prompt}, {"ids", tok->encode(prompt)}});
    else out << prompt << (prompt.empty() || prompt.back() != '\n' ? "\n" : "");
    return;
  }
  Json rows = Json::array();
  for (const auto& text : inputs) {
    std::vector<int64_t> ids = tok->encode(text);
    if (json_out) rows.push_back(Json{{"text", text}, {"ids", ids}});
    else print_ids(out, ids);
  }
  if (json_out) print_json(out, rows);
}

}  // namespace

void register_tokenize(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<TokenizeArgs>();
  auto* cmd = app.add_subcommand("tokenize", "Encode text to token ids, decode ids, or render a chat with a model's tokenizer");
  cmd->add_option("--model", a->model, "Model directory with tokenizer.json and tokenizer_config.json")->required();
  cmd->add_flag("--chat", a->chat, "Read a JSON messages list and print the prompt its chat template renders");
  cmd->add_flag("--decode", a->decode, "Read token ids and print their text");
  cmd->add_flag("--jsonl", a->jsonl, "Read one JSON value per stdin line, write one JSON value per line");
  cmd->add_flag("--skip-special-tokens", a->skip_special_tokens, "With --decode, leave special tokens out");
  cmd->add_flag("--no-generation-prompt", a->no_generation_prompt, "With --chat, do not open the assistant's turn");
  // CLI11 would split an argument "[...]" at its commas as a list when the option allows extra
  // args, and a messages list or a text is not one. Without extra args, a positional takes more
  // arguments only while under its minimum: hence the huge minimum, and TakeAll so that fewer
  // are no error.
  cmd->add_option("text", a->inputs, "Texts to encode (default: all of stdin), ids with --decode, a messages list with --chat")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->expected(1 << 20, -1)
      ->allow_extra_args(false);
  cmd->footer(
      "Plain encoding adds no BOS/EOS (HF's add_special_tokens=False); special-token text such as\n"
      "<|im_start|> in TEXT is read as that token.\n"
      "Examples:\n"
      "  verlctl tokenize --model ~/models/Qwen3-0.6B 'Hello world'\n"
      "  verlctl tokenize --model ~/models/Qwen3-0.6B --decode 9707 1879\n"
      "  verlctl tokenize --model ~/models/Qwen3-0.6B --chat '[{\"role\": \"user\", \"content\": \"Hi\"}]'\n"
      "  printf '\"a b\"\\n\"c\"\\n' | verlctl tokenize --model DIR --jsonl\n"
      "  printf '[9707, 1879]\\n' | verlctl tokenize --model DIR --decode --jsonl");
  cmd->callback([&ctx, a] { run_tokenize(ctx, *a); });
}

}  // namespace verl::cli

#include "text/hf_tokenizer.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "text/bpe.h"
#include "text/chat_template.h"
#include "text/hf_components.h"
#include "text/unicode.h"

namespace verl::text {
namespace {

using nlohmann::json;

constexpr const char* kDirHint =
    "--model takes a Hugging Face model directory with tokenizer.json and tokenizer_config.json";

[[noreturn]] void config_error(const std::string& what) {
  throw Error{ExitCode::kInvalidConfig, "tokenizer_config.json: " + what, kDirHint};
}

// A special-token entry of tokenizer_config.json: a string, or an AddedToken {content: ...}.
std::optional<std::string> token_text(const json& config, const std::string& key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  config_error(key + " must be a string or {\"content\": ...}");
}

// End-of-turn tokens of well-known chat formats: stop ids when the files carry them as
// special tokens, even where eos_token names another (Llama 3's eos is <|end_of_text|>, its
// chat turns end with <|eot_id|>).
constexpr std::array<const char*, 6> kEndOfTurnTokens = {"<|im_end|>", "<|endoftext|>", "<|eot_id|>",
                                                         "<|eom_id|>", "<end_of_turn>", "<|end|>"};

bool is_word_char(char32_t c) {
  if (c < 0x80) return std::isalnum(static_cast<int>(c)) || c == '_';
  return !unicode::is_white_space(c);  // approximation of HF's char::is_alphanumeric beyond ASCII
}

char32_t last_code_point(std::string_view s) {
  size_t i = s.size();
  while (i > 0 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i;
  if (i > 0) --i;
  size_t k = i;
  return unicode::next_code_point(s, k);
}

std::string clean_up_tokenization(std::string s) {
  static const std::array<std::pair<const char*, const char*>, 10> kRules = {{{" .", "."},
                                                                             {" ?", "?"},
                                                                             {" !", "!"},
                                                                             {" ,", ","},
                                                                             {" ' ", "'"},
                                                                             {" n't", "n't"},
                                                                             {" 'm", "'m"},
                                                                             {" 's", "'s"},
                                                                             {" 've", "'ve"},
                                                                             {" 're", "'re"}}};
  for (const auto& [from, to] : kRules) {
    std::string out;
    std::string_view f(from);
    size_t prev = 0;
    for (size_t pos = s.find(f); pos != std::string::npos; pos = s.find(f, pos + f.size())) {
      out.append(s, prev, pos - prev);
      out += to;
      prev = pos + f.size();
    }
    out.append(s, prev, std::string::npos);
    s = std::move(out);
  }
  return s;
}

// Whether a post_processor (TemplateProcessing, or one inside a Sequence) puts `token` first
// for a single text: what add_special_tokens=True does when tokenizer_config.json does not
// say add_bos_token.
bool template_starts_with(const json& post, const std::string& token) {
  if (!post.is_object()) return false;
  auto t = post.find("type");
  std::string type = t != post.end() && t->is_string() ? t->get<std::string>() : "";
  if (type == "Sequence" && post.contains("processors") && post["processors"].is_array()) {
    for (const auto& p : post["processors"]) {
      if (template_starts_with(p, token)) return true;
    }
    return false;
  }
  if (type != "TemplateProcessing" || !post.contains("single") || !post["single"].is_array() || post["single"].empty()) {
    return false;
  }
  const json& first = post["single"][0];
  return first.is_object() && first.contains("SpecialToken") && first["SpecialToken"].is_object() &&
         first["SpecialToken"].value("id", json("")) == json(token);
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error{ExitCode::kInvalidConfig, path.string() + ": cannot be read", kDirHint};
  }
  std::string text;
  in.seekg(0, std::ios::end);
  text.resize(static_cast<size_t>(in.tellg()));
  in.seekg(0);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  return text;
}

// Parses a file of the model directory; `parse` turns its text into JSON.
template <typename Parse>
json parse_file(const std::filesystem::path& path, const std::string& name, Parse&& parse) {
  std::string text = read_file(path);
  try {
    return parse(text);
  } catch (const json::exception& e) {
    throw Error{ExitCode::kInvalidConfig, name + ": not valid JSON (" + e.what() + ")", "path: " + path.string()};
  }
}

json read_json_file(const std::filesystem::path& path, const std::string& name) {
  return parse_file(path, name, [](const std::string& text) { return json::parse(text); });
}

}  // namespace

// Added-token matcher: a byte trie, leftmost-longest (HF uses Aho-Corasick, LeftmostLongest).
struct HfTokenizer::Trie {
  struct Node {
    std::vector<std::pair<unsigned char, int>> next;  // few children per node
    int token = -1;                                   // index in added_
  };
  std::vector<Node> nodes{Node{}};
  std::array<bool, 256> first{};

  void insert(const std::string& s, int token) {
    if (s.empty()) return;
    first[static_cast<unsigned char>(s[0])] = true;
    int n = 0;
    for (unsigned char c : s) {
      int child = -1;
      for (const auto& [ch, idx] : nodes[static_cast<size_t>(n)].next) {
        if (ch == c) child = idx;
      }
      if (child < 0) {
        child = static_cast<int>(nodes.size());
        nodes[static_cast<size_t>(n)].next.emplace_back(c, child);
        nodes.emplace_back();
      }
      n = child;
    }
    if (nodes[static_cast<size_t>(n)].token < 0) nodes[static_cast<size_t>(n)].token = token;
  }
  // The longest token starting at s[pos]: (token index, length), or (-1, 0).
  std::pair<int, size_t> longest(std::string_view s, size_t pos) const {
    std::pair<int, size_t> best{-1, 0};
    if (!first[static_cast<unsigned char>(s[pos])]) return best;
    int n = 0;
    for (size_t i = pos; i < s.size(); ++i) {
      int child = -1;
      for (const auto& [ch, idx] : nodes[static_cast<size_t>(n)].next) {
        if (ch == static_cast<unsigned char>(s[i])) child = idx;
      }
      if (child < 0) break;
      n = child;
      if (nodes[static_cast<size_t>(n)].token >= 0) best = {nodes[static_cast<size_t>(n)].token, i + 1 - pos};
    }
    return best;
  }
  bool empty() const { return nodes.size() == 1; }
};

namespace {
const json& model_of(const json& tj) {
  if (!tj.is_object()) hf::invalid("(top level)", "must be an object");
  auto it = tj.find("model");
  if (it == tj.end() || !it->is_object()) hf::invalid("model", "must be an object");
  return *it;
}
}  // namespace

HfTokenizer::HfTokenizer(const json& tj, const json& config, const json& generation_config)
    : HfTokenizer(tj, hf::bpe_tables_from_json(model_of(tj), "model"), config, generation_config) {}

HfTokenizer::HfTokenizer(const json& tj, hf::BpeTables&& tables, const json& config, const json& generation_config)
    : raw_trie_(std::make_unique<Trie>()), normalized_trie_(std::make_unique<Trie>()) {
  if (!tj.is_object()) hf::invalid("(top level)", "must be an object");
  if (!config.is_object()) config_error("must be an object");

  static const json kNull;
  auto field = [&](const char* key) -> const json& {
    auto it = tj.find(key);
    return it == tj.end() ? kNull : *it;
  };
  const json& model = field("model");
  if (!model.is_object()) hf::invalid("model", "must be an object");
  std::string model_type = "BPE";
  if (auto it = model.find("type"); it != model.end()) {
    if (!it->is_string()) hf::invalid("model.type", "must be a string");
    model_type = it->get<std::string>();
  }
  if (model_type != "BPE") hf::invalid("model.type", "\"" + model_type + "\" is not supported (only BPE is)");
  if (auto it = model.find("vocab"); it == model.end() || !it->is_object()) {
    hf::invalid("model.vocab", "must be an object {token: id}");
  }
  model_ = std::make_unique<hf::BpeModel>(model, std::move(tables), "model");
  normalizer_ = hf::make_normalizer(field("normalizer"), "normalizer");
  pre_tokenizer_ = hf::make_pre_tokenizer(field("pre_tokenizer"), "pre_tokenizer");
  decoder_ = hf::make_decoder(field("decoder"), "decoder");
  // post_processor: only add_special_tokens=True uses it, and we never do.

  int64_t max_id = model_->max_id();
  static const json kEmpty = json::array();
  const json& added = field("added_tokens").is_null() ? kEmpty : field("added_tokens");
  if (!added.is_array()) hf::invalid("added_tokens", "must be a list");
  for (size_t i = 0; i < added.size(); ++i) {
    const json& a = added[i];
    std::string where = "added_tokens[" + std::to_string(i) + "]";
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || a["id"].get<int64_t>() < 0 || !a.contains("content") ||
        !a["content"].is_string()) {
      hf::invalid(where, "must be {\"id\": N, \"content\": \"...\", ...}");
    }
    AddedToken t;
    t.content = a["content"].get<std::string>();
    t.id = a["id"].get<int64_t>();
    auto flag = [&](const char* key, bool fallback) {
      auto it = a.find(key);
      if (it == a.end() || it->is_null()) return fallback;
      if (!it->is_boolean()) hf::invalid(where + "." + key, "must be true or false");
      return it->get<bool>();
    };
    t.special = flag("special", false);
    t.lstrip = flag("lstrip", false);
    t.rstrip = flag("rstrip", false);
    t.single_word = flag("single_word", false);
    t.normalized = flag("normalized", !t.special);
    max_id = std::max(max_id, t.id);
    added_by_id_[t.id] = added_.size();
    added_.push_back(std::move(t));
  }
  for (size_t i = 0; i < added_.size(); ++i) {
    const AddedToken& t = added_[i];
    if (t.normalized && normalizer_) normalized_trie_->insert(normalizer_->normalize(t.content), static_cast<int>(i));
    else raw_trie_->insert(t.content, static_cast<int>(i));
  }
  vocab_size_ = max_id + 1;

  auto config_flag = [&](const char* key) {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) return false;
    if (!it->is_boolean()) config_error(std::string(key) + " must be true or false");
    return it->get<bool>();
  };
  clean_up_tokenization_spaces_ = config_flag("clean_up_tokenization_spaces");

  auto resolve = [&](const std::string& key) -> std::optional<int64_t> {
    auto text = token_text(config, key);
    if (!text) return std::nullopt;
    auto id = token_to_id(*text);
    if (!id) config_error(key + " \"" + *text + "\" is neither an added token nor in the vocabulary");
    return id;
  };
  std::vector<int64_t> generation_eos;
  if (generation_config.is_object() && generation_config.contains("eos_token_id")) {
    const json& e = generation_config["eos_token_id"];
    if (e.is_number_integer()) generation_eos.push_back(e.get<int64_t>());
    else if (e.is_array()) {
      for (const auto& x : e) {
        if (x.is_number_integer()) generation_eos.push_back(x.get<int64_t>());
      }
    }
  }
  bos_id_ = resolve("bos_token");
  if (!bos_id_ && generation_config.is_object() && generation_config.value("bos_token_id", json()).is_number_integer()) {
    bos_id_ = generation_config["bos_token_id"].get<int64_t>();
  }
  if (auto eos = resolve("eos_token")) eos_id_ = *eos;
  else if (!generation_eos.empty()) eos_id_ = generation_eos.front();
  else config_error("eos_token is missing (and generation_config.json names no eos_token_id)");
  pad_id_ = resolve("pad_token").value_or(eos_id_);
  if (auto it = config.find("add_bos_token"); it != config.end() && !it->is_null()) {
    add_bos_token_ = config_flag("add_bos_token");
  } else if (auto bos = token_text(config, "bos_token")) {
    add_bos_token_ = template_starts_with(field("post_processor"), *bos);
  }

  stop_ids_.push_back(eos_id_);
  for (int64_t id : generation_eos) stop_ids_.push_back(id);
  for (const char* name : kEndOfTurnTokens) {
    for (const auto& t : added_) {
      if (t.special && t.content == name) stop_ids_.push_back(t.id);
    }
  }
  std::vector<int64_t> unique;
  for (int64_t id : stop_ids_) {
    if (std::find(unique.begin(), unique.end(), id) == unique.end()) unique.push_back(id);
  }
  stop_ids_ = std::move(unique);

  if (auto it = config.find("chat_template"); it != config.end() && !it->is_null()) {
    if (it->is_string()) {
      chat_template_ = it->get<std::string>();
    } else if (it->is_array()) {
      for (const auto& entry : *it) {
        if (entry.is_object() && entry.value("name", std::string()) == "default" && entry.contains("template") &&
            entry["template"].is_string()) {
          chat_template_ = entry["template"].get<std::string>();
        }
      }
      if (chat_template_.empty()) config_error("chat_template is a list without a {\"name\": \"default\"} entry");
    } else {
      config_error("chat_template must be a string or a list of {name, template}");
    }
  }
  template_context_ = json::object();
  for (auto it = config.begin(); it != config.end(); ++it) {
    const std::string& key = it.key();
    if (key.size() > 6 && key.compare(key.size() - 6, 6, "_token") == 0) {
      if (it->is_string()) template_context_[key] = it->get<std::string>();
      else if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
        template_context_[key] = (*it)["content"].get<std::string>();
    }
  }
}

HfTokenizer::~HfTokenizer() = default;

std::optional<int64_t> HfTokenizer::token_to_id(const std::string& token) const {
  for (const auto& t : added_) {
    if (t.content == token) return t.id;
  }
  return model_->token_to_id(token);
}

template <typename Rest>
void HfTokenizer::split_added(const std::string& text, const Trie& trie, std::vector<int64_t>& ids, Rest&& rest) const {
  if (trie.empty()) {
    rest(text, true);
    return;
  }
  size_t start = 0;  // the start of the pending non-token part
  size_t pos = 0;
  while (pos < text.size()) {
    auto [token, len] = trie.longest(text, pos);
    if (token < 0) {
      ++pos;
      continue;
    }
    const AddedToken& t = added_[static_cast<size_t>(token)];
    size_t b = pos, e = pos + len;
    if (t.single_word) {
      bool left_ok = b == 0 || !is_word_char(last_code_point(std::string_view(text).substr(0, b)));
      size_t k = e;
      bool right_ok = e == text.size() || !is_word_char(unicode::next_code_point(text, k));
      if (!left_ok || !right_ok) {
        ++pos;
        continue;
      }
    }
    if (t.lstrip) {
      while (b > start) {
        size_t k = b;
        while (k > start && (static_cast<unsigned char>(text[k - 1]) & 0xC0) == 0x80) --k;
        if (k > start) --k;
        size_t kk = k;
        if (!unicode::is_white_space(unicode::next_code_point(text, kk))) break;
        b = k;
      }
    }
    if (t.rstrip) {
      while (e < text.size()) {
        size_t k = e;
        if (!unicode::is_white_space(unicode::next_code_point(text, k))) break;
        e = k;
      }
    }
    if (b > start) rest(text.substr(start, b - start), start == 0);
    ids.push_back(t.id);
    start = pos = e;
  }
  if (start < text.size()) rest(text.substr(start), start == 0);
}

void HfTokenizer::encode_section(const std::string& section, bool at_text_start, std::vector<int64_t>& ids) const {
  std::vector<std::string> pieces{section};
  if (pre_tokenizer_) pre_tokenizer_->pre_tokenize(pieces, at_text_start);
  for (const auto& p : pieces) model_->tokenize(p, ids);
}

std::vector<int64_t> HfTokenizer::encode(const std::string& input) const {
  std::string text = unicode::to_valid_utf8(input);
  std::vector<int64_t> ids;
  split_added(text, *raw_trie_, ids, [&](const std::string& part, bool part_at_start) {
    std::string normalized = normalizer_ ? normalizer_->normalize(part) : part;
    split_added(normalized, *normalized_trie_, ids, [&](const std::string& section, bool section_at_start) {
      encode_section(section, part_at_start && section_at_start, ids);
    });
  });
  return ids;
}

std::string HfTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::string out;
  std::vector<std::string> run;  // tokens the decoder gets together
  bool through = decoder_ && decoder_->passes_added_tokens_through();
  auto flush = [&] {
    if (run.empty()) return;
    if (decoder_) {
      decoder_->decode_chain(run);
      for (const auto& s : run) out += s;
    } else {
      for (size_t i = 0; i < run.size(); ++i) out += (i ? " " : "") + run[i];
    }
    run.clear();
  };
  for (int64_t id : ids) {
    auto a = added_by_id_.find(id);
    if (a != added_by_id_.end()) {
      const AddedToken& t = added_[a->second];
      if (skip_special_tokens && t.special) continue;
      if (through) {
        flush();
        out += t.content;
      } else {
        run.push_back(t.content);
      }
      continue;
    }
    if (const std::string* token = model_->id_to_token(id)) run.push_back(*token);
  }
  flush();
  return clean_up_tokenization_spaces_ ? clean_up_tokenization(std::move(out)) : out;
}

std::vector<int64_t> HfTokenizer::encode_prompt(const std::string& text) const {
  std::vector<int64_t> ids;
  if (add_bos_token_ && bos_id_) ids.push_back(*bos_id_);
  const auto body = encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

std::string HfTokenizer::apply_chat_template(const json& messages, bool add_generation_prompt) const {
  if (messages.is_string()) return messages.get<std::string>();
  if (!messages.is_array()) {
    throw Error{ExitCode::kInvalidConfig, "prompt must be a string or a chat list",
                "use \"prompt\": \"...\" or [{\"role\": \"user\", \"content\": \"...\"}]"};
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!messages[i].is_object() || !messages[i].contains("role") || !messages[i]["role"].is_string()) {
      throw Error{ExitCode::kInvalidConfig,
                  "chat message " + std::to_string(i) + " must be an object with a string \"role\"",
                  "use [{\"role\": \"user\", \"content\": \"...\"}]"};
    }
  }
  if (chat_template_.empty()) {
    throw Error{ExitCode::kInvalidConfig, "tokenizer_config.json has no chat_template",
                "use a model whose tokenizer_config.json has one (an instruct/chat model), or plain prompts"};
  }
  return render_chat_template(chat_template_, messages, add_generation_prompt, template_context_);
}

std::unique_ptr<HfTokenizer> load_hf_tokenizer(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw Error{ExitCode::kInvalidConfig, "tokenizer directory " + dir + " does not exist", kDirHint};
  }
  fs::path base(dir);
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    if (!fs::exists(base / name, ec)) {
      throw Error{ExitCode::kInvalidConfig, "tokenizer directory " + dir + " has no " + name, kDirHint};
    }
  }
  hf::BpeTables tables;
  json tj = parse_file(base / "tokenizer.json", "tokenizer.json",
                       [&](const std::string& text) { return hf::parse_tokenizer_json(text, tables); });
  json config = read_json_file(base / "tokenizer_config.json", "tokenizer_config.json");
  json generation;
  if (fs::exists(base / "generation_config.json", ec)) {
    generation = read_json_file(base / "generation_config.json", "generation_config.json");
  }
  return std::make_unique<HfTokenizer>(tj, std::move(tables), config, generation);
}

}  // namespace verl::text

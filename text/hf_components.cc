#include "text/hf_components.h"

#include <algorithm>
#include <stdexcept>

#include "common/error.h"
#include "common/strings.h"
#include "text/regex.h"
#include "text/unicode.h"

namespace verl::text::hf {
namespace {

using nlohmann::json;

// GPT-2's pre-tokenizer regex (ByteLevel with use_regex).
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

std::string type_of(const json& j, const std::string& path) {
  if (!j.is_object()) invalid(path, "must be an object");
  auto it = j.find("type");
  if (it == j.end() || !it->is_string()) invalid(path + ".type", "is missing");
  return it->get<std::string>();
}

[[noreturn]] void unsupported(const std::string& path, const std::string& type) {
  invalid(path + ".type", "\"" + type + "\" is not supported");
}

std::string get_string(const json& j, const std::string& key, const std::string& path, const char* fallback = nullptr) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (fallback) return fallback;
    invalid(path + "." + key, "is missing");
  }
  if (!it->is_string()) invalid(path + "." + key, "must be a string");
  return it->get<std::string>();
}

bool get_bool(const json& j, const std::string& key, const std::string& path, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) invalid(path + "." + key, "must be true or false");
  return it->get<bool>();
}

size_t get_size(const json& j, const std::string& key, const std::string& path, size_t fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_integer() || it->get<int64_t>() < 0) invalid(path + "." + key, "must be a non-negative integer");
  return it->get<size_t>();
}

const json& get_list(const json& j, const std::string& key, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) invalid(path + "." + key, "must be a list");
  return *it;
}

// One code point of a string field (Metaspace's replacement, Strip's content).
char32_t get_char(const json& j, const std::string& key, const std::string& path, const char* fallback) {
  std::string s = get_string(j, key, path, fallback);
  std::u32string cps = unicode::decode_utf8(s);
  if (cps.size() != 1) invalid(path + "." + key, "must be one character");
  return cps[0];
}

class StringPattern final : public Pattern {
 public:
  explicit StringPattern(std::string literal) : literal_(std::move(literal)) {}
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const override {
    std::vector<std::pair<size_t, size_t>> out;
    if (literal_.empty()) return out;
    for (size_t pos = s.find(literal_); pos != std::string_view::npos; pos = s.find(literal_, pos + literal_.size())) {
      out.emplace_back(pos, pos + literal_.size());
    }
    return out;
  }

 private:
  std::string literal_;
};

class RegexPattern final : public Pattern {
 public:
  explicit RegexPattern(const std::string& pattern) : regex_(pattern) {}
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const override { return regex_.find_all(s); }

 private:
  Regex regex_;
};

std::unique_ptr<Pattern> make_regex(const std::string& pattern, const std::string& path) {
  try {
    return std::make_unique<RegexPattern>(pattern);
  } catch (const std::invalid_argument& e) {
    invalid(path, e.what());
  }
}

// ---- normalizers

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(unicode::Form form) : form_(form) {}
  std::string normalize(std::string s) const override { return unicode::normalize(s, form_); }

 private:
  unicode::Form form_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  std::string normalize(std::string s) const override { return unicode::to_lower(s); }
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(std::unique_ptr<Pattern> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(std::string s) const override { return replace_all(s, *pattern_, content_); }

 private:
  std::unique_ptr<Pattern> pattern_;
  std::string content_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string s) const override { return s.empty() ? s : prefix_ + s; }

 private:
  std::string prefix_;
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string s) const override {
    std::u32string cps = unicode::decode_utf8(s);
    size_t b = 0, e = cps.size();
    if (left_) while (b < e && unicode::is_white_space(cps[b])) ++b;
    if (right_) while (e > b && unicode::is_white_space(cps[e - 1])) --e;
    return unicode::encode_utf8(cps.substr(b, e - b));
  }

 private:
  bool left_, right_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  std::string normalize(std::string s) const override {
    for (const auto& p : parts_) s = p->normalize(std::move(s));
    return s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

// ---- pre-tokenizers

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Pattern> pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(std::vector<std::string>& pieces, bool) const override {
    std::vector<std::string> out;
    for (const auto& p : pieces) {
      auto parts = split(p, *pattern_, behavior_, invert_);
      for (auto& q : parts) out.push_back(std::move(q));
    }
    pieces = std::move(out);
  }

 private:
  std::unique_ptr<Pattern> pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), regex_(use_regex ? std::make_unique<RegexPattern>(kGpt2Pattern) : nullptr) {}
  void pre_tokenize(std::vector<std::string>& pieces, bool) const override {
    std::vector<std::string> out;
    for (auto& p : pieces) {
      if (add_prefix_space_ && (p.empty() || p[0] != ' ')) p.insert(0, " ");
      if (regex_) {
        for (auto& q : split(p, *regex_, SplitBehavior::kIsolated, false)) out.push_back(map_bytes(q));
      } else if (!p.empty()) {
        out.push_back(map_bytes(p));
      }
    }
    pieces = std::move(out);
  }

 private:
  static std::string map_bytes(const std::string& s) {
    std::string out;
    out.reserve(s.size() * 2);
    for (unsigned char b : s) out += unicode::byte_to_unicode(b);
    return out;
  }
  bool add_prefix_space_;
  std::unique_ptr<RegexPattern> regex_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

PrependScheme get_prepend_scheme(const json& j, const std::string& path) {
  if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null()) {
    std::string s = get_string(j, "prepend_scheme", path);
    if (s == "always") return PrependScheme::kAlways;
    if (s == "first") return PrependScheme::kFirst;
    if (s == "never") return PrependScheme::kNever;
    invalid(path + ".prepend_scheme", "\"" + s + "\" is not one of always, first, never");
  }
  // Files written before prepend_scheme existed say add_prefix_space.
  return get_bool(j, "add_prefix_space", path, true) ? PrependScheme::kAlways : PrependScheme::kNever;
}

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(char32_t replacement, PrependScheme scheme, bool split)
      : scheme_(scheme), split_(split) {
    unicode::append_utf8(replacement_, replacement);
    pattern_ = make_string_pattern(replacement_);
    space_ = make_string_pattern(" ");
  }
  void pre_tokenize(std::vector<std::string>& pieces, bool at_text_start) const override {
    std::vector<std::string> out;
    for (size_t i = 0; i < pieces.size(); ++i) {
      std::string p = replace_all(pieces[i], *space_, replacement_);
      bool starts = p.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && at_text_start && i == 0))) {
        p.insert(0, replacement_);
      }
      if (split_) {
        for (auto& q : split(p, *pattern_, SplitBehavior::kMergedWithNext, false)) out.push_back(std::move(q));
      } else if (!p.empty()) {
        out.push_back(std::move(p));
      }
    }
    pieces = std::move(out);
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
  std::unique_ptr<Pattern> pattern_, space_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void pre_tokenize(std::vector<std::string>& pieces, bool at_text_start) const override {
    for (const auto& p : parts_) p->pre_tokenize(pieces, at_text_start);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

SplitBehavior get_behavior(const json& j, const std::string& path) {
  std::string b = get_string(j, "behavior", path);
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  invalid(path + ".behavior", "\"" + b + "\" is not supported");
}

// ---- decoders

class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) {
      std::string mapped;
      bool all = true;
      for (size_t i = 0; i < t.size() && all;) {
        int b = unicode::unicode_to_byte(unicode::next_code_point(t, i));
        if (b < 0) all = false;
        else mapped.push_back(static_cast<char>(b));
      }
      bytes += all ? mapped : t;  // HF: a token with a character outside the map stays as is
    }
    tokens.assign(1, unicode::to_valid_utf8(bytes));
  }
  bool passes_added_tokens_through() const override { return true; }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, PrependScheme scheme) : replacement_(replacement), scheme_(scheme) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      for (size_t k = 0; k < tokens[i].size();) {
        char32_t c = unicode::next_code_point(tokens[i], k);
        if (c != replacement_) unicode::append_utf8(out, c);
        else if (!(i == 0 && scheme_ != PrependScheme::kNever)) out.push_back(' ');
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  char32_t replacement_;
  PrependScheme scheme_;
};

class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    auto flush = [&] {
      if (bytes.empty()) return;
      if (invalid_utf8_at(bytes) == std::string_view::npos) out.push_back(bytes);
      else for (size_t i = 0; i < bytes.size(); ++i) out.push_back("\xEF\xBF\xBD");
      bytes.clear();
    };
    for (auto& t : tokens) {
      int b = byte_of(t);
      if (b >= 0) {
        bytes.push_back(static_cast<char>(b));
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }

 private:
  // "<0xNN>" -> NN, else -1.
  static int byte_of(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    auto hex = [](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    int hi = hex(t[3]), lo = hex(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::u32string cps = unicode::decode_utf8(t);
      size_t b = 0, e = cps.size();
      for (size_t i = 0; i < start_ && b < e && cps[b] == content_; ++i) ++b;
      for (size_t i = 0; i < stop_ && e > b && cps[e - 1] == content_; ++i) --e;
      t = unicode::encode_utf8(cps.substr(b, e - b));
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::unique_ptr<Pattern> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) t = replace_all(t, *pattern_, content_);
  }

 private:
  std::unique_ptr<Pattern> pattern_;
  std::string content_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {
    for (const auto& p : parts_) through_ = through_ || p->passes_added_tokens_through();
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }
  bool passes_added_tokens_through() const override { return through_; }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
  bool through_ = false;
};

std::string index_path(const std::string& path, const std::string& key, size_t i) {
  return path + "." + key + "[" + std::to_string(i) + "]";
}

}  // namespace

void invalid(const std::string& path, const std::string& what) {
  throw Error{ExitCode::kInvalidConfig, "tokenizer.json: " + path + " " + what,
              "verlctl reads tokenizer.json as HF tokenizers writes it (BPE models); see 'man verlctl-tokenize'"};
}

std::unique_ptr<Pattern> make_string_pattern(std::string literal) {
  return std::make_unique<StringPattern>(std::move(literal));
}

std::unique_ptr<Pattern> make_pattern(const json& j, const std::string& path) {
  if (!j.is_object()) invalid(path, "must be {\"String\": ...} or {\"Regex\": ...}");
  if (j.contains("String")) return make_string_pattern(get_string(j, "String", path));
  if (j.contains("Regex")) return make_regex(get_string(j, "Regex", path), path + ".Regex");
  invalid(path, "must be {\"String\": ...} or {\"Regex\": ...}");
}

std::vector<std::string> split(const std::string& s, const Pattern& pattern, SplitBehavior behavior, bool invert) {
  // (begin, end, is_match) covering s, as HF's find_matches.
  struct Span {
    size_t b, e;
    bool match;
  };
  std::vector<Span> spans;
  size_t prev = 0;
  for (auto [b, e] : pattern.find_all(s)) {
    if (b != prev) spans.push_back({prev, b, invert});
    spans.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != s.size()) spans.push_back({prev, s.size(), invert});

  std::vector<Span> cut;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      cut = spans;
      break;
    case SplitBehavior::kRemoved:
      for (const auto& sp : spans) if (!sp.match) cut.push_back(sp);
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const auto& sp : spans) {
        if (sp.match && !previous_match && !cut.empty()) cut.back().e = sp.e;
        else cut.push_back(sp);
        previous_match = sp.match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous_match && !cut.empty()) cut.back().b = it->b;
        else cut.push_back(*it);
        previous_match = it->match;
      }
      std::reverse(cut.begin(), cut.end());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const auto& sp : spans) {
        if (sp.match == previous_match && !cut.empty()) cut.back().e = sp.e;
        else cut.push_back(sp);
        previous_match = sp.match;
      }
      break;
    }
  }
  std::vector<std::string> out;
  out.reserve(cut.size());
  for (const auto& sp : cut) {
    if (sp.e > sp.b) out.push_back(s.substr(sp.b, sp.e - sp.b));
  }
  return out;
}

std::string replace_all(const std::string& s, const Pattern& pattern, const std::string& content) {
  auto matches = pattern.find_all(s);
  if (matches.empty()) return s;
  std::string out;
  size_t prev = 0;
  for (auto [b, e] : matches) {
    out.append(s, prev, b - prev);
    out += content;
    prev = e;
  }
  out.append(s, prev, std::string::npos);
  return out;
}

std::unique_ptr<Normalizer> make_normalizer(const json& j, const std::string& path) {
  if (j.is_null()) return nullptr;
  std::string type = type_of(j, path);
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(unicode::Form::kNfc);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(unicode::Form::kNfd);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(unicode::Form::kNfkc);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(unicode::Form::kNfkd);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(make_pattern(j.value("pattern", json()), path + ".pattern"),
                                               get_string(j, "content", path));
  }
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(get_string(j, "prepend", path));
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(get_bool(j, "strip_left", path, true), get_bool(j, "strip_right", path, true));
  }
  if (type == "Sequence") {
    const json& list = get_list(j, "normalizers", path);
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto n = make_normalizer(list[i], index_path(path, "normalizers", i))) parts.push_back(std::move(n));
    }
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  unsupported(path, type);
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const std::string& path) {
  if (j.is_null()) return nullptr;
  std::string type = type_of(j, path);
  if (type == "Split") {
    return std::make_unique<SplitPreTokenizer>(make_pattern(j.value("pattern", json()), path + ".pattern"),
                                               get_behavior(j, path), get_bool(j, "invert", path, false));
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(get_bool(j, "add_prefix_space", path, true),
                                                   get_bool(j, "use_regex", path, true));
  }
  if (type == "Metaspace") {
    return std::make_unique<MetaspacePreTokenizer>(get_char(j, "replacement", path, "\xE2\x96\x81"),
                                                   get_prepend_scheme(j, path), get_bool(j, "split", path, true));
  }
  if (type == "Digits") {
    bool individual = get_bool(j, "individual_digits", path, false);
    return std::make_unique<SplitPreTokenizer>(make_regex(individual ? "\\p{N}" : "\\p{N}+", path),
                                               SplitBehavior::kIsolated, false);
  }
  if (type == "Whitespace") {
    return std::make_unique<SplitPreTokenizer>(make_regex("\\w+|[^\\w\\s]+", path), SplitBehavior::kRemoved, true);
  }
  if (type == "WhitespaceSplit") {
    return std::make_unique<SplitPreTokenizer>(make_regex("\\s+", path), SplitBehavior::kRemoved, false);
  }
  if (type == "Sequence") {
    const json& list = get_list(j, "pretokenizers", path);
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto p = make_pre_tokenizer(list[i], index_path(path, "pretokenizers", i))) parts.push_back(std::move(p));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  unsupported(path, type);
}

std::unique_ptr<Decoder> make_decoder(const json& j, const std::string& path) {
  if (j.is_null()) return nullptr;
  std::string type = type_of(j, path);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    return std::make_unique<MetaspaceDecoder>(get_char(j, "replacement", path, "\xE2\x96\x81"), get_prepend_scheme(j, path));
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    return std::make_unique<StripDecoder>(get_char(j, "content", path, " "), get_size(j, "start", path, 0),
                                          get_size(j, "stop", path, 0));
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(make_pattern(j.value("pattern", json()), path + ".pattern"),
                                            get_string(j, "content", path));
  }
  if (type == "Sequence") {
    const json& list = get_list(j, "decoders", path);
    std::vector<std::unique_ptr<Decoder>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto d = make_decoder(list[i], index_path(path, "decoders", i))) parts.push_back(std::move(d));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  unsupported(path, type);
}

}  // namespace verl::text::hf

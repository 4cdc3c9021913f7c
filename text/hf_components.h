// The pieces of Hugging Face's tokenizer.json pipeline around the model: normalizers,
// pre-tokenizers and decoders, each built from its JSON object by a factory that names the
// JSON path of anything it cannot handle ("tokenizer.json: pre_tokenizer.pretokenizers[1].type
// \"Foo\" is not supported", verl::Error, invalid config). Internal to text/: HfTokenizer
// (text/hf_tokenizer.h) is the public face.
//
// Semantics follow HF's Rust `tokenizers` crate; we keep strings, not offsets, since nothing
// downstream needs alignments. Every object is immutable after construction and thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace verl::text::hf {

// Throws verl::Error{kInvalidConfig, "tokenizer.json: <path> <what>"}.
[[noreturn]] void invalid(const std::string& path, const std::string& what);

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string s) const = 0;
};

// Splits every piece of a section of text (the part between two added tokens) further.
// `at_text_start`: the section starts at offset 0 of the input (Metaspace's prepend_scheme
// "first" needs it). Empty pieces are dropped, as HF does.
class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(std::vector<std::string>& pieces, bool at_text_start) const = 0;
};

// HF's decode_chain: tokens in, strings out (joined by the caller).
class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
  // The ByteLevel decoder gives added tokens through as their text, the others decode them like
  // any token (what HF's Rust and JS tokenizers both do).
  virtual bool passes_added_tokens_through() const { return false; }
};

// A null JSON value gives nullptr (no such stage).
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j, const std::string& path);
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j, const std::string& path);
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j, const std::string& path);

// Split's and Replace's {"String": ...} or {"Regex": ...}: successive non-overlapping matches.
class Pattern {
 public:
  virtual ~Pattern() = default;
  virtual std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const = 0;
};
std::unique_ptr<Pattern> make_pattern(const nlohmann::json& j, const std::string& path);
std::unique_ptr<Pattern> make_string_pattern(std::string literal);

// Split behaviors (HF's SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
// `s` cut at the matches of `pattern` as `behavior` says; empty pieces dropped.
std::vector<std::string> split(const std::string& s, const Pattern& pattern, SplitBehavior behavior, bool invert);

// Replaces every match of `pattern` in `s` by `content`.
std::string replace_all(const std::string& s, const Pattern& pattern, const std::string& content);

}  // namespace verl::text::hf

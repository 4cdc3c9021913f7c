// Regex is a compiled tokenizer.json pattern (a Split pre-tokenizer's or a Replace's "Regex"),
// matched with PCRE2 in UTF + UCP mode. HF compiles these with Oniguruma; the one difference
// that the patterns of real tokenizers meet is \s / \S, which Oniguruma reads as the Unicode
// White_Space property (U+0085 included) and PCRE2 as \p{Z} plus tab..CR: the constructor
// rewrites them to an explicit White_Space class. Lookahead, (?i:...), \p{L}, \p{N} work as is.
//
// Immutable after construction; find_all is thread-safe (match data is per call).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace verl::text {

class Regex {
 public:
  // Throws std::invalid_argument with PCRE2's message and offset when the pattern is invalid.
  explicit Regex(const std::string& oniguruma_pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Byte ranges [begin, end) of the successive non-overlapping, non-empty matches in `s` (valid
  // UTF-8). JIT-compiled; when the JIT's stack is too small for a match the interpreter retries
  // it, and a resource limit hit even there throws verl::Error (failure) rather than split wrongly.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const;

  // The pattern as handed to PCRE2 (after the \s rewrite), for messages and tests.
  const std::string& pcre2_pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
};

}  // namespace verl::text

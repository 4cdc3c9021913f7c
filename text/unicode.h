// Unicode helpers for the HF tokenizer pipeline (text/hf_tokenizer.h): UTF-8 decoding and
// encoding, lossy repair of invalid UTF-8 (WHATWG "maximal subpart" U+FFFD, the same as Rust's
// from_utf8_lossy and JS's TextDecoder), the four normalization forms, full lowercase, Unicode
// White_Space, and GPT-2's byte <-> printable-character map.
//
// The tables are generated from Python's unicodedata (text/unicode_tables.cc, Unicode 14.0 —
// also the version of Debian 12's PCRE2); no ICU. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace verl::text::unicode {

// Decodes one code point at s[i] and advances i; an invalid sequence yields U+FFFD and
// advances over its maximal subpart.
char32_t next_code_point(std::string_view s, size_t& i);
std::u32string decode_utf8(std::string_view s);
void append_utf8(std::string& out, char32_t cp);
std::string encode_utf8(const std::u32string& cps);
// s with every invalid sequence replaced by U+FFFD (s itself when valid).
std::string to_valid_utf8(std::string_view s);

enum class Form { kNfc, kNfd, kNfkc, kNfkd };
std::string normalize(std::string_view s, Form form);
std::string to_lower(std::string_view s);

// The White_Space property (what Oniguruma's \s matches): tab..CR, space, U+0085, U+00A0,
// U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
bool is_white_space(char32_t cp);

// GPT-2's bytes_to_unicode: every byte as a printable character (as UTF-8), and back (-1 for
// a character that is not one of the 256).
const std::string& byte_to_unicode(uint8_t b);
int unicode_to_byte(char32_t cp);

}  // namespace verl::text::unicode

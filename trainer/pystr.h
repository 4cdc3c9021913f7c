// Python `str` semantics on code points, for the reward functions that must score exactly as
// verl's Python does (trainer/rewards.h): Python slices, splits, strips and tests characters
// per code point, and its `\s`, `\d`, isspace(), isdecimal() and isdigit() are Unicode-wide.
// A UTF-8 response is decoded once (invalid bytes become U+FFFD, as the tokenizer's
// decode(errors="replace") gives Python) and every rule works on the u32string.
//
// The character classes are generated from CPython 3.11's unicodedata (Unicode 14.0), the
// version of text/unicode_tables.cc. Pure functions, thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace verl::trainer::pystr {

using Str = std::u32string;

Str from_utf8(std::string_view s);
std::string to_utf8(const Str& s);

// str.isspace() of one character; also what `\s` matches in a str pattern.
bool is_space(char32_t c);
// str.isdecimal() of one character (Unicode Nd); also what `\d` matches.
bool is_decimal(char32_t c);
// unicodedata.decimal(c): 0..9, or -1 when c is not a decimal digit.
int decimal_value(char32_t c);
// s.isdigit(): non-empty and every character a digit (Numeric_Type Digit or Decimal: "²" is).
bool is_digit_string(const Str& s);

bool contains(const Str& s, const Str& sub);
bool starts_with(const Str& s, size_t at, const Str& prefix);
// s.replace(old, new) with a non-empty old: left to right, non-overlapping.
Str replace(const Str& s, const Str& old_sub, const Str& new_sub);
// s.split(sep) with a non-empty sep (never drops empty parts).
std::vector<Str> split(const Str& s, const Str& sep);
// s.strip(): Unicode whitespace off both ends.
Str strip(const Str& s);
// s[-n:]
Str last(const Str& s, size_t n);

}  // namespace verl::trainer::pystr

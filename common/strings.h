// Small string helpers that several folders need, written once. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace verl {

// s without the whitespace (std::isspace: blanks, tabs, newlines, CR) at either end.
std::string trim(std::string_view s);

// The offset of the first byte of s that is not part of well-formed UTF-8 (overlong forms,
// surrogates and code points past U+10FFFF included), or npos when s is UTF-8 throughout.
size_t invalid_utf8_at(std::string_view s);

}  // namespace verl

// Small string helpers that several folders need, written once. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace verl {

// s without the whitespace (std::isspace: blanks, tabs, newlines, CR) at either end.
std::string trim(std::string_view s);

}  // namespace verl

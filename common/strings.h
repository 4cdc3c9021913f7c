// Small string helpers that several folders need, written once. Pure functions; thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace verl {

// s without the whitespace (std::isspace: blanks, tabs, newlines, CR) at either end.
std::string trim(std::string_view s);

// The offset of the first byte of s that is not part of well-formed UTF-8 (overlong forms,
// surrogates and code points past U+10FFFF included), or npos when s is UTF-8 throughout.
size_t invalid_utf8_at(std::string_view s);

// s up to (not including) its first '\n'; all of s when it has none. No trimming: callers that
// read a command's answer trim it themselves (trim(first_line(out))).
std::string first_line(std::string_view s);

// Durations as text, in the three shapes messages use (each written only here):
//   format_seconds(1.25, 1) == "1.2 s"   a measured time, fixed decimals;
//   format_seconds_shortest(2) == "2 s", (0.5) == "0.5 s"   a limit as the user set it (%g);
//   format_duration(45) == "45 s", (185) == "3m05s", (3720) == "1h02m"   a job's length or ETA.
std::string format_seconds(double seconds, int decimals);
std::string format_seconds_shortest(double seconds);
std::string format_seconds_shortest(std::chrono::milliseconds d);
std::string format_duration(double seconds);

}  // namespace verl

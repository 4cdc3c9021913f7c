#include "common/strings.h"

#include <cctype>
#include <cstdio>

namespace verl {

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

size_t invalid_utf8_at(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c < 0x80) n = 1;
    else if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
      n = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (i + n > s.size()) return i;
    for (size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (k == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) return i;
    }
    i += n;
  }
  return std::string_view::npos;
}

std::string first_line(std::string_view s) { return std::string(s.substr(0, s.find('\n'))); }

std::string format_seconds(double seconds, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f s", decimals, seconds);
  return buf;
}

std::string format_seconds_shortest(double seconds) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%g s", seconds);
  return buf;
}

std::string format_seconds_shortest(std::chrono::milliseconds d) {
  return format_seconds_shortest(static_cast<double>(d.count()) / 1000);
}

std::string format_duration(double s) {
  char buf[48];
  if (s < 60) std::snprintf(buf, sizeof buf, "%.0f s", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) / 60 % 60);
  return buf;
}

}  // namespace verl

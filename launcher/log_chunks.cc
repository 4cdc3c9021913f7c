#include "launcher/log_chunks.h"

namespace verl::launcher {

namespace {

// How many bytes a UTF-8 sequence starting with lead has (1 for ASCII and for a byte that
// starts no sequence).
size_t utf8_length(unsigned char lead) {
  return lead >= 0xF5 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC2 ? 2 : 1;
}

}  // namespace

size_t chunk_end(const std::string& data, bool full, bool final) {
  if (full) {
    const auto nl = data.rfind('\n');
    if (nl != std::string::npos) return nl + 1;
  }
  if (final) return data.size();
  for (size_t back = 1; back <= 4 && back <= data.size(); ++back) {
    const auto c = static_cast<unsigned char>(data[data.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back for its lead
    const size_t want = utf8_length(c);
    return want > back && want > 1 ? data.size() - back : data.size();  // cut a sequence whose tail is to come
  }
  return data.size();
}

void sanitize_utf8(std::string& data) {
  for (size_t i = 0; i < data.size();) {
    const auto c = static_cast<unsigned char>(data[i]);
    const size_t n = utf8_length(c);
    bool ok = c < 0x80 || (n > 1 && i + n <= data.size());
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(data[i + k]) & 0xC0) == 0x80;
    // Overlong three/four-byte forms and surrogates are invalid too.
    if (ok && n == 3) {
      const auto c1 = static_cast<unsigned char>(data[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
    }
    if (ok && n == 4) {
      const auto c1 = static_cast<unsigned char>(data[i + 1]);
      ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
    }
    if (!ok) {
      data[i++] = '?';
      continue;
    }
    i += c < 0x80 ? 1 : n;
  }
}

}  // namespace verl::launcher

#include "text/unicode.h"

#include <algorithm>
#include <array>

#include "common/strings.h"
#include "text/unicode_tables.h"

namespace verl::text::unicode {
namespace {

namespace ud = unicode_data;

constexpr char32_t kReplacement = 0xFFFD;
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

const ud::Mapping* find_mapping(const ud::Mapping* table, size_t n, char32_t cp) {
  const ud::Mapping* end = table + n;
  const ud::Mapping* it = std::lower_bound(table, end, cp, [](const ud::Mapping& m, char32_t c) { return m.cp < c; });
  return it != end && it->cp == cp ? it : nullptr;
}

uint32_t combining_class(char32_t cp) {
  if (cp < 0x300) return 0;
  const ud::CodePointValue* end = ud::kCombiningClass + ud::kCombiningClassSize;
  const ud::CodePointValue* it = std::lower_bound(ud::kCombiningClass, end, cp,
                                                  [](const ud::CodePointValue& v, char32_t c) { return v.cp < c; });
  return it != end && it->cp == cp ? it->value : 0;
}

// The primary composite of (a, b), or 0.
char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  const ud::Composition* end = ud::kComposition + ud::kCompositionSize;
  const ud::Composition* it = std::lower_bound(ud::kComposition, end, std::make_pair(a, b),
                                               [](const ud::Composition& c, const std::pair<char32_t, char32_t>& k) {
                                                 return c.first != k.first ? c.first < k.first : c.second < k.second;
                                               });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

void decompose(char32_t cp, bool compat, std::u32string& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (cp < 0xC0) {
    if (!compat || cp < 0xA0) {
      out.push_back(cp);
      return;
    }
  }
  if (compat) {
    if (const auto* m = find_mapping(ud::kCompatibilityDecomposition, ud::kCompatibilityDecompositionSize, cp)) {
      out.append(m->seq, m->seq + m->len);
      return;
    }
  }
  if (const auto* m = find_mapping(ud::kCanonicalDecomposition, ud::kCanonicalDecompositionSize, cp)) {
    out.append(m->seq, m->seq + m->len);
    return;
  }
  out.push_back(cp);
}

void canonical_order(std::u32string& s) {
  size_t i = 0;
  while (i < s.size()) {
    if (combining_class(s[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < s.size() && combining_class(s[j]) != 0) ++j;
    std::stable_sort(s.begin() + static_cast<std::ptrdiff_t>(i), s.begin() + static_cast<std::ptrdiff_t>(j),
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
}

void compose(std::u32string& s) {
  if (s.empty()) return;
  size_t starter = std::u32string::npos;
  uint32_t last_class = 0;
  size_t out = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char32_t c = s[i];
    uint32_t cc = combining_class(c);
    if (starter != std::u32string::npos && (last_class < cc || (last_class == 0 && out == starter + 1))) {
      // Not blocked: either nothing sits between the starter and c, or everything between has a
      // lower class than c.
      if (char32_t comp = compose_pair(s[starter], c)) {
        s[starter] = comp;
        continue;
      }
    }
    if (cc == 0) {
      starter = out;
      last_class = 0;
    } else {
      last_class = cc;
    }
    s[out++] = c;
  }
  s.resize(out);
}

}  // namespace

char32_t next_code_point(std::string_view s, size_t& i) {
  auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t c = b(i);
  if (c < 0x80) {
    ++i;
    return c;
  }
  size_t need;
  char32_t cp;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    cp = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    cp = c & 0x07;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    ++i;
    return kReplacement;
  }
  size_t k = i + 1;
  for (size_t n = 0; n < need; ++n, ++k) {
    if (k >= s.size() || b(k) < lo || b(k) > hi) {
      i = k;
      return kReplacement;
    }
    cp = (cp << 6) | (b(k) & 0x3F);
    lo = 0x80;
    hi = 0xBF;
  }
  i = k;
  return cp;
}

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out.push_back(next_code_point(s, i));
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode_utf8(const std::u32string& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) append_utf8(out, cp);
  return out;
}

std::string to_valid_utf8(std::string_view s) {
  if (invalid_utf8_at(s) == std::string_view::npos) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) append_utf8(out, next_code_point(s, i));
  return out;
}

std::string normalize(std::string_view s, Form form) {
  bool ascii = std::all_of(s.begin(), s.end(), [](char c) { return static_cast<uint8_t>(c) < 0x80; });
  if (ascii) return std::string(s);
  bool compat = form == Form::kNfkc || form == Form::kNfkd;
  std::u32string d;
  d.reserve(s.size());
  for (size_t i = 0; i < s.size();) decompose(next_code_point(s, i), compat, d);
  canonical_order(d);
  if (form == Form::kNfc || form == Form::kNfkc) compose(d);
  return encode_utf8(d);
}

std::string to_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint8_t c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
      ++i;
      continue;
    }
    char32_t cp = next_code_point(s, i);
    if (const auto* m = find_mapping(ud::kLowercase, ud::kLowercaseSize, cp)) {
      for (uint32_t k = 0; k < m->len; ++k) append_utf8(out, m->seq[k]);
    } else {
      append_utf8(out, cp);
    }
  }
  return out;
}

bool is_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

namespace {
struct ByteMap {
  std::array<std::string, 256> to_unicode;
  std::array<char32_t, 256> cps{};
  ByteMap() {
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      cps[b] = printable ? static_cast<char32_t>(b) : next++;
      append_utf8(to_unicode[b], cps[b]);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}
}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return byte_map().to_unicode[b]; }

int unicode_to_byte(char32_t cp) {
  if (cp < 256) {
    bool printable = (cp >= '!' && cp <= '~') || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF);
    return printable ? static_cast<int>(cp) : -1;
  }
  if (cp >= 256 && cp < 256 + 68) {
    for (int b = 0; b < 256; ++b)
      if (byte_map().cps[b] == cp) return b;
  }
  return -1;
}

}  // namespace verl::text::unicode

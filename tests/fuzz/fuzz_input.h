// Splitting one fuzzer input into the parts a target needs: parts are separated by a NUL byte,
// so a seed is a readable file (the parts of a text format rarely hold NUL). Header-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace verl::fuzz {

// At most max_parts: the last part keeps any further NUL bytes.
inline std::vector<std::string> split_input(const uint8_t* data, size_t size, size_t max_parts) {
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0 && parts.size() < max_parts) parts.emplace_back();
    else parts.back().push_back(static_cast<char>(data[i]));
  }
  return parts;
}

// A property the code under test promises; a broken one is a crash libFuzzer reports.
#define VERL_FUZZ_CHECK(cond)                                                    \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                              \
    }                                                                            \
  } while (0)

}  // namespace verl::fuzz

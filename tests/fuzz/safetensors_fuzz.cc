// libFuzzer target for trainer/safetensors_header (the torch-free half of the safetensors
// reader): any bytes as a whole .safetensors file. A header that parses must describe tensors
// whose bytes lie inside the file (what File::view trusts); anything else is a verl::Error.
#include <string>

#include "common/error.h"
#include "tests/fuzz/fuzz_input.h"
#include "trainer/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace st = verl::trainer::safetensors;
  try {
    const st::Header h = st::parse_header(data, size, "fuzz.safetensors");
    VERL_FUZZ_CHECK(h.data_start >= 8 && h.data_start <= size);
    for (const auto& [name, e] : h.tensors) {
      VERL_FUZZ_CHECK(e.begin <= e.end && e.end <= size - h.data_start);
      // The view's element count times its element size is exactly the range, computed the
      // way torch will (int64 sizes).
      uint64_t bytes = e.element_size;
      for (const int64_t d : e.shape) {
        VERL_FUZZ_CHECK(d >= 0);
        bytes *= static_cast<uint64_t>(d);
      }
      VERL_FUZZ_CHECK(bytes == e.end - e.begin);
    }
  } catch (const verl::Error&) {
  }
  return 0;
}

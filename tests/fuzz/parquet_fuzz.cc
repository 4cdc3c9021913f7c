// libFuzzer target for data/parquet.cc: any bytes either read as rows or give verl::Error, never
// a crash, a read out of bounds (ASan) or an unbounded allocation. scripts/fuzz
// builds it with clang and runs it from its seeds (tests/fuzz/corpus/parquet/).
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "data/parquet.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto file = verl::data::ParquetFile::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.parquet");
    const auto rows = file.read_rows();
    for (const auto& row : rows) (void)row.dump();  // every string must be valid UTF-8
  } catch (const verl::Error&) {
  }
  return 0;
}

// Reads each parquet file given with data/parquet.cc, as the dataset does (the whole file, every
// row as JSON), and prints {"file", "rows", "ms"} per file: the side of bench/parquet_bench.sh
// that is ours.
#include <chrono>
#include <cstdio>

#include "common/error.h"
#include "data/parquet.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_parquet_read FILE.parquet...\n");
    return 2;
  }
  try {
    for (int i = 1; i < argc; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const auto rows = verl::data::ParquetFile::open(argv[i]).read_rows();
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      std::printf("{\"file\": \"%s\", \"rows\": %zu, \"ms\": %.1f}\n", argv[i], rows.size(), ms);
    }
  } catch (const verl::Error& e) {
    std::fprintf(stderr, "bench_parquet_read: %s\n", e.what());
    return 1;
  }
  return 0;
}

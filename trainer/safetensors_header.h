// The safetensors header, read without torch: an 8-byte little-endian length N, then N bytes of
// JSON ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}).
// parse_header() validates everything a reader must trust before it hands out views over the
// data: a known dtype, sizes that are non-negative integers whose product times the element size
// neither overflows nor differs from the byte range, ranges inside the file and not overlapping.
// trainer/safetensors.cc maps the file and calls it; tests/fuzz/safetensors_fuzz.cc fuzzes it.
//
// Errors: verl::Error (kInvalidConfig) "safetensors: <path>: <what>", naming the tensor. Pure;
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"

namespace verl::trainer::safetensors {

struct HeaderEntry {
  std::string dtype;          // "F32", ...: one of supported_dtypes()
  size_t element_size = 0;    // bytes per element of dtype
  std::vector<int64_t> shape;
  uint64_t begin = 0;         // data_offsets, relative to the end of the header
  uint64_t end = 0;
};

struct Header {
  size_t data_start = 0;  // 8 + N: where the data bytes start in the file
  std::map<std::string, HeaderEntry> tensors;
  std::map<std::string, std::string> metadata;
};

// bytes: the whole file, size bytes of it.
Header parse_header(const unsigned char* bytes, size_t size, const std::string& path);

// Bytes per element of a safetensors dtype name; 0 for a name it lacks.
size_t dtype_size(const std::string& name);
// "F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL" (what errors list).
std::string supported_dtypes();

// The error parse_header throws: "safetensors: <path>: <what>" with a hint.
Error invalid(const std::string& path, const std::string& what, const std::string& hint = "");

}  // namespace verl::trainer::safetensors

#include "trainer/safetensors_header.h"

#include <algorithm>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

namespace verl::trainer::safetensors {
namespace {

using nlohmann::json;

// A header larger than this is not a model's (HF's own reader refuses past 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

struct DtypeSize {
  const char* name;
  size_t size;
};
constexpr DtypeSize kDtypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                                 {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};

}  // namespace

size_t dtype_size(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return d.size;
  return 0;
}

std::string supported_dtypes() {
  std::string s;
  for (const auto& d : kDtypes) s += (s.empty() ? "" : ", ") + std::string(d.name);
  return s;
}

Error invalid(const std::string& path, const std::string& what, const std::string& hint) {
  return Error{ExitCode::kInvalidConfig, "safetensors: " + path + ": " + what,
               hint.empty() ? "the file is not a valid safetensors file (truncated or not written by "
                              "safetensors/save_pretrained?)"
                            : hint};
}

Header parse_header(const unsigned char* bytes, size_t size, const std::string& path) {
  if (size < 8) throw invalid(path, "file is " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];  // little-endian
  if (header_len > kMaxHeaderBytes || header_len > size - 8) {
    throw invalid(path, "header length " + std::to_string(header_len) + " does not fit in the file of " +
                            std::to_string(size) + " bytes");
  }
  Header h;
  h.data_start = 8 + static_cast<size_t>(header_len);
  const uint64_t data_size = size - h.data_start;

  json header;
  try {
    header = json::parse(reinterpret_cast<const char*>(bytes + 8), reinterpret_cast<const char*>(bytes + h.data_start));
  } catch (const json::exception& e) {
    throw invalid(path, std::string("header is not JSON: ") + e.what());
  }
  if (!header.is_object()) throw invalid(path, "header is not a JSON object");

  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) throw invalid(path, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) throw invalid(path, "__metadata__ key '" + m.key() + "' is not a string");
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "': ";
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets")) {
      throw invalid(path, where + "entry needs dtype, shape and data_offsets");
    }
    HeaderEntry e;
    if (!v["dtype"].is_string()) throw invalid(path, where + "dtype is not a string");
    e.dtype = v["dtype"].get<std::string>();
    e.element_size = dtype_size(e.dtype);
    if (e.element_size == 0)
      throw invalid(path, where + "unknown dtype '" + e.dtype + "'", "verlctl reads " + supported_dtypes());
    if (!v["shape"].is_array()) throw invalid(path, where + "shape is not an array");
    // The byte count in unsigned arithmetic with an overflow check: a shape whose product wraps
    // (2^32 x 2^32) would otherwise match an empty range and give a view far past the mapping.
    uint64_t bytes_wanted = e.element_size;
    bool overflow = false;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) throw invalid(path, where + "shape has a negative or non-integer size");
      const uint64_t n = d.get<uint64_t>();
      if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw invalid(path, where + "shape has a size past 2^63-1: " + std::to_string(n));
      if (n != 0 && bytes_wanted > std::numeric_limits<uint64_t>::max() / n) overflow = true;
      else bytes_wanted *= n;
      e.shape.push_back(static_cast<int64_t>(n));
    }
    // A zero size makes the product 0 whatever the others are (numpy's rule); only a nonzero
    // product can overflow.
    const bool empty = std::find(e.shape.begin(), e.shape.end(), 0) != e.shape.end();
    if (empty) bytes_wanted = 0;
    else if (overflow) throw invalid(path, where + "shape has more elements than a file can hold");
    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      throw invalid(path, where + "data_offsets is not two non-negative integers");
    }
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.end < e.begin || e.end > data_size) {
      throw invalid(path, where + "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                              "] fall outside the " + std::to_string(data_size) + " data bytes (truncated file?)");
    }
    if (e.end - e.begin != bytes_wanted) {
      throw invalid(path, where + "shape and dtype make " + std::to_string(bytes_wanted) +
                              " bytes but data_offsets span " + std::to_string(e.end - e.begin));
    }
    ranges.emplace_back(e.begin, e.end);
    h.tensors.emplace(name, std::move(e));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) throw invalid(path, "two tensors' data_offsets overlap");
  }
  return h;
}

}  // namespace verl::trainer::safetensors

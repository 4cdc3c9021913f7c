// The torch-free safetensors header check (trainer/safetensors_header.h): the inputs that would
// have let File::view read past the mapping, each refused with the tensor named.
#include "trainer/safetensors_header.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "common/error.h"

namespace verl::trainer::safetensors {
namespace {

// A file: the 8-byte little-endian length, the header, then data_bytes zero bytes.
std::string file_of(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + header + std::string(data_bytes, '\0');
}

std::string error_of(const std::string& file) {
  try {
    parse_header(reinterpret_cast<const unsigned char*>(file.data()), file.size(), "m.safetensors");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    return e.what();
  }
  return "";
}

TEST(SafetensorsHeader, AShapeWhoseProductWrapsIsRefused) {
  // 2^32 x 2^32 F32 elements: the int64 product wrapped (signed overflow, undefined) to 0 bytes,
  // which matched an empty range, and view() would have described 2^64 elements over nothing.
  EXPECT_NE(error_of(file_of(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0))
                .find("tensor 'w': shape has more elements than a file can hold"),
            std::string::npos);
  // 2^62 x 4 bytes wraps an unsigned 64-bit count to 0 as well.
  EXPECT_NE(error_of(file_of(R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0)), "");
  // A size past int64 (was read as a negative int64).
  EXPECT_NE(error_of(file_of(R"({"w":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,0]}})", 0))
                .find("past 2^63-1"),
            std::string::npos);
}

TEST(SafetensorsHeader, AZeroSizeMakesAnEmptyTensorWhateverTheOtherSizes) {
  const std::string f = file_of(R"({"e":{"dtype":"I64","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})", 0);
  const Header h = parse_header(reinterpret_cast<const unsigned char*>(f.data()), f.size(), "m.safetensors");
  EXPECT_EQ(h.tensors.at("e").shape.size(), 3u);
  EXPECT_EQ(h.tensors.at("e").element_size, 8u);
}

TEST(SafetensorsHeader, AValidHeaderReadsWithItsDataStartAndMetadata) {
  const std::string header = R"({"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},)"
                             R"("b":{"dtype":"BOOL","shape":[],"data_offsets":[12,13]}})";
  const std::string f = file_of(header, 13);
  const Header h = parse_header(reinterpret_cast<const unsigned char*>(f.data()), f.size(), "m.safetensors");
  EXPECT_EQ(h.data_start, 8 + header.size());
  EXPECT_EQ(h.metadata.at("format"), "pt");
  EXPECT_EQ(h.tensors.at("a").dtype, "BF16");
  EXPECT_EQ(h.tensors.at("a").end, 12u);
  EXPECT_EQ(h.tensors.at("b").shape.size(), 0u);
}

TEST(SafetensorsHeader, LengthsAndRangesOutsideTheFileAreRefused) {
  EXPECT_NE(error_of("abc").find("shorter than the 8-byte header length"), std::string::npos);
  // A header length of 2^64-1.
  EXPECT_NE(error_of(std::string(8, '\xff') + "{}").find("does not fit"), std::string::npos);
  EXPECT_NE(error_of(file_of(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 3)).find("fall outside"),
            std::string::npos);
  EXPECT_NE(error_of(file_of(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                             R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})", 6))
                .find("overlap"),
            std::string::npos);
  EXPECT_NE(error_of(file_of(R"({"w":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}})", 1)).find("unknown dtype 'F8'"),
            std::string::npos);
}

}  // namespace
}  // namespace verl::trainer::safetensors

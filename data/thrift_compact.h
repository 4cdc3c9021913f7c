// A decoder for Thrift's compact protocol, enough for parquet's footer and page headers: structs
// are walked field by field (the caller switches on the field id and skips what it does not
// know), so that new fields added by newer writers pass through. It reads from a byte span it
// does not own and never reads past its end: a truncated or corrupt input throws ThriftError
// (the caller adds the file and what it was reading). Not thread-safe; one per span.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace verl::data {

class ThriftError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Compact protocol type ids (the low nibble of a field header).
enum class ThriftType : uint8_t {
  kStop = 0, kTrue = 1, kFalse = 2, kByte = 3, kI16 = 4, kI32 = 5, kI64 = 6, kDouble = 7,
  kBinary = 8, kList = 9, kSet = 10, kMap = 11, kStruct = 12,
};

class ThriftReader {
 public:
  ThriftReader(const uint8_t* data, size_t size) : p_(data), begin_(data), end_(data + size) {}

  // Struct walking: begin_struct, then next_field until it returns false, then end_struct.
  void begin_struct();
  bool next_field(int16_t* id, ThriftType* type);  // false at the struct's stop byte
  void end_struct();

  bool read_bool(ThriftType type) const { return type == ThriftType::kTrue; }  // fields carry it
  int32_t read_i32();
  int64_t read_i64();
  std::string read_string();
  // A list header: the element type and count (bounded by the bytes left, so a corrupt count
  // cannot make the caller reserve gigabytes).
  size_t read_list_header(ThriftType* element);
  bool read_list_bool();  // one element of a list<bool>
  void skip(ThriftType type);

  size_t consumed() const { return static_cast<size_t>(p_ - begin_); }

 private:
  uint8_t byte();
  uint64_t varint();
  const uint8_t* p_;
  const uint8_t* begin_;
  const uint8_t* end_;
  std::vector<int16_t> last_ids_;  // the enclosing structs' last field ids (ids are deltas)
  int16_t last_id_ = 0;
  int depth_ = 0;
};

}  // namespace verl::data

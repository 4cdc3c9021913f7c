#include "data/thrift_compact.h"

namespace verl::data {
namespace {
// Parquet's own metadata nests a few levels (LogicalType inside SchemaElement inside FileMetaData);
// a corrupt file could claim thousands, and skip() recurses.
constexpr int kMaxDepth = 64;
}  // namespace

uint8_t ThriftReader::byte() {
  if (p_ >= end_) throw ThriftError("unexpected end of data at byte " + std::to_string(consumed()));
  return *p_++;
}

uint64_t ThriftReader::varint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    const uint8_t b = byte();
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  throw ThriftError("varint longer than 10 bytes at byte " + std::to_string(consumed()));
}

void ThriftReader::begin_struct() {
  if (++depth_ > kMaxDepth) throw ThriftError("structs nested deeper than 64 levels");
  last_ids_.push_back(last_id_);
  last_id_ = 0;
}

void ThriftReader::end_struct() {
  --depth_;
  last_id_ = last_ids_.back();
  last_ids_.pop_back();
}

bool ThriftReader::next_field(int16_t* id, ThriftType* type) {
  const uint8_t b = byte();
  if (b == 0) return false;
  const uint8_t t = b & 0x0f;
  if (t > static_cast<uint8_t>(ThriftType::kStruct))
    throw ThriftError("unknown field type " + std::to_string(t) + " at byte " + std::to_string(consumed() - 1));
  *type = static_cast<ThriftType>(t);
  const uint8_t delta = b >> 4;
  if (delta) {
    *id = static_cast<int16_t>(last_id_ + delta);
  } else {
    const uint64_t z = varint();  // an i16, zigzag
    *id = static_cast<int16_t>((z >> 1) ^ (~(z & 1) + 1));
  }
  last_id_ = *id;
  return true;
}

int32_t ThriftReader::read_i32() {
  const uint64_t z = varint();
  return static_cast<int32_t>(static_cast<uint32_t>((z >> 1) ^ (~(z & 1) + 1)));
}

int64_t ThriftReader::read_i64() {
  const uint64_t z = varint();
  return static_cast<int64_t>((z >> 1) ^ (~(z & 1) + 1));
}

std::string ThriftReader::read_string() {
  const uint64_t n = varint();
  if (n > static_cast<uint64_t>(end_ - p_))
    throw ThriftError("string of " + std::to_string(n) + " bytes runs past the end of the data");
  std::string s(reinterpret_cast<const char*>(p_), static_cast<size_t>(n));
  p_ += n;
  return s;
}

size_t ThriftReader::read_list_header(ThriftType* element) {
  const uint8_t b = byte();
  const uint8_t t = b & 0x0f;
  if (t > static_cast<uint8_t>(ThriftType::kStruct)) throw ThriftError("unknown list element type " + std::to_string(t));
  *element = static_cast<ThriftType>(t);
  uint64_t n = b >> 4;
  if (n == 15) n = varint();
  // Every element takes at least one byte, except bools... which also take one in a list.
  if (n > static_cast<uint64_t>(end_ - p_))
    throw ThriftError("list of " + std::to_string(n) + " elements is longer than the data left");
  return static_cast<size_t>(n);
}

bool ThriftReader::read_list_bool() { return byte() == 1; }

void ThriftReader::skip(ThriftType type) {
  switch (type) {
    case ThriftType::kTrue:
    case ThriftType::kFalse: return;  // the value is in the field header
    case ThriftType::kByte: byte(); return;
    case ThriftType::kI16:
    case ThriftType::kI32:
    case ThriftType::kI64: varint(); return;
    case ThriftType::kDouble:
      if (end_ - p_ < 8) throw ThriftError("unexpected end of data in a double");
      p_ += 8;
      return;
    case ThriftType::kBinary: read_string(); return;
    case ThriftType::kList:
    case ThriftType::kSet: {
      ThriftType element;
      const size_t n = read_list_header(&element);
      if (++depth_ > kMaxDepth) throw ThriftError("lists nested deeper than 64 levels");
      for (size_t i = 0; i < n; ++i) {
        if (element == ThriftType::kTrue || element == ThriftType::kFalse) byte();
        else skip(element);
      }
      --depth_;
      return;
    }
    case ThriftType::kMap: {
      const uint64_t n = varint();
      if (n == 0) return;
      const uint8_t kv = byte();
      if (n > static_cast<uint64_t>(end_ - p_)) throw ThriftError("map longer than the data left");
      if (++depth_ > kMaxDepth) throw ThriftError("maps nested deeper than 64 levels");
      const auto kt = static_cast<ThriftType>(kv >> 4), vt = static_cast<ThriftType>(kv & 0x0f);
      if ((kv >> 4) > 12 || (kv & 0x0f) > 12) throw ThriftError("unknown map element type");
      for (uint64_t i = 0; i < n; ++i) {
        if (kt == ThriftType::kTrue || kt == ThriftType::kFalse) byte(); else skip(kt);
        if (vt == ThriftType::kTrue || vt == ThriftType::kFalse) byte(); else skip(vt);
      }
      --depth_;
      return;
    }
    case ThriftType::kStruct: {
      begin_struct();
      int16_t id;
      ThriftType t;
      while (next_field(&id, &t)) skip(t);
      end_struct();
      return;
    }
    case ThriftType::kStop: break;
  }
  throw ThriftError("cannot skip a field of type " + std::to_string(static_cast<int>(type)));
}

}  // namespace verl::data

#include "trainer/tfevents.h"

#include <array>
#include <cstdio>
#include <cstring>

namespace verl::trainer::tfevents {
namespace {

std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}

// Protobuf wire format: a key is (field_number << 3) | wire_type.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, uint32_t field, WireType type) { put_varint(out, (uint64_t{field} << 3) | type); }

template <typename T>
void put_little_endian(std::string& out, T bits) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
}

void put_double(std::string& out, uint32_t field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed64);
  put_little_endian(out, bits);
}

void put_float(std::string& out, uint32_t field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed32);
  put_little_endian(out, bits);
}

void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

// tensorboard.Event fields.
constexpr uint32_t kEventWallTime = 1;     // double
constexpr uint32_t kEventStep = 2;         // int64
constexpr uint32_t kEventFileVersion = 3;  // string (oneof what)
constexpr uint32_t kEventSummary = 5;      // Summary (oneof what)
constexpr uint32_t kEventSessionLog = 7;   // SessionLog (oneof what)
constexpr uint32_t kSessionLogStatus = 1;  // enum SessionStatus
constexpr uint64_t kSessionStart = 1;      // SessionStatus.START
// tensorboard.Summary and Summary.Value fields.
constexpr uint32_t kSummaryValue = 1;      // repeated Value
constexpr uint32_t kValueTag = 1;          // string
constexpr uint32_t kValueSimpleValue = 2;  // float (oneof value)

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  static const auto table = make_crc_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string frame_record(const std::string& payload) {
  std::string out;
  std::string length;
  put_little_endian(length, static_cast<uint64_t>(payload.size()));
  out += length;
  put_little_endian(out, masked_crc32c(length.data(), length.size()));
  out += payload;
  put_little_endian(out, masked_crc32c(payload.data(), payload.size()));
  return out;
}

std::string file_version_event(double wall_time) {
  std::string e;
  put_double(e, kEventWallTime, wall_time);
  put_bytes(e, kEventFileVersion, "brain.Event:2");
  return e;
}

static void put_step(std::string& e, int64_t step) {
  if (step == 0) return;  // proto3 leaves a default value out
  put_key(e, kEventStep, kVarint);
  put_varint(e, static_cast<uint64_t>(step));  // int64: two's complement, as protobuf does
}

std::string session_start_event(double wall_time, int64_t step) {
  std::string log;
  put_key(log, kSessionLogStatus, kVarint);
  put_varint(log, kSessionStart);
  std::string e;
  put_double(e, kEventWallTime, wall_time);
  put_step(e, step);
  put_bytes(e, kEventSessionLog, log);
  return e;
}

std::string scalars_event(double wall_time, int64_t step, const std::map<std::string, double>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    put_bytes(v, kValueTag, tag);
    put_float(v, kValueSimpleValue, static_cast<float>(value));
    put_bytes(summary, kSummaryValue, v);
  }
  std::string e;
  put_double(e, kEventWallTime, wall_time);
  put_step(e, step);
  put_bytes(e, kEventSummary, summary);
  return e;
}

std::string event_file_name(int64_t unix_time, const std::string& host, int64_t pid) {
  char t[32];
  std::snprintf(t, sizeof t, "%010lld", static_cast<long long>(unix_time));
  return "events.out.tfevents." + std::string(t) + "." + host + "." + std::to_string(pid) + ".0";
}

}  // namespace verl::trainer::tfevents

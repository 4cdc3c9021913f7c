// TensorBoard event files: the CRC and framing against published values, and the bytes of an
// event against the protobuf encoding written out by hand. tracking_test.cc reads whole files
// with a real protobuf runtime (tests/peers/read_tfevents.py).
#include "trainer/tfevents.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace verl::trainer::tfevents {
namespace {

uint32_t le32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<size_t>(i)]);
  return v;
}

TEST(TfEvents, Crc32cMatchesTheCastagnoliCheckValues) {
  // RFC 3720 B.4 and the CRC catalogue's check value for "123456789".
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  const std::string zeros(32, '\0');
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  const std::string ones(32, '\xFF');
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(TfEvents, MaskRotatesAndAddsTheConstant) {
  const uint32_t c = crc32c("123456789", 9);
  EXPECT_EQ(masked_crc32c("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(TfEvents, RecordIsLengthCrcPayloadCrc) {
  const std::string payload = "hello";
  const std::string r = frame_record(payload);
  ASSERT_EQ(r.size(), 8 + 4 + payload.size() + 4);
  EXPECT_EQ(static_cast<unsigned char>(r[0]), 5);
  for (int i = 1; i < 8; ++i) EXPECT_EQ(r[static_cast<size_t>(i)], '\0');
  EXPECT_EQ(le32(r, 8), masked_crc32c(r.data(), 8));
  EXPECT_EQ(r.substr(12, 5), payload);
  EXPECT_EQ(le32(r, 17), masked_crc32c(payload.data(), payload.size()));
}

TEST(TfEvents, ScalarEventEncodesWallTimeStepAndTaggedFloat) {
  const std::string e = scalars_event(/*wall_time=*/1.5, /*step=*/300, {{"a/b", 0.25}});
  std::string want;
  want += '\x09';  // field 1, fixed64: wall_time
  double w = 1.5;
  char wb[8];
  std::memcpy(wb, &w, 8);
  want.append(wb, 8);
  want += "\x10\xAC\x02";  // field 2, varint: 300
  // field 5 (summary), length 12: field 1 (value), length 10: tag "a/b", simple_value 0.25f
  want += "\x2A\x0C\x0A\x0A\x0A\x03" "a/b" "\x15";
  float f = 0.25f;
  char fb[4];
  std::memcpy(fb, &f, 4);
  want.append(fb, 4);
  EXPECT_EQ(e, want);
}

TEST(TfEvents, FileVersionEventNamesBrainEvent2) {
  const std::string e = file_version_event(0.0);
  EXPECT_NE(e.find(std::string("\x1A\x0D") + "brain.Event:2"), std::string::npos);
}

TEST(TfEvents, FileNameFollowsSummaryWriter) {
  EXPECT_EQ(event_file_name(1700000000, "node1", 42), "events.out.tfevents.1700000000.node1.42.0");
  EXPECT_EQ(event_file_name(7, "h", 1), "events.out.tfevents.0000000007.h.1.0");
}

}  // namespace
}  // namespace verl::trainer::tfevents

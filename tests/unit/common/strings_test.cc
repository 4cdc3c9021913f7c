#include "common/strings.h"

#include <gtest/gtest.h>

namespace verl {
namespace {

TEST(Strings, TrimTakesWhitespaceOffBothEndsOnly) {
  EXPECT_EQ(trim("  12345 \r\n"), "12345");
  EXPECT_EQ(trim("\tkey = value\n"), "key = value");
  EXPECT_EQ(trim(" \n\t"), "");
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(trim("a b"), "a b");
}

TEST(Strings, FirstLineStopsAtTheFirstNewlineAndKeepsBlanks) {
  EXPECT_EQ(first_line("12;cluster\nsbatch: warning\n"), "12;cluster");
  EXPECT_EQ(first_line(" running \r\n"), " running \r");
  EXPECT_EQ(first_line("no newline"), "no newline");
  EXPECT_EQ(first_line("\nsecond"), "");
  EXPECT_EQ(first_line(""), "");
}

TEST(Strings, FormatSecondsHasFixedDecimals) {
  EXPECT_EQ(format_seconds(1.25, 1), "1.2 s");
  EXPECT_EQ(format_seconds(10, 1), "10.0 s");
  EXPECT_EQ(format_seconds(0.123, 2), "0.12 s");
  EXPECT_EQ(format_seconds(5.1, 0), "5 s");
}

TEST(Strings, FormatSecondsShortestDropsTrailingZeros) {
  EXPECT_EQ(format_seconds_shortest(2), "2 s");
  EXPECT_EQ(format_seconds_shortest(0.5), "0.5 s");
  EXPECT_EQ(format_seconds_shortest(1.25), "1.25 s");
  EXPECT_EQ(format_seconds_shortest(120), "120 s");
  EXPECT_EQ(format_seconds_shortest(std::chrono::milliseconds(2500)), "2.5 s");
  EXPECT_EQ(format_seconds_shortest(std::chrono::milliseconds(10000)), "10 s");
}

TEST(Strings, FormatDurationPicksSecondsMinutesOrHours) {
  EXPECT_EQ(format_duration(0), "0 s");
  EXPECT_EQ(format_duration(45), "45 s");
  EXPECT_EQ(format_duration(59.4), "59 s");
  EXPECT_EQ(format_duration(60), "1m00s");
  EXPECT_EQ(format_duration(185), "3m05s");
  EXPECT_EQ(format_duration(3599), "59m59s");
  EXPECT_EQ(format_duration(3600), "1h00m");
  EXPECT_EQ(format_duration(3720), "1h02m");
  EXPECT_EQ(format_duration(90061), "25h01m");
}

}  // namespace
}  // namespace verl

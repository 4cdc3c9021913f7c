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

}  // namespace
}  // namespace verl

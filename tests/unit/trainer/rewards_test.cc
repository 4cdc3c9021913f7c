#include "trainer/rewards.h"

#include <gtest/gtest.h>

namespace verl::trainer::rewards {
namespace {

TEST(Rewards, ExactMatchTrimsWhitespaceOnly) {
  EXPECT_EQ(exact_match("46", "46"), 1.0);
  EXPECT_EQ(exact_match(" 46\n", "46"), 1.0);
  EXPECT_EQ(exact_match("046", "46"), 0.0);
  EXPECT_EQ(exact_match("46", nlohmann::json(46)), 1.0);
  EXPECT_EQ(exact_match("", "46"), 0.0);
}

TEST(Rewards, Gsm8kTakesTheNumberAfterHashes) {
  EXPECT_EQ(extract_gsm8k_answer("so 6*7 = 42\n#### 42").value(), "42");
  EXPECT_EQ(extract_gsm8k_answer("#### 1,234").value(), "1234");
  EXPECT_EQ(extract_gsm8k_answer("#### -3.5").value(), "-3.5");
  EXPECT_FALSE(extract_gsm8k_answer("the answer is 42").has_value());
  EXPECT_EQ(gsm8k("#### 42", "42"), 1.0);
  EXPECT_EQ(gsm8k("#### 41", "42"), 0.0);
  EXPECT_EQ(gsm8k("#### 41", "42", /*format_score=*/0.1), 0.1);
  EXPECT_EQ(gsm8k("42", "42"), 0.0);  // strict: no "####", no credit
  EXPECT_EQ(compute_score("openai/gsm8k", "#### 42", "42"), 1.0);
}

TEST(Rewards, CountdownChecksNumbersAndTarget) {
  const auto gt = nlohmann::json::parse(R"({"target": 46, "numbers": [3, 7, 25]})");
  EXPECT_EQ(countdown("3*7+25", gt), 1.0);
  EXPECT_EQ(countdown("25+7*3", gt), 1.0);
  EXPECT_EQ(countdown("<answer>(25+21)</answer>", gt), 0.1);  // 21 is not a given number
  EXPECT_EQ(countdown("3+7+25", gt), 0.1);                   // right numbers, wrong value
  EXPECT_EQ(countdown("3*7+25+3", gt), 0.1);                 // a number used twice
  EXPECT_EQ(countdown("3*7+", gt), 0.0);                     // not an expression
  EXPECT_EQ(countdown("x=46", gt), 0.0);
  EXPECT_EQ(countdown("<answer>3*7+25</answer>", gt), 1.0);
  EXPECT_EQ(compute_score("countdown", "3*7+25", gt), 1.0);
}

TEST(Rewards, ExpressionEvaluatorHandlesPrecedenceAndErrors) {
  EXPECT_DOUBLE_EQ(evaluate_expression("2+3*4").value(), 14.0);
  EXPECT_DOUBLE_EQ(evaluate_expression("(2+3)*4").value(), 20.0);
  EXPECT_DOUBLE_EQ(evaluate_expression("8/4/2").value(), 1.0);
  EXPECT_DOUBLE_EQ(evaluate_expression("-3+5").value(), 2.0);
  EXPECT_FALSE(evaluate_expression("1/0").has_value());
  EXPECT_FALSE(evaluate_expression("(1+2").has_value());
  EXPECT_FALSE(evaluate_expression("").has_value());
}

TEST(Rewards, FormatAndDispatch) {
  EXPECT_EQ(integer_format("123"), 1.0);
  EXPECT_EQ(integer_format("-5"), 1.0);
  EXPECT_EQ(integer_format("12a"), 0.0);
  EXPECT_EQ(compute_score("arithmetic", "46", "46"), 1.0);
  EXPECT_EQ(compute_score("some/other", "x", "x"), 1.0);  // unknown sources: exact answer
}

}  // namespace
}  // namespace verl::trainer::rewards

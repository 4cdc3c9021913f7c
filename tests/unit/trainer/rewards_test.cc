#include "trainer/rewards.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace verl::trainer::rewards {
namespace {

TEST(Rewards, ExactMatchTrimsWhitespaceOnly) {
  EXPECT_EQ(exact_match("46", "46"), 1.0);
  EXPECT_EQ(exact_match(" 46\n", "46"), 1.0);
  EXPECT_EQ(exact_match("046", "46"), 0.0);
  EXPECT_EQ(exact_match("46", nlohmann::json(46)), 1.0);
  EXPECT_EQ(compute_score("arithmetic", "46", "46"), 1.0);
}

TEST(Rewards, Gsm8kStrictTakesTheLastHashesNumberInTheLast300Chars) {
  EXPECT_EQ(extract_gsm8k_answer("so 6*7 = 42\n#### 42").value(), "42");
  EXPECT_EQ(extract_gsm8k_answer("#### 1,234").value(), "1234");
  EXPECT_EQ(extract_gsm8k_answer("#### -3.5").value(), "-3.5");
  EXPECT_EQ(extract_gsm8k_answer("#### 1\n#### 2").value(), "2");  // verl takes the last
  EXPECT_FALSE(extract_gsm8k_answer("the answer is 42").has_value());
  EXPECT_FALSE(extract_gsm8k_answer("#### 42" + std::string(300, ' ')).has_value());  // clipped away
  EXPECT_EQ(gsm8k("#### 42", "42"), 1.0);
  EXPECT_EQ(gsm8k("#### 41", "42"), 0.0);
  EXPECT_EQ(gsm8k("#### 41", "42", Gsm8kMethod::kStrict, /*format_score=*/0.1), 0.1);
  EXPECT_EQ(gsm8k("#### 42", " 42"), 0.0);  // the ground truth is compared as it is
  EXPECT_EQ(compute_score("openai/gsm8k", "#### 42", "42"), 1.0);
}

TEST(Rewards, Gsm8kFlexibleTakesTheLastNumberThatIsNotADot) {
  EXPECT_EQ(extract_gsm8k_answer("3 apples and 1,5 pears.", Gsm8kMethod::kFlexible).value(), "1,5");
  EXPECT_EQ(extract_gsm8k_answer("it is 7 .", Gsm8kMethod::kFlexible).value(), "7");
  EXPECT_EQ(extract_gsm8k_answer(". .", Gsm8kMethod::kFlexible).value(), ".");  // verl's loop leaves the first
  EXPECT_FALSE(extract_gsm8k_answer("none", Gsm8kMethod::kFlexible).has_value());
}

TEST(Rewards, MathRewardNormalisesTheLastBoxedAnswer) {
  EXPECT_EQ(last_boxed_only_string("a \\boxed{1} b \\boxed{\\frac{1}{2}} c").value(), "\\boxed{\\frac{1}{2}}");
  EXPECT_FALSE(last_boxed_only_string("\\boxed{unclosed").has_value());
  EXPECT_EQ(strip_string("\\dfrac{3}{4}"), "\\frac{3}{4}");
  EXPECT_EQ(strip_string("3/4"), "\\frac{3}{4}");
  EXPECT_EQ(strip_string("\\left( 1, 2 \\right)"), "(1,2)");
  EXPECT_EQ(strip_string("10\\%"), "10");
  EXPECT_EQ(strip_string("k = 3"), "3");
  EXPECT_EQ(strip_string("0.5"), "\\frac{1}{2}");
  EXPECT_EQ(strip_string("5 \\text{ cm}"), "5");
  EXPECT_THROW(strip_string("1\\text{ a}\\text{ b}"), std::runtime_error);  // verl's assert
  EXPECT_TRUE(is_equiv("1\\text{ a}\\text{ b}", "1\\text{ a}\\text{ b}"));  // then raw equality
  EXPECT_EQ(math_reward("so $\\boxed{\\dfrac{1}{2}}$.", "0.5"), 1.0);
  EXPECT_EQ(math_reward("\\boxed 7$ done", "7"), 1.0);
  EXPECT_EQ(math_reward("\\fbox{7}", "7"), 0.0);  // remove_boxed asserts "\boxed{": verl scores 0
  EXPECT_EQ(math_reward("7", "7"), 0.0);
  EXPECT_EQ(compute_score("HuggingFaceH4/MATH-500", "\\boxed{90^\\circ}", "90"), 1.0);
}

TEST(Rewards, MathDapoReadsTheLastAnswerLineAndGivesAccAndPred) {
  EXPECT_EQ(normalize_final_answer("\\text{5 dollars}"), "5");
  EXPECT_EQ(normalize_final_answer("x = \\boxed{1,000}"), "1000");
  EXPECT_EQ(normalize_final_answer("\\frac12"), "\\frac{1}{2}");
  const auto ok = math_dapo("work...\nAnswer: $\\frac{1}{2}$", "\\frac{1}{2}");
  EXPECT_EQ(ok.score, 1.0);
  EXPECT_EQ(ok.extra.at("acc"), 1.0);
  EXPECT_EQ(ok.pred.value(), "\\frac{1}{2}");
  const auto bad = math_dapo("no answer here", "3");
  EXPECT_EQ(bad.score, -1.0);
  EXPECT_EQ(bad.extra.at("acc"), 0.0);
  EXPECT_EQ(bad.pred.value(), "[INVALID]");
  EXPECT_EQ(math_dapo("ANSWER :\n 3", "3").score, 1.0);  // (?i) and \s* across the newline
  EXPECT_EQ(score("aime2024", "Answer: 3", "3").score, 1.0);
  EXPECT_EQ(score("math", "Answer: 4", "3").score, -1.0);
}

TEST(Rewards, CountdownIsTinyZerosAnswerTagOnTheLastLine) {
  const auto gt = nlohmann::json::parse(R"({"target": 46, "numbers": [3, 7, 25]})");
  EXPECT_EQ(countdown("<think>...</think>\n<answer>3*7+25</answer>", gt), 1.0);
  EXPECT_EQ(countdown("<answer> (25+7*3) </answer>", gt), 1.0);
  EXPECT_EQ(countdown("<answer>3+7+25</answer>", gt), 0.1);        // right numbers, wrong value
  EXPECT_EQ(countdown("<answer>3*7+25+3</answer>", gt), 0.1);      // a number used twice
  EXPECT_EQ(countdown("<answer>03*7+25</answer>", gt), 0.1);       // Python's SyntaxError
  EXPECT_EQ(countdown("<answer>3*7+25</answer>\nmore", gt), 0.0);  // not on the last line
  EXPECT_EQ(countdown("3*7+25", gt), 0.0);                         // no tags
  EXPECT_EQ(compute_score("countdown", "<answer>3*7+25</answer>", gt), 1.0);
  const auto tiny = nlohmann::json::parse(R"({"target": 0, "numbers": [5, 61, 25, 7]})");
  EXPECT_EQ(countdown("<answer>25*5/7**61</answer>", tiny), 1.0);  // Python's big ints
}

TEST(Rewards, BuiltinCountdownScoresTheBareExpression) {
  const auto gt = nlohmann::json::parse(R"({"target": 46, "numbers": [3, 7, 25]})");
  EXPECT_EQ(builtin_countdown("3*7+25", gt), 1.0);
  EXPECT_EQ(builtin_countdown("3+7+25", gt), 0.1);
  EXPECT_EQ(builtin_countdown("3*7+", gt), 0.0);
  EXPECT_EQ(compute_score("verlctl/countdown", "25+7*3", gt), 1.0);
}

TEST(Rewards, ExpressionEvaluatorHandlesPrecedenceAndErrors) {
  EXPECT_DOUBLE_EQ(evaluate_expression("2+3*4").value(), 14.0);
  EXPECT_DOUBLE_EQ(evaluate_expression("(2+3)*4").value(), 20.0);
  EXPECT_FALSE(evaluate_expression("1/0").has_value());
  EXPECT_FALSE(evaluate_expression("(1+2").has_value());
  EXPECT_EQ(integer_format("-5"), 1.0);
  EXPECT_EQ(integer_format("12a"), 0.0);
}

TEST(Rewards, AnUnknownDataSourceIsAnErrorNamingItAndTheSupportedOnes) {
  EXPECT_TRUE(has_scorer("openai/gsm8k"));
  EXPECT_TRUE(has_scorer("aime_2025"));
  EXPECT_TRUE(has_scorer("my_countdown_v2"));
  EXPECT_FALSE(has_scorer("some/other"));
  EXPECT_FALSE(has_scorer("unknown"));
  try {
    compute_score("some/other", "x", "x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    const std::string what = e.what();
    EXPECT_NE(what.find("'some/other'"), std::string::npos) << what;
    EXPECT_NE(what.find("openai/gsm8k"), std::string::npos) << what;
    EXPECT_NE(what.find("lighteval/MATH"), std::string::npos) << what;
    EXPECT_FALSE(e.hint().empty());
  }
  try {
    check_data_source("x", "val.parquet:3");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("val.parquet:3: ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace verl::trainer::rewards

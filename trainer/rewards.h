// Rule-based rewards, dispatched by data_source as verl's default_compute_score
// (verl/utils/reward_score/__init__.py) does, each scoring exactly as verl's Python:
//   "openai/gsm8k"                                gsm8k.py, strict: the last "#### <number>" in
//                                                 the last 300 characters equals the ground truth
//   "lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval", "HuggingFaceH4/MATH-500"
//                                                 math_reward.py: the last \boxed{} (or "\boxed "),
//                                                 strip_string normalisation, 1.0 / 0.0
//   "math_dapo", "math", "math_dapo_reasoning", "aime*"
//                                                 math_dapo.py: the last "Answer: ..." line,
//                                                 Minerva normalisation, 1.0 / -1.0 with acc, pred
//   any data_source containing "countdown"        TinyZero's countdown.py: the last
//                                                 <answer>expr</answer> on the last line, 1.0 / 0.1
// and verlctl's own built-in tasks (trainer/tasks.h):
//   "arithmetic"                                  exact answer (whitespace-trimmed equality)
//   "verlctl/countdown"                           the bare expression uses the given numbers once
//                                                 and reaches the target, 1.0 / 0.1
//   "gsm8k"                                       verlctl's alias of "openai/gsm8k"
// A data_source that none of these serves is an Error (verl raises NotImplementedError);
// has_scorer / check_data_source let the data check refuse it before training starts.
//
// A ground truth that is a JSON number is compared as its decimal text (verl's Python would
// compare a str with an int and never match). All functions are pure and thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace verl::trainer::rewards {

// What verl's reward function returns for one response: the reward, plus, when the function
// returns a dict (math_dapo), its numeric fields (reward_extra_info: "score", "acc") and its
// "pred", which validation's maj@N votes on.
struct Score {
  double score = 0;
  std::map<std::string, double> extra;
  std::optional<std::string> pred;
};

// The data_source names and patterns that have a scorer, for messages and docs.
std::vector<std::string> supported_data_sources();
bool has_scorer(const std::string& data_source);
// Throws Error{kInvalidConfig} naming data_source, listing the supported ones, with a hint;
// `where` (e.g. "data.val_files: val.parquet") prefixes the message when given.
void check_data_source(const std::string& data_source, const std::string& where = "");

// The full result; throws as check_data_source for an unknown data_source.
Score score(const std::string& data_source, const std::string& response, const nlohmann::json& ground_truth);
// score(...).score
double compute_score(const std::string& data_source, const std::string& response,
                     const nlohmann::json& ground_truth);

// ---- the individual functions, named after verl's modules

enum class Gsm8kMethod { kStrict, kFlexible };
// gsm8k.extract_solution: nullopt where verl returns None.
std::optional<std::string> extract_gsm8k_answer(const std::string& response,
                                                Gsm8kMethod method = Gsm8kMethod::kStrict);
double gsm8k(const std::string& response, const nlohmann::json& ground_truth,
             Gsm8kMethod method = Gsm8kMethod::kStrict, double format_score = 0.0, double score = 1.0);

// math_reward.py
std::optional<std::string> last_boxed_only_string(const std::string& s);
std::string strip_string(const std::string& s);  // throws std::runtime_error where verl's raises
bool is_equiv(const std::string& a, const std::string& b);
double math_reward(const std::string& response, const nlohmann::json& ground_truth);

// math_dapo.py
std::string normalize_final_answer(const std::string& s);
Score math_dapo(const std::string& response, const nlohmann::json& ground_truth);

// TinyZero's countdown.py. ground_truth: {"target": int, "numbers": [int...]}. TinyZero scores
// prompt + response after the prompt's "Assistant:"; this takes the response alone, which is
// the same text for its prompts (they end with the assistant turn).
double countdown(const std::string& response, const nlohmann::json& ground_truth,
                 double format_score = 0.1, double score = 1.0);

// The built-in tasks.
double exact_match(const std::string& response, const nlohmann::json& ground_truth);
double builtin_countdown(const std::string& response, const nlohmann::json& ground_truth,
                         double format_score = 0.1, double score = 1.0);
// 1.0 when the response is a (signed) integer and nothing else: the format the built-in
// arithmetic task asks for.
double integer_format(const std::string& response);
// Evaluates + - * / and parentheses over integers; nullopt on a syntax error or division by 0.
std::optional<double> evaluate_expression(const std::string& expr);

}  // namespace verl::trainer::rewards

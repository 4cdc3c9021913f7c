// Rule-based rewards, dispatched by data_source the way verl's default_compute_score does:
//   "arithmetic" (built-in)         exact answer (whitespace-trimmed string equality)
//   "openai/gsm8k", "gsm8k"         the number after "#### " equals the ground truth
//   "countdown*"                    the expression uses exactly the given numbers and
//                                   evaluates to the target (TinyZero's 1.0 / 0.1 format score)
//   anything else                   exact answer
// All functions are pure and thread-safe.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace verl::trainer::rewards {

// ground_truth may be a string or a number.
double exact_match(const std::string& response, const nlohmann::json& ground_truth);

// verl's gsm8k "strict" extraction: the first "#### <number>", commas and '$' dropped.
std::optional<std::string> extract_gsm8k_answer(const std::string& response);
double gsm8k(const std::string& response, const nlohmann::json& ground_truth,
             double format_score = 0.0, double score = 1.0);

// ground_truth: {"target": int, "numbers": [int...]}. The equation is the text inside
// <answer>...</answer> when present, else the whole response.
double countdown(const std::string& response, const nlohmann::json& ground_truth,
                 double format_score = 0.1, double score = 1.0);

// 1.0 when the response is a (signed) integer and nothing else: the format the built-in
// arithmetic task asks for.
double integer_format(const std::string& response);

// Evaluates + - * / and parentheses over integers; nullopt on a syntax error or division by 0.
std::optional<double> evaluate_expression(const std::string& expr);

double compute_score(const std::string& data_source, const std::string& response,
                     const nlohmann::json& ground_truth);

}  // namespace verl::trainer::rewards

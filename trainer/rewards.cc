#include "trainer/rewards.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <regex>
#include <vector>

#include "common/strings.h"

namespace verl::trainer::rewards {
namespace {

std::string gt_string(const nlohmann::json& gt) {
  if (gt.is_string()) return gt.get<std::string>();
  if (gt.is_number_integer()) return std::to_string(gt.get<int64_t>());
  return gt.dump();
}

// Recursive descent: expr = term (('+'|'-') term)*, term = factor (('*'|'/') factor)*,
// factor = number | '(' expr ')' | '-' factor.
class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}
  std::optional<double> parse() {
    auto v = expr();
    skip();
    if (!v || pos_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  void skip() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  std::optional<double> expr() {
    auto v = term();
    while (v) {
      skip();
      if (pos_ >= s_.size() || (s_[pos_] != '+' && s_[pos_] != '-')) break;
      const char op = s_[pos_++];
      auto r = term();
      if (!r) return std::nullopt;
      v = op == '+' ? *v + *r : *v - *r;
    }
    return v;
  }
  std::optional<double> term() {
    auto v = factor();
    while (v) {
      skip();
      if (pos_ >= s_.size() || (s_[pos_] != '*' && s_[pos_] != '/')) break;
      const char op = s_[pos_++];
      auto r = factor();
      if (!r) return std::nullopt;
      if (op == '/' && *r == 0.0) return std::nullopt;
      v = op == '*' ? *v * *r : *v / *r;
    }
    return v;
  }
  std::optional<double> factor() {
    if (++depth_ > 64) return std::nullopt;
    skip();
    if (pos_ >= s_.size()) return std::nullopt;
    std::optional<double> out;
    if (s_[pos_] == '(') {
      ++pos_;
      out = expr();
      skip();
      if (!out || pos_ >= s_.size() || s_[pos_] != ')') return std::nullopt;
      ++pos_;
    } else if (s_[pos_] == '-') {
      ++pos_;
      auto v = factor();
      if (v) out = -*v;
    } else if (std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      double v = 0;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
        v = v * 10 + (s_[pos_++] - '0');
      }
      out = v;
    }
    --depth_;
    return out;
  }
  const std::string& s_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

double exact_match(const std::string& response, const nlohmann::json& ground_truth) {
  return trim(response) == trim(gt_string(ground_truth)) ? 1.0 : 0.0;
}

std::optional<std::string> extract_gsm8k_answer(const std::string& response) {
  static const std::regex kAnswer("#### (\\-?[0-9\\.\\,]+)");
  std::smatch m;
  if (!std::regex_search(response, m, kAnswer)) return std::nullopt;
  std::string out;
  for (char ch : m[1].str()) {
    if (ch != ',' && ch != '$') out.push_back(ch);
  }
  return out;
}

double gsm8k(const std::string& response, const nlohmann::json& ground_truth, double format_score,
             double score) {
  const auto answer = extract_gsm8k_answer(response);
  if (!answer) return 0.0;
  return *answer == trim(gt_string(ground_truth)) ? score : format_score;
}

std::optional<double> evaluate_expression(const std::string& expr) { return Parser(expr).parse(); }

double countdown(const std::string& response, const nlohmann::json& ground_truth,
                 double format_score, double score) {
  std::string eq = response;
  const auto open = response.rfind("<answer>");
  if (open != std::string::npos) {
    const auto close = response.find("</answer>", open);
    if (close == std::string::npos) return 0.0;
    eq = response.substr(open + 8, close - open - 8);
  }
  eq = trim(eq);
  if (eq.empty() || !ground_truth.is_object() || !ground_truth.contains("target") ||
      !ground_truth.contains("numbers")) {
    return 0.0;
  }
  for (char ch : eq) {
    if (!std::isdigit(static_cast<unsigned char>(ch)) && std::string("+-*/() ").find(ch) == std::string::npos) {
      return 0.0;
    }
  }
  std::vector<int64_t> used;
  for (size_t i = 0; i < eq.size();) {
    if (std::isdigit(static_cast<unsigned char>(eq[i]))) {
      int64_t v = 0;
      while (i < eq.size() && std::isdigit(static_cast<unsigned char>(eq[i]))) v = v * 10 + (eq[i++] - '0');
      used.push_back(v);
    } else {
      ++i;
    }
  }
  auto given = ground_truth["numbers"].get<std::vector<int64_t>>();
  std::sort(used.begin(), used.end());
  std::sort(given.begin(), given.end());
  const auto value = evaluate_expression(eq);
  if (!value) return 0.0;
  if (used != given) return format_score;
  const double target = ground_truth["target"].get<double>();
  return std::fabs(*value - target) < 1e-5 ? score : format_score;
}

double integer_format(const std::string& response) {
  static const std::regex kInt("^\\s*-?[0-9]+\\s*$");
  return std::regex_match(response, kInt) ? 1.0 : 0.0;
}

double compute_score(const std::string& data_source, const std::string& response,
                     const nlohmann::json& ground_truth) {
  if (data_source == "openai/gsm8k" || data_source == "gsm8k") return gsm8k(response, ground_truth);
  if (data_source.rfind("countdown", 0) == 0) return countdown(response, ground_truth);
  return exact_match(response, ground_truth);
}

}  // namespace verl::trainer::rewards

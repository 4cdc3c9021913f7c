#include "trainer/tasks.h"

#include <random>
#include <set>

#include "common/error.h"

namespace verl::trainer {
namespace {

// mt19937_64 is specified bit-exactly by the standard; the distributions are not, hence
// this modulo draw (its bias is irrelevant for ranges this small).
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  int64_t uniform(int64_t lo, int64_t hi) {  // inclusive
    return lo + static_cast<int64_t>(engine_() % static_cast<uint64_t>(hi - lo + 1));
  }

 private:
  std::mt19937_64 engine_;
};

int64_t pow10(int64_t digits) {
  int64_t v = 1;
  for (int64_t i = 0; i < digits; ++i) v *= 10;
  return v;
}

Example make_arithmetic(Rng& rng, const BuiltinDataConfig& c) {
  const int64_t hi = pow10(c.digits) - 1;
  std::string prompt;
  int64_t sum = 0;
  for (int64_t i = 0; i < c.num_operands; ++i) {
    const int64_t v = rng.uniform(0, hi);
    sum += v;
    if (i > 0) prompt += "+";
    prompt += std::to_string(v);
  }
  prompt += "=";
  return Example{prompt, "arithmetic", std::to_string(sum), std::to_string(sum)};
}

// A random left-to-right expression over a permutation of the numbers with + - *, evaluated
// with the usual precedence; redrawn until the target is a positive integer.
Example make_countdown(Rng& rng, const BuiltinDataConfig& c) {
  const int64_t hi = pow10(c.digits) - 1;
  for (;;) {
    std::vector<int64_t> nums;
    for (int64_t i = 0; i < c.num_operands; ++i) nums.push_back(rng.uniform(1, hi));
    std::vector<int64_t> order = nums;
    for (size_t i = order.size(); i > 1; --i) {
      std::swap(order[i - 1], order[static_cast<size_t>(rng.uniform(0, static_cast<int64_t>(i) - 1))]);
    }
    static const char kOps[] = {'+', '-', '*'};
    std::string expr = std::to_string(order[0]);
    // Evaluate with precedence: sum of products.
    int64_t total = 0, term = order[0];
    int sign = 1;
    for (size_t i = 1; i < order.size(); ++i) {
      const char op = kOps[rng.uniform(0, 2)];
      expr += op;
      expr += std::to_string(order[i]);
      if (op == '*') {
        term *= order[i];
      } else {
        total += sign * term;
        sign = op == '+' ? 1 : -1;
        term = order[i];
      }
    }
    total += sign * term;
    if (total <= 0) continue;
    std::string prompt;
    for (size_t i = 0; i < nums.size(); ++i) prompt += (i ? "," : "") + std::to_string(nums[i]);
    prompt += ">" + std::to_string(total) + ":";
    nlohmann::json gt = {{"target", total}, {"numbers", nums}};
    return Example{prompt, "verlctl/countdown", gt, expr};
  }
}

}  // namespace

TaskSplit generate_builtin_task(const BuiltinDataConfig& c, int64_t seed) {
  Example (*make)(Rng&, const BuiltinDataConfig&) = nullptr;
  if (c.task == "arithmetic") {
    make = make_arithmetic;
  } else if (c.task == "countdown") {
    make = make_countdown;
  } else {
    throw Error{ExitCode::kInvalidConfig,
                "job config: key 'data.builtin.task' is '" + c.task + "'",
                "choose arithmetic or countdown"};
  }
  if (c.digits < 1 || c.digits > 6 || c.num_operands < 2 || c.num_operands > 6) {
    throw Error{ExitCode::kInvalidConfig,
                "job config: data.builtin.digits must be 1..6 and num_operands 2..6", ""};
  }
  if (c.train_size < 1 || c.val_size < 0) {
    throw Error{ExitCode::kInvalidConfig,
                "job config: data.builtin.train_size must be > 0 and val_size >= 0", ""};
  }
  Rng rng(static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ULL + 0x5EED);
  std::set<std::string> seen;
  TaskSplit split;
  const int64_t wanted = c.train_size + c.val_size;
  const int64_t max_draws = 50 * wanted + 1000;
  int64_t draws = 0;
  while (static_cast<int64_t>(split.val.size() + split.train.size()) < wanted) {
    if (++draws > max_draws) {
      throw Error{ExitCode::kInvalidConfig,
                  "data.builtin: could not draw " + std::to_string(wanted) +
                      " distinct problems (task " + c.task + ", digits " +
                      std::to_string(c.digits) + ")",
                  "raise data.builtin.digits or lower train_size/val_size"};
    }
    Example ex = make(rng, c);
    if (!seen.insert(ex.prompt).second) continue;
    auto& dst = static_cast<int64_t>(split.val.size()) < c.val_size ? split.val : split.train;
    dst.push_back(std::move(ex));
  }
  return split;
}

}  // namespace verl::trainer

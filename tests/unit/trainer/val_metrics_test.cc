#include "trainer/val_metrics.h"

#include <gtest/gtest.h>

namespace verl::trainer::val_metrics {
namespace {

std::vector<Sample> prompt(const std::string& src, const std::string& uid, const std::vector<double>& rewards,
                           const std::vector<std::string>& preds = {}) {
  std::vector<Sample> out;
  for (size_t i = 0; i < rewards.size(); ++i) {
    Sample s{src, uid, {{"reward", rewards[i]}}, std::nullopt};
    if (!preds.empty()) {
      s.vars.emplace_back("acc", rewards[i] > 0 ? 1.0 : 0.0);
      s.pred = preds[i];
    }
    out.push_back(s);
  }
  return out;
}

TEST(ValMetrics, BootstrapSizesArePowersOfTwoThenN) {
  EXPECT_TRUE(bootstrap_sizes(1).empty());
  EXPECT_EQ(bootstrap_sizes(2), (std::vector<int64_t>{2}));
  EXPECT_EQ(bootstrap_sizes(5), (std::vector<int64_t>{2, 4, 5}));
  EXPECT_EQ(bootstrap_sizes(8), (std::vector<int64_t>{2, 4, 8}));
}

TEST(ValMetrics, NumpyChoiceIsLegacyMt19937WithMaskedRejection) {
  // np.random.seed(42); np.random.choice(5, size=(2, 4)) == [[3, 4, 2, 4], [4, 1, 2, 2]]
  EXPECT_EQ(numpy_choice(42, 5, 2, 4), (std::vector<int64_t>{3, 4, 2, 4, 4, 1, 2, 2}));
}

TEST(ValMetrics, NumpyReductionsUsePairwiseSummation) {
  std::vector<double> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1 * static_cast<double>(i % 7);
  double naive = 0;
  for (double x : v) naive += x;
  EXPECT_NEAR(numpy_sum(v), naive, 1e-9);
  EXPECT_DOUBLE_EQ(numpy_mean({1.0, 0.0}), 0.5);
  EXPECT_DOUBLE_EQ(numpy_std({1.0, 0.0}), 0.5);
}

TEST(ValMetrics, OneResponsePerPromptGivesOnlyTheMean) {
  auto s = prompt("openai/gsm8k", "0", {1.0});
  auto t = prompt("openai/gsm8k", "1", {0.0});
  s.insert(s.end(), t.begin(), t.end());
  const auto m = metric_dict(process_validation_metrics(s));
  EXPECT_EQ(m, (std::map<std::string, double>{{"val-core/openai/gsm8k/reward/mean@1", 0.5}}));
}

TEST(ValMetrics, ManyResponsesGiveVerlsFamiliesAndCoreNames) {
  // The values verl's process_validation_metrics + _val_metrics_update give for this batch.
  const auto m = metric_dict(process_validation_metrics(prompt("d", "a", {1.0, 0.0})));
  EXPECT_DOUBLE_EQ(m.at("val-core/d/reward/mean@2"), 0.5);
  EXPECT_DOUBLE_EQ(m.at("val-aux/d/reward/std@2"), 0.5);
  EXPECT_DOUBLE_EQ(m.at("val-core/d/reward/best@2/mean"), 0.77);
  EXPECT_DOUBLE_EQ(m.at("val-core/d/reward/best@2/std"), 0.4208325082500163);
  EXPECT_DOUBLE_EQ(m.at("val-aux/d/reward/worst@2/mean"), 0.246);
  EXPECT_DOUBLE_EQ(m.at("val-aux/d/reward/worst@2/std"), 0.43067853440820564);
  EXPECT_EQ(m.size(), 6u);
}

TEST(ValMetrics, AccIsTheCoreVariableAndPredAddsMajority) {
  const auto m = metric_dict(process_validation_metrics(prompt("math_dapo", "a", {1, -1, 1, -1}, {"1", "2", "1", "3"})));
  EXPECT_TRUE(m.count("val-core/math_dapo/acc/mean@4"));
  EXPECT_TRUE(m.count("val-core/math_dapo/acc/maj@4/mean"));
  EXPECT_TRUE(m.count("val-core/math_dapo/acc/best@4/std"));
  EXPECT_TRUE(m.count("val-aux/math_dapo/acc/best@2/mean"));   // not the largest n
  EXPECT_TRUE(m.count("val-aux/math_dapo/acc/worst@4/mean"));  // worst is never core
  EXPECT_TRUE(m.count("val-aux/math_dapo/reward/mean@4"));     // reward is aux when acc exists
  EXPECT_TRUE(m.count("val-aux/math_dapo/reward/maj@4/mean"));
  // "1" has the most votes whenever it is drawn twice: the majority value tends to 1.
  EXPECT_GT(m.at("val-core/math_dapo/acc/maj@4/mean"), m.at("val-core/math_dapo/acc/mean@4"));
}

TEST(ValMetrics, MetricNamesMatchWhatAPromptYields) {
  const auto per = per_prompt_metrics(prompt("d", "a", {1, 0, 1, 0, 1}, {"x", "y", "x", "y", "x"}));
  std::vector<std::string> got;
  for (const auto& [name, vals] : per.at("d").at("reward")) got.push_back(name);
  auto want = metric_names(5, /*has_pred=*/true);
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace verl::trainer::val_metrics

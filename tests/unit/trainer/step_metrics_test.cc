// verl's step metrics on small batches whose answers are worked out by hand: the data metrics
// (max/min/clip ratios, aborted rows), the explained variance (against torch::var), the
// per-token timings, psutil's used-memory formula, and the memory metrics on the CPU.
#include "trainer/step_metrics.h"

#include <gtest/gtest.h>

#include <cmath>

namespace verl::trainer {
namespace {

// Three rows, response width 4: lengths 4 (clipped), 2, 0 (aborted).
DataMetricsInput three_rows() {
  DataMetricsInput in;
  in.response_mask = torch::tensor({1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0}, torch::kFloat32).reshape({3, 4});
  in.token_level_scores = torch::zeros({3, 4});
  in.token_level_scores.index_put_({0, 3}, 1.0);
  in.token_level_scores.index_put_({1, 1}, 0.5);
  in.token_level_rewards = in.token_level_scores - 0.125 * in.response_mask;  // a KL penalty per token
  in.advantages = torch::tensor({1, 2, 3, 4, -5, 6, 99, 99, 99, 99, 99, 99}, torch::kFloat32).reshape({3, 4});
  in.returns = torch::tensor({0.5, 1.0, 1.0, 1.0, 2.0, -1.0, 99.0, 99.0, 99.0, 99.0, 99.0, 99.0}, torch::kFloat32).reshape({3, 4});
  in.values = torch::tensor({0, 0, 0, 0, 3, 0, -99, 0, 0, 0, 0, 0}, torch::kFloat32).reshape({3, 4});
  in.prompt_lengths = {8, 3, 8};
  in.max_prompt_length = 8;
  return in;
}

TEST(StepMetrics, DataMetricsFollowVerlsFormulas) {
  const auto m = compute_data_metrics(three_rows());
  // Score and reward leave the aborted row out: rows 0 and 1.
  EXPECT_DOUBLE_EQ(m.at("critic/score/mean"), 0.75);
  EXPECT_DOUBLE_EQ(m.at("critic/score/max"), 1.0);
  EXPECT_DOUBLE_EQ(m.at("critic/score/min"), 0.5);
  EXPECT_DOUBLE_EQ(m.at("critic/rewards/max"), 0.5);    // 1 - 4 * 0.125
  EXPECT_DOUBLE_EQ(m.at("critic/rewards/min"), 0.25);   // 0.5 - 2 * 0.125
  // Token statistics over response tokens only (the 99s are padding).
  EXPECT_DOUBLE_EQ(m.at("critic/advantages/max"), 6.0);
  EXPECT_DOUBLE_EQ(m.at("critic/advantages/min"), -5.0);
  EXPECT_DOUBLE_EQ(m.at("critic/advantages/mean"), 11.0 / 6.0);
  EXPECT_DOUBLE_EQ(m.at("critic/returns/max"), 2.0);
  EXPECT_DOUBLE_EQ(m.at("critic/returns/min"), -1.0);
  EXPECT_DOUBLE_EQ(m.at("critic/returns/mean"), 4.5 / 6.0);
  EXPECT_DOUBLE_EQ(m.at("critic/values/max"), 3.0);
  EXPECT_DOUBLE_EQ(m.at("critic/values/min"), 0.0);
  EXPECT_DOUBLE_EQ(m.at("response_length/mean"), 2.0);
  EXPECT_DOUBLE_EQ(m.at("response_length/clip_ratio"), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(m.at("response_length_non_aborted/mean"), 3.0);
  EXPECT_DOUBLE_EQ(m.at("response_length_non_aborted/clip_ratio"), 0.5);
  EXPECT_DOUBLE_EQ(m.at("response/aborted_ratio"), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(m.at("prompt_length/max"), 8.0);
  EXPECT_DOUBLE_EQ(m.at("prompt_length/min"), 3.0);
  EXPECT_DOUBLE_EQ(m.at("prompt_length/clip_ratio"), 2.0 / 3.0);
}

TEST(StepMetrics, NoCriticNoValueMetrics) {
  auto in = three_rows();
  in.values = torch::Tensor();
  const auto m = compute_data_metrics(in);
  EXPECT_EQ(m.count("critic/values/mean"), 0u);
  EXPECT_EQ(m.count("critic/values/max"), 0u);
  EXPECT_EQ(m.count("critic/returns/max"), 1u);
}

TEST(StepMetrics, ExplainedVarianceEqualsTorchVarFormula) {
  const auto in = three_rows();
  const auto mask = in.response_mask > 0;
  const auto r = in.returns.masked_select(mask).to(torch::kFloat64);
  const auto v = in.values.masked_select(mask).to(torch::kFloat64);
  const double want = 1.0 - (r - v).var().item<double>() / (r.var().item<double>() + 1e-5);
  const double got = explained_variance(explained_variance_moments(in.returns, in.values, in.response_mask));
  EXPECT_NEAR(got, want, 1e-12);
  // Split over two "ranks": the summed moments give the whole batch's figure.
  const auto a = explained_variance_moments(in.returns.slice(0, 0, 1), in.values.slice(0, 0, 1),
                                            in.response_mask.slice(0, 0, 1));
  const auto b = explained_variance_moments(in.returns.slice(0, 1), in.values.slice(0, 1), in.response_mask.slice(0, 1));
  EXPECT_NEAR(explained_variance(a + b), want, 1e-12);
  // A perfect critic explains everything.
  EXPECT_NEAR(explained_variance(explained_variance_moments(in.returns, in.returns, in.response_mask)), 1.0, 1e-4);
}

TEST(StepMetrics, TimingPerTokenUsesResponseTokensForGenAndAllTokensElsewhere) {
  MetricMap m = {{"timing_s/gen", 2.0}, {"timing_s/update_actor", 3.0}, {"timing_s/reward", 1.0}};
  add_timing_per_token(m, /*prompt_tokens=*/600, /*response_tokens=*/400);
  EXPECT_DOUBLE_EQ(m.at("timing_per_token_ms/gen"), 5.0);            // 2 s / 400 tokens
  EXPECT_DOUBLE_EQ(m.at("timing_per_token_ms/update_actor"), 3.0);   // 3 s / 1000 tokens
  EXPECT_EQ(m.count("timing_per_token_ms/reward"), 0u) << "verl has no per-token figure for reward";
  EXPECT_EQ(m.count("timing_per_token_ms/values"), 0u) << "no phase, no figure";
}

TEST(StepMetrics, UsedMemoryIsPsutilsFormula) {
  const std::string meminfo =
      "MemTotal:       16000000 kB\n"
      "MemFree:         4000000 kB\n"
      "MemAvailable:    9000000 kB\n"
      "Buffers:          500000 kB\n"
      "Cached:          3000000 kB\n"
      "SwapCached:            0 kB\n"
      "SReclaimable:     250000 kB\n";
  EXPECT_DOUBLE_EQ(used_memory_bytes(meminfo), (16000000.0 - 4000000 - 500000 - 3250000) * 1024);
  // A container whose cache figures exceed its total: total - free.
  EXPECT_DOUBLE_EQ(used_memory_bytes("MemTotal: 100 kB\nMemFree: 10 kB\nCached: 200 kB\n"), 90.0 * 1024);
  EXPECT_DOUBLE_EQ(used_memory_bytes(""), 0.0);
}

TEST(StepMetrics, MemoryOnTheCpuReportsZeroAllocatorPeaksAndTheMachinesUsedMemory) {
  MetricMap m;
  add_memory_metrics(m, torch::Device(torch::kCPU));
  EXPECT_EQ(m.at("perf/max_memory_allocated_gb"), 0.0);
  EXPECT_EQ(m.at("perf/max_memory_reserved_gb"), 0.0);
  EXPECT_GT(m.at("perf/cpu_memory_used_gb"), 0.0);
  EXPECT_LT(m.at("perf/cpu_memory_used_gb"), 1 << 16);
}

}  // namespace
}  // namespace verl::trainer

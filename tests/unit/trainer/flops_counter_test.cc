// trainer/flops_counter.h against verl's own formula (verl/utils/flops_counter.py,
// _estimate_qwen2_flops), whose results for these shapes were computed by running that function's
// arithmetic in Python; and verl's device table.
#include "trainer/flops_counter.h"

#include <gtest/gtest.h>

namespace verl::trainer {
namespace {

ModelConfig qwen2_05b() {
  ModelConfig c;
  c.hidden_size = 896;
  c.vocab_size = 151936;
  c.num_hidden_layers = 24;
  c.num_attention_heads = 14;
  c.num_key_value_heads = 2;
  c.intermediate_size = 4864;
  return c;
}

TEST(FlopsCounter, MatchesVerlsQwen2FormulaOnTheHalfBillionShape) {
  EXPECT_DOUBLE_EQ(estimate_flops(qwen2_05b(), std::vector<int64_t>(16, 512)), 31511638179840.0);
}

TEST(FlopsCounter, CountsAttentionPerSequenceNotPerBatch) {
  ModelConfig c;  // the toy model: hidden 64, 2 layers, 4/2 heads, intermediate 176, vocab 100
  EXPECT_DOUBLE_EQ(estimate_flops(c, {5, 12, 1}), 11466240.0);
  // One sequence of 18 tokens costs more attention than three that add up to 18.
  EXPECT_GT(estimate_flops(c, {18}), estimate_flops(c, {5, 12, 1}));
}

TEST(FlopsCounter, UsesAnExplicitHeadDim) {
  ModelConfig c;  // a Qwen3-1.7B-like shape: head_dim 128 with hidden 2048 / 16 heads
  c.hidden_size = 2048;
  c.vocab_size = 151936;
  c.num_hidden_layers = 28;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 8;
  c.intermediate_size = 6144;
  c.explicit_head_dim = 128;
  EXPECT_DOUBLE_EQ(estimate_flops(c, {300, 17}), 3895198826496.0);
}

TEST(FlopsCounter, DeviceTableFollowsVerl) {
  EXPECT_DOUBLE_EQ(promised_flops_for_name("NVIDIA H200"), 989e12);
  EXPECT_DOUBLE_EQ(promised_flops_for_name("NVIDIA H20"), 148e12);
  EXPECT_DOUBLE_EQ(promised_flops_for_name("NVIDIA L40S"), 362.05e12);
  EXPECT_DOUBLE_EQ(promised_flops_for_name("NVIDIA A100-SXM4-80GB"), 312e12);
  EXPECT_DOUBLE_EQ(promised_flops_for_name("CPU"), 448e9);
  EXPECT_DOUBLE_EQ(promised_flops_for_name("Some Future GPU"), 0.0);
  EXPECT_DOUBLE_EQ(promised_flops(torch::Device(torch::kCPU)), 448e9);
}

TEST(FlopsCounter, MfuIsFlopsTimesEpochsOverTimeAndPeak) {
  ModelConfig c;
  auto mask = torch::zeros({3, 12}, torch::kInt64);
  mask.index_put_({0, torch::indexing::Slice(0, 5)}, 1);
  mask.index_put_({1, torch::indexing::Slice()}, 1);
  mask.index_put_({2, torch::indexing::Slice(11, 12)}, 1);
  const double expected = 11466240.0 * 2 / 0.5 / 448e9;
  EXPECT_DOUBLE_EQ(model_flops_utilization(c, mask, 2, 0.5, torch::Device(torch::kCPU)), expected);
  EXPECT_EQ(model_flops_utilization(c, mask, 2, 0.0, torch::Device(torch::kCPU)), 0.0);
}

}  // namespace
}  // namespace verl::trainer

// Sampling contracts: greedy determinism, stop handling and masks, top-k=1 == greedy, the
// sampling RNG's independence from torch's default generator and from batch composition.
#include "trainer/log_probs.h"
#include "trainer/native_rollout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include "tests/testing/tiny_model.h"

namespace verl::trainer {
namespace {

constexpr int64_t kEos = 2;
constexpr int64_t kPad = 0;

CausalLm model(int64_t vocab, double std, uint64_t seed = 1) {
  CausalLm m(testing::tiny_model_config(vocab));
  init_weights(*m, std, seed);
  return m;
}

GenerateOptions options(bool sample, int64_t max_len = 8) {
  GenerateOptions o;
  o.sampling.do_sample = sample;
  o.sampling.temperature = sample ? 1.0 : 0.0;
  o.max_response_length = max_len;
  o.stop_token_ids = {kEos};
  o.pad_token_id = kPad;
  return o;
}

std::vector<std::vector<int64_t>> prompts() { return {{1, 5, 6, 7}, {1, 9}, {1, 8, 8}, {1, 4, 5, 6}}; }

std::vector<uint64_t> seeds(size_t n, uint64_t base = 3) {
  std::vector<uint64_t> s;
  for (size_t i = 0; i < n; ++i) s.push_back(row_seed(base, 0, i));
  return s;
}

// Masks and lengths agree with the tokens: mask 1 up to and including the stop token, PAD after.
void expect_consistent(const RolloutBatch& b) {
  auto resp = b.responses.to(torch::kCPU);
  auto mask = b.response_mask.to(torch::kCPU);
  for (int64_t i = 0; i < b.batch_size(); ++i) {
    const int64_t len = b.response_lengths[static_cast<size_t>(i)];
    for (int64_t j = 0; j < b.response_width(); ++j) {
      EXPECT_EQ(mask[i][j].item<float>(), j < len ? 1.0f : 0.0f) << i << "," << j;
      if (j >= len) EXPECT_EQ(resp[i][j].item<int64_t>(), kPad);
      if (j < len - 1) EXPECT_NE(resp[i][j].item<int64_t>(), kEos);
    }
    if (b.finished[static_cast<size_t>(i)]) EXPECT_EQ(resp[i][len - 1].item<int64_t>(), kEos);
    else EXPECT_EQ(len, b.response_width());
  }
  EXPECT_EQ(b.input_ids.size(1), b.prompts.size(1) + b.response_width());
  EXPECT_TRUE(torch::equal(b.attention_mask.narrow(1, b.prompts.size(1), b.response_width()),
                           b.response_mask.to(torch::kLong)));
}

TEST(Rollout, GreedyIsDeterministic) {
  auto m = model(24, 0.3);
  auto a = generate(m, prompts(), options(false), {}, torch::kCPU);
  auto b = generate(m, prompts(), options(false), {}, torch::kCPU);
  EXPECT_TRUE(torch::equal(a.responses, b.responses));
  expect_consistent(a);
}

TEST(Rollout, StopTokenEndsTheResponseAndMasksTheRest) {
  auto m = model(24, 0.3);
  auto greedy = generate(m, prompts(), options(false), {}, torch::kCPU);
  // Whatever row 0 emits first becomes a stop token: row 0 must end right there.
  const int64_t first = greedy.responses[0][0].item<int64_t>();
  auto o = options(false);
  o.stop_token_ids = {kEos, first};
  auto stopped = generate(m, prompts(), o, {}, torch::kCPU);
  EXPECT_EQ(stopped.response_lengths[0], 1);
  EXPECT_TRUE(stopped.finished[0]);
  EXPECT_EQ(stopped.response_mask[0].sum().item<float>(), 1.0f);
  EXPECT_EQ(stopped.responses[0].narrow(0, 1, 7).ne(kPad).sum().item<int64_t>(), 0);
  // Rows that did not hit a stop token are unaffected by row 0 stopping.
  for (int64_t i = 1; i < 4; ++i) {
    if (stopped.response_lengths[static_cast<size_t>(i)] == 8 && greedy.response_lengths[static_cast<size_t>(i)] == 8) {
      bool has_first = false;
      for (int64_t j = 0; j < 8; ++j) has_first |= greedy.responses[i][j].item<int64_t>() == first;
      if (!has_first) EXPECT_TRUE(torch::equal(stopped.responses[i], greedy.responses[i]));
    }
  }
}

TEST(Rollout, SampledResponsesStopAtEosWithConsistentMasks) {
  // A small vocabulary and a near-uniform policy: EOS comes up often.
  auto m = model(6, 0.02);
  std::vector<std::vector<int64_t>> ps(32, std::vector<int64_t>{1, 4, 5});
  auto b = generate(m, ps, options(true, 10), seeds(32), torch::kCPU);
  int finished = 0;
  for (bool f : b.finished) finished += f;
  EXPECT_GT(finished, 16);
  EXPECT_LT(finished, 32);  // and some rows are clipped at max_response_length
  expect_consistent(b);
}

TEST(Rollout, TopKOneEqualsGreedy) {
  auto m = model(24, 0.3);
  auto greedy = generate(m, prompts(), options(false), {}, torch::kCPU);
  auto o = options(true);
  o.sampling.top_k = 1;
  o.sampling.temperature = 1.5;
  auto topk = generate(m, prompts(), o, seeds(4), torch::kCPU);
  EXPECT_TRUE(torch::equal(greedy.responses, topk.responses));
}

TEST(Rollout, SamplingNeverTouchesTheDefaultGenerator) {
  auto m = model(24, 0.3);
  torch::manual_seed(123);
  auto expected = torch::rand({8});
  torch::manual_seed(123);
  auto a = generate(m, prompts(), options(true), seeds(4), torch::kCPU);
  EXPECT_TRUE(torch::equal(torch::rand({8}), expected));
  torch::manual_seed(999);  // a different model RNG state changes nothing in sampling
  auto b = generate(m, prompts(), options(true), seeds(4), torch::kCPU);
  EXPECT_TRUE(torch::equal(a.responses, b.responses));
  auto c = generate(m, prompts(), options(true), seeds(4, /*base=*/4), torch::kCPU);
  EXPECT_FALSE(torch::equal(a.responses, c.responses));
}

TEST(Rollout, ShardsSampleWhatTheWholeBatchSamples) {
  // Two ranks holding half the rows each sample the same tokens as one rank holding all.
  auto m = model(24, 0.3);
  std::vector<std::vector<int64_t>> ps(6, std::vector<int64_t>{1, 5, 6});
  auto all = generate(m, ps, options(true), seeds(6), torch::kCPU);
  auto s = seeds(6);
  std::vector<std::vector<int64_t>> p0(ps.begin(), ps.begin() + 3), p1(ps.begin() + 3, ps.end());
  auto h0 = generate(m, p0, options(true), {s.begin(), s.begin() + 3}, torch::kCPU);
  auto h1 = generate(m, p1, options(true), {s.begin() + 3, s.end()}, torch::kCPU);
  EXPECT_TRUE(torch::equal(all.responses, torch::cat({h0.responses, h1.responses}, 0)));
}

TEST(Rollout, FilterLogitsKeepsTopKAndNucleus) {
  auto logits = torch::log(torch::tensor({{0.5, 0.3, 0.15, 0.05}}, torch::kFloat64));
  auto k2 = filter_logits(logits, 2, 1.0);
  EXPECT_TRUE(torch::isinf(k2[0][2]).item<bool>());
  EXPECT_TRUE(torch::isfinite(k2[0][1]).item<bool>());
  auto p = filter_logits(logits, -1, 0.7);  // 0.5 + 0.3 reaches 0.7: keep two
  EXPECT_TRUE(torch::isfinite(p[0][1]).item<bool>());
  EXPECT_TRUE(torch::isinf(p[0][2]).item<bool>());
  auto tiny_p = filter_logits(logits, -1, 0.01);  // the top token always survives
  EXPECT_TRUE(torch::isfinite(tiny_p[0][0]).item<bool>());
  EXPECT_TRUE(torch::isinf(tiny_p[0][1]).item<bool>());
}

TEST(Rollout, LogProbsOfGreedyTokensAreTheMaxima) {
  auto m = model(24, 0.3);
  auto b = generate(m, prompts(), options(false), {}, torch::kCPU);
  auto lp = compute_log_probs(m, b, /*micro_batch=*/3, /*temperature=*/1.0).log_probs;
  EXPECT_EQ(lp.sizes(), b.responses.sizes());
  torch::NoGradGuard g;
  auto logits = response_logits(m, b.input_ids, b.attention_mask, b.position_ids, b.response_width());
  auto best = std::get<0>(logits.log_softmax(-1).max(-1));
  auto mask = b.response_mask > 0;
  EXPECT_TRUE(torch::allclose(lp.masked_select(mask), best.masked_select(mask), 1e-5, 1e-6));
}

// The engine reports the log-prob of each token it sampled (verl's rollout_log_probs, which the
// rollout correction compares with the recomputed ones): with the same weights and no filter it
// is the trainer's log-prob at the rollout temperature; with top-k it is that of the filtered,
// renormalised distribution (vLLM's processed_logprobs), so never below the unfiltered one.
TEST(Rollout, ReportsTheLogProbsItSampledFrom) {
  auto m = model(24, 0.3);
  auto o = options(true);
  o.sampling.temperature = 0.7;
  const auto s = seeds(prompts().size());
  auto b = generate(m, prompts(), o, s, torch::kCPU);
  ASSERT_TRUE(b.rollout_log_probs.defined());
  EXPECT_EQ(b.rollout_log_probs.sizes(), b.responses.sizes());
  auto lp = compute_log_probs(m, b, /*micro_batch=*/4, /*temperature=*/0.7).log_probs;
  auto mask = b.response_mask > 0;
  EXPECT_TRUE(torch::allclose(b.rollout_log_probs.masked_select(mask), lp.masked_select(mask), 1e-4, 1e-5));
  EXPECT_EQ(b.rollout_log_probs.masked_select(~mask).abs().sum().item<float>(), 0.0f);  // 0 on padding
  o.sampling.top_k = 3;
  auto k = generate(m, prompts(), o, s, torch::kCPU);
  auto lpk = compute_log_probs(m, k, /*micro_batch=*/4, /*temperature=*/0.7).log_probs;
  auto maskk = k.response_mask > 0;
  auto diff = k.rollout_log_probs.masked_select(maskk) - lpk.masked_select(maskk);
  EXPECT_GE(diff.min().item<float>(), -1e-5);
  EXPECT_GT(diff.max().item<float>(), 1e-3) << "top-k renormalises: some token's probability must rise";
}

TEST(Rollout, TeacherForcedBatchHasTheRolloutLayout) {
  auto b = make_batch({{1, 5}, {1, 6, 7}}, {{9, kEos}, {8, 8, 8, 8, 8}}, 4, kPad, torch::kCPU);
  EXPECT_EQ(b.prompts.size(1), 3);
  EXPECT_EQ(b.response_lengths, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(b.prompts[0][0].item<int64_t>(), kPad);  // left padding
  EXPECT_EQ(b.position_ids[0][1].item<int64_t>(), 0);
  EXPECT_EQ(b.position_ids[0][3].item<int64_t>(), 2);
  EXPECT_EQ(b.response_mask[0][2].item<float>(), 0.0f);
}

}  // namespace
}  // namespace verl::trainer

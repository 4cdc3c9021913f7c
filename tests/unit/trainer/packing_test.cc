// verl's throughput and memory keys on the trainer: use_remove_padding (packed sequences give the
// padded forward's log-probs, values and gradients), enable_gradient_checkpointing (the same
// gradients), use_dynamic_bsz (token-budget micro-batches: rows back in order, the mini-batch's
// gradient unchanged, a too-long row named), and how the keys' null defaults follow the actor.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "common/config.h"
#include "common/error.h"
#include "tests/testing/tiny_model.h"
#include "trainer/batch.h"
#include "trainer/core_algos.h"
#include "trainer/job_config.h"
#include "trainer/log_probs.h"
#include "trainer/minibatch_update.h"
#include "trainer/model.h"
#include "trainer/seqlen_balancing.h"

namespace verl::trainer {
namespace {

ModelConfig small_config() {
  ModelConfig c = testing::tiny_model_config(32);
  c.max_position_embeddings = 64;
  c.initializer_range = 0.2;  // larger than HF's 0.02 so that differences would show
  return c;
}

// Left-padded prompts of 2..9 tokens and right-padded responses of 1..8: mixed lengths, about
// half of the [B, P+R] slots padding.
RolloutBatch mixed_batch(int64_t rows = 8, uint64_t seed = 5, torch::Device device = torch::kCPU) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int64_t>> prompts, responses;
  for (int64_t i = 0; i < rows; ++i) {
    prompts.emplace_back(2 + rng() % 8);
    responses.emplace_back(1 + rng() % 8);
    for (auto& t : prompts.back()) t = 4 + static_cast<int64_t>(rng() % 28);
    for (auto& t : responses.back()) t = 4 + static_cast<int64_t>(rng() % 28);
  }
  return make_batch(prompts, responses, /*response_width=*/8, /*pad_token_id=*/0, device);
}

// Largest |a - b| over the positions where mask is 1.
double masked_max_diff(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& mask) {
  return ((a - b).abs() * mask).max().item<double>();
}

std::vector<torch::Tensor> grads_of(torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (auto& p : m.parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  return out;
}

double max_grad_diff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, (a[i] - b[i]).abs().max().item<double>());
  return d;
}

// Gradients of a masked log-prob loss under the given forward, and the log-probs.
std::pair<torch::Tensor, std::vector<torch::Tensor>> log_prob_grads(CausalLm& model, const RolloutBatch& b,
                                                                     SequenceLayout layout) {
  model->zero_grad();
  auto logits = response_logits(model, b.input_ids, b.attention_mask, b.position_ids, b.response_width(), layout);
  auto lp = log_probs_from_logits(logits, b.responses);
  (-(lp * b.response_mask).sum() / b.response_mask.sum()).backward();
  return {lp.detach(), grads_of(*model)};
}

TEST(RemovePadding, LogProbsAndGradientsEqualThePaddedForward) {
  for (int64_t window : {0, 4}) {  // full causal attention and Mistral's sliding window
    auto c = small_config();
    c.sliding_window = window;
    auto model = make_causal_lm(c, /*seed=*/3);
    model->train();
    const auto b = mixed_batch();
    auto [lp_pad, g_pad] = log_prob_grads(model, b, SequenceLayout::kPadded);
    auto [lp_rmpad, g_rmpad] = log_prob_grads(model, b, SequenceLayout::kRemovePadding);
    EXPECT_LT(masked_max_diff(lp_pad, lp_rmpad, b.response_mask), 1e-5) << "window " << window;
    EXPECT_LT(max_grad_diff(g_pad, g_rmpad), 1e-5) << "window " << window;
    // The gradients are not trivially zero.
    EXPECT_GT(g_pad[0].abs().max().item<double>(), 1e-4);
  }
}

// With a bf16 compute dtype: on CUDA (libtorch >= 2.6) the packed attention is FlashAttention's
// variable-length kernel, on the CPU the per-sequence loop; either way the packed forward and its
// gradients agree with the padded one to bf16 rounding, with and without a sliding window.
TEST(RemovePadding, Bf16PackedForwardAgreesWithThePaddedOneOnThisMachinesDevice) {
  const torch::Device device = torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  for (int64_t window : {0, 4}) {
    auto c = small_config();
    c.sliding_window = window;
    c.compute_dtype = torch::kBFloat16;
    auto model = make_causal_lm(c, /*seed=*/3);
    model->to(device);
    model->train();
    const auto b = mixed_batch(8, 5, device);
    auto [lp_pad, g_pad] = log_prob_grads(model, b, SequenceLayout::kPadded);
    auto [lp_rmpad, g_rmpad] = log_prob_grads(model, b, SequenceLayout::kRemovePadding);
    EXPECT_LT(masked_max_diff(lp_pad, lp_rmpad, b.response_mask), 0.05) << device << " window " << window;
    double scale = 0;
    for (const auto& g : g_pad) scale = std::max(scale, g.abs().max().item<double>());
    EXPECT_LT(max_grad_diff(g_pad, g_rmpad), 0.05 * scale) << device << " window " << window;
    EXPECT_GT(scale, 1e-4);
  }
}

TEST(RemovePadding, NoGradLogProbsAndCriticValuesEqualThePaddedForward) {
  auto model = make_causal_lm(small_config(), /*seed=*/3);
  const auto b = mixed_batch(/*rows=*/12, /*seed=*/9);
  ForwardPlan padded, packed;
  padded.micro_batch = packed.micro_batch = 5;
  packed.layout = SequenceLayout::kRemovePadding;
  const auto a = compute_log_probs(model, b, padded, /*temperature=*/0.7, /*with_entropy=*/true);
  const auto p = compute_log_probs(model, b, packed, /*temperature=*/0.7, /*with_entropy=*/true);
  EXPECT_LT(masked_max_diff(a.log_probs, p.log_probs, b.response_mask), 1e-5);
  EXPECT_LT(masked_max_diff(a.entropy, p.entropy, b.response_mask), 1e-5);

  auto critic = make_critic(small_config(), /*seed=*/4);
  torch::NoGradGuard no_grad;
  auto v_pad = critic->forward(b.input_ids, b.attention_mask, b.position_ids, SequenceLayout::kPadded);
  auto v_rmpad = critic->forward(b.input_ids, b.attention_mask, b.position_ids, SequenceLayout::kRemovePadding);
  EXPECT_LT(masked_max_diff(v_pad, v_rmpad, b.attention_mask.to(torch::kFloat32)), 1e-5);
  // Padding slots are not computed at all: they come back as zeros.
  EXPECT_EQ((v_rmpad * (1 - b.attention_mask.to(torch::kFloat32))).abs().max().item<double>(), 0.0);
}

TEST(GradientCheckpointing, GradientsEqualThePlainBackward) {
  for (auto layout : {SequenceLayout::kPadded, SequenceLayout::kRemovePadding}) {
    auto model = make_causal_lm(small_config(), /*seed=*/3);
    model->train();
    const auto b = mixed_batch();
    auto [lp_plain, g_plain] = log_prob_grads(model, b, layout);
    model->model->set_gradient_checkpointing(true);
    auto [lp_ckpt, g_ckpt] = log_prob_grads(model, b, layout);
    EXPECT_TRUE(torch::equal(lp_plain, lp_ckpt));
    EXPECT_LT(max_grad_diff(g_plain, g_ckpt), 1e-6);
  }
}

TEST(GradientCheckpointing, TheCriticsValueHeadAndBackboneGetTheSameGradients) {
  auto critic = make_critic(small_config(), /*seed=*/4);
  const auto b = mixed_batch();
  auto grads = [&](bool checkpoint) {
    critic->zero_grad();
    critic->model->set_gradient_checkpointing(checkpoint);
    auto v = critic->forward(b.input_ids, b.attention_mask, b.position_ids);
    (v * b.attention_mask).pow(2).sum().backward();
    return grads_of(*critic);
  };
  const auto plain = grads(false);
  EXPECT_LT(max_grad_diff(plain, grads(true)), 1e-6);
}

TEST(SeqlenBalancing, KarmarkarKarpCoversEveryIndexWithBalancedSums) {
  const std::vector<int64_t> values = {9, 1, 8, 2, 7, 3, 6, 4, 5, 5, 30};
  const auto parts = karmarkar_karp(values, 3);
  ASSERT_EQ(parts.size(), 3u);
  std::vector<int64_t> seen;
  int64_t lo = INT64_MAX, hi = 0;
  for (const auto& p : parts) {
    ASSERT_FALSE(p.empty());
    EXPECT_TRUE(std::is_sorted(p.begin(), p.end()));
    int64_t sum = 0;
    for (int64_t i : p) sum += values[static_cast<size_t>(i)], seen.push_back(i);
    lo = std::min(lo, sum);
    hi = std::max(hi, sum);
  }
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> all(values.size());
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(seen, all);
  // 80 in total: the 30 alone and the rest split 25 / 25 is the optimum.
  EXPECT_EQ(hi, 30);
  EXPECT_EQ(lo, 25);
}

TEST(SeqlenBalancing, BudgetDecidesTheCountAndRestoreOrderInvertsIt) {
  const std::vector<int64_t> lens = {10, 3, 7, 12, 5, 9};  // 46 tokens
  EXPECT_EQ(count_micro_batches(lens, 16), 3);
  EXPECT_EQ(count_micro_batches(lens, 1000), 1);
  EXPECT_EQ(count_micro_batches(lens, 16, /*min_micro_batches=*/5), 5);  // another rank needs 5
  EXPECT_EQ(count_micro_batches(lens, 12, /*min_micro_batches=*/9), 6);  // never more than rows
  const auto parts = rearrange_micro_batches(lens, 16, "k");
  ASSERT_EQ(parts.size(), 3u);
  std::vector<int64_t> concat;
  for (const auto& p : parts) concat.insert(concat.end(), p.begin(), p.end());
  const auto order = restore_order(parts);
  for (size_t row = 0; row < lens.size(); ++row) EXPECT_EQ(concat[static_cast<size_t>(order[row])], int64_t(row));
}

TEST(SeqlenBalancing, ARowLongerThanTheBudgetNamesTheKeyAndTheLength) {
  try {
    rearrange_micro_batches({10, 40, 7}, 32, "actor_rollout_ref.actor.ppo_max_token_len_per_gpu");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    const std::string what = e.what();
    EXPECT_NE(what.find("actor_rollout_ref.actor.ppo_max_token_len_per_gpu"), std::string::npos) << what;
    EXPECT_NE(what.find("row 1"), std::string::npos) << what;
    EXPECT_NE(what.find("40 tokens"), std::string::npos) << what;
  }
}

TEST(DynamicBsz, LogProbsComeBackInRowOrder) {
  auto model = make_causal_lm(small_config(), /*seed=*/3);
  const auto b = mixed_batch(/*rows=*/10, /*seed=*/11);
  ForwardPlan fixed, dynamic;
  fixed.micro_batch = 10;
  dynamic.max_token_len = 24;  // several micro-batches, rows regrouped by length
  dynamic.budget_key = "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu";
  ASSERT_GT(plan_micro_batches(dynamic, b.attention_mask).size(), 2u);
  const auto a = compute_log_probs(model, b, fixed, /*temperature=*/1.0);
  const auto d = compute_log_probs(model, b, dynamic, /*temperature=*/1.0);
  EXPECT_LT(masked_max_diff(a.log_probs, d.log_probs, b.response_mask), 1e-6);

  dynamic.max_token_len = 6;  // shorter than some rows
  try {
    compute_log_probs(model, b, dynamic, 1.0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("log_prob_max_token_len_per_gpu"), std::string::npos);
  }
}

// One optimizer step of plain SGD (lr 1, no clipping) over one mini-batch: the parameters'
// change is minus the accumulated gradient.
std::vector<torch::Tensor> sgd_delta(const RolloutBatch& b, const UpdatePlan& plan, int64_t* micro_batches) {
  auto model = make_causal_lm(small_config(), /*seed=*/3);
  model->train();
  std::vector<torch::Tensor> before;
  for (auto& p : model->parameters()) before.push_back(p.detach().clone());
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(1.0));
  auto strategy = make_data_parallel(nullptr);
  MeanAccumulator acc;
  const auto adv = torch::linspace(-1, 1, b.batch_size() * b.response_width()).reshape({b.batch_size(), -1});
  const TensorMap all = {{"input_ids", b.input_ids},       {"attention_mask", b.attention_mask},
                         {"position_ids", b.position_ids}, {"responses", b.responses},
                         {"response_mask", b.response_mask}, {"advantages", adv}};
  const auto mode = algos::LossAggMode::kTokenMean;
  *micro_batches = 0;
  auto engine = make_replicated_engine(model->parameters(), *strategy);
  run_minibatch_update(all, b.batch_size(), plan, sgd, *engine, *strategy, acc, /*step=*/0,
                       [&](const MicroBatch& mb) {
                         ++*micro_batches;
                         const auto& d = mb.data;
                         auto lp = log_probs_from_logits(
                             response_logits(model, d.at("input_ids"), d.at("attention_mask"), d.at("position_ids"),
                                             b.response_width(), SequenceLayout::kRemovePadding),
                             d.at("responses"));
                         auto loss = algos::agg_loss(-lp * d.at("advantages"), d.at("response_mask"), mode);
                         return loss * loss_scale(mb, mode);
                       });
  std::vector<torch::Tensor> delta;
  auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) delta.push_back(params[i].detach() - before[i]);
  return delta;
}

TEST(DynamicBsz, TokenMeanGradientOfAMiniBatchEqualsOneMicroBatchs) {
  const auto b = mixed_batch(/*rows=*/12, /*seed=*/13);
  UpdatePlan plan;
  plan.mini_batch = 12;
  plan.micro_batch = 12;  // the whole mini-batch at once: its token mean, exactly
  plan.grad_clip = 1e9;
  plan.who = "test";
  int64_t fixed_count = 0, dynamic_count = 0;
  const auto fixed = sgd_delta(b, plan, &fixed_count);
  plan.max_token_len = 30;
  plan.budget_key = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu";
  const auto dynamic = sgd_delta(b, plan, &dynamic_count);
  EXPECT_EQ(fixed_count, 1);
  EXPECT_GT(dynamic_count, 2);  // the budget really split it, into groups of unequal token counts
  EXPECT_LT(max_grad_diff(fixed, dynamic), 1e-6);
  EXPECT_GT(fixed[0].abs().max().item<double>(), 1e-4);
}

JobConfig job(std::vector<std::string> overrides) {
  return JobConfig::from_json(nlohmann::json::parse(config::load_job("", overrides).dump()));
}

TEST(DynamicBsz, NullKeysFollowTheActorAsVerlsDefaults) {
  const auto d = job({});
  EXPECT_FALSE(d.model.use_remove_padding);            // null: off for the built-in model
  EXPECT_FALSE(d.model.enable_gradient_checkpointing);
  EXPECT_FALSE(d.critic.enable_gradient_checkpointing);
  EXPECT_FALSE(d.critic.use_remove_padding);           // verl: critic.model
  const auto on = job({"actor_rollout_ref.model.use_remove_padding=True",
                       "actor_rollout_ref.model.enable_gradient_checkpointing=true"});
  EXPECT_TRUE(on.model.use_remove_padding);
  EXPECT_TRUE(on.model.enable_gradient_checkpointing);
  EXPECT_FALSE(d.actor.use_dynamic_bsz);
  EXPECT_FALSE(d.critic.use_dynamic_bsz);
  EXPECT_EQ(d.critic.ppo_max_token_len_per_gpu, 32768);
  const auto j = job({"actor_rollout_ref.actor.use_dynamic_bsz=true",
                      "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=4096",
                      "critic.ppo_max_token_len_per_gpu=8192"});
  EXPECT_TRUE(j.rollout.log_prob_use_dynamic_bsz);
  EXPECT_TRUE(j.ref.log_prob_use_dynamic_bsz);
  EXPECT_TRUE(j.critic.use_dynamic_bsz);
  EXPECT_EQ(j.rollout.log_prob_max_token_len_per_gpu, 4096);
  EXPECT_EQ(j.ref.log_prob_max_token_len_per_gpu, 4096);
  EXPECT_EQ(j.critic.forward_max_token_len_per_gpu, 8192);
  const auto k = job({"actor_rollout_ref.actor.use_dynamic_bsz=true", "actor_rollout_ref.ref.log_prob_use_dynamic_bsz=false",
                      "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=100"});
  EXPECT_FALSE(k.ref.log_prob_use_dynamic_bsz);
  EXPECT_EQ(k.rollout.log_prob_max_token_len_per_gpu, 100);
}

}  // namespace
}  // namespace verl::trainer

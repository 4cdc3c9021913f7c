// The mini-/micro-batch loop's global-batch counts (UpdatePlan::global_counts), as the actor uses
// them with trainer.use_legacy_worker_impl=disable: ranks as threads over Gloo.
#include <gtest/gtest.h>

#include "tests/unit/trainer/rank_harness.h"
#include "trainer/core_algos.h"
#include "trainer/minibatch_update.h"
#include "trainer/parallel_strategy.h"

namespace verl::trainer {
namespace {

constexpr int64_t kRows = 8;
constexpr int64_t kWidth = 6;

// One seeded batch: per-token inputs and a response mask with uneven lengths (rows 0..3 short,
// 4..7 long, so that two ranks hold very different token counts) and one empty row.
TensorMap whole_batch() {
  auto gen = at::detail::createCPUGenerator(/*seed_in=*/11);
  auto x = torch::randn({kRows, kWidth}, gen);
  auto lengths = torch::tensor({1, 2, 0, 1, 6, 5, 6, 4}, torch::kLong);
  auto mask = (torch::arange(kWidth).unsqueeze(0) < lengths.unsqueeze(1)).to(torch::kFloat32);
  return {{"x", x}, {"response_mask", mask}, {"attention_mask", mask.to(torch::kLong)}};
}

TensorMap rows(const TensorMap& batch, int64_t begin, int64_t count) {
  TensorMap out;
  for (const auto& [k, v] : batch) out[k] = v.narrow(0, begin, count);
  return out;
}

// One optimizer step of SGD (lr 1) on a [T] weight with loss_mat = x * w; returns the weight's
// gradient (= its change). micro: rows per micro-batch on this rank.
torch::Tensor gradient(ParallelStrategy& strategy, const TensorMap& data, algos::LossAggMode mode, bool global,
                       int64_t micro) {
  auto w = torch::ones({kWidth}, torch::requires_grad());
  torch::optim::SGD sgd({w}, torch::optim::SGDOptions(1.0));
  UpdatePlan plan;
  plan.mini_batch = data.at("x").size(0);
  plan.micro_batch = micro;
  plan.grad_clip = 1e9;
  plan.who = "test";
  plan.global_counts = global;
  MeanAccumulator acc;
  auto engine = make_replicated_engine({w}, strategy);
  run_minibatch_update(data, data.at("x").size(0), plan, sgd, *engine, strategy, acc, /*step=*/1, [&](const MicroBatch& mb) {
    const auto& d = mb.data;
    algos::GlobalBatchInfo info;
    if (global) {
      info.dp_size = strategy.dp_size();
      info.batch_num_tokens = mb.global_tokens;
      info.global_batch_size = mb.global_rows;
      return algos::agg_loss(d.at("x") * w, d.at("response_mask"), mode, info);
    }
    return algos::agg_loss(d.at("x") * w, d.at("response_mask"), mode) * loss_scale(mb, mode);
  });
  return (torch::ones({kWidth}) - w.detach());
}

TEST(MinibatchUpdate, GlobalCountsMakeTwoGlooRanksMatchOneRankOnTheWholeBatch) {
  const auto batch = whole_batch();
  for (const auto mode : {algos::LossAggMode::kTokenMean, algos::LossAggMode::kSeqMeanTokenMean,
                          algos::LossAggMode::kSeqMeanTokenSum}) {
    SCOPED_TRACE(algos::to_string(mode));
    auto one_rank = make_data_parallel(nullptr);
    const auto want = gradient(*one_rank, batch, mode, /*global=*/true, /*micro=*/3);
    // The whole batch's mean, whatever the micro-batches: one micro-batch gives the same.
    EXPECT_TRUE(torch::allclose(want, gradient(*one_rank, batch, mode, true, kRows), 1e-5, 1e-7));
    std::vector<torch::Tensor> got(2), per_micro(2);
    testing::run_ranks(2, [&](Distributed& d) {
      auto strategy = make_data_parallel(&d);
      const auto shard = rows(batch, d.rank() * kRows / 2, kRows / 2);
      got[d.rank()] = gradient(*strategy, shard, mode, /*global=*/true, /*micro=*/3);
      per_micro[d.rank()] = gradient(*strategy, shard, mode, /*global=*/false, /*micro=*/3);
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_TRUE(torch::allclose(got[r], want, 1e-5, 1e-7)) << "rank " << r << ": " << got[r] << " vs " << want;
    }
    // verl's dp_actor form averages each rank's own mean: with these uneven ranks it differs.
    EXPECT_FALSE(torch::allclose(per_micro[0], want, 1e-3, 1e-5)) << "the test's ranks are not uneven enough";
  }
}

}  // namespace
}  // namespace verl::trainer

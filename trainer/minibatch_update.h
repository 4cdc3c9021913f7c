// The optimizer-update loop that the actor, the critic and the SFT warm start share (verl's
// update_policy / update_critic): for each PPO epoch, the batch (optionally shuffled) is cut
// into mini-batches, each mini-batch into micro-batches whose losses are backpropagated and
// accumulated; then the strategy makes the gradients equal across ranks, they are clipped to
// grad_clip, and the optimizer steps. A mini-batch whose gradient norm is not finite is
// skipped (no step), logged, and counted.
//
// Micro-batches are micro_batch rows each, or (use_dynamic_bsz) formed by a token budget as
// verl's rearrange_micro_batches, with every data-parallel rank running the same number of
// them (the count is the group's maximum).
//
// The loss callback sees one micro-batch (the named rows) and returns the loss to
// backpropagate, already scaled for accumulation by loss_scale (micro / mini-batch).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "trainer/batch.h"
#include "trainer/core_algos.h"
#include "trainer/job_config.h"
#include "trainer/metrics.h"
#include "trainer/module_engine.h"
#include "trainer/parallel_strategy.h"

namespace verl::trainer {

// Mean of per-micro-batch metric values, accumulated under one key.
class MeanAccumulator {
 public:
  void add(const std::string& key, double v) {
    auto& e = sums_[key];
    e.first += v;
    e.second += 1;
  }
  void into(MetricMap& m) const {
    for (const auto& [k, e] : sums_) m[k] = e.second ? e.first / e.second : 0.0;
  }

 private:
  std::map<std::string, std::pair<double, int64_t>> sums_;
};

struct UpdatePlan {
  int64_t epochs = 1;
  int64_t mini_batch = 1;    // rows per optimizer step, on this rank
  int64_t micro_batch = 1;   // rows per forward/backward (when max_token_len is 0)
  int64_t max_token_len = 0; // > 0 (use_dynamic_bsz): micro-batches by this budget of real tokens
  std::string budget_key;    // the key max_token_len came from, for the too-long-row error
  bool shuffle = false;      // a fresh seeded permutation of the rows per epoch
  uint64_t shuffle_seed = 0; // mixed with the epoch
  double grad_clip = 1.0;
  std::string who;           // "actor", "critic", "sft": the log line and the grad-norm metric
  // Count each mini-batch's loss tokens and non-empty rows over every rank (one all-reduce per
  // mini-batch) into MicroBatch::global_*: the global-batch loss normalisation needs them.
  bool global_counts = false;
};

struct MicroBatch {
  TensorMap data;        // the micro-batch's rows of every tensor
  int64_t rows = 0;      // rows in this micro-batch
  int64_t mini_rows = 0; // rows in its mini-batch
  bool dynamic = false;  // formed by a token budget (use_dynamic_bsz)
  double tokens = 0;     // loss tokens (sum of "response_mask", when the batch has one) in it
  double mini_tokens = 0;  // ... and in its mini-batch
  // With UpdatePlan::global_counts: the mini-batch's loss tokens and rows holding one, summed
  // over every DP rank (verl's engine workers' batch_num_tokens / global_batch_size).
  double global_tokens = 0;
  double global_rows = 0;
  int64_t micro_batches = 1;  // micro-batches in its mini-batch
};

// The factor a micro-batch's loss (aggregated over the micro-batch with `mode`) is multiplied
// by so that the accumulated gradient is the mini-batch's (verl's loss_scale_factor).
// Fixed micro-batches: rows / mini rows (verl's 1 / gradient_accumulation). Dynamic ones: for
// token-mean, tokens / mini tokens, which makes the sum the mini-batch's token mean however
// the rows were grouped (verl's engine workers' global token normalisation); for the other
// modes rows / mini rows (verl's dp_actor).
double loss_scale(const MicroBatch& mb, algos::LossAggMode mode);

struct UpdateStats {
  int64_t steps = 0;    // optimizer steps taken
  int64_t skipped = 0;  // mini-batches skipped for a non-finite gradient norm
  double last_grad_norm = 0;
};

// Runs the loop; records "<who>/grad_norm" (finite norms only) into acc. `step` names the
// training step in the warning for a skipped update. The engine holds the module (its compute
// scope spans each mini-batch's micro-batches) and syncs, clips and steps; the strategy counts.
UpdateStats run_minibatch_update(const TensorMap& batch, int64_t rows, const UpdatePlan& plan,
                                 torch::optim::Optimizer& optimizer, ModuleEngine& engine,
                                 ParallelStrategy& strategy, MeanAccumulator& acc, int64_t step,
                                 const std::function<torch::Tensor(const MicroBatch&)>& micro_loss);

// verl's constant schedule with warmup: lr * step / warmup while step < warmup, where warmup is
// optim.lr_warmup_steps, or lr_warmup_steps_ratio * total_steps when that is negative.
double warmup_lr(const OptimConfig& optim, int64_t scheduler_step, int64_t total_steps);

// AdamW over params with the optim.* keys (lr, betas, weight_decay).
std::unique_ptr<torch::optim::AdamW> make_adamw(const std::vector<torch::Tensor>& params, double lr, double beta1,
                                                double beta2, double weight_decay);
void set_lr(torch::optim::Optimizer& optimizer, double lr);

// optimizer.step(), except that an AdamW over fp32 CUDA parameters steps through torch's fused
// multi-tensor kernel (at::_fused_adamw_, libtorch >= 2: a few launches instead of ~10 per
// parameter) on torch::optim::AdamW's own state, so checkpoints and the CPU path are unchanged.
void optimizer_step(torch::optim::Optimizer& optimizer);

// torch.nn.utils.clip_grad_norm_ (L2, scale by min(1, max_norm / (norm + 1e-6))) over the
// parameters' gradients with multi-tensor kernels and one host sync; returns the norm before
// clipping (inf / nan when a gradient is not finite).
double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

// A tensor's value as a double (0 for an undefined tensor).
double item(const torch::Tensor& t);

}  // namespace verl::trainer

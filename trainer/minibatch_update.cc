#include "trainer/minibatch_update.h"

#include <cmath>
#include <numeric>
#include <random>

#include "common/log.h"
#include "trainer/log_probs.h"
#include "trainer/seqlen_balancing.h"

namespace verl::trainer {

double item(const torch::Tensor& t) {
  return t.defined() ? t.detach().to(torch::kCPU).to(torch::kFloat64).item<double>() : 0.0;
}

std::unique_ptr<torch::optim::AdamW> make_adamw(const std::vector<torch::Tensor>& params, double lr, double beta1,
                                                double beta2, double weight_decay) {
  return std::make_unique<torch::optim::AdamW>(
      params, torch::optim::AdamWOptions(lr).betas({beta1, beta2}).weight_decay(weight_decay));
}

double warmup_lr(const OptimConfig& o, int64_t scheduler_step, int64_t total_steps) {
  const int64_t warmup = o.lr_warmup_steps > 0
                             ? o.lr_warmup_steps
                             : static_cast<int64_t>(o.lr_warmup_steps_ratio * static_cast<double>(total_steps));
  if (warmup > 0 && scheduler_step < warmup) {
    return o.lr * static_cast<double>(scheduler_step) / static_cast<double>(warmup);
  }
  return o.lr;
}

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  }
}

double loss_scale(const MicroBatch& mb, algos::LossAggMode mode) {
  if (mb.dynamic && mode == algos::LossAggMode::kTokenMean && mb.mini_tokens > 0) return mb.tokens / mb.mini_tokens;
  return static_cast<double>(mb.rows) / static_cast<double>(std::max<int64_t>(1, mb.mini_rows));
}

namespace {

// The largest micro-batch count of any rank (verl's same_micro_num_in_dp), through the one
// collective the strategy has: each rank writes its count in its own slot of a zero vector,
// and the sum is every rank's count.
int64_t max_over_ranks(ParallelStrategy& strategy, int64_t count) {
  if (strategy.dp_size() <= 1) return count;
  auto slots = torch::zeros({strategy.dp_size()}, torch::kFloat64);
  slots[strategy.dp_rank()] = static_cast<double>(count);
  strategy.all_reduce_sum(slots);
  return static_cast<int64_t>(slots.max().item<double>());
}

// [loss tokens, rows holding one] of `data`, summed over every rank.
std::pair<double, double> global_counts(ParallelStrategy& strategy, const TensorMap& data) {
  const auto it = data.find("response_mask");
  if (it == data.end()) return {0.0, 0.0};
  const auto& m = it->second;
  auto counts = torch::stack({m.sum().to(torch::kCPU, torch::kFloat64),
                              (m.sum(-1) > 0).sum().to(torch::kCPU, torch::kFloat64)});
  strategy.all_reduce_sum(counts);
  return {counts[0].item<double>(), counts[1].item<double>()};
}

double mask_sum(const TensorMap& data) {
  const auto it = data.find("response_mask");
  return it == data.end() ? 0.0 : item(it->second.sum());
}

}  // namespace

UpdateStats run_minibatch_update(const TensorMap& batch, int64_t rows, const UpdatePlan& plan,
                                 torch::optim::Optimizer& optimizer, const std::vector<torch::Tensor>& params,
                                 ParallelStrategy& strategy, MeanAccumulator& acc, int64_t step,
                                 const std::function<torch::Tensor(const MicroBatch&)>& micro_loss) {
  UpdateStats stats;
  const int64_t mini = std::max<int64_t>(1, plan.mini_batch);
  const int64_t micro = std::max<int64_t>(1, plan.micro_batch);
  for (int64_t epoch = 0; epoch < plan.epochs; ++epoch) {
    torch::Tensor order = torch::arange(rows, torch::kLong);
    if (plan.shuffle) {
      std::mt19937_64 rng(plan.shuffle_seed + static_cast<uint64_t>(epoch));
      std::vector<int64_t> v(static_cast<size_t>(rows));
      std::iota(v.begin(), v.end(), 0);
      for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng() % i]);
      order = torch::tensor(v, torch::kLong);
    }
    for (int64_t s = 0; s < rows; s += mini) {
      const int64_t mb = std::min(mini, rows - s);
      optimizer.zero_grad();
      const auto mini_order = order.narrow(0, s, mb);
      std::pair<double, double> global{0.0, 0.0};
      if (plan.global_counts) global = global_counts(strategy, select_rows(batch, mini_order.to(batch.at("attention_mask").device())));
      if (plan.max_token_len > 0) {
        const TensorMap mini_data = select_rows(batch, mini_order.to(batch.at("attention_mask").device()));
        ForwardPlan fp;
        fp.max_token_len = plan.max_token_len;
        fp.budget_key = plan.budget_key;
        const auto& mask = mini_data.at("attention_mask");
        const auto lens = mask.to(torch::kLong).sum(1).to(torch::kCPU).contiguous();
        const std::vector<int64_t> seq_lens(lens.data_ptr<int64_t>(), lens.data_ptr<int64_t>() + mb);
        const int64_t count = max_over_ranks(strategy, count_micro_batches(seq_lens, plan.max_token_len));
        const auto parts = plan_micro_batches(fp, mask, count);
        const double mini_tokens = mask_sum(mini_data);
        for (const auto& part : parts) {
          MicroBatch m;
          m.rows = static_cast<int64_t>(part.size());
          m.mini_rows = mb;
          m.dynamic = true;
          m.data = select_rows(mini_data, torch::tensor(part, torch::kLong).to(mask.device()));
          m.tokens = mask_sum(m.data);
          m.mini_tokens = mini_tokens;
          m.global_tokens = global.first;
          m.global_rows = global.second;
          m.micro_batches = static_cast<int64_t>(parts.size());
          micro_loss(m).backward();
        }
      } else {
        for (int64_t u = s; u < s + mb; u += micro) {
          MicroBatch m;
          m.rows = std::min(micro, s + mb - u);
          m.mini_rows = mb;
          m.data = select_rows(batch, order.narrow(0, u, m.rows));
          m.global_tokens = global.first;
          m.global_rows = global.second;
          m.micro_batches = (mb + micro - 1) / micro;
          micro_loss(m).backward();
        }
      }
      strategy.sync_gradients(params);
      const double gn = torch::nn::utils::clip_grad_norm_(params, plan.grad_clip);
      stats.last_grad_norm = gn;
      if (std::isfinite(gn)) {
        acc.add(plan.who + "/grad_norm", gn);
        optimizer.step();
        ++stats.steps;
      } else {
        ++stats.skipped;
        log::Warn() << "step " << step << ": " << plan.who << " grad norm is " << gn << ", update skipped";
      }
      optimizer.zero_grad();
    }
  }
  return stats;
}

}  // namespace verl::trainer

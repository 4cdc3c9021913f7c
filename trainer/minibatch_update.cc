#include "trainer/minibatch_update.h"

#include <cmath>
#include <numeric>
#include <random>

#include "common/log.h"

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
      for (int64_t u = s; u < s + mb; u += micro) {
        MicroBatch m;
        m.rows = std::min(micro, s + mb - u);
        m.mini_rows = mb;
        m.data = select_rows(batch, order.narrow(0, u, m.rows));
        micro_loss(m).backward();
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

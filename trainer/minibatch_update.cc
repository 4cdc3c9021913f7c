#include "trainer/minibatch_update.h"

#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

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

namespace {

#if VERL_TORCH_HAS_CUDA && TORCH_VERSION_MAJOR >= 2
// One group's AdamW step through torch's fused CUDA kernel, with torch::optim::AdamW's own state
// (created as its step() creates it, keyed by the TensorImpl's address as libtorch 2.x keys it,
// so a checkpoint cannot tell the two apart). False when the group is not all fp32 dense CUDA
// parameters (or asks for amsgrad): the caller falls back.
bool fused_adamw_group(torch::optim::AdamW& opt, torch::optim::OptimizerParamGroup& group) {
  auto& o = static_cast<torch::optim::AdamWOptions&>(group.options());
  if (o.amsgrad()) return false;
  std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs;
  for (auto& p : group.params()) {
    if (!p.grad().defined()) continue;
    if (!p.is_cuda() || p.scalar_type() != torch::kFloat32 || p.grad().is_sparse() ||
        p.grad().scalar_type() != torch::kFloat32)
      return false;
    params.push_back(p);
  }
  if (params.empty()) return true;
  auto& state = opt.state();
  int64_t step = -1;
  for (auto& p : params) {
    auto it = state.find(p.unsafeGetTensorImpl());
    if (it == state.end()) {
      auto s = std::make_unique<torch::optim::AdamWParamState>();
      s->step(0);
      s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      it = state.emplace(p.unsafeGetTensorImpl(), std::move(s)).first;
    }
    auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
    // One step count for the kernel: every parameter of a group steps together (they may differ
    // only after a checkpoint made by a different optimizer; then keep torch's per-tensor loop).
    if (step >= 0 && s.step() != step) return false;
    step = s.step();
    grads.push_back(p.grad());
    exp_avgs.push_back(s.exp_avg());
    exp_avg_sqs.push_back(s.exp_avg_sq());
  }
  const auto step_tensor = torch::full({}, static_cast<double>(step + 1), params[0].options());
  const std::vector<torch::Tensor> steps(params.size(), step_tensor);
  at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/at::TensorList(), steps, o.lr(),
                    std::get<0>(o.betas()), std::get<1>(o.betas()), o.weight_decay(), o.eps(),
                    /*amsgrad=*/false, /*maximize=*/false);
  for (auto& p : params) static_cast<torch::optim::AdamWParamState&>(*state.at(p.unsafeGetTensorImpl())).step(step + 1);
  return true;
}
#endif

}  // namespace

void optimizer_step(torch::optim::Optimizer& optimizer) {
#if VERL_TORCH_HAS_CUDA && TORCH_VERSION_MAJOR >= 2
  // verlctl's optimizers hold one group (make_adamw); with more, a group the kernel cannot take
  // would leave the others half-stepped, so those go through torch whole.
  auto* adamw = dynamic_cast<torch::optim::AdamW*>(&optimizer);
  if (adamw != nullptr && adamw->param_groups().size() == 1) {
    torch::NoGradGuard no_grad;
    if (fused_adamw_group(*adamw, adamw->param_groups()[0])) return;
  }
#endif
  optimizer.step();
}

double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
#if TORCH_VERSION_MAJOR >= 2
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return 0.0;
  torch::NoGradGuard no_grad;
  // torch.nn.utils.clip_grad_norm_'s foreach path: per-tensor norms in one launch, the total,
  // and one scale of every gradient by min(1, max_norm / (total + 1e-6)); one host sync.
  const auto norms = at::_foreach_norm(grads, 2);
  const auto total = torch::stack(norms).norm();
  const auto coef = torch::clamp_max((total + 1e-6).reciprocal() * max_norm, 1.0);
  at::_foreach_mul_(grads, coef);
  return total.item<double>();
#else
  return torch::nn::utils::clip_grad_norm_(params, max_norm);
#endif
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
                                 torch::optim::Optimizer& optimizer, ModuleEngine& engine,
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
      ComputeScope scope(engine);
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
      engine.sync_gradients();
      const double gn = engine.clip_grad_norm(plan.grad_clip);
      stats.last_grad_norm = gn;
      if (std::isfinite(gn)) {
        acc.add(plan.who + "/grad_norm", gn);
        engine.step(optimizer);
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

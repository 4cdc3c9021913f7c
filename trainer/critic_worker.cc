#include "trainer/critic_worker.h"

#include <vector>

#include "trainer/core_algos.h"
#include "trainer/log_probs.h"
#include "trainer/minibatch_update.h"

namespace verl::trainer {
namespace {

// Values of the response positions: the value at P-1+j scores the state before token j.
torch::Tensor response_values(CriticModel& critic, const TensorMap& b, int64_t width) {
  const auto& ids = b.at("input_ids");
  const int64_t total = ids.size(1);
  auto v = critic->forward(ids.narrow(1, 0, total - 1), b.at("attention_mask").narrow(1, 0, total - 1),
                           b.at("position_ids").narrow(1, 0, total - 1));
  return v.narrow(1, total - width - 1, width);
}

}  // namespace

CriticWorker::CriticWorker(const JobConfig& config, CriticModel critic, const torch::Device& device,
                           ParallelStrategy& strategy)
    : config_(config), strategy_(strategy), device_(device), module_(std::move(critic)) {
  module_->to(device_);
  const auto& o = config_.critic.optim;
  optim_ = make_adamw(module_->parameters(), o.lr, o.beta1, o.beta2, o.weight_decay);
}

torch::Tensor CriticWorker::compute_values(const RolloutBatch& batch) {
  torch::NoGradGuard no_grad;
  EvalScope eval(*module_);
  const TensorMap all = {{"input_ids", batch.input_ids.to(device_)},
                         {"attention_mask", batch.attention_mask.to(device_)},
                         {"position_ids", batch.position_ids.to(device_)}};
  std::vector<torch::Tensor> parts;
  const int64_t micro = config_.rollout.log_prob_micro_batch_size_per_gpu;
  for (int64_t s = 0; s < batch.batch_size(); s += micro) {
    const int64_t k = std::min(micro, batch.batch_size() - s);
    parts.push_back(response_values(module_, select_rows(all, torch::arange(s, s + k, torch::kLong)),
                                    batch.response_width()));
  }
  return torch::cat(parts, 0);
}

MetricMap CriticWorker::update_critic(const RolloutBatch& batch, const torch::Tensor& values,
                                      const torch::Tensor& returns, int64_t step, int64_t total_steps) {
  MetricMap m;
  const auto& cc = config_.critic;
  const auto mode = algos::parse_loss_agg_mode(cc.loss_agg_mode);
  const TensorMap all = {{"input_ids", batch.input_ids.to(device_)},
                         {"attention_mask", batch.attention_mask.to(device_)},
                         {"position_ids", batch.position_ids.to(device_)},
                         {"response_mask", batch.response_mask.to(device_)},
                         {"values", values.to(device_)},
                         {"returns", returns.to(device_)}};
  module_->train();
  const double lr = warmup_lr(cc.optim, updates_, total_steps);
  set_lr(*optim_, lr);
  m["critic/lr"] = lr;
  ++updates_;
  UpdatePlan plan;
  plan.epochs = cc.ppo_epochs;
  plan.mini_batch = cc.ppo_mini_batch_size * config_.rollout.sampling.n / strategy_.dp_size();
  plan.micro_batch = cc.ppo_micro_batch_size_per_gpu;
  plan.grad_clip = cc.grad_clip;
  plan.who = "critic";
  MeanAccumulator acc;
  const int64_t width = batch.response_width();
  run_minibatch_update(all, batch.batch_size(), plan, *optim_, module_->parameters(), strategy_, acc, step,
                       [&](const MicroBatch& mb) {
                         const auto& d = mb.data;
                         auto vpreds = response_values(module_, d, width);
                         auto vl = algos::compute_value_loss(vpreds, d.at("returns"), d.at("values"),
                                                             d.at("response_mask"), cc.cliprange_value, mode);
                         acc.add("critic/vf_loss", item(vl.vf_loss));
                         acc.add("critic/vf_clipfrac", item(vl.vf_clipfrac));
                         acc.add("critic/vpred_mean", item(algos::masked_mean(vpreds.detach(), d.at("response_mask"))));
                         return vl.vf_loss * (static_cast<double>(mb.rows) / static_cast<double>(mb.mini_rows));
                       });
  acc.into(m);
  return m;
}

void CriticWorker::add_to(CheckpointParts& parts) {
  parts.critic = module_.ptr().get();
  parts.critic_optim = optim_.get();
}

}  // namespace verl::trainer

#include "trainer/critic_worker.h"

#include <chrono>
#include <vector>

#include "trainer/core_algos.h"
#include "trainer/flops_counter.h"
#include "trainer/log_probs.h"
#include "trainer/minibatch_update.h"
#include "trainer/seqlen_balancing.h"

namespace verl::trainer {
namespace {

// Values of the response positions: the value at P-1+j scores the state before token j.
torch::Tensor response_values(CriticModel& critic, const TensorMap& b, int64_t width, SequenceLayout layout) {
  const auto& ids = b.at("input_ids");
  const int64_t total = ids.size(1);
  auto v = critic->forward(ids.narrow(1, 0, total - 1), b.at("attention_mask").narrow(1, 0, total - 1),
                           b.at("position_ids").narrow(1, 0, total - 1), layout);
  return v.narrow(1, total - width - 1, width);
}

}  // namespace

CriticWorker::CriticWorker(const JobConfig& config, CriticModel critic, const torch::Device& device,
                           ParallelStrategy& strategy)
    : config_(config), strategy_(strategy), device_(device), module_(std::move(critic)) {
  module_->to(device_);
  module_->model->set_gradient_checkpointing(config_.critic.enable_gradient_checkpointing);
  engine_ = make_module_engine(*module_, strategy_, device_, {"critic.model", true, config_.critic.fsdp});
  const auto& o = config_.critic.optim;
  optim_ = make_adamw(engine_->optimizer_params(), o.lr, o.beta1, o.beta2, o.weight_decay);
}

torch::Tensor CriticWorker::compute_values(const RolloutBatch& batch) {
  torch::NoGradGuard no_grad;
  EvalScope eval(*module_);
  ComputeScope scope(*engine_);
  const TensorMap all = {{"input_ids", batch.input_ids.to(device_)},
                         {"attention_mask", batch.attention_mask.to(device_)},
                         {"position_ids", batch.position_ids.to(device_)}};
  // verl's compute_values: critic.forward_micro_batch_size_per_gpu rows (here the rollout's
  // log-prob micro-batch) or, with use_dynamic_bsz, critic.forward_max_token_len_per_gpu tokens.
  const ForwardPlan plan = forward_plan(config_.rollout.log_prob_micro_batch_size_per_gpu, config_.critic.use_dynamic_bsz,
                                       config_.critic.forward_max_token_len_per_gpu,
                                       "critic.forward_max_token_len_per_gpu", layout());
  const auto parts = plan_micro_batches(plan, batch.attention_mask);
  std::vector<torch::Tensor> values;
  for (const auto& part : parts) {
    values.push_back(response_values(module_, select_rows(all, torch::tensor(part, torch::kLong)),
                                     batch.response_width(), layout()));
  }
  // Back in the batch's row order.
  return torch::cat(values, 0).index_select(0, torch::tensor(restore_order(parts), torch::kLong).to(device_));
}

SequenceLayout CriticWorker::layout() const {
  return config_.critic.use_remove_padding ? SequenceLayout::kRemovePadding : SequenceLayout::kPadded;
}

MetricMap CriticWorker::update_critic(const RolloutBatch& batch, const torch::Tensor& values,
                                      const torch::Tensor& returns, int64_t step, int64_t total_steps) {
  MetricMap m;
  const auto start = std::chrono::steady_clock::now();
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
  if (cc.use_dynamic_bsz) {
    plan.max_token_len = cc.ppo_max_token_len_per_gpu;
    plan.budget_key = "critic.ppo_max_token_len_per_gpu";
  }
  plan.grad_clip = cc.grad_clip;
  plan.who = "critic";
  MeanAccumulator acc;
  const int64_t width = batch.response_width();
  const auto seq_layout = layout();
  run_minibatch_update(all, batch.batch_size(), plan, *optim_, *engine_, strategy_, acc, step,
                       [&](const MicroBatch& mb) {
                         const auto& d = mb.data;
                         auto vpreds = response_values(module_, d, width, seq_layout);
                         auto vl = algos::compute_value_loss(vpreds, d.at("returns"), d.at("values"),
                                                             d.at("response_mask"), cc.cliprange_value, mode);
                         acc.add("critic/vf_loss", item(vl.vf_loss));
                         acc.add("critic/vf_clipfrac", item(vl.vf_clipfrac));
                         acc.add("critic/vpred_mean", item(algos::masked_mean(vpreds.detach(), d.at("response_mask"))));
                         return vl.vf_loss * loss_scale(mb, mode);
                       });
  acc.into(m);
  // perf/mfu/critic as verl's fsdp worker computes it (flops_counter.h), over the update's time.
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m["perf/mfu/critic"] = model_flops_utilization(module_->config(), batch.attention_mask, cc.ppo_epochs, secs, device_);
  return m;
}

void CriticWorker::add_to(CheckpointParts& parts) {
  if (engine_->sharded()) {
    parts.sharded.push_back({"critic", [this](const std::string& dir) { engine_->save_shards(dir, optim_.get()); },
                             [this](const std::string& dir) { engine_->load_shards(dir, optim_.get()); }});
    return;
  }
  parts.critic = module_.ptr().get();
  parts.critic_optim = optim_.get();
}

}  // namespace verl::trainer

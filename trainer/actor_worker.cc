#include "trainer/actor_worker.h"

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <map>
#include <set>

#include "common/log.h"
#include "trainer/core_algos.h"
#include "trainer/flops_counter.h"
#include "trainer/hf_model.h"
#include "trainer/minibatch_update.h"
#include "trainer/ref_worker.h"
#include "trainer/rollout_correction.h"

namespace verl::trainer {
namespace {

}  // namespace

algos::PolicyLossParams policy_loss_params(const JobConfig& config) {
  const auto& ac = config.actor;
  algos::PolicyLossParams p;
  p.loss_mode = algos::parse_policy_loss_mode(ac.loss_mode);
  p.agg = algos::parse_loss_agg_mode(ac.loss_agg_mode);
  p.clip_ratio_low = ac.clip_ratio_low;
  p.clip_ratio_high = ac.clip_ratio_high;
  p.clip_ratio_c = ac.clip_ratio_c;
  p.tau_pos = ac.tau_pos;
  p.tau_neg = ac.tau_neg;
  p.clip_cov_ratio = ac.clip_cov_ratio;
  p.clip_cov_lb = ac.clip_cov_lb;
  p.clip_cov_ub = ac.clip_cov_ub;
  p.kl_cov_ratio = ac.kl_cov_ratio;
  p.ppo_kl_coef = ac.ppo_kl_coef;
  p.loss_scale_factor = ac.loss_scale_factor.value_or(0.0);
  return p;
}

ActorWorker::ActorWorker(const JobConfig& config, CausalLm policy, const torch::Device& device,
                         ParallelStrategy& strategy)
    : config_(config), strategy_(strategy), device_(device), module_(std::move(policy)) {
  module_->to(device_);
  module_->model->set_gradient_checkpointing(config_.model.enable_gradient_checkpointing);
  if (lora()) {
    if (config_.trainer.sft_warmup_steps > 0) {
      lora_pending_ = true;
    } else {
      add_adapters();
    }
  }
  engine_ = make_module_engine(*module_, strategy_, device_, {"actor_rollout_ref.actor", true, config_.actor.fsdp});
  const auto& o = config_.actor.optim;
  optim_ = make_adamw(engine_->optimizer_params(), o.lr, o.beta1, o.beta2, o.weight_decay);
}

double ActorWorker::temperature() const {
  const double t = config_.rollout.sampling.temperature;
  return t > 0 ? t : 1.0;
}

SequenceLayout ActorWorker::layout() const {
  return config_.model.use_remove_padding ? SequenceLayout::kRemovePadding : SequenceLayout::kPadded;
}

ResponseLogProbs ActorWorker::compute_log_prob(const RolloutBatch& batch, bool with_entropy) {
  const auto& r = config_.rollout;
  const ForwardPlan plan =
      forward_plan(r.log_prob_micro_batch_size_per_gpu, r.log_prob_use_dynamic_bsz, r.log_prob_max_token_len_per_gpu,
                   "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu", layout());
  ComputeScope scope(*engine_);
  return compute_log_probs(module_, batch, plan, temperature(), with_entropy);
}

torch::Tensor ActorWorker::compute_base_log_prob(const RolloutBatch& batch) {
  const ForwardPlan plan = reference_log_prob_plan(config_);
  ComputeScope scope(*engine_);
  set_lora_enabled(*module_, false);
  struct Reenable {
    torch::nn::Module& m;
    ~Reenable() { set_lora_enabled(m, true); }
  } reenable{*module_};
  return compute_log_probs(module_, batch, plan, temperature()).log_probs;
}

void ActorWorker::add_adapters() {
  const auto& l = config_.model.lora;
  const int64_t adapted = add_lora(*module_, l, static_cast<uint64_t>(config_.trainer.seed) * 2654435761ULL + 97);
  if (l.adapter_path) load_peft_adapter(module_, resolve_model_dir(*l.adapter_path, "actor_rollout_ref.model.lora_adapter_path"));
  if (strategy_.is_rank0()) {
    log::Info() << "actor: LoRA r=" << l.rank << " alpha=" << l.alpha << " on " << adapted << " projections, "
                << count_trainable(*module_) << " trainable of " << count_parameters(*module_) << " parameters";
  }
}

void ActorWorker::enter_lora() {
  if (!lora_pending_) return;
  // A plain copy of the full (gathered) weights; the old engine and module go.
  CausalLm fresh(module_->config(), torch::TensorOptions().device(device_).dtype(torch::kFloat32));
  {
    FullParamsScope full(*engine_);
    torch::NoGradGuard no_grad;
    copy_shared_parameters(*module_, *fresh);
  }
  optim_.reset();
  engine_.reset();
  module_ = fresh;
  module_->model->set_gradient_checkpointing(config_.model.enable_gradient_checkpointing);
  add_adapters();
  engine_ = make_module_engine(*module_, strategy_, device_, {"actor_rollout_ref.actor", true, config_.actor.fsdp});
  const auto& o = config_.actor.optim;
  optim_ = make_adamw(engine_->optimizer_params(), o.lr, o.beta1, o.beta2, o.weight_decay);
  lora_pending_ = false;
  lora_base_is_warm_start_ = true;
}

MetricMap ActorWorker::update_policy(const RolloutBatch& batch, const PolicyUpdateInputs& in, int64_t step,
                                     int64_t total_steps) {
  MetricMap m;
  const auto start = std::chrono::steady_clock::now();
  const auto& ac = config_.actor;
  const auto kl_type = algos::parse_kl_penalty(ac.kl_loss_type);
  auto loss_params = policy_loss_params(config_);
  const auto mode = loss_params.agg;
  const bool global = config_.trainer.global_batch_loss();
  // clip_cov's random choice of tokens: seeded by the run, the step and the rank, never torch's
  // global generator (docs/ARCHITECTURE.md, Determinism).
  loss_params.generator = at::detail::createCPUGenerator(static_cast<uint64_t>(config_.trainer.seed) * 6364136223846793005ULL +
                                                         static_cast<uint64_t>(step) * 1442695040888963407ULL +
                                                         static_cast<uint64_t>(strategy_.dp_rank()));
  const double temp = temperature();
  TensorMap all = {{"input_ids", batch.input_ids},       {"attention_mask", batch.attention_mask},
                   {"position_ids", batch.position_ids}, {"responses", batch.responses},
                   {"response_mask", batch.response_mask}, {"old_log_prob", in.old_log_prob},
                   {"advantages", in.advantages}};
  if (ac.use_kl_loss) all["ref_log_prob"] = in.ref_log_prob.to(device_);
  if (in.rollout_log_prob.defined()) all["rollout_log_prob"] = in.rollout_log_prob.to(device_);
  if (in.rollout_is_weights.defined()) all["rollout_is_weights"] = in.rollout_is_weights.to(device_);
  module_->train();
  const double lr = warmup_lr(ac.optim, updates_, total_steps);
  set_lr(*optim_, lr);
  m["actor/lr"] = lr;
  ++updates_;

  UpdatePlan plan;
  plan.epochs = ac.ppo_epochs;
  plan.mini_batch = ac.ppo_mini_batch_size * config_.rollout.sampling.n / strategy_.dp_size();
  plan.micro_batch = ac.ppo_micro_batch_size_per_gpu;
  if (ac.use_dynamic_bsz) {
    plan.max_token_len = ac.ppo_max_token_len_per_gpu;
    plan.budget_key = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu";
  }
  plan.shuffle = ac.shuffle;
  plan.shuffle_seed = static_cast<uint64_t>(config_.trainer.seed) * 7919ULL + static_cast<uint64_t>(step) * 131ULL;
  plan.grad_clip = ac.grad_clip;
  plan.who = "actor";
  plan.global_counts = global;
  MeanAccumulator acc;
  const int64_t width = batch.response_width();
  const auto seq_layout = layout();
  const auto stats = run_minibatch_update(
      all, batch.batch_size(), plan, *optim_, *engine_, strategy_, acc, step,
      [&](const MicroBatch& mb) {
        const auto& d = mb.data;
        const auto& mask = d.at("response_mask");
        // The LM head a chunk of positions at a time, forward and backward: no [B, R, V] logits.
        const bool with_entropy = ac.entropy_coeff != 0.0 || ac.calculate_entropy;
        auto hidden = response_hidden(module_, d.at("input_ids"), d.at("attention_mask"), d.at("position_ids"), width,
                                      seq_layout);
        auto head = head_log_probs(module_, hidden, d.at("responses"), temp, with_entropy);
        const auto& log_prob = head.log_probs;
        auto params = loss_params;
        if (global) {
          params.global.dp_size = strategy_.dp_size();
          params.global.batch_num_tokens = mb.global_tokens;
          params.global.global_batch_size = mb.global_rows;
        }
        auto agg = [&](const torch::Tensor& loss_mat) {
          return algos::agg_loss(loss_mat, mask, mode, params.global, params.loss_scale_factor);
        };
        const auto is_weights = d.count("rollout_is_weights") ? d.at("rollout_is_weights") : torch::Tensor();
        auto pl = algos::compute_policy_loss(d.at("old_log_prob"), log_prob, d.at("advantages"), mask, params,
                                             is_weights);
        // verl's actor logs the current policy against the rollout's, per micro-batch.
        if (d.count("rollout_log_prob")) {
          for (const auto& [k, v] : algos::rollout_corr_metrics_from_logprobs(log_prob, d.at("rollout_log_prob"), mask))
            acc.add(k, v);
        }
        auto loss = pl.pg_loss;
        // verl's dp_actor: entropy over the vocabulary only when the loss uses it or
        // actor.calculate_entropy asks (the step's actor/entropy comes from the old log-prob pass).
        torch::Tensor entropy;
        if (ac.entropy_coeff != 0.0) {
          entropy = agg(head.entropy);
          loss = loss - ac.entropy_coeff * entropy;
        } else if (ac.calculate_entropy) {
          torch::NoGradGuard no_grad;
          entropy = agg(head.entropy.detach());
        }
        // In global mode a micro-batch's loss is its share of the mini-batch's (summed, not
        // averaged, by the accumulation); its metric is scaled back to the mini-batch's figure.
        const double metric_scale = global ? static_cast<double>(mb.micro_batches) : 1.0;
        if (ac.use_kl_loss) {
          auto kl = agg(algos::kl_penalty(log_prob, d.at("ref_log_prob"), kl_type));
          loss = loss + ac.kl_loss_coef * kl;
          acc.add("actor/kl_loss", item(kl) * metric_scale);
          acc.add("actor/kl_coef", ac.kl_loss_coef);
        }
        acc.add("actor/pg_loss", item(pl.pg_loss) * metric_scale);
        // A loss mode that does not compute a metric leaves it out, as verl's do.
        if (pl.pg_clipfrac.defined()) acc.add("actor/pg_clipfrac", item(pl.pg_clipfrac));
        if (pl.ppo_kl.defined()) acc.add("actor/ppo_kl", item(pl.ppo_kl));
        if (pl.pg_clipfrac_lower.defined()) acc.add("actor/pg_clipfrac_lower", item(pl.pg_clipfrac_lower));
        if (entropy.defined()) acc.add("actor/entropy", item(entropy) * metric_scale);
        // Global mode: agg_loss already divided by the mini-batch's global counts.
        return global ? loss : loss * loss_scale(mb, mode);
      });
  acc.into(m);
  m["actor/skipped_updates"] = static_cast<double>(stats.skipped);
  // perf/mfu/actor as verl's fsdp worker computes it (flops_counter.h), over the update's time.
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m["perf/mfu/actor"] = model_flops_utilization(module_->config(), batch.attention_mask, ac.ppo_epochs, secs, device_);
  return m;
}

MetricMap ActorWorker::sft_step(const RolloutBatch& batch, double lr) {
  MetricMap m;
  module_->train();
  set_lr(*optim_, lr);
  // Normalised by the mean token count per rank over ALL ranks, so that the averaged gradient
  // is the token-mean gradient of the global batch (as one rank holding it would compute).
  auto token_count = batch.response_mask.sum().to(torch::kFloat64).to(torch::kCPU).reshape({1});
  const double local_tokens = token_count.item<double>();
  strategy_.all_reduce_sum(token_count);
  const double tokens = token_count.item<double>() / static_cast<double>(strategy_.dp_size());
  double loss_sum = 0, correct = 0;
  UpdatePlan plan;
  plan.mini_batch = batch.batch_size();  // one optimizer step over the whole batch
  plan.micro_batch = config_.actor.ppo_micro_batch_size_per_gpu;
  plan.grad_clip = config_.actor.grad_clip;
  plan.who = "sft";
  MeanAccumulator acc;
  const TensorMap all = {{"input_ids", batch.input_ids},       {"attention_mask", batch.attention_mask},
                         {"position_ids", batch.position_ids}, {"responses", batch.responses},
                         {"response_mask", batch.response_mask}};
  const int64_t width = batch.response_width();
  const auto seq_layout = layout();
  const auto stats = run_minibatch_update(
      all, batch.batch_size(), plan, *optim_, *engine_, strategy_, acc, /*step=*/0,
      [&](const MicroBatch& mb) {
        const auto& d = mb.data;
        auto hidden = response_hidden(module_, d.at("input_ids"), d.at("attention_mask"), d.at("position_ids"), width,
                                      seq_layout);
        const auto& labels = d.at("responses");
        const auto& mask = d.at("response_mask");
        const auto head =
            head_log_probs(module_, hidden, labels, /*temperature=*/1.0, /*with_entropy=*/false, /*with_argmax=*/true);
        const auto& lp = head.log_probs;
        // Token-mean over the whole (rank's) batch, accumulated across micro-batches.
        auto loss = -(lp * mask).sum() / std::max(tokens, 1.0);
        loss_sum += item(loss);
        correct += item(((head.argmax == labels).to(torch::kFloat32) * mask).sum());
        return loss;
      });
  m["sft/loss"] = loss_sum;
  m["sft/token_acc"] = correct / std::max(local_tokens, 1.0);
  m["sft/grad_norm"] = stats.last_grad_norm;
  return m;
}

NamedTensors ActorWorker::weights() const {
  // With LoRA the adapters are merged in: the rollout's model has none.
  return merged_lora_parameters(*module_);
}

void ActorWorker::sync_to(RolloutEngine& rollout) {
  // A layer at a time (verl's hybrid engine): a sharded actor never holds its whole model
  // gathered, and a tensor-parallel rollout keeps only its piece of each layer.
  std::map<const c10::TensorImpl*, std::string> names;
  for (const auto& p : module_->named_parameters(/*recurse=*/true)) names[p.value().unsafeGetTensorImpl()] = p.key();
  engine_->visit_full([&](const std::vector<torch::Tensor>& params) {
    std::set<std::string> in;
    for (const auto& p : params) in.insert(names.at(p.unsafeGetTensorImpl()));
    rollout.load_weights(merged_lora_parameters(*module_, [&](const std::string& n) { return in.count(n) > 0; }));
  });
}

void ActorWorker::add_to(CheckpointParts& parts) {
  if (engine_->sharded()) {
    parts.sharded.push_back({"actor", [this](const std::string& dir) { engine_->save_shards(dir, optim_.get()); },
                             [this](const std::string& dir) { engine_->load_shards(dir, optim_.get()); }});
    return;
  }
  parts.actor = module_.ptr().get();
  parts.actor_optim = optim_.get();
}

}  // namespace verl::trainer

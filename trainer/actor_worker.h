// ActorWorker is verl's actor (dp_actor.DataParallelPPOActor with its FSDP worker's module and
// optimizer): it owns the policy module and its AdamW, computes log-probs of rollouts, runs
// the PPO policy update (and the SFT warm start's supervised step), hands its weights to the
// rollout engine, and names its parts for a checkpoint. Gradients are synchronised through the
// ParallelStrategy. Used from one thread.
#pragma once

#include <cstdint>
#include <memory>

#include <torch/torch.h>

#include "trainer/batch.h"
#include "trainer/checkpoint.h"
#include "trainer/core_algos.h"
#include "trainer/job_config.h"
#include "trainer/log_probs.h"
#include "trainer/metrics.h"
#include "trainer/model.h"
#include "trainer/module_engine.h"
#include "trainer/parallel_strategy.h"
#include "trainer/rollout_engine.h"

namespace verl::trainer {

// What the policy update needs besides the rollout: [B, R] tensors on the actor's device.
struct PolicyUpdateInputs {
  torch::Tensor old_log_prob;
  torch::Tensor advantages;
  torch::Tensor ref_log_prob;        // only with actor.use_kl_loss
  torch::Tensor rollout_log_prob;    // the rollout engine's, with algorithm.rollout_correction on
  torch::Tensor rollout_is_weights;  // with rollout_correction.rollout_is (rollout_correction.h)
};

// Everything the policy losses read from the job config, in one place (core_algos.h
// PolicyLossParams): loss mode and its keys, clip ratios, loss_agg_mode, loss_scale_factor.
// The per-micro-batch parts (global counts, generator) are the update's to fill.
algos::PolicyLossParams policy_loss_params(const JobConfig& config);

class ActorWorker {
 public:
  // Takes the (already initialised or loaded) policy; moves it to device.
  ActorWorker(const JobConfig& config, CausalLm policy, const torch::Device& device, ParallelStrategy& strategy);

  // Log-probs (and entropies when asked) of the batch's responses at the rollout temperature.
  ResponseLogProbs compute_log_prob(const RolloutBatch& batch, bool with_entropy = false);

  // With LoRA (actor_rollout_ref.model.lora_rank > 0): the reference policy's log-probs, from
  // this module with its adapters off (the base model, as verl's ref_in_actor), with the
  // reference's micro-batch keys. No third copy of the model.
  bool lora() const { return config_.model.lora.rank > 0; }
  torch::Tensor compute_base_log_prob(const RolloutBatch& batch);
  // verlctl's SFT warm start stands in for pretraining: under LoRA it trains the whole model,
  // and the adapters come after it (enter_lora: the module re-wrapped with adapters, a fresh
  // engine and optimizer), so that RL's reference (the base) is the post-SFT policy, as it is
  // without LoRA. lora_pending(): adapters not added yet (a warm start is configured). The PEFT
  // export then has no base on disk to apply to (lora_base_is_warm_start()).
  bool lora_pending() const { return lora_pending_; }
  void enter_lora();
  bool lora_base_is_warm_start() const { return lora_base_is_warm_start_; }
  void set_lora_base_is_warm_start(bool v) { lora_base_is_warm_start_ = v; }

  // One PPO update (actor.ppo_epochs over mini/micro-batches); returns actor/* metrics and
  // perf/mfu/actor. total_steps sizes the LR warmup.
  MetricMap update_policy(const RolloutBatch& batch, const PolicyUpdateInputs& inputs, int64_t step,
                          int64_t total_steps);

  // One supervised step on this rank's teacher-forced batch, with the actor's own optimizer at
  // lr (so RL starts with warm Adam moments); the loss is the token mean over every rank's
  // tokens. Returns sft/loss, sft/token_acc, sft/grad_norm (this rank's; the caller reduces).
  MetricMap sft_step(const RolloutBatch& batch, double lr);

  // The policy's parameters by name, for RolloutEngine::load_weights: full values only inside a
  // FullParamsScope of engine() (a sharded engine; collective), as sync_to does.
  NamedTensors weights() const;
  // Loads the policy's weights into the rollout engine (gathering them when sharded).
  void sync_to(RolloutEngine& rollout);
  void add_to(CheckpointParts& parts);

  // The module: its parameters hold full values only inside a FullParamsScope(engine()).
  CausalLm& module() { return module_; }
  ModuleEngine& engine() { return *engine_; }
  // The module's and the optimizer's state off the device and back (ModuleEngine::sleep).
  void sleep() { engine_->sleep(optim_.get()); }
  void wake() { engine_->wake(); }
  const torch::Device& device() const { return device_; }
  int64_t updates() const { return updates_; }
  void set_updates(int64_t n) { updates_ = n; }

 private:
  double temperature() const;
  // actor_rollout_ref.model.use_remove_padding as the forward to run.
  SequenceLayout layout() const;

  const JobConfig& config_;
  ParallelStrategy& strategy_;
  torch::Device device_;
  CausalLm module_;
  std::unique_ptr<ModuleEngine> engine_;
  std::unique_ptr<torch::optim::AdamW> optim_;
  int64_t updates_ = 0;  // LR scheduler steps taken
  bool lora_pending_ = false;
  bool lora_base_is_warm_start_ = false;
  void add_adapters();  // add_lora (+ lora_adapter_path) on module_, logged
};

}  // namespace verl::trainer

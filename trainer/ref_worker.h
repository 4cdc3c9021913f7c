// RefWorker is verl's reference policy: a frozen copy of the policy that RL starts from (after
// the SFT warm start, if any), whose log-probs feed the KL loss or the KL reward penalty. It is
// part of a checkpoint, because a resumed run cannot rebuild it from the resumed actor.
#pragma once

#include <memory>

#include <torch/torch.h>

#include "trainer/batch.h"
#include "trainer/checkpoint.h"
#include "trainer/job_config.h"
#include "trainer/log_probs.h"
#include "trainer/model.h"
#include "trainer/module_engine.h"
#include "trainer/parallel_strategy.h"

namespace verl::trainer {

// How the reference's log-probs are batched (actor_rollout_ref.ref.log_prob_* keys) and which
// forward runs (actor_rollout_ref.model decides, as in verl): RefWorker's, and the actor's own
// pass with its LoRA adapters off.
ForwardPlan reference_log_prob_plan(const JobConfig& config);

class RefWorker {
 public:
  // A frozen deep copy of policy on device (policy's parameters must hold full values: inside
  // the actor engine's FullParamsScope), held by an engine as ref.fsdp_config says.
  RefWorker(const JobConfig& config, const CausalLm& policy, const torch::Device& device, ParallelStrategy& strategy);

  // Log-probs of the batch's responses [B, R], on the reference's device.
  torch::Tensor compute_ref_log_prob(const RolloutBatch& batch);

  void add_to(CheckpointParts& parts);
  // The frozen module off the device and back (ModuleEngine::sleep).
  void sleep() { engine_->sleep(nullptr); }
  void wake() { engine_->wake(); }
  const torch::Device& device() const { return device_; }

 private:
  const JobConfig& config_;
  torch::Device device_;
  CausalLm module_;
  std::unique_ptr<ModuleEngine> engine_;
};

}  // namespace verl::trainer

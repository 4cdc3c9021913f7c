// CriticWorker is verl's critic (dp_critic.DataParallelPPOCritic with its worker's module and
// optimizer): it owns the value model and its AdamW, computes values of rollouts, runs the
// clipped value-loss update, and names its parts for a checkpoint. Used from one thread.
#pragma once

#include <cstdint>
#include <memory>

#include <torch/torch.h>

#include "trainer/batch.h"
#include "trainer/checkpoint.h"
#include "trainer/job_config.h"
#include "trainer/metrics.h"
#include "trainer/model.h"
#include "trainer/module_engine.h"
#include "trainer/parallel_strategy.h"

namespace verl::trainer {

class CriticWorker {
 public:
  CriticWorker(const JobConfig& config, CriticModel critic, const torch::Device& device, ParallelStrategy& strategy);

  // Values of the response positions [B, R] (on the critic's device), without a graph.
  torch::Tensor compute_values(const RolloutBatch& batch);

  // One value update (critic.ppo_epochs over mini/micro-batches) towards returns; values are
  // the rollout-time values the clip is relative to. Returns critic/* metrics.
  MetricMap update_critic(const RolloutBatch& batch, const torch::Tensor& values, const torch::Tensor& returns,
                          int64_t step, int64_t total_steps);

  void add_to(CheckpointParts& parts);
  // The module: its parameters hold full values only inside a FullParamsScope(engine()).
  CriticModel& module() { return module_; }
  ModuleEngine& engine() { return *engine_; }
  // The module's and the optimizer's state off the device and back (ModuleEngine::sleep).
  void sleep() { engine_->sleep(optim_.get()); }
  void wake() { engine_->wake(); }
  const torch::Device& device() const { return device_; }
  int64_t updates() const { return updates_; }
  void set_updates(int64_t n) { updates_ = n; }

 private:
  // critic.model.use_remove_padding as the forward to run.
  SequenceLayout layout() const;

  const JobConfig& config_;
  ParallelStrategy& strategy_;
  torch::Device device_;
  CriticModel module_;
  std::unique_ptr<ModuleEngine> engine_;
  std::unique_ptr<torch::optim::AdamW> optim_;
  int64_t updates_ = 0;
};

}  // namespace verl::trainer

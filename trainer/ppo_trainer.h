// PpoTrainer runs verl's RayPPOTrainer.fit() loop on one data-parallel rank, in verl's order,
// over the worker parts (actor, critic, reference, rollout engine) and the parallel strategy:
//   [SFT warm start] -> validate (val_before_train) -> for each step:
//     generate (rollout.n responses per prompt) -> reward -> old log-prob -> ref log-prob ->
//     values -> advantages -> update critic -> update actor (after critic_warmup) ->
//     sync weights to the rollout -> metrics (averaged over ranks) -> validate every
//     test_freq -> checkpoint every save_freq.
// Each step takes data.train_batch_size prompts over all ranks; the strategy gives this rank
// its contiguous shard (whole prompt groups, so GRPO's groups never straddle ranks). On CPU a
// run is deterministic: same config -> same metrics (docs/ARCHITECTURE.md, "Determinism").
//
// Owns its workers, data and engine; uses Distributed (not owned) through the strategy. Rank 0
// alone writes metrics and checkpoints. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "common/error.h"
#include "text/tokenizer.h"
#include "trainer/core_algos.h"
#include "trainer/rollout_correction.h"
#include "trainer/dataset.h"
#include "trainer/distributed.h"
#include "trainer/job_config.h"
#include "trainer/metrics.h"
#include "trainer/model.h"
#include "trainer/rollout_engine.h"

namespace verl::trainer {

class ActorWorker;
class CriticWorker;
class RefWorker;
class RolloutEngine;
class ParallelStrategy;
class CheckpointManager;
struct RolloutBatch;

struct ValidationResult {
  double score = 0;                          // mean reward over the whole held-out set
  std::map<std::string, double> by_source;   // data_source -> mean reward
  int64_t samples = 0;
  MetricMap metrics;                         // verl's val-core/val-aux families (val_metrics.h), val/score/mean
};

struct FitResult {
  std::vector<std::pair<int64_t, double>> val_scores;  // (global step, val/score/mean)
  int64_t steps = 0;                                   // global step reached
  MetricMap last_metrics;                              // the last step's metrics
};

class PpoTrainer {
 public:
  // dist may be null: a single rank. Throws verl::Error for an inconsistent config.
  PpoTrainer(const JobConfig& config, Distributed* dist);
  ~PpoTrainer();

  // SFT warm start (trainer.sft_warmup_steps, skipped when resuming), then the RL loop.
  // Running out of memory is a verl::Error naming the rank, the device, the step's phase
  // (gen, old_log_prob, ref, values, update_critic, update_actor, ...) and the keys that size it.
  FitResult fit();
  // The request's "sft": true: supervised steps only (sft_warmup_steps, or
  // total_training_steps when that is 0), validating every test_freq, saving the actor under
  // <default_local_dir>/sft/global_step_N at the end.
  FitResult fit_sft();

  // Greedy (rollout.val_kwargs) generation on the held-out set, scored by the rewards.
  ValidationResult validate();
  // One supervised step on ground-truth answers; returns its metrics (sft/loss, ...).
  MetricMap sft_step();

  CausalLm& actor();
  const PromptDataset& train_set() const { return train_; }
  const PromptDataset& val_set() const { return val_; }
  const text::Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  struct StepBatch;
  MetricMap train_step(int64_t step);
  void generate_and_score(int64_t step, StepBatch& sb, MetricMap& m);
  FitResult run_fit();
  // Whether a worker on this device sleeps while the rollout generates (the hybrid engine's
  // sleep: rollout.free_cache_engine with the rollout on that GPU).
  bool sleeps_during_rollout(const torch::Device& worker_device) const;
  FitResult run_fit_sft();
  // run(), with a torch out-of-memory error turned into one that names the rank, device, phase
  // and step, and the keys that size the phase (out_of_memory_error).
  FitResult naming_out_of_memory(const std::function<FitResult()>& run);
  // What one rank asks the rollout for: prompts and one seed per row.
  struct RolloutRequest {
    std::vector<std::vector<int64_t>> prompts;
    std::vector<uint64_t> seeds;
  };
  // The requests of every member of this rank's rollout tensor-parallel group (member order),
  // generated together on the group's model; returns this rank's rows. Collective over the
  // group (every member passes the same requests). With tp = 1, members holds this rank's alone.
  RolloutBatch group_generate(const std::vector<RolloutRequest>& members, const GenerateOptions& options);
  // rollout.free_cache_engine (the hybrid engine's sleep): while the rollout generates, the
  // training state of the workers on its GPU is in host memory, so that its KV cache can have
  // that memory; woken before their next use. Not on the CPU, where it would only copy.
  class WorkersAsleep;
  // The batch on the actor's device (role placement may put the rollout on another GPU).
  RolloutBatch on_actor_device(RolloutBatch batch) const;
  // The global ranks of this rank's rollout TP group (consecutive ranks; this rank alone at tp 1).
  std::vector<int> rollout_group() const;
  void compute_advantages(StepBatch& sb, MetricMap& m);
  void apply_rollout_correction(StepBatch& sb, MetricMap& m);
  void resample_pf_ppo(StepBatch& sb);
  void after_sft();
  // Hands the actor's weights to the rollout engine when the actor changed since the last sync.
  void sync_rollout_weights(MetricMap* m);
  // Seconds this rank has spent in collectives so far (Distributed::comm_seconds; 0 alone).
  double comm_seconds() const;
  // actor/entropy: agg_loss(entropy, mask, actor.loss_agg_mode, loss_scale_factor) over every
  // rank's rows (token-mean from the summed tokens; the other modes' ranks hold equal row counts).
  double batch_entropy(const torch::Tensor& entropy, const torch::Tensor& mask);
  int64_t total_steps() const;
  bool maybe_save(int64_t step, bool force);  // true when it saved
  void record(int64_t step, const MetricMap& m);
  // Rank 0 only: the metrics recorder for a run of total steps: metrics.jsonl always, and the
  // loggers of trainer.logger (tracking.h); one warning per skipped service logger. Empty
  // console_keys: the recorder's default progress-line keys.
  void start_recorder(int64_t total, int64_t resume_from_step, std::vector<std::string> console_keys);
  std::vector<int64_t> stop_ids() const;
  // Writes the actor as an HF directory into a checkpoint (empty for the built-in model).
  std::function<void(const std::string&)> hf_export();

  JobConfig config_;
  std::unique_ptr<ParallelStrategy> strategy_;
  std::string model_dir_;          // the resolved actor_rollout_ref.model.path; empty: built-in model
  bool critic_from_path_ = false;  // the critic came from critic.model.path
  std::shared_ptr<const text::Tokenizer> tokenizer_;
  PromptDataset train_, val_;
  std::unique_ptr<DataSampler> sampler_, sft_sampler_;
  torch::Device actor_device_, critic_device_, ref_device_, rollout_device_;
  ModelConfig model_config_;
  std::unique_ptr<ActorWorker> actor_;
  std::unique_ptr<CriticWorker> critic_;
  std::unique_ptr<RefWorker> ref_;
  std::unique_ptr<RolloutEngine> rollout_;
  int64_t rollout_tp_ = 1;  // rollout.tensor_model_parallel_size
  int rank_ = 0, world_ = 1;
  bool rollout_stale_ = true;  // the actor changed since the engine last got its weights
  std::unique_ptr<algos::KlController> kl_ctrl_;
  algos::RolloutCorrectionConfig rollout_correction_;  // algorithm.rollout_correction
  std::unique_ptr<CheckpointManager> ckpt_;
  std::unique_ptr<MetricsRecorder> recorder_;
  int64_t global_step_ = 0;
  int64_t sft_steps_done_ = 0;
};

// The module's entry: reads the resolved config, sets up the rank, runs fit() or fit_sft().
// Throws verl::Error on failure.
void run_trainer(const nlohmann::json& config, bool sft_only);

// The error for a step that ran out of memory (torch's message `what`) in `phase` (a step
// timer's name; empty when outside one) on `device`: what ran out, where, and which keys to
// lower for that phase.
Error out_of_memory_error(const std::string& what, const std::string& phase, int64_t step, int rank,
                          const std::string& device);

}  // namespace verl::trainer

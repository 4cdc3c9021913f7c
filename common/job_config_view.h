// What verlctl itself (the launcher and the CLI, not the trainer) reads from a job config and from
// the metric rows a job writes, each key path and metric name written only here, so that a key
// verl renames breaks in this file and nowhere else. The trainer parses the whole config into
// trainer::JobConfig; this is the few facts the head needs to place, restart and show a job.
//
// JobConfigView holds a reference to a resolved job config (config::resolve / resolve_text: the
// schema's defaults filled in); the config must outlive it. Pure reads; thread-safe as the Json is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config.h"

namespace verl {

namespace job_keys {
inline constexpr const char* kNnodes = "trainer.nnodes";
inline constexpr const char* kNGpusPerNode = "trainer.n_gpus_per_node";
inline constexpr const char* kMaxRestarts = "trainer.max_restarts";
inline constexpr const char* kTotalTrainingSteps = "trainer.total_training_steps";
inline constexpr const char* kDefaultLocalDir = "trainer.default_local_dir";
inline constexpr const char* kMetricsFile = "trainer.metrics_file";
inline constexpr const char* kSaveFreq = "trainer.save_freq";
inline constexpr const char* kResumeMode = "trainer.resume_mode";
}  // namespace job_keys

// The names (verl's) of the metrics verlctl reads back from a job's rows.
namespace metric_names {
inline constexpr const char* kScore = "critic/score/mean";     // training rollouts' mean score
inline constexpr const char* kValScore = "val/score/mean";     // the validation score users track
inline constexpr const char* kStepSeconds = "timing_s/step";   // seconds one step took
inline constexpr const char* kCommSeconds = "timing_s/comm";   // of which in collectives
inline constexpr const char* kThroughput = "perf/throughput";  // tokens per second per rank
inline constexpr const char* kMaxMemoryReservedGb = "perf/max_memory_reserved_gb";
// Every name a PPO (GAE) step's row must carry, and those of a validation row (verlctl smoke
// checks a job's rows against them).
const std::vector<std::string>& ppo_step();
const std::vector<std::string>& validation();
}  // namespace metric_names

// Sets trainer.resume_mode to auto: the next attempt of a restarted job resumes from its latest
// checkpoint.
void set_resume_from_latest_checkpoint(config::Json& config);

// The config without the keys that name one run rather than shape it (nnodes, experiment name,
// where it writes, resume mode): two jobs of the same shape on other node counts compare equal.
config::Json without_run_names(config::Json config);

class JobConfigView {
 public:
  explicit JobConfigView(const config::Json& config) : config_(config) {}

  // The job's shape. Throw verl::Error naming the key when it is missing or not an integer
  // (a resolved config always has them).
  int nnodes() const;
  int n_gpus_per_node() const;
  int world_size() const { return nnodes() * n_gpus_per_node(); }
  // 0 when absent or not an integer.
  int max_restarts() const;
  // 0 when not an integer: null means "as many as the data gives", which the trainer works out.
  int64_t total_training_steps() const;
  // "" when absent or not a string.
  std::string default_local_dir() const;
  // Steps between checkpoints; 0 when not an integer. <= 0: the trainer saves none.
  int64_t save_freq() const;
  // Where rank 0 writes its metrics, as the trainer decides it: trainer.metrics_file when set,
  // else <trainer.default_local_dir>/metrics.jsonl; relative to the job's directory or absolute.
  std::string metrics_path() const;

 private:
  const config::Json& config_;
};

}  // namespace verl

// Scaling health of one training job: what the guide verlctl grew from asks a person to check
// by hand on a multi-node run, computed by the head from what it already holds: rank 0's metric
// rows (perf/throughput, timing_s/step, timing_s/comm, perf/max_memory_reserved_gb), the
// agents' GPU samples (gpu_sampler.h) on the job's GPUs while it ran, its failure, and an
// earlier run of the same job on fewer nodes.
//
// Each figure is judged against the guide's threshold as a row, as the probes report theirs:
// pass, warn (with the reason and what to try), or skip (not measurable here, e.g. GPU figures
// of CPU ranks). The thresholds: GPU utilisation >= 70 %, communication < 10 % of the step, no
// out-of-memory, peak reserved memory < 95 % of the GPU's, and tokens/s per GPU on N nodes
// >= 90 % of what the same job did per GPU on fewer nodes ("near-linear"). The first step is
// left out of the means when there are others (it pays for start-up: allocations, caches).
//
// Pure functions; thread-compatible.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "launcher/job_store.h"

namespace verl::launcher {

constexpr double kMinGpuUtilPct = 70;
constexpr double kMaxCommShare = 0.10;
constexpr double kMaxReservedShare = 0.95;
constexpr double kMinScalingEfficiency = 0.90;

// The same job run before on fewer nodes.
struct ScalingBaseline {
  std::string job;   // job-N
  int nnodes = 0;
  double tokens_per_s_per_rank = 0;
};

struct ScalingInput {
  JobRecord job;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();  // rank 0's metric rows, by step
  std::vector<Placement> placement;                                // the attempt's ranks
  // node -> samples [{time_ms, gpus: [{index, util_pct, mem_used_mib, mem_total_mib}]}]
  std::map<std::string, std::vector<nlohmann::ordered_json>> gpu_samples;
  int64_t now_ms = 0;  // the window's end while the job runs
  std::optional<ScalingBaseline> baseline;
};

// {ranks, device, steps, tokens_per_s_per_rank, comm_share, gpu_util_mean_pct?, gpu_util_min_pct?,
//  peak_memory_share?, efficiency?, baseline?, checks: [{name, value, unit, threshold, status,
//  reason, try?}]}; figures that cannot be had are absent, and their rows say skip and why.
nlohmann::ordered_json scaling_health(const ScalingInput& in);

// The configs equal but for trainer.nnodes and the keys that name a run rather than shape it
// (trainer.experiment_name, trainer.default_local_dir, trainer.metrics_file, trainer.resume_mode).
bool same_job_shape(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b);

// The latest SUCCEEDED train job before `job` of the same shape on fewer nodes (the most nodes
// among those), with its mean tokens/s per rank; nullopt when there is none.
std::optional<ScalingBaseline> find_scaling_baseline(const JobStore& store, const JobRecord& job);

// The mean of perf/throughput (tokens/s per rank, as verl's) over the rows, first step left
// out when there are others; nullopt without rows that have it.
std::optional<double> mean_tokens_per_s_per_rank(const nlohmann::ordered_json& rows);

}  // namespace verl::launcher

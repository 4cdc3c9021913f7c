// GPU utilisation and memory, sampled for the agent's heartbeats (docs/API.md: heartbeats carry
// `gpus: [{index, util_pct, mem_used_mib, mem_total_mib}]`; the head keeps the recent samples
// per node for the dashboard and GET /metrics).
//
// sample_gpus() runs nvidia-smi through the process module with a short timeout, so a hung
// driver delays a heartbeat by at most that long. It never throws: a node without nvidia-smi,
// without GPUs, or whose nvidia-smi fails, has no samples (an empty vector). Thread-safe.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace verl::launcher {

struct GpuSample {
  int index = 0;
  // -1: nvidia-smi answered "[N/A]" / "[Not Supported]" (a MIG instance has no utilisation).
  int util_pct = -1;
  int64_t mem_used_mib = -1;
  int64_t mem_total_mib = -1;
};

// {index, util_pct, mem_used_mib, mem_total_mib}; a value nvidia-smi did not report is null.
nlohmann::ordered_json to_json(const GpuSample& s);
nlohmann::ordered_json to_json(const std::vector<GpuSample>& samples);  // an array
// The inverse (the head reads heartbeats with it); entries that are not objects are skipped.
std::vector<GpuSample> gpu_samples_from_json(const nlohmann::ordered_json& j);

// The argv sample_gpus() runs (argv[0] = nvidia_smi).
std::vector<std::string> gpu_query_argv(const std::string& nvidia_smi = "nvidia-smi");

// Parses the output of gpu_query_argv(): one line per GPU, "0, 37, 1024, 143771". Lines that do
// not have four fields with a numeric index (e.g. "No devices were found") are skipped.
std::vector<GpuSample> parse_gpu_query(const std::string& csv);

// Runs nvidia_smi (a name on PATH or a path). Empty when it is absent, fails, or times out.
std::vector<GpuSample> sample_gpus(const std::string& nvidia_smi = "nvidia-smi",
                                   std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

}  // namespace verl::launcher

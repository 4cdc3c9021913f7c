// The metrics of one PPO step as verl's metric_utils computes them (compute_data_metrics,
// compute_timing_metrics, compute_throughout_metrics) and the memory figures its workers add
// (perf/max_memory_*_gb, perf/cpu_memory_used_gb), with verl's names and formulas.
//
// Each function works on one rank's shard; the loop then averages over ranks
// (Distributed::all_reduce_metrics: "/max" and "/min" keys reduce as max and min). Where a mean
// of per-rank values would be wrong, the function takes global sums instead:
// explained_variance() takes moments summed over ranks, add_timing_per_token() global token
// counts. Pure functions of their inputs except add_memory_metrics (allocator and /proc reads).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/metrics.h"

namespace verl::trainer {

struct DataMetricsInput {
  torch::Tensor token_level_scores;   // [B, R]: the reward function's outcome on the last token
  torch::Tensor token_level_rewards;  // [B, R]: scores after the KL penalty in the reward, if any
  torch::Tensor advantages;           // [B, R]
  torch::Tensor returns;              // [B, R]
  torch::Tensor values;               // [B, R]; undefined without a critic
  torch::Tensor response_mask;        // [B, R]
  std::vector<int64_t> prompt_lengths;  // [B] real prompt tokens
  int64_t max_prompt_length = 0;        // data.max_prompt_length: verl pads prompts to it
};

// critic/{score,rewards,advantages,returns}/{mean,max,min}, critic/values/{mean,max,min} with a
// critic, response_length/{mean,max,min,clip_ratio}, response_length_non_aborted/*,
// response/aborted_ratio, prompt_length/{mean,max,min,clip_ratio}. Score and reward statistics
// leave out aborted rows (no response token), as verl does; clip ratios count rows whose length
// equals the limit (the response width, data.max_prompt_length).
MetricMap compute_data_metrics(const DataMetricsInput& in);

// critic/vf_explained_var = 1 - Var(returns - values) / (Var(returns) + 1e-5) over the response
// tokens of the whole batch, with unbiased variances (torch.var). The moments are float64 sums
// [n, sum(d), sum(d^2), sum(r), sum(r^2)] with d = returns - values: all-reduce them (sum)
// across ranks, then call explained_variance().
torch::Tensor explained_variance_moments(const torch::Tensor& returns, const torch::Tensor& values,
                                         const torch::Tensor& response_mask);
double explained_variance(const torch::Tensor& moments);

// timing_per_token_ms/<phase> = timing_s/<phase> * 1000 / tokens, for the phases in metrics:
// gen over response tokens; ref, values, adv, update_critic, update_actor over prompt + response
// tokens (verl's compute_timing_metrics). Token counts are the global batch's.
void add_timing_per_token(MetricMap& metrics, double prompt_tokens, double response_tokens);

// perf/max_memory_allocated_gb, perf/max_memory_reserved_gb: the CUDA caching allocator's peaks
// on device since the process started (torch.cuda.max_memory_allocated/reserved), in GiB; 0 on
// the CPU, where torch.cuda's counters read 0. perf/cpu_memory_used_gb: the machine's used memory
// in GiB, as psutil.virtual_memory().used (verl's choice: the whole machine, not this process).
void add_memory_metrics(MetricMap& metrics, const torch::Device& device);

// psutil's Linux formula over /proc/meminfo's text: MemTotal - MemFree - Buffers - (Cached +
// SReclaimable), or MemTotal - MemFree when that is negative (containers). In bytes; 0 when
// MemTotal is missing.
double used_memory_bytes(const std::string& meminfo);

}  // namespace verl::trainer

#include "trainer/step_metrics.h"

#if VERL_TORCH_HAS_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <fstream>
#include <sstream>

#include "common/log.h"

namespace verl::trainer {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double scalar(const torch::Tensor& t) { return t.to(torch::kCPU).to(torch::kFloat64).item<double>(); }

// mean / max / min of a 1-D tensor under prefix; nothing for an empty one (all rows aborted).
void add_stats(MetricMap& m, const std::string& prefix, const torch::Tensor& v) {
  if (v.numel() == 0) return;
  const auto d = v.to(torch::kFloat64);
  m[prefix + "/mean"] = scalar(d.mean());
  m[prefix + "/max"] = scalar(d.max());
  m[prefix + "/min"] = scalar(d.min());
}

}  // namespace

MetricMap compute_data_metrics(const DataMetricsInput& in) {
  MetricMap m;
  const auto mask = in.response_mask > 0;
  const auto response_length = in.response_mask.sum(-1).to(torch::kFloat64);
  const auto aborted = response_length == 0;
  const auto kept = aborted.logical_not();
  const auto score = in.token_level_scores.sum(-1);
  const auto reward = in.token_level_rewards.sum(-1);
  add_stats(m, "critic/score", score.masked_select(kept));
  add_stats(m, "critic/rewards", reward.masked_select(kept));
  add_stats(m, "critic/advantages", in.advantages.masked_select(mask));
  add_stats(m, "critic/returns", in.returns.masked_select(mask));
  if (in.values.defined()) add_stats(m, "critic/values", in.values.masked_select(mask));

  const double max_response = static_cast<double>(in.response_mask.size(-1));
  add_stats(m, "response_length", response_length);
  m["response_length/clip_ratio"] = scalar((response_length == max_response).to(torch::kFloat64).mean());
  const auto kept_length = response_length.masked_select(kept);
  add_stats(m, "response_length_non_aborted", kept_length);
  if (kept_length.numel() > 0)
    m["response_length_non_aborted/clip_ratio"] = scalar((kept_length == max_response).to(torch::kFloat64).mean());
  m["response/aborted_ratio"] = scalar(aborted.to(torch::kFloat64).mean());

  const auto prompt_length =
      torch::tensor(std::vector<double>(in.prompt_lengths.begin(), in.prompt_lengths.end()), torch::kFloat64);
  add_stats(m, "prompt_length", prompt_length);
  m["prompt_length/clip_ratio"] =
      scalar((prompt_length == static_cast<double>(in.max_prompt_length)).to(torch::kFloat64).mean());
  return m;
}

torch::Tensor explained_variance_moments(const torch::Tensor& returns, const torch::Tensor& values,
                                         const torch::Tensor& response_mask) {
  const auto mask = response_mask > 0;
  const auto r = returns.masked_select(mask).to(torch::kCPU).to(torch::kFloat64);
  const auto d = r - values.masked_select(mask).to(torch::kCPU).to(torch::kFloat64);
  return torch::stack({torch::tensor(static_cast<double>(r.numel()), torch::kFloat64), d.sum(), d.square().sum(),
                       r.sum(), r.square().sum()});
}

double explained_variance(const torch::Tensor& moments) {
  const auto m = moments.to(torch::kCPU).to(torch::kFloat64).contiguous();
  const double* p = m.data_ptr<double>();
  const double n = p[0];
  // torch.var of one element is NaN (n - 1 = 0), and so is verl's figure then.
  auto var = [n](double sum, double sum_sq) { return (sum_sq - sum * sum / n) / (n - 1); };
  return 1.0 - var(p[1], p[2]) / (var(p[3], p[4]) + 1e-5);
}

void add_timing_per_token(MetricMap& metrics, double prompt_tokens, double response_tokens) {
  const double overall = prompt_tokens + response_tokens;
  const std::pair<const char*, double> phases[] = {
      {"gen", response_tokens}, {"ref", overall},           {"values", overall},
      {"adv", overall},         {"update_critic", overall}, {"update_actor", overall}};
  for (const auto& [phase, tokens] : phases) {
    auto it = metrics.find(std::string("timing_s/") + phase);
    if (it == metrics.end() || tokens <= 0) continue;
    metrics[std::string("timing_per_token_ms/") + phase] = it->second * 1000.0 / tokens;
  }
}

double used_memory_bytes(const std::string& meminfo) {
  std::istringstream in(meminfo);
  std::string line;
  double total = -1, free = 0, buffers = 0, cached = 0, reclaimable = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    double kib = 0;
    if (!(fields >> key >> kib)) continue;
    const double bytes = kib * 1024.0;
    if (key == "MemTotal:") total = bytes;
    else if (key == "MemFree:") free = bytes;
    else if (key == "Buffers:") buffers = bytes;
    else if (key == "Cached:") cached = bytes;
    else if (key == "SReclaimable:") reclaimable = bytes;
  }
  if (total < 0) return 0;
  const double used = total - free - (cached + reclaimable) - buffers;
  return used < 0 ? total - free : used;
}

void add_memory_metrics(MetricMap& metrics, const torch::Device& device) {
  double allocated = 0, reserved = 0;
#if VERL_TORCH_HAS_CUDA
  if (device.is_cuda()) {
    try {
      // libtorch 1.13 takes an int, 2.x a DeviceIndex: this converts to either.
      const c10::DeviceIndex index = device.has_index() ? device.index() : 0;
      const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
      allocated = static_cast<double>(stats.allocated_bytes[0].peak);  // [0]: StatType::AGGREGATE
      reserved = static_cast<double>(stats.reserved_bytes[0].peak);
    } catch (const c10::Error& e) {
      // Every rank must report the same keys: keep the 0s rather than drop the metrics.
      static bool warned = false;
      if (!warned) log::Warn() << "perf/max_memory_*_gb: no allocator statistics for " << device.str() << ": " << e.what_without_backtrace();
      warned = true;
    }
  }
#else
  (void)device;
#endif
  metrics["perf/max_memory_allocated_gb"] = allocated / kGiB;
  metrics["perf/max_memory_reserved_gb"] = reserved / kGiB;
  std::ifstream in("/proc/meminfo");
  std::stringstream text;
  text << in.rdbuf();
  metrics["perf/cpu_memory_used_gb"] = used_memory_bytes(text.str()) / kGiB;
}

}  // namespace verl::trainer

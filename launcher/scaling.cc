#include "launcher/scaling.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

#include "common/job_config_view.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;

// The rows the means are taken over: every step but the first when there are others.
std::vector<const Json*> steady_rows(const Json& rows) {
  std::vector<const Json*> out;
  if (!rows.is_array()) return out;
  for (const auto& r : rows)
    if (r.is_object()) out.push_back(&r);
  if (out.size() > 1) out.erase(out.begin());
  return out;
}

std::optional<double> number(const Json& row, const char* key) {
  auto it = row.find(key);
  if (it == row.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string pct(double share) { return fixed(share * 100, 1) + " %"; }

Json row(const std::string& name, std::optional<double> value, const std::string& unit, const std::string& threshold,
         const std::string& status, const std::string& reason, const std::string& try_this = {}) {
  Json r = {{"name", name}};
  r["value"] = value ? Json(*value) : Json(nullptr);
  r["unit"] = unit;
  r["threshold"] = threshold;
  r["status"] = status;
  r["reason"] = reason;
  if (!try_this.empty()) r["try"] = try_this;
  return r;
}

bool mentions_oom(const Json& failure) {
  if (!failure.is_object()) return false;
  std::string text = failure.value("reason", std::string());
  for (const auto& l : failure.value("last_lines", Json::array()))
    if (l.is_string()) text += "\n" + l.get<std::string>();
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text.find("out of memory") != std::string::npos || text.find("outofmemoryerror") != std::string::npos;
}

}  // namespace

bool same_job_shape(const Json& a, const Json& b) { return without_run_names(a) == without_run_names(b); }

std::optional<double> mean_tokens_per_s_per_rank(const Json& rows) {
  double sum = 0;
  int n = 0;
  for (const Json* r : steady_rows(rows))
    if (auto v = number(*r, metric_names::kThroughput)) {
      sum += *v;
      ++n;
    }
  if (n == 0) return std::nullopt;
  return sum / n;
}

std::optional<ScalingBaseline> find_scaling_baseline(const JobStore& store, const JobRecord& job) {
  std::optional<ScalingBaseline> best;
  for (const auto& other : store.jobs()) {  // newest first
    if (other.id >= job.id || other.kind != JobKind::kTrain || other.state != JobState::kSucceeded) continue;
    if (other.nnodes >= job.nnodes || other.n_gpus_per_node != job.n_gpus_per_node) continue;
    if (best && other.nnodes <= best->nnodes) continue;
    if (!same_job_shape(other.config, job.config)) continue;
    const auto tps = mean_tokens_per_s_per_rank(store.metrics(other.id, -1));
    if (!tps) continue;
    best = ScalingBaseline{other.name(), other.nnodes, *tps};
  }
  return best;
}

Json scaling_health(const ScalingInput& in) {
  const JobRecord& job = in.job;
  bool gpu = false;
  std::map<std::string, std::set<int>> job_gpus;  // node -> the job's GPU indices there
  for (const auto& p : in.placement)
    if (p.device.rfind("cuda:", 0) == 0) {
      gpu = true;
      job_gpus[p.node].insert(std::stoi(p.device.substr(5)));
    }
  const auto rows = steady_rows(in.rows);
  Json out = {{"ranks", job.world_size}, {"device", gpu ? "gpu" : "cpu"}, {"steps", rows.size()}};
  Json checks = Json::array();
  const std::string per = gpu ? "GPU" : "rank";

  // Throughput per GPU (per rank on CPUs), as verl's perf/throughput.
  const auto tps = mean_tokens_per_s_per_rank(in.rows);
  if (tps) out["tokens_per_s_per_rank"] = *tps;

  // Communication: time in collectives over the step's time, summed over the steps.
  double comm = 0, step = 0;
  bool has_comm = false;
  for (const Json* r : rows) {
    auto c = number(*r, metric_names::kCommSeconds);
    auto s = number(*r, metric_names::kStepSeconds);
    if (!c || !s) continue;
    has_comm = true;
    comm += *c;
    step += *s;
  }
  const std::string comm_try =
      "more work per all-reduce: a bigger data.train_batch_size (the guide's table) or fewer, larger micro-batches; "
      "check the transport with 'submit --nccl-debug' (InfiniBand, not sockets); fewer nodes";
  if (job.world_size <= 1) {
    checks.push_back(row("comm_share", std::nullopt, "%", "< 10 %", "skip", "one rank: no collectives"));
  } else if (!has_comm || step <= 0) {
    checks.push_back(row("comm_share", std::nullopt, "%", "< 10 %", "skip",
                         "no step with timing_s/comm yet (a trainer before it measured collectives)"));
  } else {
    const double share = comm / step;
    out["comm_share"] = share;
    checks.push_back(share < kMaxCommShare
                         ? row("comm_share", share * 100, "%", "< 10 %", "pass",
                               pct(share) + " of the step waits in collectives")
                         : row("comm_share", share * 100, "%", "< 10 %", "warn",
                               pct(share) + " of the step waits in collectives (gradient all-reduce, metric sync)",
                               comm_try));
  }

  // GPU utilisation and memory capacity from the agents' samples within the job's run.
  const int64_t from = job.started_ms, to = job.ended_ms ? job.ended_ms : in.now_ms;
  std::map<std::pair<std::string, int>, std::pair<double, int>> util;  // (node, gpu) -> (sum, n)
  double mem_total_mib = 0;
  for (const auto& [node, gpus] : job_gpus) {
    auto it = in.gpu_samples.find(node);
    if (it == in.gpu_samples.end()) continue;
    for (const auto& s : it->second) {
      const int64_t t = s.value("time_ms", int64_t{0});
      if (t < from || t > to) continue;
      for (const auto& g : s.value("gpus", Json::array())) {
        const int index = g.value("index", -1);
        if (!gpus.count(index)) continue;
        if (g.contains("util_pct") && g["util_pct"].is_number() && g["util_pct"].get<double>() >= 0) {
          auto& u = util[{node, index}];
          u.first += g["util_pct"].get<double>();
          ++u.second;
        }
        if (g.contains("mem_total_mib") && g["mem_total_mib"].is_number() && g["mem_total_mib"].get<double>() > 0)
          mem_total_mib = mem_total_mib > 0 ? std::min(mem_total_mib, g["mem_total_mib"].get<double>())
                                            : g["mem_total_mib"].get<double>();
      }
    }
  }
  const std::string util_try =
      "feed the GPUs more: a bigger data.train_batch_size or ppo_micro_batch_size_per_gpu, "
      "actor_rollout_ref.rollout.gpu_memory_utilization up; less offload; if comm_share is high too, fix that first";
  if (!gpu) {
    checks.push_back(row("gpu_util", std::nullopt, "%", ">= 70 %", "skip", "CPU ranks: no GPU to keep busy"));
  } else if (util.empty()) {
    checks.push_back(row("gpu_util", std::nullopt, "%", ">= 70 %", "skip",
                         "no GPU samples from the job's nodes while it ran (the head keeps the last 10 minutes)"));
  } else {
    double sum = 0, min = 1e9;
    int n = 0;
    for (const auto& [key, u] : util) {
      sum += u.first;
      n += u.second;
      min = std::min(min, u.first / u.second);
    }
    const double mean = sum / n;
    out["gpu_util_mean_pct"] = mean;
    out["gpu_util_min_pct"] = min;
    checks.push_back(mean >= kMinGpuUtilPct && min >= kMinGpuUtilPct
                         ? row("gpu_util", mean, "%", ">= 70 %", "pass",
                               "mean " + fixed(mean, 0) + " %, lowest GPU " + fixed(min, 0) + " %")
                         : row("gpu_util", mean, "%", ">= 70 %", "warn",
                               "mean " + fixed(mean, 0) + " %, lowest GPU " + fixed(min, 0) + " % over " +
                                   std::to_string(util.size()) + " GPUs",
                               util_try));
  }

  // Memory: no out-of-memory, and the peak reserved under 95 % of the GPU's.
  const bool oom = mentions_oom(job.failure);
  checks.push_back(oom ? row("oom", 1, "", "none", "warn", "the job failed out of memory",
                             "param/optimizer offload, a smaller ppo_micro_batch_size_per_gpu or "
                             "ppo_max_token_len_per_gpu, enable_gradient_checkpointing, or more GPUs (TP)")
                       : row("oom", 0, "", "none", "pass", "no out-of-memory failure"));
  double reserved_gb = -1;  // a peak: every step counts, the first one too
  if (in.rows.is_array())
    for (const auto& r : in.rows)
      if (auto v = r.is_object() ? number(r, metric_names::kMaxMemoryReservedGb) : std::nullopt)
        reserved_gb = std::max(reserved_gb, *v);
  if (!gpu) {
    checks.push_back(row("reserved_memory", std::nullopt, "%", "< 95 %", "skip", "CPU ranks: no GPU memory"));
  } else if (reserved_gb < 0 || mem_total_mib <= 0) {
    checks.push_back(row("reserved_memory", std::nullopt, "%", "< 95 %", "skip",
                         reserved_gb < 0 ? "no perf/max_memory_reserved_gb in the job's metrics yet"
                                         : "no GPU memory capacity in the agents' samples"));
  } else {
    const double share = reserved_gb * 1024.0 / mem_total_mib;
    out["peak_memory_share"] = share;
    const std::string why = fixed(reserved_gb, 1) + " GiB reserved at the peak of " + fixed(mem_total_mib / 1024.0, 1) +
                            " GiB (" + pct(share) + ")";
    checks.push_back(share < kMaxReservedShare
                         ? row("reserved_memory", share * 100, "%", "< 95 %", "pass", why)
                         : row("reserved_memory", share * 100, "%", "< 95 %", "warn", why,
                               "close to OOM: param/optimizer offload, a smaller micro-batch, gradient checkpointing, "
                               "a lower rollout.gpu_memory_utilization"));
  }

  // Scaling efficiency against the same job on fewer nodes.
  if (in.baseline && tps && in.baseline->tokens_per_s_per_rank > 0) {
    const double eff = *tps / in.baseline->tokens_per_s_per_rank;
    out["efficiency"] = eff;
    out["baseline"] = {{"job", in.baseline->job},
                       {"nnodes", in.baseline->nnodes},
                       {"tokens_per_s_per_rank", in.baseline->tokens_per_s_per_rank}};
    const std::string why = fixed(*tps, 1) + " tokens/s per " + per + " on " + std::to_string(job.nnodes) +
                            " nodes against " + fixed(in.baseline->tokens_per_s_per_rank, 1) + " on " +
                            std::to_string(in.baseline->nnodes) + " (" + in.baseline->job + "): " + pct(eff);
    checks.push_back(eff >= kMinScalingEfficiency
                         ? row("scaling_efficiency", eff * 100, "%", ">= 90 %", "pass", why)
                         : row("scaling_efficiency", eff * 100, "%", ">= 90 %", "warn", why, comm_try));
  } else {
    checks.push_back(row("scaling_efficiency", std::nullopt, "%", ">= 90 %", "skip",
                         !tps ? "no perf/throughput in the job's metrics yet"
                              : "no earlier successful run of the same job on fewer nodes to compare with"));
  }
  out["checks"] = checks;
  return out;
}

}  // namespace verl::launcher

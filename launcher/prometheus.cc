#include "launcher/prometheus.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <utility>
#include <vector>

#include "common/job_config_view.h"
#include "launcher/states.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;
using Labels = std::vector<std::pair<std::string, std::string>>;


// One metric family: its samples are written together under one HELP and TYPE (the format
// requires a family's lines to be contiguous).
class Family {
 public:
  Family(std::string name, std::string type, std::string help)
      : name_(std::move(name)), type_(std::move(type)), help_(std::move(help)) {}
  void add(const Labels& labels, double value) { samples_.emplace_back(labels, value); }
  void write(std::ostream& out) const {
    if (samples_.empty()) return;
    out << "# HELP " << name_ << " " << help_ << "\n# TYPE " << name_ << " " << type_ << "\n";
    for (const auto& [labels, value] : samples_) {
      out << name_;
      if (!labels.empty()) {
        out << "{";
        for (size_t i = 0; i < labels.size(); ++i)
          out << (i ? "," : "") << labels[i].first << "=\"" << prometheus_escape_label(labels[i].second) << "\"";
        out << "}";
      }
      out << " " << format_value(value) << "\n";
    }
  }

 private:
  static std::string format_value(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));
    // The shortest of %.15g..%.17g that reads back as the same double (%.17g always does).
    char b[32];
    for (int p = 15; p <= 17; ++p) {
      std::snprintf(b, sizeof b, "%.*g", p, v);
      if (std::strtod(b, nullptr) == v) break;
    }
    return b;
  }
  std::string name_, type_, help_;
  std::vector<std::pair<Labels, double>> samples_;
};

bool number(const Json& j, const char* key, double* out) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return false;
  *out = it->get<double>();
  return true;
}

std::string str(const Json& j, const char* key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A node's newest per-GPU sample: the last gpu_samples entry, else a gpus array.
Json latest_gpus(const Json& node) {
  auto s = node.find("gpu_samples");
  if (s != node.end() && s->is_array() && !s->empty()) return s->back().value("gpus", Json::array());
  auto g = node.find("gpus");
  if (g != node.end() && g->is_array()) return *g;
  return Json::array();
}

}  // namespace

std::string prometheus_escape_label(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string prometheus_text(const Json& cluster, const Json& nodes, const Json& jobs) {
  const std::string cluster_name = str(cluster, "name");
  Family info("verl_cluster_info", "gauge", "The cluster this head serves (always 1).");
  info.add({{"cluster", cluster_name}, {"backend", str(cluster, "backend")}}, 1);
  Family uptime("verl_head_uptime_seconds", "gauge", "Seconds since the head started.");
  double v = 0;
  if (cluster.is_object() && cluster.contains("head") && number(cluster["head"], "uptime_s", &v)) uptime.add({}, v);

  Family node_state("verl_node_state", "gauge", "1 for the node's state (alive, lost, left), 0 for the others.");
  Family node_age("verl_node_heartbeat_age_seconds", "gauge", "Seconds since the node's last heartbeat.");
  Family node_cpus("verl_node_cpus", "gauge", "CPUs the node's agent may use.");
  Family node_mem("verl_node_memory_bytes", "gauge", "The node's memory.");
  Family node_gpus("verl_node_gpus", "gauge", "GPUs on the node.");
  Family gpu_util("verl_node_gpu_utilization_percent", "gauge", "GPU utilisation in the last sample (nvidia-smi).");
  Family gpu_used("verl_node_gpu_memory_used_bytes", "gauge", "GPU memory in use in the last sample.");
  Family gpu_total("verl_node_gpu_memory_total_bytes", "gauge", "GPU memory in total.");
  const Json node_list = nodes.is_array() ? nodes : Json::array();
  for (const auto& n : node_list) {
    const std::string name = str(n, "name"), host = str(n, "host"), state = str(n, "state");
    const Labels base = {{"node", name}, {"host", host}};
    for (const auto& s : names<NodeState>()) {
      Labels l = base;
      l.emplace_back("state", s);
      node_state.add(l, state == s ? 1 : 0);
    }
    if (number(n, "heartbeat_age_s", &v)) node_age.add(base, v);
    const Json res = n.value("resources", Json::object());
    if (number(res, "cpus", &v)) node_cpus.add(base, v);
    if (number(res, "memory_bytes", &v)) node_mem.add(base, v);
    if (number(res, "gpus", &v)) node_gpus.add(base, v);
    for (const auto& g : latest_gpus(n)) {
      double index = 0;
      if (!number(g, "index", &index)) continue;
      Labels l = base;
      l.emplace_back("gpu", std::to_string(static_cast<long long>(index)));
      if (number(g, "util_pct", &v)) gpu_util.add(l, v);
      if (number(g, "mem_used_mib", &v)) gpu_used.add(l, v * 1024 * 1024);
      if (number(g, "mem_total_mib", &v)) gpu_total.add(l, v * 1024 * 1024);
    }
  }

  Family job_state("verl_job_state", "gauge", "1 for the job's state, 0 for the other states.");
  Family job_step("verl_job_step", "gauge", "The job's latest training step.");
  Family job_total("verl_job_total_steps", "gauge", "The job's total training steps (0: unknown).");
  Family job_world("verl_job_world_size", "gauge", "Ranks the job runs on.");
  Family job_restarts("verl_job_restarts", "counter", "Times the job was restarted from a checkpoint.");
  Family job_score("verl_job_score_mean", "gauge", std::string(metric_names::kScore) + " of the latest step (training rollouts).");
  Family job_val("verl_job_val_score_mean", "gauge", std::string(metric_names::kValScore) + " of the latest validation.");
  Family job_tput("verl_job_throughput_tokens_per_second", "gauge", std::string(metric_names::kThroughput) + ": tokens per second per rank.");
  Family job_step_s("verl_job_step_seconds", "gauge", std::string(metric_names::kStepSeconds) + ": seconds the latest step took.");
  Family job_metric("verl_job_metric", "gauge", "Every numeric metric of the job's latest step, by verl name.");
  const Json job_list = jobs.is_array() ? jobs : Json::array();
  for (const auto& j : job_list) {
    const std::string id = str(j, "id"), state = str(j, "state");
    const Labels base = {{"job", id}, {"kind", str(j, "kind")}};
    for (const auto& s : names<JobState>()) {
      Labels l = base;
      l.emplace_back("state", s);
      job_state.add(l, state == s ? 1 : 0);
    }
    if (number(j, "step", &v)) job_step.add(base, v);
    if (number(j, "total_steps", &v)) job_total.add(base, v);
    if (number(j, "world_size", &v)) job_world.add(base, v);
    if (number(j, "restarts", &v)) job_restarts.add(base, v);
    const Json m = j.value("latest_metrics", Json::object());
    if (number(m, metric_names::kScore, &v)) job_score.add(base, v);
    if (number(m, metric_names::kValScore, &v)) job_val.add(base, v);
    if (number(m, metric_names::kThroughput, &v)) job_tput.add(base, v);
    if (number(m, metric_names::kStepSeconds, &v)) job_step_s.add(base, v);
    if (m.is_object())
      for (const auto& [key, value] : m.items()) {
        if (!value.is_number() || key == "step" || key.rfind('_', 0) == 0) continue;
        Labels l = base;
        l.emplace_back("metric", key);
        job_metric.add(l, value.get<double>());
      }
  }

  std::ostringstream out;
  for (const Family* f : {&info, &uptime, &node_state, &node_age, &node_cpus, &node_mem, &node_gpus, &gpu_util,
                          &gpu_used, &gpu_total, &job_state, &job_step, &job_total, &job_world, &job_restarts,
                          &job_score, &job_val, &job_tput, &job_step_s, &job_metric})
    f->write(out);
  return out.str();
}

}  // namespace verl::launcher

#include "launcher/gpu_sampler.h"

#include <cmath>

#include <cctype>
#include <cstdlib>
#include <sstream>

#include "common/process.h"
#include "common/strings.h"

namespace verl::launcher {
namespace {

// A whole non-negative integer, else -1 ("[N/A]", "[Not Supported]", "").
int64_t number_or_missing(const std::string& field) {
  const std::string t = trim(field);
  if (t.empty()) return -1;
  for (char c : t)
    if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
  return std::strtoll(t.c_str(), nullptr, 10);
}

nlohmann::ordered_json value_or_null(int64_t v) { return v < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(v); }

// -1 for a missing value, one that is not a number, or a float outside int64's range (whose
// conversion would be undefined).
int64_t int_or_missing(const nlohmann::ordered_json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return -1;
  if (it->is_number_float()) {
    const double d = it->get<double>();
    return std::isfinite(d) && d > -9.2e18 && d < 9.2e18 ? static_cast<int64_t>(d) : -1;
  }
  return it->get<int64_t>();
}

}  // namespace

nlohmann::ordered_json to_json(const GpuSample& s) {
  return {{"index", s.index},
          {"util_pct", value_or_null(s.util_pct)},
          {"mem_used_mib", value_or_null(s.mem_used_mib)},
          {"mem_total_mib", value_or_null(s.mem_total_mib)}};
}

nlohmann::ordered_json to_json(const std::vector<GpuSample>& samples) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const auto& s : samples) a.push_back(to_json(s));
  return a;
}

std::vector<GpuSample> gpu_samples_from_json(const nlohmann::ordered_json& j) {
  std::vector<GpuSample> out;
  if (!j.is_array()) return out;
  for (const auto& e : j) {
    if (!e.is_object()) continue;
    GpuSample s;
    s.index = static_cast<int>(int_or_missing(e, "index"));
    s.util_pct = static_cast<int>(int_or_missing(e, "util_pct"));
    s.mem_used_mib = int_or_missing(e, "mem_used_mib");
    s.mem_total_mib = int_or_missing(e, "mem_total_mib");
    out.push_back(s);
  }
  return out;
}

std::vector<std::string> gpu_query_argv(const std::string& nvidia_smi) {
  return {nvidia_smi, "--query-gpu=index,utilization.gpu,memory.used,memory.total", "--format=csv,noheader,nounits"};
}

std::vector<GpuSample> parse_gpu_query(const std::string& csv) {
  std::vector<GpuSample> out;
  std::stringstream lines(csv);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> fields;
    std::stringstream ss(line);
    std::string f;
    while (std::getline(ss, f, ',')) fields.push_back(f);
    if (fields.size() != 4) continue;
    const int64_t index = number_or_missing(fields[0]);
    if (index < 0) continue;
    GpuSample s;
    s.index = static_cast<int>(index);
    s.util_pct = static_cast<int>(number_or_missing(fields[1]));
    s.mem_used_mib = number_or_missing(fields[2]);
    s.mem_total_mib = number_or_missing(fields[3]);
    out.push_back(s);
  }
  return out;
}

std::vector<GpuSample> sample_gpus(const std::string& nvidia_smi, std::chrono::milliseconds timeout) {
  try {
    process::Options o;
    o.timeout = timeout;
    o.grace = std::chrono::milliseconds(200);
    const auto res = process::run(gpu_query_argv(nvidia_smi), o);
    if (res.timed_out || res.exit_code != 0) return {};
    return parse_gpu_query(res.out);
  } catch (const std::exception&) {
    return {};  // no nvidia-smi on this node: no GPUs to sample
  }
}

}  // namespace verl::launcher

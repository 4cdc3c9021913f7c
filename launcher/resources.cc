#include "launcher/resources.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/error.h"
#include "common/process.h"

namespace verl::launcher {
namespace fs = std::filesystem;
namespace {

bool on_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return access(program.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':'))
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  return false;
}

}  // namespace

nlohmann::ordered_json to_json(const Resources& r) {
  nlohmann::ordered_json ib = nlohmann::ordered_json::array();
  for (const auto& p : r.ib_ports)
    ib.push_back({{"device", p.device}, {"port", p.port}, {"state", p.state}, {"rate", p.rate},
                  {"link_layer", p.link_layer}});
  nlohmann::ordered_json out = {{"cpus", r.cpus},
                                {"memory_bytes", r.memory_bytes},
                                {"gpus", r.gpus},
                                {"gpu_names", r.gpu_names},
                                {"ib_ports", ib}};
  if (!r.gpu_ids.empty()) out["gpu_ids"] = r.gpu_ids;
  if (r.declared) out["detected"] = {{"cpus", r.detected_cpus}, {"gpus", r.detected_gpus}};
  if (!r.nccl_env.empty()) out["nccl_env"] = r.nccl_env;
  return out;
}

std::vector<int> Resources::usable_gpus() const {
  if (!gpu_ids.empty()) return gpu_ids;
  std::vector<int> all;
  for (int i = 0; i < gpus; ++i) all.push_back(i);
  return all;
}

DeclaredResources declared_resources(const nlohmann::ordered_json& node_entry) {
  DeclaredResources d;
  if (!node_entry.is_object()) return d;
  auto it = node_entry.find("resources");
  if (it == node_entry.end() || !it->is_object()) return d;
  const auto& r = *it;
  if (r.contains("cpus") && r["cpus"].is_number_integer()) d.cpus = r["cpus"].get<int>();
  if (r.contains("gpus") && r["gpus"].is_number_integer()) d.gpus = r["gpus"].get<int>();
  if (r.contains("gpu_ids") && r["gpu_ids"].is_array()) d.gpu_ids = r["gpu_ids"].get<std::vector<int>>();
  return d;
}

nlohmann::ordered_json to_json(const DeclaredResources& d) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (d.cpus) j["cpus"] = *d.cpus;
  if (d.gpus) j["gpus"] = *d.gpus;
  if (d.gpu_ids) j["gpu_ids"] = *d.gpu_ids;
  return j;
}

Resources declare(Resources r, const DeclaredResources& d, const std::string& where) {
  if (!d.any()) return r;
  const int have = r.gpus;
  auto refuse = [&](const std::string& what, const std::string& hint) {
    throw Error(ExitCode::kInvalidConfig, where + ": " + what, hint);
  };
  const std::string detected = std::to_string(have) + " GPU" + (have == 1 ? "" : "s") + " detected";
  // The hint repeats the facts: over SSH, up shows only the last line of the agent's log.
  if (d.gpus && *d.gpus > have)
    refuse("declares gpus: " + std::to_string(*d.gpus) + ", but the node has " + detected,
           where + " declares " + std::to_string(*d.gpus) + " GPUs: declare at most " + std::to_string(have) +
               " (what the node has), or remove resources.gpus to use what is detected");
  if (d.gpu_ids) {
    std::vector<int> seen;
    for (int id : *d.gpu_ids) {
      if (id < 0 || id >= have)
        refuse("declares gpu_ids [.., " + std::to_string(id) + ", ..], but the node has " + detected +
                   (have ? " (indices 0.." + std::to_string(have - 1) + ")" : ""),
               "list indices the node has ('nvidia-smi -L' on it)");
      if (std::find(seen.begin(), seen.end(), id) != seen.end())
        refuse("declares GPU " + std::to_string(id) + " twice in gpu_ids", "list each index once");
      seen.push_back(id);
    }
    if (d.gpus && *d.gpus != static_cast<int>(d.gpu_ids->size()))
      refuse("declares gpus: " + std::to_string(*d.gpus) + " but " + std::to_string(d.gpu_ids->size()) + " gpu_ids",
             "give one of the two, or make them agree");
  }
  r.declared = true;
  r.detected_cpus = r.cpus;
  r.detected_gpus = r.gpus;
  if (d.cpus) r.cpus = *d.cpus;
  if (d.gpu_ids) {
    r.gpu_ids = *d.gpu_ids;
    r.gpus = static_cast<int>(d.gpu_ids->size());
  } else if (d.gpus) {
    r.gpus = *d.gpus;
  }
  // gpu_names follow the GPUs offered, so that status lists the declared ones.
  if (!r.gpu_names.empty()) {
    std::vector<std::string> names;
    for (int id : r.usable_gpus())
      if (id < static_cast<int>(r.gpu_names.size())) names.push_back(r.gpu_names[id]);
    r.gpu_names = names;
  }
  return r;
}

Resources resources_from_json(const nlohmann::ordered_json& j) {
  try {
    Resources r;
    r.cpus = j.at("cpus").get<int>();
    r.memory_bytes = j.at("memory_bytes").get<int64_t>();
    r.gpus = j.at("gpus").get<int>();
    if (j.contains("gpu_names")) r.gpu_names = j.at("gpu_names").get<std::vector<std::string>>();
    if (j.contains("ib_ports"))
      for (const auto& p : j.at("ib_ports"))
      {
        HcaPort port;
        port.device = p.at("device").get<std::string>();
        port.port = p.at("port").get<int>();
        port.state = p.value("state", "");
        port.rate = p.value("rate", "");
        port.link_layer = p.value("link_layer", "");
        r.ib_ports.push_back(port);
      }
    if (j.contains("gpu_ids")) r.gpu_ids = j.at("gpu_ids").get<std::vector<int>>();
    if (j.contains("nccl_env")) r.nccl_env = j.at("nccl_env").get<std::map<std::string, std::string>>();
    if (j.contains("detected")) {
      r.declared = true;
      r.detected_cpus = j.at("detected").at("cpus").get<int>();
      r.detected_gpus = j.at("detected").at("gpus").get<int>();
    }
    if (r.cpus < 0 || r.memory_bytes < 0 || r.gpus < 0) throw std::invalid_argument("negative count");
    return r;
  } catch (const std::exception& e) {
    throw Error(ExitCode::kFailure, std::string("bad resources in a registration: ") + e.what(),
                "the agent and the head must be the same verlctl version");
  }
}

int cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

int64_t parse_meminfo_total(const std::string& text) {
  static const std::regex kTotal(R"((^|\n)MemTotal:\s+(\d+)\s*kB)");
  std::smatch m;
  if (!std::regex_search(text, m, kTotal)) return 0;
  return std::stoll(m[2].str()) * 1024;
}

std::vector<std::string> parse_nvidia_smi_list(const std::string& text) {
  static const std::regex kLine(R"(^GPU (\d+): (.*?)( \(UUID: [^)]*\))?\s*$)");
  std::vector<std::string> names;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    std::smatch m;
    if (std::regex_match(line, m, kLine)) names.push_back(m[2].str());
  }
  return names;
}

int count_proc_nvidia_gpus(const std::string& proc_root) {
  std::error_code ec;
  const fs::path dir = fs::path(proc_root) / "driver/nvidia/gpus";
  if (!fs::is_directory(dir, ec)) return 0;
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory(ec)) ++n;
  return n;
}

Resources detect_resources(const ResourceRoots& roots) {
  Resources r;
  r.cpus = cpu_count();
  {
    std::ifstream in(fs::path(roots.proc) / "meminfo");
    std::stringstream ss;
    ss << in.rdbuf();
    r.memory_bytes = parse_meminfo_total(ss.str());
  }
  if (!roots.nvidia_smi.empty() && on_path(roots.nvidia_smi)) {
    try {
      process::Options o;
      o.timeout = std::chrono::milliseconds(10000);
      auto res = process::run({roots.nvidia_smi, "-L"}, o);
      if (res.exit_code == 0) r.gpu_names = parse_nvidia_smi_list(res.out);
    } catch (const std::exception&) {
      // an nvidia-smi that cannot run counts as none; /proc below may still know
    }
  }
  r.gpus = static_cast<int>(r.gpu_names.size());
  if (r.gpus == 0) r.gpus = count_proc_nvidia_gpus(roots.proc);
  r.ib_ports = read_hca_ports(roots.sys);
  for (auto& p : r.ib_ports) p.gids.clear();  // the registry needs the ports, not their GID tables
  return r;
}

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace verl::launcher

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
  return {{"cpus", r.cpus},
          {"memory_bytes", r.memory_bytes},
          {"gpus", r.gpus},
          {"gpu_names", r.gpu_names},
          {"ib_ports", ib}};
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

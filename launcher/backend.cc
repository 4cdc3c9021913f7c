// The backend factory and what every backend shares: the node names of a resolved spec, the
// sequential start_agents, ended_all and stop_all.
#include "launcher/backend.h"

#include "common/error.h"

namespace verl::launcher {

using Json = nlohmann::ordered_json;

std::vector<std::string> node_names(const Json& spec) {
  std::vector<std::string> names;
  if (spec.value("backend", "") == "slurm") {
    const int n = spec.at("slurm").at("nodes").get<int>();
    for (int i = 0; i < n; ++i) names.push_back("node-" + std::to_string(i));
    return names;
  }
  const Json& nodes = spec.at("nodes");
  const bool by_host = spec.value("backend", "") == "ssh";
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!by_host) {
      names.push_back("node-" + std::to_string(i));
      continue;
    }
    const std::string host = nodes[i].value("host", "");
    size_t same = 0;
    for (const auto& n : nodes) same += n.value("host", "") == host;
    names.push_back(same > 1 ? host + "-" + std::to_string(i) : host);
  }
  return names;
}

void Backend::start_agents(const std::vector<LaunchSpec>& specs, const std::function<void(const ProcessRecord&)>& started,
                           const ProgressFn& progress) {
  (void)progress;
  for (const auto& s : specs) started(start(s));
}

std::vector<std::optional<std::string>> Backend::ended_all(const std::vector<ProcessRecord>& ps) {
  std::vector<std::optional<std::string>> out;
  for (const auto& p : ps) out.push_back(ended(p));
  return out;
}

std::vector<bool> Backend::stop_all(const std::vector<ProcessRecord>& ps, std::chrono::milliseconds grace) {
  std::vector<bool> out;
  for (const auto& p : ps) out.push_back(stop(p, grace));
  return out;
}

std::unique_ptr<Backend> make_backend(const Json& spec, const std::string& state_dir, const std::string& exe) {
  const std::string backend = spec.at("backend").get<std::string>();
  if (backend == "local") return make_local_backend(spec, state_dir, exe);
  if (backend == "ssh") return make_ssh_backend(spec, state_dir, exe);
  if (backend == "slurm") return make_slurm_backend(spec, state_dir, exe);
  // Validation admits only the three above; a spec that reaches here was built in code.
  throw Error(ExitCode::kInvalidConfig, "backend: unknown backend '" + backend + "'", "choose local, ssh or slurm");
}

}  // namespace verl::launcher

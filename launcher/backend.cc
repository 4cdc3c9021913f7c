// The backend factory and what every backend shares: the node names of a resolved spec and the
// sequential start_agents. The one place, with node_names, that looks at spec.backend.
#include "launcher/backend.h"

#include "common/error.h"

namespace verl::launcher {

std::vector<std::string> node_names(const ClusterSpec& spec) {
  std::vector<std::string> names;
  switch (spec.backend) {
    case BackendKind::kSlurm:
      for (int i = 0; i < spec.slurm.nodes; ++i) names.push_back("node-" + std::to_string(i));
      return names;
    case BackendKind::kLocal:
      for (size_t i = 0; i < spec.nodes.size(); ++i) names.push_back("node-" + std::to_string(i));
      return names;
    case BackendKind::kSsh:
      for (size_t i = 0; i < spec.nodes.size(); ++i) {
        const std::string& host = spec.nodes[i].host;
        size_t same = 0;
        for (const auto& n : spec.nodes) same += n.host == host;
        names.push_back(same > 1 ? host + "-" + std::to_string(i) : host);
      }
      return names;
  }
  return names;
}

void Backend::start_agents(const std::vector<LaunchSpec>& specs, const std::function<void(const ProcessRecord&)>& started,
                           const ProgressFn& progress) {
  (void)progress;
  for (const auto& s : specs) started(start(s));
}

std::unique_ptr<Backend> make_backend(const ClusterSpec& spec, const std::string& state_dir, const std::string& exe) {
  switch (spec.backend) {
    case BackendKind::kLocal: return make_local_backend(spec, state_dir, exe);
    case BackendKind::kSsh: return make_ssh_backend(spec, state_dir, exe);
    case BackendKind::kSlurm: return make_slurm_backend(spec, state_dir, exe);
  }
  // from_json admits only the three above.
  throw Error(ExitCode::kInvalidConfig, "backend: unknown backend", "choose local, ssh or slurm");
}

}  // namespace verl::launcher

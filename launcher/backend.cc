// The backend factory and what every backend shares: the node names of a resolved spec and the
// sequential start_agents and the one-at-a-time ended_all / stop_all. The one place, with node_names, that looks at spec.backend.
#include "launcher/backend.h"

#include <cstdio>

#include "common/error.h"
#include "common/log.h"

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

std::vector<std::optional<std::string>> OneAtATimeBackend::ended_all(const std::vector<ProcessRecord>& ps) {
  std::vector<std::optional<std::string>> out;
  for (const auto& p : ps) out.push_back(ended_one(p));
  return out;
}

std::vector<bool> OneAtATimeBackend::stop_all(const std::vector<ProcessRecord>& ps, std::chrono::milliseconds grace) {
  std::vector<bool> out;
  for (const auto& p : ps) out.push_back(stop_one(p, grace));
  return out;
}

std::string daemon_log_level() {
  switch (log::level()) {
    case log::Level::kDebug: return "debug";
    case log::Level::kInfo: return "info";
    case log::Level::kWarn: return "warn";
    case log::Level::kError: return "error";
    case log::Level::kOff: return "off";
  }
  return "info";
}

std::vector<std::string> AgentCommand::argv(const std::function<std::string(const std::string&)>& word) const {
  auto w = [&](const std::string& v) { return word ? word(v) : v; };
  auto seconds = [&](double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", s);
    return w(buf);
  };
  std::vector<std::string> out = {exe, "agent"};
  if (!head.empty()) out.insert(out.end(), {"--head", w(head)});
  out.insert(out.end(), {"--token-file", token_file});
  if (!node.empty()) out.insert(out.end(), {"--node", w(node)});
  out.insert(out.end(), {"--heartbeat-interval", seconds(heartbeat_interval_s), "--exit-after", seconds(exit_after_s),
                         "--log-level", w(log_level)});
  // The agent puts them over what it detects and refuses GPUs it lacks.
  if (resources.any())
    out.insert(out.end(), {"--resources", w(to_json(resources).dump()), "--resources-key", w(resources_key)});
  return out;
}

AgentCommand agent_command(const ClusterSpec& spec, const StatePaths& paths, const std::string& exe, size_t index) {
  AgentCommand c;
  c.exe = exe;
  c.head = spec.head.host + ":" + std::to_string(spec.head.dashboard_port);
  c.token_file = paths.token();
  c.node = node_names(spec).at(index);
  c.heartbeat_interval_s = spec.head.heartbeat_interval_s;
  c.exit_after_s = spec.head.agent_exit_after_s;
  c.log_level = daemon_log_level();
  // A spec without a nodes list (a slurm allocation's nodes) declares none.
  if (index < spec.nodes.size()) {
    c.resources = spec.nodes[index].resources;
    c.resources_key = "nodes[" + std::to_string(index) + "].resources";
  }
  return c;
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

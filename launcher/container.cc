#include "launcher/container.h"

#include <algorithm>
#include <regex>

#include "common/error.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;

std::string string_at(const Json& c, const char* key) {
  if (!c.contains(key) || !c[key].is_string()) return {};
  return c[key].get<std::string>();
}

// apptainer's --env is a pflag string-to-string map: a value with one '=' is taken whole (its
// outer quotes trimmed), one with more is read as a CSV record, so it is quoted as one field.
std::string apptainer_env(const std::string& assignment) {
  if (std::count(assignment.begin(), assignment.end(), '=') == 1) {
    if (!assignment.empty() && assignment.back() == '"')
      throw Error(ExitCode::kInvalidConfig,
                  "env: " + assignment.substr(0, assignment.find('=')) +
                      " ends in a double quote, which apptainer's --env strips",
                  "drop the quotes from the value in the cluster spec's env");
    return assignment;
  }
  std::string quoted = "\"";
  for (char c : assignment) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

void docker_like(std::vector<std::string>& argv, const ContainerConfig& c, const ContainerHost& host,
                 const std::vector<std::string>& env, bool podman) {
  argv.insert(argv.end(), {"run", "--rm", "--network", "host"});
  if (c.shm_size == "host") argv.insert(argv.end(), {"--ipc", "host"});
  else argv.insert(argv.end(), {"--shm-size", c.shm_size});
  argv.insert(argv.end(), {"--ulimit", "memlock=-1"});
  if (host.infiniband) argv.insert(argv.end(), {"--device", "/dev/infiniband"});
  if (host.gpus) {
    if (podman) argv.insert(argv.end(), {"--device", "nvidia.com/gpu=all"});
    else argv.insert(argv.end(), {"--gpus", "all"});
  }
  for (const auto& m : c.mounts) argv.insert(argv.end(), {"-v", m});
  for (const auto& e : env) argv.insert(argv.end(), {"-e", e});
  argv.push_back(c.image);
}

}  // namespace

const char* runtime_name(ContainerRuntime runtime) {
  switch (runtime) {
    case ContainerRuntime::kNone: return "none";
    case ContainerRuntime::kDocker: return "docker";
    case ContainerRuntime::kPodman: return "podman";
    case ContainerRuntime::kApptainer: return "apptainer";
    case ContainerRuntime::kPyxis: return "pyxis";
  }
  return "?";
}

ContainerConfig container_config(const Json& spec) {
  ContainerConfig out;
  const Json c = spec.contains("container") && spec["container"].is_object() ? spec["container"] : Json::object();
  const std::string runtime = string_at(c, "runtime");
  for (auto r : {ContainerRuntime::kNone, ContainerRuntime::kDocker, ContainerRuntime::kPodman,
                 ContainerRuntime::kApptainer, ContainerRuntime::kPyxis})
    if (runtime == runtime_name(r)) out.runtime = r;
  if (out.runtime == ContainerRuntime::kNone) return out;

  std::vector<std::string> errors;
  out.image = string_at(c, "image");
  if (out.image.empty())
    errors.push_back("container.image: container.runtime is " + runtime + " but no image is set");
  if (c.contains("shm_size") && c["shm_size"].is_string()) out.shm_size = c["shm_size"].get<std::string>();
  static const std::regex kSize("[0-9]+[bkmgBKMG]?");
  if ((out.runtime == ContainerRuntime::kDocker || out.runtime == ContainerRuntime::kPodman) &&
      out.shm_size != "host" && !std::regex_match(out.shm_size, kSize))
    errors.push_back("container.shm_size: '" + out.shm_size + "' is neither a size (16g, 512m) nor host");
  const bool commas_split = out.runtime == ContainerRuntime::kApptainer || out.runtime == ContainerRuntime::kPyxis;
  if (c.contains("mounts") && c["mounts"].is_array()) {
    for (size_t i = 0; i < c["mounts"].size(); ++i) {
      const Json& m = c["mounts"][i];
      const std::string key = "container.mounts[" + std::to_string(i) + "]";
      const std::string s = m.is_string() ? m.get<std::string>() : "";
      const size_t colon = s.find(':');
      if (colon == 0 || colon == std::string::npos || colon + 1 == s.size() || s[colon + 1] == ':') {
        errors.push_back(key + ": '" + s + "' is not SRC:DST or SRC:DST:OPTIONS");
        continue;
      }
      if (commas_split && s.find(',') != std::string::npos) {
        errors.push_back(key + ": '" + s + "' has a comma, which " + runtime + " reads as a list separator");
        continue;
      }
      out.mounts.push_back(s);
    }
  }
  if (!errors.empty()) {
    std::string msg = "invalid container settings in the cluster spec:";
    for (const auto& e : errors) msg += "\n  " + e;
    throw Error(ExitCode::kInvalidConfig, msg,
                "set container.image=REGISTRY/IMAGE:TAG, mounts as /host/path:/container/path[:ro], "
                "shm_size as 16g or host");
  }
  return out;
}

std::vector<std::string> container_argv(const ContainerConfig& c, const ContainerHost& host,
                                        const std::vector<std::string>& env, const std::vector<std::string>& inner) {
  std::vector<std::string> argv;
  switch (c.runtime) {
    case ContainerRuntime::kNone:
      return inner;
    case ContainerRuntime::kDocker:
    case ContainerRuntime::kPodman:
      argv.push_back(runtime_name(c.runtime));
      docker_like(argv, c, host, env, c.runtime == ContainerRuntime::kPodman);
      break;
    case ContainerRuntime::kApptainer:
      argv = {"apptainer", "exec"};
      if (host.gpus) argv.push_back("--nv");
      for (const auto& m : c.mounts) argv.insert(argv.end(), {"--bind", m});
      for (const auto& e : env) argv.insert(argv.end(), {"--env", apptainer_env(e)});
      argv.push_back(c.image);
      break;
    case ContainerRuntime::kPyxis: {
      argv = {"srun", "--overlap", "--nodes", "1", "--ntasks", "1"};
      if (!host.slurm_node.empty()) argv.insert(argv.end(), {"--nodelist", host.slurm_node});
      argv.insert(argv.end(), {"--container-image", c.image});
      if (!c.mounts.empty()) {
        std::string list;
        for (const auto& m : c.mounts) list += (list.empty() ? "" : ",") + m;
        argv.insert(argv.end(), {"--container-mounts", list});
      }
      if (!env.empty()) {
        argv.push_back("env");
        argv.insert(argv.end(), env.begin(), env.end());
      }
      break;
    }
  }
  argv.insert(argv.end(), inner.begin(), inner.end());
  return argv;
}

}  // namespace verl::launcher

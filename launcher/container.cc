#include "launcher/container.h"

#include <cctype>
#include <regex>

#include "common/error.h"
#include "common/template.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;

std::string string_at(const Json& c, const char* key) {
  if (!c.contains(key) || !c[key].is_string()) return {};
  return c[key].get<std::string>();
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

std::string container_name(const std::string& cluster, const std::string& task) {
  std::string name = "verlctl-" + cluster + "-" + task;
  for (char& c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) c = '-';
  return name;
}

std::vector<std::string> container_argv(const ContainerConfig& c, const ContainerHost& host,
                                        const std::vector<std::string>& env, const std::vector<std::string>& inner,
                                        const ContainerTask& task) {
  if (c.runtime == ContainerRuntime::kNone) return inner;
  std::vector<std::string> mounts = c.mounts;
  if (!task.workdir.empty()) mounts.push_back(task.workdir + ":" + task.workdir);
  std::vector<std::string> names;
  for (const auto& e : env) names.push_back(e.substr(0, e.find('=')));
  std::string mounts_list;
  for (const auto& m : mounts) mounts_list += (mounts_list.empty() ? "" : ",") + m;
  const Json vars = {{"name", task.name},
                     {"workdir", task.workdir},
                     {"ipc_host", c.shm_size == "host"},
                     {"shm_size", c.shm_size == "host" ? std::string() : c.shm_size},
                     {"infiniband", host.infiniband},
                     {"gpus", host.gpus},
                     {"slurm_node", host.slurm_node},
                     {"mounts", mounts},
                     {"mounts_list", mounts_list},
                     {"env", names},
                     {"image", c.image},
                     {"inner", inner}};
  return tmpl::render_argv(tmpl::load(std::string("container/") + runtime_name(c.runtime) + ".argv"), vars);
}

std::vector<std::string> container_client_env(const ContainerConfig& c, const std::vector<std::string>& env) {
  if (c.runtime != ContainerRuntime::kApptainer) return env;
  std::vector<std::string> out;
  for (const auto& e : env) out.push_back("APPTAINERENV_" + e);
  return out;
}

std::vector<std::string> container_kill_argv(const ContainerConfig& c, const std::string& name) {
  if (c.runtime != ContainerRuntime::kDocker && c.runtime != ContainerRuntime::kPodman) return {};
  return tmpl::render_argv(tmpl::load(std::string("container/") + runtime_name(c.runtime) + "-kill.argv"),
                           Json{{"name", name}});
}

}  // namespace verl::launcher

#include "launcher/cluster_spec.h"

#include "common/config.h"
#include "common/error.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void invalid(const std::string& path, const std::string& what) {
  throw Error(ExitCode::kInvalidConfig, "cluster spec: " + path + ": " + what,
              "'verlctl config validate --kind cluster -f FILE' checks a spec; templates/cluster.yaml lists every key");
}

// One mapping of the spec and its key path, for errors that name the key.
class Section {
 public:
  Section(const Json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) invalid(path_.empty() ? "(the spec)" : path_, "expected a mapping, got " + describe(j_));
  }

  const Json& at(const std::string& key) const {
    auto it = j_.find(key);
    if (it == j_.end()) invalid(path(key), "missing");
    return *it;
  }
  std::string path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  std::string str(const std::string& key) const {
    const Json& v = at(key);
    if (!v.is_string()) invalid(path(key), "expected a string, got " + describe(v));
    return v.get<std::string>();
  }
  std::optional<std::string> opt_str(const std::string& key) const {
    const Json& v = at(key);
    if (v.is_null()) return std::nullopt;
    if (!v.is_string()) invalid(path(key), "expected a string or null, got " + describe(v));
    return v.get<std::string>();
  }
  int integer(const std::string& key) const {
    const Json& v = at(key);
    if (!v.is_number_integer()) invalid(path(key), "expected an integer, got " + describe(v));
    return v.get<int>();
  }
  double number(const std::string& key) const {
    const Json& v = at(key);
    if (!v.is_number()) invalid(path(key), "expected a number, got " + describe(v));
    return v.get<double>();
  }
  bool boolean(const std::string& key) const {
    const Json& v = at(key);
    if (!v.is_boolean()) invalid(path(key), "expected a boolean, got " + describe(v));
    return v.get<bool>();
  }
  Section section(const std::string& key) const { return Section(at(key), path(key)); }
  const Json& json() const { return j_; }

  static std::string describe(const Json& v) {
    if (v.is_string()) return "'" + v.get<std::string>() + "'";
    return std::string(v.type_name()) + (v.is_primitive() && !v.is_null() ? " " + v.dump() : "");
  }

 private:
  const Json& j_;
  std::string path_;
};

Json opt(const std::optional<std::string>& s) { return s ? Json(*s) : Json(nullptr); }

const char* copy_name(CopyBinary c) {
  switch (c) {
    case CopyBinary::kAuto: return "auto";
    case CopyBinary::kAlways: return "always";
    case CopyBinary::kNever: return "never";
  }
  return "auto";
}

NodeSpec node_from_json(const Json& j, const std::string& path) {
  const Section s(j, path);
  NodeSpec n;
  n.host = s.str("host");
  n.port = s.integer("port");
  n.user = s.opt_str("user");
  n.gpus = s.integer("gpus");
  const Section r = s.section("resources");
  for (const char* k : {"cpus", "gpus"})
    if (!r.at(k).is_null()) r.integer(k);  // the type named by key before declared_resources reads it
  if (const Json& ids = r.at("gpu_ids"); !ids.is_null() && !ids.is_array())
    invalid(r.path("gpu_ids"), "expected a list of integers or null, got " + Section::describe(ids));
  n.resources = declared_resources(j);
  return n;
}

Json node_to_json(const NodeSpec& n) {
  const DeclaredResources& d = n.resources;
  return {{"host", n.host},
          {"port", n.port},
          {"user", opt(n.user)},
          {"gpus", n.gpus},
          {"resources",
           {{"cpus", d.cpus ? Json(*d.cpus) : Json(nullptr)},
            {"gpus", d.gpus ? Json(*d.gpus) : Json(nullptr)},
            {"gpu_ids", d.gpu_ids ? Json(*d.gpu_ids) : Json(nullptr)}}}};
}

}  // namespace

const char* backend_name(BackendKind kind) {
  switch (kind) {
    case BackendKind::kLocal: return "local";
    case BackendKind::kSsh: return "ssh";
    case BackendKind::kSlurm: return "slurm";
  }
  return "local";
}

bool operator==(const HeadSpec& a, const HeadSpec& b) {
  return a.host == b.host && a.bind_host == b.bind_host && a.dashboard_port == b.dashboard_port &&
         a.store_port == b.store_port && a.heartbeat_interval_s == b.heartbeat_interval_s &&
         a.heartbeat_timeout_s == b.heartbeat_timeout_s && a.agent_exit_after_s == b.agent_exit_after_s;
}

void from_json(const Json& j, ClusterSpec& spec) {
  const Section root(j, "");
  spec.name = root.str("name");
  const std::string backend = root.str("backend");
  bool known = false;
  for (BackendKind k : {BackendKind::kLocal, BackendKind::kSsh, BackendKind::kSlurm})
    if (backend == backend_name(k)) spec.backend = k, known = true;
  if (!known) invalid("backend", "'" + backend + "' is not one of local, ssh, slurm");

  const Section head = root.section("head");
  spec.head.host = head.str("host");
  spec.head.bind_host = head.str("bind_host");
  spec.head.dashboard_port = head.integer("dashboard_port");
  spec.head.store_port = head.integer("store_port");
  spec.head.heartbeat_interval_s = head.number("heartbeat_interval_s");
  spec.head.heartbeat_timeout_s = head.number("heartbeat_timeout_s");
  spec.head.agent_exit_after_s = head.number("agent_exit_after_s");

  const Json& nodes = root.at("nodes");
  if (!nodes.is_array()) invalid("nodes", "expected a list, got " + Section::describe(nodes));
  spec.nodes.clear();
  for (size_t i = 0; i < nodes.size(); ++i) spec.nodes.push_back(node_from_json(nodes[i], "nodes[" + std::to_string(i) + "]"));

  const Section ssh = root.section("ssh");
  spec.ssh.user = ssh.opt_str("user");
  spec.ssh.port = ssh.integer("port");
  spec.ssh.identity_file = ssh.opt_str("identity_file");
  spec.ssh.known_hosts = ssh.str("known_hosts");
  spec.ssh.strict_host_keys = ssh.boolean("strict_host_keys");
  spec.ssh.connect_timeout_s = ssh.integer("connect_timeout_s");
  spec.ssh.command_timeout_s = ssh.integer("command_timeout_s");
  spec.ssh.keepalive_s = ssh.integer("keepalive_s");
  spec.ssh.remote_dir = ssh.str("remote_dir");
  const std::string copy = ssh.str("copy_binary");
  known = false;
  for (CopyBinary c : {CopyBinary::kAuto, CopyBinary::kAlways, CopyBinary::kNever})
    if (copy == copy_name(c)) spec.ssh.copy_binary = c, known = true;
  if (!known) invalid("ssh.copy_binary", "'" + copy + "' is not one of auto, always, never");
  spec.ssh.parallel = ssh.integer("parallel");

  const Section slurm = root.section("slurm");
  spec.slurm.nodes = slurm.integer("nodes");
  spec.slurm.gpus_per_node = slurm.integer("gpus_per_node");
  spec.slurm.cpus_per_task = slurm.integer("cpus_per_task");
  spec.slurm.partition = slurm.opt_str("partition");
  spec.slurm.account = slurm.opt_str("account");
  const Json& time = slurm.at("time");
  if (!time.is_string() && !time.is_number_integer())
    invalid("slurm.time", "expected a time such as \"01:00:00\" or minutes, got " + Section::describe(time));
  spec.slurm.time = time.is_string() ? time.get<std::string>() : time.dump();
  spec.slurm.output = slurm.opt_str("output");
  spec.slurm.error = slurm.opt_str("error");

  root.section("container");  // a mapping, named by key when not
  spec.container = container_config(j);

  spec.env = root.section("env").json();
  spec.probes = root.section("probes").json();
}

void to_json(Json& j, const ClusterSpec& spec) {
  Json nodes = Json::array();
  for (const auto& n : spec.nodes) nodes.push_back(node_to_json(n));
  const ContainerConfig& c = spec.container;
  j = Json{{"name", spec.name},
           {"backend", backend_name(spec.backend)},
           {"head",
            {{"host", spec.head.host},
             {"bind_host", spec.head.bind_host},
             {"dashboard_port", spec.head.dashboard_port},
             {"store_port", spec.head.store_port},
             {"heartbeat_interval_s", spec.head.heartbeat_interval_s},
             {"heartbeat_timeout_s", spec.head.heartbeat_timeout_s},
             {"agent_exit_after_s", spec.head.agent_exit_after_s}}},
           {"nodes", nodes},
           {"ssh",
            {{"user", opt(spec.ssh.user)},
             {"port", spec.ssh.port},
             {"identity_file", opt(spec.ssh.identity_file)},
             {"known_hosts", spec.ssh.known_hosts},
             {"strict_host_keys", spec.ssh.strict_host_keys},
             {"connect_timeout_s", spec.ssh.connect_timeout_s},
             {"command_timeout_s", spec.ssh.command_timeout_s},
             {"keepalive_s", spec.ssh.keepalive_s},
             {"remote_dir", spec.ssh.remote_dir},
             {"copy_binary", copy_name(spec.ssh.copy_binary)},
             {"parallel", spec.ssh.parallel}}},
           {"slurm",
            {{"nodes", spec.slurm.nodes},
             {"gpus_per_node", spec.slurm.gpus_per_node},
             {"cpus_per_task", spec.slurm.cpus_per_task},
             {"partition", opt(spec.slurm.partition)},
             {"account", opt(spec.slurm.account)},
             {"time", spec.slurm.time},
             {"output", opt(spec.slurm.output)},
             {"error", opt(spec.slurm.error)}}},
           {"container",
            {{"runtime", runtime_name(c.runtime)},
             {"image", c.image.empty() ? Json(nullptr) : Json(c.image)},
             {"shm_size", c.shm_size},
             {"mounts", c.mounts}}},
           {"env", spec.env},
           {"probes", spec.probes}};
}

ClusterSpec load_cluster_spec(const std::string& file, const std::vector<std::string>& overrides) {
  return config::load_cluster(file, overrides).get<ClusterSpec>();
}

ClusterSpec read_cluster_spec(const std::string& path) { return load_cluster_spec(path, {}); }

NodeSpec default_node(const std::string& host) {
  Json item = config::item_defaults(config::Kind::kCluster, "nodes");
  item["host"] = host;
  return node_from_json(item, "nodes[]");
}

}  // namespace verl::launcher

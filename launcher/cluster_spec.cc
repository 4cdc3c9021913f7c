#include "launcher/cluster_spec.h"

#include <array>

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
  // The one of all whose name(e) the key's string is; an error naming the key and the names when none.
  template <typename E, size_t N>
  E choice(const std::string& key, const std::array<E, N>& all, const char* (*name)(E)) const {
    const std::string v = str(key);
    std::string names;
    for (E e : all) {
      if (v == name(e)) return e;
      names += (names.empty() ? "" : ", ") + std::string(name(e));
    }
    invalid(path(key), "'" + v + "' is not one of " + names);
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

constexpr std::array<CopyBinary, 3> kCopyBinaries = {CopyBinary::kAuto, CopyBinary::kAlways, CopyBinary::kNever};
constexpr std::array<BackendKind, 3> kBackends = {BackendKind::kLocal, BackendKind::kSsh, BackendKind::kSlurm};

// slurm.time: a string, or a number of minutes read as its text.
struct TimeText {};

// Each section's plain keys, in the spec's order, written once for from_json and to_json:
// f(key, member) for each (f is a Reader or a Writer).
template <typename Node, typename F>
void node_fields(Node& n, F&& f) {
  f("host", n.host);
  f("port", n.port);
  f("user", n.user);
  f("gpus", n.gpus);
}
template <typename Head, typename F>
void head_fields(Head& h, F&& f) {
  f("host", h.host);
  f("bind_host", h.bind_host);
  f("dashboard_port", h.dashboard_port);
  f("store_port", h.store_port);
  f("heartbeat_interval_s", h.heartbeat_interval_s);
  f("heartbeat_timeout_s", h.heartbeat_timeout_s);
  f("agent_exit_after_s", h.agent_exit_after_s);
}
template <typename Ssh, typename F>
void ssh_fields(Ssh& s, F&& f) {
  f("user", s.user);
  f("port", s.port);
  f("identity_file", s.identity_file);
  f("known_hosts", s.known_hosts);
  f("strict_host_keys", s.strict_host_keys);
  f("connect_timeout_s", s.connect_timeout_s);
  f("command_timeout_s", s.command_timeout_s);
  f("keepalive_s", s.keepalive_s);
  f("remote_dir", s.remote_dir);
  f("copy_binary", s.copy_binary);
  f("parallel", s.parallel);
}
template <typename Slurm, typename F>
void slurm_fields(Slurm& s, F&& f) {
  f("nodes", s.nodes);
  f("gpus_per_node", s.gpus_per_node);
  f("cpus_per_task", s.cpus_per_task);
  f("partition", s.partition);
  f("account", s.account);
  f("time", s.time, TimeText{});
  f("output", s.output);
  f("error", s.error);
}

// Reads a member from its key of one section, checking its type.
struct Reader {
  const Section& s;
  void operator()(const char* k, std::string& v) const { v = s.str(k); }
  void operator()(const char* k, std::optional<std::string>& v) const { v = s.opt_str(k); }
  void operator()(const char* k, int& v) const { v = s.integer(k); }
  void operator()(const char* k, double& v) const { v = s.number(k); }
  void operator()(const char* k, bool& v) const { v = s.boolean(k); }
  void operator()(const char* k, CopyBinary& v) const { v = s.choice(k, kCopyBinaries, copy_name); }
  void operator()(const char* k, std::string& v, TimeText) const {
    const Json& time = s.at(k);
    if (!time.is_string() && !time.is_number_integer())
      invalid(s.path(k), "expected a time such as \"01:00:00\" or minutes, got " + Section::describe(time));
    v = time.is_string() ? time.get<std::string>() : time.dump();
  }
};

// Writes a member under its key (an unset optional as null).
struct Writer {
  Json& j;
  template <typename T>
  void operator()(const char* k, const T& v, TimeText = {}) const { j[k] = v; }
  void operator()(const char* k, const std::optional<std::string>& v) const { j[k] = opt(v); }
  void operator()(const char* k, const CopyBinary& v) const { j[k] = copy_name(v); }
};

template <typename T, typename Fields>
Json written(const T& v, Fields fields) {
  Json j = Json::object();
  fields(v, Writer{j});
  return j;
}

NodeSpec node_from_json(const Json& j, const std::string& path) {
  const Section s(j, path);
  NodeSpec n;
  node_fields(n, Reader{s});
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
  Json j = written(n, [](const auto& v, const Writer& w) { node_fields(v, w); });
  j["resources"] = {{"cpus", d.cpus ? Json(*d.cpus) : Json(nullptr)},
                    {"gpus", d.gpus ? Json(*d.gpus) : Json(nullptr)},
                    {"gpu_ids", d.gpu_ids ? Json(*d.gpu_ids) : Json(nullptr)}};
  return j;
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
  spec.backend = root.choice("backend", kBackends, backend_name);
  head_fields(spec.head, Reader{root.section("head")});

  const Json& nodes = root.at("nodes");
  if (!nodes.is_array()) invalid("nodes", "expected a list, got " + Section::describe(nodes));
  spec.nodes.clear();
  for (size_t i = 0; i < nodes.size(); ++i) spec.nodes.push_back(node_from_json(nodes[i], "nodes[" + std::to_string(i) + "]"));

  ssh_fields(spec.ssh, Reader{root.section("ssh")});
  slurm_fields(spec.slurm, Reader{root.section("slurm")});

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
           {"head", written(spec.head, [](const auto& v, const Writer& w) { head_fields(v, w); })},
           {"nodes", nodes},
           {"ssh", written(spec.ssh, [](const auto& v, const Writer& w) { ssh_fields(v, w); })},
           {"slurm", written(spec.slurm, [](const auto& v, const Writer& w) { slurm_fields(v, w); })},
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

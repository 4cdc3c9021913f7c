// The cluster spec as the launcher uses it: parsed once from the resolved YAML (or the recorded
// cluster.json) into typed fields, so that the backends, up, down, status and the head read
// members instead of looking keys up with defaults of their own.
//
// Where the values come from: templates/cluster.yaml is the schema and holds every default;
// common/config_schema.cc holds the ranges, choices and cross-key checks. config::load_cluster
// applies both, so that every key is present and valid here; from_json applies no default of
// its own (a key the JSON lacks is an error naming it, exit 3). The spec's container section
// is checked here too (container_config: exit 3 naming the key), before anything starts.
//
// JSON stays at the edges: the YAML read by config, cluster.json written by up (to_json) and
// read by the head, down and status (read_cluster_spec), and the sections that travel as they
// are (env to the ranks, probes to the probe thresholds).
//
// Plain values: copyable, thread-compatible.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "launcher/container.h"
#include "launcher/resources.h"

namespace verl::launcher {

enum class BackendKind { kLocal, kSsh, kSlurm };
const char* backend_name(BackendKind kind);  // "local" | "ssh" | "slurm", as the spec spells it

struct HeadSpec {
  std::string host;       // where the head runs and what agents dial
  std::string bind_host;  // what the HTTP API listens on
  int dashboard_port = 0;
  int store_port = 0;
  double heartbeat_interval_s = 0;
  double heartbeat_timeout_s = 0;
  double agent_exit_after_s = 0;
};
bool operator==(const HeadSpec& a, const HeadSpec& b);
inline bool operator!=(const HeadSpec& a, const HeadSpec& b) { return !(a == b); }

// One nodes[] entry.
struct NodeSpec {
  std::string host;
  int port = 0;                     // 22: ssh.port applies
  std::optional<std::string> user;  // unset: ssh.user
  int gpus = 0;                     // what --dry-run assumes a remote node has
  DeclaredResources resources;      // nodes[].resources: put over what the agent detects
};

enum class CopyBinary { kAuto, kAlways, kNever };

struct SshSpec {
  std::optional<std::string> user;
  int port = 0;
  std::optional<std::string> identity_file;
  std::string known_hosts;
  bool strict_host_keys = true;
  int connect_timeout_s = 0;
  int command_timeout_s = 0;
  int keepalive_s = 0;
  std::string remote_dir;
  CopyBinary copy_binary = CopyBinary::kAuto;
  int parallel = 1;
};

struct SlurmSpec {
  int nodes = 0;
  int gpus_per_node = 0;
  int cpus_per_task = 0;
  std::optional<std::string> partition, account;
  std::string time;  // as sbatch --time takes it (a number in the YAML is its text)
  std::optional<std::string> output, error;  // unset: <state dir>/logs/slurm-%j.{out,err}
};

struct ClusterSpec {
  std::string name;
  BackendKind backend = BackendKind::kLocal;
  HeadSpec head;
  std::vector<NodeSpec> nodes;
  SshSpec ssh;
  SlurmSpec slurm;
  ContainerConfig container;
  // NAME: value (string, number, boolean or null), in the spec's order: nccl_env.h and
  // job_controller.h read it as it is written, since its reasons name each key.
  nlohmann::ordered_json env = nlohmann::ordered_json::object();
  // probes.* thresholds, read by name by the probes (cli/cmd_probe.cc, probes/).
  nlohmann::ordered_json probes = nlohmann::ordered_json::object();
};

// Throws verl::Error(invalid config, 3) naming the key path ("head.dashboard_port: expected an
// integer") when a key is missing or of the wrong type, or the container section is invalid.
void from_json(const nlohmann::ordered_json& j, ClusterSpec& spec);
// Every key, in templates/cluster.yaml's order: what cluster.json holds.
void to_json(nlohmann::ordered_json& j, const ClusterSpec& spec);

// config::load_cluster (defaults <- file <- overrides, validated; every issue at once, exit 3),
// then from_json.
ClusterSpec load_cluster_spec(const std::string& file, const std::vector<std::string>& overrides);

// A recorded spec (cluster.json) the same way: keys it lacks take today's defaults. Throws
// verl::Error when the file cannot be read (invalid config, 3) or is invalid.
ClusterSpec read_cluster_spec(const std::string& path);

// A nodes[] entry with only its host set, the rest the schema's item defaults (--local N, and
// the one node of a local spec that lists none).
NodeSpec default_node(const std::string& host);

}  // namespace verl::launcher

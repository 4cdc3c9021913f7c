// What `verlctl up` leaves in a cluster's state directory ($VERLCTL_HOME/<name>/, 0700), read by
// down and status:
//   cluster.json  the resolved cluster spec (the head reads it)
//   token         the head's bearer token, 0600
//   state.json    status (starting|up|failed|down), the head's address, the started processes
//   state.db      the head's SQLite database (node registry)
//   logs/         head.log, agent-<i>.log
// Every file is written with files::write_atomic.
//
// A recorded process is its pid plus its start time (/proc/<pid>/stat, clock ticks since boot),
// so that a pid reused by an unrelated process is never signalled.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "launcher/states.h"

namespace verl::launcher {

struct StatePaths {
  std::string dir;
  explicit StatePaths(std::string d) : dir(std::move(d)) {}
  std::string spec() const { return dir + "/cluster.json"; }
  std::string token() const { return dir + "/token"; }
  std::string state() const { return dir + "/state.json"; }
  std::string db() const { return dir + "/state.db"; }
  std::string logs() const { return dir + "/logs"; }
  std::string head_log() const { return logs() + "/head.log"; }
  std::string agent_log(size_t index) const { return logs() + "/agent-" + std::to_string(index) + ".log"; }
};

struct ProcessRecord {
  ProcessRole role = ProcessRole::kHead;
  std::string node;  // the agent's node name; empty for the head
  std::string host;  // where it runs
  pid_t pid = 0;
  int64_t start_ticks = 0;
  std::string log;
};

struct ClusterState {
  std::string name;
  std::string backend;
  ClusterStatus status = ClusterStatus::kStarting;
  std::string head_host;
  int head_port = 0;
  int64_t updated_ms = 0;
  std::vector<ProcessRecord> processes;
};

nlohmann::ordered_json to_json(const ClusterState& s);
ClusterState state_from_json(const nlohmann::ordered_json& j);
void write_state(const StatePaths& paths, const ClusterState& state);
// nullopt when there is no state.json; throws verl::Error naming the file when it is corrupt.
std::optional<ClusterState> read_state(const StatePaths& paths);

// 32 random bytes from /dev/urandom, hex. Throws verl::Error when /dev/urandom cannot be read.
std::string generate_token();
std::string read_token(const std::string& path);  // trimmed; throws verl::Error naming the file

// The start time of pid in clock ticks since boot; nullopt when there is no such process or it
// is a zombie (it has ended; only its exit status waits to be collected).
std::optional<int64_t> process_start_ticks(pid_t pid);
bool is_same_process(const ProcessRecord& p);
// Stops the recorded process on this machine, only while it is still that process (its pid has
// its recorded start time): process::stop_escalating to its group and to itself, polling
// is_same_process. true: it is gone (or was not that process). templates/ssh/stop.sh is the
// same protocol for a process on an ssh node.
bool stop_recorded(const ProcessRecord& p, std::chrono::milliseconds grace);
// verlctl head/agent processes of this user whose command line names dir (the head's
// --state-dir, an agent's --token-file under it): what down looks for when the records are gone.
std::vector<pid_t> find_cluster_processes(const std::string& dir);

}  // namespace verl::launcher

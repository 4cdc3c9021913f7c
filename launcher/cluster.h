// The cluster operations behind `verlctl up`, `down` and `status`, written against the Backend
// interface and the head's API so that the CLI files only parse flags and print.
//
// up: resolve the spec (a ClusterSpec), take the state directory's lock, then in stages: start
// the head, wait until it answers, start one agent per node, wait until each has registered
// (polling the head, never a fixed sleep), recording everything in the state directory as it
// starts. Any failure, an interrupt among them, stops what this call started (one rollback for
// every stage). A cluster whose head answers is left alone. down: ask the head to shut down,
// then signal what is left. status: ask the head.
//
// Progress goes to the given stream (stderr), one line per event with the elapsed time.
#pragma once

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "launcher/backend.h"
#include "launcher/cluster_spec.h"
#include "launcher/cluster_state.h"
#include "launcher/wire.h"

namespace verl::launcher {

struct UpOptions {
  std::string file;                    // cluster spec YAML; empty: the embedded default
  std::vector<std::string> overrides;  // key.path=value
  std::optional<int> local_nodes;      // --local N: backend local, N agents, no file needed
  std::string name;                    // --name: overrides the spec's name
  std::chrono::milliseconds timeout{60000};
  std::string exe;                     // the verlctl binary the daemons run
  // --accept-new-host-keys: this up adds the keys of hosts not yet in ssh.known_hosts to it
  // (ssh.strict_host_keys=false for this run only). The recorded spec keeps the spec's own
  // value, so a later down checks against the keys this up added and accepts no new one.
  bool accept_new_host_keys = false;
};

// The container run line of a node's ranks, as --dry-run shows it (container.runtime set).
struct ContainerLine {
  std::string node;
  std::vector<std::string> argv;  // wrapping rank 0 of a job job-N, its own flags and variables left out
  std::string note;               // what the node adds that is known only there; empty: nothing
};

struct UpPlan {
  ClusterSpec spec;  // resolved, nodes filled in: what up records (cluster.json)
  std::string state_dir;
  std::vector<LaunchSpec> daemons;  // head first
  std::vector<ContainerLine> containers;  // one per agent when container.runtime is set
};

// What up would do; creates nothing. Throws verl::Error: invalid config (3: the spec's
// container.* among them), a backend that is not in this build (6).
UpPlan plan_up(const UpOptions& options);

enum class UpOutcome { kStarted, kAlreadyUp };
struct UpResult {
  UpOutcome outcome = UpOutcome::kStarted;
  ClusterState state;
};

// Throws verl::Error: timed out (124) naming the node and stage, failure (1) when a daemon
// ended before it was ready, interrupted (130) when *interrupted became true.
UpResult bring_up(const UpOptions& options, std::ostream& progress, const std::atomic<bool>* interrupted = nullptr);

struct DownResult {
  bool was_down = false;   // nothing was running
  int stopped = 0;         // processes that ended
  int signalled = 0;       // of those, how many needed a signal
};
// graceful: how long to wait for the head's own shutdown before signalling.
DownResult tear_down(const std::string& name, std::chrono::milliseconds graceful, std::ostream& progress,
                     const std::string& exe);

struct StatusReport {
  ClusterState state;
  wire::ClusterView cluster;       // GET /api/cluster
  nlohmann::ordered_json nodes;    // GET /api/nodes's list
  nlohmann::ordered_json allocation = nlohmann::ordered_json::object();  // the backend's view (Backend::allocation); {} for none
};
// Throws verl::Error(unreachable) naming the cluster and the head's address when there is no
// cluster, it is down, or its head does not answer.
StatusReport query_status(const std::string& name);

}  // namespace verl::launcher

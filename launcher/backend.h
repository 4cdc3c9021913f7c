// A backend starts and stops a cluster's daemons (the head and one agent per node) somewhere:
// on this machine (local), over SSH (ssh), inside a SLURM allocation (slurm). The rest of the
// launcher does not know which one it has: it asks for the command lines (for --dry-run), starts
// the daemons, watches whether they still run while it waits for them, and stops them.
//
// Only "local" is in this build; make_backend() answers the others with exit 6 (not compiled
// in) naming the backend. A Backend is used by one thread.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "launcher/cluster_state.h"

namespace verl::launcher {

// What one daemon is: exactly what would run (and, on a remote backend, where).
struct LaunchSpec {
  std::string role;  // head | agent
  std::string node;  // the agent's node name; empty for the head
  std::string host;  // where it runs
  std::vector<std::string> argv;
  std::vector<std::string> env;  // NAME=value added to the inherited environment
  std::string log;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  virtual LaunchSpec head_spec() const = 0;
  virtual size_t agent_count() const = 0;
  virtual LaunchSpec agent_spec(size_t index) const = 0;

  // Start a daemon detached from this process (its own session, output to its log). Throws
  // verl::Error naming the daemon when it cannot be started.
  virtual ProcessRecord start(const LaunchSpec& spec) = 0;
  // nullopt while it runs; how it ended otherwise ("exited with code 4", "killed by signal 9").
  virtual std::optional<std::string> ended(const ProcessRecord& p) = 0;
  // Stops it and everything in its process group: SIGTERM, SIGKILL after grace. A record from
  // an earlier run is signalled only while it is still the same process. true: it is gone.
  virtual bool stop(const ProcessRecord& p, std::chrono::milliseconds grace) = 0;
  // The daemons started by this object keep running after it is destroyed.
  virtual void detach() = 0;
};

// spec: the resolved cluster spec; state_dir: the cluster's state directory; exe: the verlctl
// binary the daemons run.
std::unique_ptr<Backend> make_backend(const nlohmann::ordered_json& spec, const std::string& state_dir,
                                      const std::string& exe);

// The node names of a resolved spec, in order: node-0, node-1, ... for local.
std::vector<std::string> node_names(const nlohmann::ordered_json& spec);

}  // namespace verl::launcher

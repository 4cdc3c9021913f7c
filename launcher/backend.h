// A backend starts and stops a cluster's daemons (the head and one agent per node) somewhere:
// on this machine (local), over SSH (ssh), inside a SLURM allocation (slurm). The rest of the
// launcher does not know which one it has: it asks for the command lines (for --dry-run), starts
// the daemons, watches whether they still run while it waits for them, and stops them. What
// differs between backends is said by what a backend does (can_restart_agent, started_as,
// head_host, known_host, ...), never by a caller comparing backend names: only the factory
// (make_backend) and node_names look at ClusterSpec::backend.
//
// make_backend() picks local_backend.cc, ssh_backend.cc or slurm_backend.cc by spec.backend.
// A Backend is used by one thread (start_agents, ended_all and stop_all may use threads of
// their own inside).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/cluster_state.h"
#include "launcher/container.h"

namespace verl::launcher {

// What one daemon is: exactly what would run (and, on a remote backend, where).
struct LaunchSpec {
  ProcessRole role = ProcessRole::kHead;  // head | agent
  std::string node;  // the agent's node name; empty for the head
  std::string host;  // where it runs
  std::vector<std::string> argv;
  std::vector<std::string> env;  // NAME=value added to the inherited environment
  std::string log;
  // Remote backends: what runs on host, in order, exactly (shell command lines, each argument
  // quoted by process::quote_argv; "# ..." lines for file copies). Empty for a local daemon.
  std::vector<std::string> remote;
  // A file the launch writes first and argv runs (slurm: the rendered sbatch script, which
  // starts the daemons inside the allocation); --dry-run prints it. Empty: none.
  std::string script_path;
  std::string script;
  // An agent's work directory as its node spells it (its jobs run under <work_dir>/jobs/): the
  // token file's directory, which the agent takes when no --work-dir is given. Empty for the head.
  std::string work_dir;
};

// What a node is known to have before up reaches it, for the container line --dry-run shows.
struct KnownHost {
  ContainerHost host;
  std::string note;  // what only the node itself knows (its InfiniBand ports); empty: nothing
};

// An agent's command line, the same flags on every backend; each fills in what it knows (ssh:
// the node's own paths; slurm: no head and no node, which its script adds on each node).
// agent_command() gives the local backend's; argv() writes it in one order.
struct AgentCommand {
  std::string exe;
  std::string head;        // host:port; empty: left off the line
  std::string token_file;  // its directory is the agent's work directory
  std::string node;        // empty: left off the line
  double heartbeat_interval_s = 0;
  double exit_after_s = 0;
  std::string log_level;
  DeclaredResources resources;  // nodes[i].resources; none: left off
  std::string resources_key;    // "nodes[i].resources", for the agent's errors
  // word: how each value is written (as it is for an argv; process::quote for a shell line).
  // exe and token_file are written as they are: a shell line's caller gives them quoted.
  std::vector<std::string> argv(const std::function<std::string(const std::string&)>& word = nullptr) const;
};
// The agent of node index of spec as the local backend starts it.
AgentCommand agent_command(const ClusterSpec& spec, const StatePaths& paths, const std::string& exe, size_t index);
// The --log-level every daemon gets: this process's.
std::string daemon_log_level();

// Per-node progress from a backend ("connecting", "syncing", ...): who, what.
using ProgressFn = std::function<void(const std::string& who, const std::string& what)>;

class Backend {
 public:
  virtual ~Backend() = default;
  // "local", "ssh", "slurm": recorded in state.json and shown; nothing branches on it.
  virtual std::string name() const = 0;
  // Throws verl::Error(invalid config, 3) when the spec cannot work, before up starts anything
  // (ssh: a node whose agent could not reach the head, node_facts.h check_head_reach). Only up
  // asks: down and status work with whatever spec was recorded.
  virtual void check_spec() const {}

  virtual LaunchSpec head_spec() const = 0;
  virtual size_t agent_count() const = 0;
  virtual LaunchSpec agent_spec(size_t index) const = 0;
  // What agent index's node has (GPUs, InfiniBand) as far as it is known here: this machine's
  // when the node is this machine, the spec's word for a remote one.
  virtual KnownHost known_host(size_t index) const = 0;

  // Start a daemon detached from this process (its own session, output to its log). Throws
  // verl::Error naming the daemon when it cannot be started.
  virtual ProcessRecord start(const LaunchSpec& spec) = 0;
  // For each record, in their order: nullopt while it runs; how it ended otherwise ("exited
  // with code 4", "killed by signal 9"). up and down ask about every node at once, so that a
  // remote backend can ask the nodes in parallel (ssh: at most ssh.parallel at once, one round
  // trip per node on the session it keeps for that node) instead of one node after the other.
  virtual std::vector<std::optional<std::string>> ended_all(const std::vector<ProcessRecord>& ps) = 0;
  // Stops each and everything in its process group: SIGTERM, SIGKILL after grace. A record
  // from an earlier run is signalled only while it is still the same process. true: it is gone.
  virtual std::vector<bool> stop_all(const std::vector<ProcessRecord>& ps, std::chrono::milliseconds grace) = 0;
  // One record: ended_all / stop_all of it.
  std::optional<std::string> ended(const ProcessRecord& p) { return ended_all({p}).front(); }
  bool stop(const ProcessRecord& p, std::chrono::milliseconds grace) { return stop_all({p}, grace).front(); }
  // Whether one agent that ended can be started again on its own (start() of its LaunchSpec)
  // while the head runs: up repairs a running cluster so (local, ssh). Not where the agents are
  // steps of the head's allocation (slurm).
  virtual bool can_restart_agent() const { return true; }
  // Whether the node that registered with the head as process pid is the daemon p that this
  // backend started (and not another agent under the same node name). The default compares
  // pids: local and ssh record the agent's own pid (on its node).
  virtual bool started_as(const ProcessRecord& p, int64_t pid) { return p.pid == pid; }
  // The daemons started by this object keep running after it is destroyed.
  virtual void detach() = 0;

  // Starts the agents, in parallel where the backend can (ssh: up to ssh.parallel nodes at
  // once). started and progress are called one at a time (never concurrently), started once for
  // each agent that runs. When some fail, it throws the first failure (by node order) after every
  // start has ended; the agents that did start were reported, so the caller can stop them. The
  // default starts them one after the other with start().
  virtual void start_agents(const std::vector<LaunchSpec>& specs,
                            const std::function<void(const ProcessRecord&)>& started, const ProgressFn& progress);

  // For backends that hold more than processes: a batch allocation (slurm), where start() of
  // the head submits one job that starts the head and every agent, start_agents() reports the
  // agents that job starts, ended_all() says whether the job still runs and stop_all() of the head
  // cancels it (returning once the scheduler no longer lists it). The defaults fit process
  // backends.
  //
  // Names the daemon in progress and errors: "pid 123", "slurm job 45".
  virtual std::string describe(const ProcessRecord& p) { return "pid " + std::to_string(p.pid); }
  // What it waits for now ("pending allocation (slurm job 45, reason Priority)"), for up's
  // progress; empty: nothing to add to "starting". Polled while up waits (the backend keeps
  // its own queries rare).
  virtual std::string waiting_for(const ProcessRecord& p) { (void)p; return {}; }
  // Where the head answers: configured (the spec's head.host) unless the backend places the
  // head itself; empty while that place is not known yet (an allocation that has not started).
  virtual std::string head_host(const std::string& configured) { return configured; }
  // The backend's view for status (slurm: the allocation's job id, state, nodes, time), with
  // "summary", one line of it; an empty object when it has none. Never throws: a view it
  // cannot get is reported in it.
  virtual nlohmann::ordered_json allocation() { return nlohmann::ordered_json::object(); }
};

// A backend that asks about its daemons one at a time, from this machine (local, slurm):
// ended_all and stop_all ask ended_one / stop_one of each record in order. A backend that can
// ask many at once (ssh, over its per-node sessions) derives from Backend itself.
class OneAtATimeBackend : public Backend {
 public:
  std::vector<std::optional<std::string>> ended_all(const std::vector<ProcessRecord>& ps) final;
  std::vector<bool> stop_all(const std::vector<ProcessRecord>& ps, std::chrono::milliseconds grace) final;

 protected:
  // ended_all / stop_all of one record.
  virtual std::optional<std::string> ended_one(const ProcessRecord& p) = 0;
  virtual bool stop_one(const ProcessRecord& p, std::chrono::milliseconds grace) = 0;
};

// spec: the resolved cluster spec; state_dir: the cluster's state directory; exe: the verlctl
// binary the daemons run.
std::unique_ptr<Backend> make_backend(const ClusterSpec& spec, const std::string& state_dir, const std::string& exe);

// One factory per backend, each in its own <name>_backend.cc; make_backend picks by spec.backend.
std::unique_ptr<Backend> make_local_backend(const ClusterSpec& spec, const std::string& state_dir, const std::string& exe);
std::unique_ptr<Backend> make_slurm_backend(const ClusterSpec& spec, const std::string& state_dir, const std::string& exe);
std::unique_ptr<Backend> make_ssh_backend(const ClusterSpec& spec, const std::string& state_dir, const std::string& exe);

// The node names of a resolved spec, in order: node-0, node-1, ... for local; for ssh the
// node's host (<host>-<i> when a host is listed more than once); for slurm node-<i> for the
// i-th node of the allocation (SLURM_NODEID), slurm.nodes of them. The head knows its nodes by
// these without a backend (cmd_head.cc).
std::vector<std::string> node_names(const ClusterSpec& spec);

}  // namespace verl::launcher

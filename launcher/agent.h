// The agent: one per node. It registers the node's resources with the head, heartbeats every
// heartbeat_interval, runs the tasks (trainer ranks, probes) the head orders in its heartbeat
// answers, and ends when the head says shutdown (in a heartbeat's answer), when *stop is set
// (SIGTERM), or when the head has been unreachable for exit_after. A head that answers 404 to a
// heartbeat has lost its registry (restarted): the agent registers again and goes on reporting
// the tasks it runs, so that the head can take them back.
//
// A task runs `verlctl <argv...>` (this binary) in <work_dir>/<cwd> (the job's directory: a
// relative default_local_dir puts checkpoints there) with the node's NCCL/Gloo environment
// (nccl_env.h) and the order's env on top, in its own process group, stdout and stderr appended
// to logs/rank-<R>.attempt-<A>.{out,err} there. It gets SIGKILL if the agent dies
// (PR_SET_PDEATHSIG), so a killed agent leaves no rank behind. The agent ships both streams to
// the head by byte offset (a failed POST is resent from the same offset), rank 0's metrics JSONL
// rows, and a probe task's stdout JSON as its result; it reports a task's end (exit status or
// signal) only once its logs are shipped, and forgets it once a heartbeat carrying the end got
// an answer. A stop order is SIGTERM, then SIGKILL after the order's grace. Before the agent
// ends for any reason it stops its tasks the same way (grace task_stop_grace).
//
// An order with `container` (the cluster spec's container section and the container's name,
// sent when container.runtime is set) runs the task through container_argv() instead
// (container.h): the variables go in by name (their values in the client's environment), the
// job directory is mounted at its own path, the client gets SIGTERM (not SIGKILL) when the agent
// dies, since docker and podman pass SIGTERM into the container and could not pass SIGKILL;
// when a stop outlives its grace the agent kills the container by name (container_kill_argv)
// before it kills the client.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "launcher/head_client.h"
#include "launcher/resources.h"

namespace verl::launcher {

struct AgentOptions {
  HeadAddress head;
  std::string token;
  std::string node_name;
  Resources resources;
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds exit_after{60000};
  std::string work_dir;   // where jobs/<job>/ go; required to run tasks
  std::string exe;        // the verlctl that tasks run (argv[0] "verlctl" is replaced by it)
  std::chrono::milliseconds task_stop_grace{2000};
  bool sample_gpus = true;  // put `gpus` (gpu_sampler.h) in heartbeats
};

enum class AgentExit {
  kShutdown,  // the head told it to
  kStopped,   // *stop was set; it told the head it leaves
  kHeadLost,  // the head was unreachable for exit_after
};
const char* agent_exit_name(AgentExit e);

// Throws verl::Error when the head rejects the token (401): no retry can fix that.
AgentExit run_agent(const AgentOptions& options, const std::atomic<bool>& stop);

}  // namespace verl::launcher

// The agent: one per node. It registers the node's resources with the head, heartbeats every
// heartbeat_interval, and ends when the head says shutdown (in a heartbeat's answer), when *stop
// is set (SIGTERM), or when the head has been unreachable for exit_after. A head that answers
// 404 to a heartbeat has lost its registry (restarted): the agent registers again.
// Running trainer ranks is later work; this is the control-plane half.
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

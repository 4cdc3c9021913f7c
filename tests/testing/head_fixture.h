// A head and agents in-process, on loopback with short timings, for the tests that need the
// real HTTP between them (head_test, agent_test).
#pragma once

#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <string>

#include "launcher/agent.h"
#include "launcher/head.h"
#include "launcher/head_client.h"

namespace verl::testing {

inline constexpr const char* kTestToken = "0123456789abcdef0123456789abcdef";

// A head's options: 127.0.0.1 on any free port, kTestToken, a heartbeat every 50 ms and a sweep
// every 20 ms; heartbeat_timeout and shutdown_grace as the test needs.
launcher::HeadOptions fast_head_options(std::chrono::milliseconds heartbeat_timeout,
                                        std::chrono::milliseconds shutdown_grace);

launcher::HeadAddress address_of(const launcher::Head& head);
// A client of the head with kTestToken.
launcher::HeadClient client_of(const launcher::Head& head);

// The node of that name in the head's registry, if it registered.
std::optional<launcher::NodeRecord> find_node(launcher::Head& head, const std::string& name);

// An agent's options for a head on 127.0.0.1:head_port: kTestToken, 3 CPUs and 1 MiB, a
// heartbeat every 50 ms, exit after 1 s without the head.
launcher::AgentOptions fast_agent_options(int head_port, const std::string& name = "node-0");

// run_agent on a thread of its own; stopped (its stop flag set) and waited for when the object goes.
class AgentRun {
 public:
  explicit AgentRun(launcher::AgentOptions options);
  ~AgentRun();
  AgentRun(const AgentRun&) = delete;
  AgentRun& operator=(const AgentRun&) = delete;

  void stop() { stop_ = true; }
  // ready once run_agent has returned (or thrown) within limit.
  std::future_status wait_for(std::chrono::milliseconds limit) { return exit_.wait_for(limit); }
  // run_agent's answer; rethrows what it threw.
  launcher::AgentExit get() { return exit_.get(); }

 private:
  std::atomic<bool> stop_{false};
  std::future<launcher::AgentExit> exit_;
};

}  // namespace verl::testing

#include "tests/testing/head_fixture.h"

namespace verl::testing {

using namespace std::chrono_literals;

launcher::HeadOptions fast_head_options(std::chrono::milliseconds heartbeat_timeout,
                                        std::chrono::milliseconds shutdown_grace) {
  launcher::HeadOptions o;
  o.bind_host = "127.0.0.1";
  o.port = 0;  // any free port
  o.token = kTestToken;
  o.heartbeat_interval = 50ms;
  o.heartbeat_timeout = heartbeat_timeout;
  o.sweep_interval = 20ms;
  o.shutdown_grace = shutdown_grace;
  return o;
}

launcher::HeadAddress address_of(const launcher::Head& head) { return launcher::HeadAddress{"127.0.0.1", head.port()}; }

launcher::HeadClient client_of(const launcher::Head& head) { return launcher::HeadClient(address_of(head), kTestToken); }

std::optional<launcher::NodeRecord> find_node(launcher::Head& head, const std::string& name) {
  for (const auto& n : head.registry().nodes())
    if (n.name == name) return n;
  return std::nullopt;
}

launcher::AgentOptions fast_agent_options(int head_port, const std::string& name) {
  launcher::AgentOptions o;
  o.head = launcher::HeadAddress{"127.0.0.1", head_port};
  o.token = kTestToken;
  o.node_name = name;
  o.resources.cpus = 3;
  o.resources.memory_bytes = 1 << 20;
  o.heartbeat_interval = 50ms;
  o.exit_after = 1000ms;
  return o;
}

AgentRun::AgentRun(launcher::AgentOptions options)
    : exit_(std::async(std::launch::async, [this, o = std::move(options)] { return launcher::run_agent(o, stop_); })) {}

AgentRun::~AgentRun() {
  stop_ = true;
  if (exit_.valid()) exit_.wait();
}

}  // namespace verl::testing

// The agent against an in-process head: it registers and heartbeats, leaves when the head says
// shutdown, registers again with a head that forgot it, leaves on stop, and exits when the head
// is gone for exit_after.
#include "launcher/agent.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "common/error.h"
#include "launcher/head.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* kToken = "feedfacefeedfacefeedfacefeedface";

HeadOptions head_options() {
  HeadOptions o;
  o.token = kToken;
  o.heartbeat_interval = 50ms;
  o.heartbeat_timeout = 2000ms;
  o.sweep_interval = 20ms;
  o.shutdown_grace = 3000ms;
  return o;
}

AgentOptions agent_options(int port, const std::string& name = "node-0") {
  AgentOptions o;
  o.head = HeadAddress{"127.0.0.1", port};
  o.token = kToken;
  o.node_name = name;
  o.resources.cpus = 3;
  o.resources.memory_bytes = 1 << 20;
  o.heartbeat_interval = 50ms;
  o.exit_after = 1000ms;
  return o;
}

template <typename F>
bool eventually(F cond, std::chrono::milliseconds limit = 3000ms) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    if (cond()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return cond();
}

std::optional<NodeRecord> find(Head& head, const std::string& name) {
  for (const auto& n : head.registry().nodes())
    if (n.name == name) return n;
  return std::nullopt;
}

TEST(Agent, RegistersHeartbeatsAndLeavesOnShutdown) {
  Head head(head_options());
  head.start();
  std::atomic<bool> stop{false};
  auto agent = std::async(std::launch::async, [&] { return run_agent(agent_options(head.port()), stop); });
  ASSERT_TRUE(eventually([&] {
    auto n = find(head, "node-0");
    return n && n->heartbeats >= 3;
  })) << "the agent must register and heartbeat";
  EXPECT_EQ(find(head, "node-0")->resources.cpus, 3);
  HeadClient(HeadAddress{"127.0.0.1", head.port()}, kToken).post("/api/shutdown", Json::object());
  ASSERT_EQ(agent.wait_for(3s), std::future_status::ready) << "the agent must end after shutdown";
  EXPECT_EQ(agent.get(), AgentExit::kShutdown);
  EXPECT_EQ(find(head, "node-0")->state, NodeState::kLeft);
  stop = true;
}

TEST(Agent, StopFlagMakesItLeave) {
  Head head(head_options());
  head.start();
  std::atomic<bool> stop{false};
  auto agent = std::async(std::launch::async, [&] { return run_agent(agent_options(head.port()), stop); });
  ASSERT_TRUE(eventually([&] { return find(head, "node-0").has_value(); }));
  stop = true;
  ASSERT_EQ(agent.wait_for(3s), std::future_status::ready);
  EXPECT_EQ(agent.get(), AgentExit::kStopped);
  const auto n = find(head, "node-0");
  EXPECT_EQ(n->state, NodeState::kLeft);
  EXPECT_NE(n->reason.find("signal"), std::string::npos) << n->reason;
}

TEST(Agent, RegistersAgainWithAHeadThatForgotIt) {
  Head head(head_options());
  head.start();
  std::atomic<bool> stop{false};
  auto agent = std::async(std::launch::async, [&] { return run_agent(agent_options(head.port()), stop); });
  ASSERT_TRUE(eventually([&] { return find(head, "node-0").has_value(); }));
  head.registry().clear();  // what a restarted head looks like: heartbeats get 404
  EXPECT_TRUE(eventually([&] { return find(head, "node-0").has_value(); })) << "the agent must register again";
  stop = true;
  ASSERT_EQ(agent.wait_for(3s), std::future_status::ready);
}

TEST(Agent, ExitsWhenTheHeadIsGoneForExitAfter) {
  int port = 0;
  auto head = std::make_unique<Head>(head_options());
  head->start();
  port = head->port();
  std::atomic<bool> stop{false};
  auto agent = std::async(std::launch::async, [&] { return run_agent(agent_options(port), stop); });
  ASSERT_TRUE(eventually([&] { return find(*head, "node-0").has_value(); }));
  head.reset();  // the head is gone
  const auto t0 = Clock::now();
  ASSERT_EQ(agent.wait_for(5s), std::future_status::ready) << "exit_after is 1 s";
  EXPECT_EQ(agent.get(), AgentExit::kHeadLost);
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - t0).count(), 0.8);
}

TEST(Agent, WrongTokenIsAnErrorNotARetryLoop) {
  Head head(head_options());
  head.start();
  auto o = agent_options(head.port());
  o.token = "not-the-token";
  std::atomic<bool> stop{false};
  auto agent = std::async(std::launch::async, [&] { return run_agent(o, stop); });
  ASSERT_EQ(agent.wait_for(3s), std::future_status::ready);
  EXPECT_THROW(agent.get(), Error);
  EXPECT_TRUE(head.registry().nodes().empty());
}


}  // namespace
}  // namespace verl::launcher

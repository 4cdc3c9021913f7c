// The node registry with time passed in: registration, heartbeats, loss after the timeout with
// its time and reason, coming back, leaving, and what survives in the WAL database file.
#include "launcher/node_registry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/testing/temp_dir.h"

namespace verl::launcher {
namespace {

Resources two_cpus() {
  Resources r;
  r.cpus = 2;
  r.memory_bytes = int64_t{8} << 30;
  r.gpus = 1;
  r.gpu_names = {"NVIDIA H200"};
  r.ib_ports = {{"mlx5_0", 1, "4: ACTIVE", "InfiniBand", "400 Gb/sec (4X NDR)", {}}};
  return r;
}

TEST(NodeRegistry, RegisterStoresResourcesAndIsAlive) {
  NodeRegistry reg(":memory:");
  const auto n = reg.register_node("node-0", "hostA", 42, two_cpus(), /*now_ms=*/1000);
  EXPECT_GT(n.id, 0);
  EXPECT_EQ(n.state, NodeState::kAlive);
  const auto all = reg.nodes();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].name, "node-0");
  EXPECT_EQ(all[0].host, "hostA");
  EXPECT_EQ(all[0].pid, 42);
  EXPECT_EQ(all[0].resources.cpus, 2);
  EXPECT_EQ(all[0].resources.gpus, 1);
  EXPECT_EQ(all[0].resources.gpu_names, std::vector<std::string>{"NVIDIA H200"});
  ASSERT_EQ(all[0].resources.ib_ports.size(), 1u);
  EXPECT_EQ(all[0].resources.ib_ports[0].rate, "400 Gb/sec (4X NDR)");
  EXPECT_EQ(all[0].last_heartbeat_ms, 1000);
}

TEST(NodeRegistry, SameNameRegistersAsTheSameNode) {
  NodeRegistry reg(":memory:");
  const auto a = reg.register_node("node-0", "h", 1, two_cpus(), 1000);
  reg.mark_lost(/*now_ms=*/20000, /*timeout_ms=*/5000);
  const auto b = reg.register_node("node-0", "h", 2, two_cpus(), 21000);
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(b.pid, 2);
  EXPECT_EQ(b.state, NodeState::kAlive);
  EXPECT_EQ(reg.nodes().size(), 1u);
}

TEST(NodeRegistry, SilentNodeIsMarkedLostWithTimeAndReason) {
  NodeRegistry reg(":memory:");
  const auto quiet = reg.register_node("node-0", "h", 1, two_cpus(), 1000);
  const auto chatty = reg.register_node("node-1", "h", 2, two_cpus(), 1000);
  ASSERT_TRUE(reg.heartbeat(chatty.id, 5500));
  EXPECT_TRUE(reg.mark_lost(/*now_ms=*/5900, /*timeout_ms=*/5000).empty()) << "4.9 s of silence is under 5 s";
  const auto lost = reg.mark_lost(/*now_ms=*/6100, /*timeout_ms=*/5000);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].id, quiet.id);
  const auto n = *reg.node(quiet.id);
  EXPECT_EQ(n.state, NodeState::kLost);
  EXPECT_EQ(n.lost_ms, 6100);
  EXPECT_NE(n.reason.find("no heartbeat for 5.1 s"), std::string::npos) << n.reason;
  EXPECT_NE(n.reason.find("timeout 5.0 s"), std::string::npos) << n.reason;
  EXPECT_EQ(reg.node(chatty.id)->state, NodeState::kAlive);
  EXPECT_TRUE(reg.mark_lost(7000, 5000).empty()) << "a lost node is marked once";
}

TEST(NodeRegistry, LostNodeThatHeartbeatsIsAliveAgain) {
  NodeRegistry reg(":memory:");
  const auto n = reg.register_node("node-0", "h", 1, two_cpus(), 1000);
  ASSERT_EQ(reg.mark_lost(10000, 5000).size(), 1u);
  const auto back = reg.heartbeat(n.id, 10500);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->state, NodeState::kAlive);
  EXPECT_EQ(back->reason, "");
  EXPECT_EQ(back->heartbeats, 1);
}

TEST(NodeRegistry, HeartbeatOfUnknownNodeIsNullopt) {
  NodeRegistry reg(":memory:");
  EXPECT_FALSE(reg.heartbeat(99, 1000));
  EXPECT_FALSE(reg.leave(99, "x", 1000));
}

TEST(NodeRegistry, LeftNodeIsNeitherAliveNorLost) {
  NodeRegistry reg(":memory:");
  const auto n = reg.register_node("node-0", "h", 1, two_cpus(), 1000);
  ASSERT_TRUE(reg.leave(n.id, "shutdown requested by the head", 2000));
  EXPECT_TRUE(reg.mark_lost(100000, 5000).empty());
  reg.heartbeat(n.id, 3000);  // a late heartbeat does not bring it back
  const auto after = *reg.node(n.id);
  EXPECT_EQ(after.state, NodeState::kLeft);
  EXPECT_EQ(after.reason, "shutdown requested by the head");
}

TEST(NodeRegistry, FileDatabaseIsWalAndPersists) {
  const testing::TempDir tmp("registry");
  const std::filesystem::path dir = tmp.path();
  const std::string path = (dir / "state.db").string();
  {
    NodeRegistry reg(path);
    reg.register_node("node-0", "h", 1, two_cpus(), 1000);
    EXPECT_TRUE(std::filesystem::exists(path + "-wal")) << "journal_mode=WAL keeps a -wal file while open";
  }
  NodeRegistry again(path);
  EXPECT_EQ(again.nodes().size(), 1u);
  again.clear();
  EXPECT_TRUE(again.nodes().empty());
}

TEST(NodeRegistry, JsonHasHeartbeatAge) {
  NodeRegistry reg(":memory:");
  const auto n = reg.register_node("node-0", "h", 1, two_cpus(), 1000);
  const nlohmann::ordered_json j = node_view(n, 3500);
  EXPECT_EQ(j["state"], "alive");
  EXPECT_DOUBLE_EQ(j["heartbeat_age_s"].get<double>(), 2.5);
  EXPECT_TRUE(j["lost_ms"].is_null());
  EXPECT_EQ(j["resources"]["cpus"], 2);
}

// Heartbeats live in memory and reach the table in one transaction per sweep (mark_lost or
// flush); a registry opened on the file afterwards sees them, and a state change is written at once.
TEST(NodeRegistry, HeartbeatsReachTheTableAtTheNextSweep) {
  const testing::TempDir tmp("registry_hb");
  const std::filesystem::path dir = tmp.path();
  const std::string path = (dir / "state.db").string();
  NodeRegistry reg(path);
  const auto n = reg.register_node("node-0", "h", 1, two_cpus(), 1000);
  reg.heartbeat(n.id, 2000);
  reg.heartbeat(n.id, 3000);
  EXPECT_EQ(reg.node(n.id)->heartbeats, 2) << "memory is current at once";
  EXPECT_EQ(NodeRegistry(path).nodes()[0].heartbeats, 0) << "the table lags until the sweep";
  reg.mark_lost(3500, 10000);
  auto seen = NodeRegistry(path).nodes();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].heartbeats, 2);
  EXPECT_EQ(seen[0].last_heartbeat_ms, 3000);
  reg.leave(n.id, "bye", 4000);
  EXPECT_EQ(NodeRegistry(path).nodes()[0].state, NodeState::kLeft);
  EXPECT_TRUE(reg.has_node("node-0"));
  EXPECT_FALSE(reg.has_node("node-1"));
  EXPECT_EQ(reg.not_alive().size(), 1u);
}

}  // namespace
}  // namespace verl::launcher

#include "launcher/node_facts.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/error.h"
#include "tests/testing/fake_sysfs.h"

namespace verl::launcher {
namespace {

using testing::FakeSysfs;
using testing::ipv4_gid;
using testing::kLinkLocalGid;
using testing::kZeroGid;

TEST(NodeFacts, ReadsPortsWithStateLinkLayerRateAndGidsSorted) {
  FakeSysfs sys("ports");
  sys.port("mlx5_1", 1, "4: ACTIVE", "Ethernet", "100 Gb/sec (4X EDR)");
  sys.port("mlx5_0", 2, "1: DOWN", "InfiniBand");
  sys.port("mlx5_0", 1, "4: ACTIVE", "InfiniBand");
  sys.gid("mlx5_1", 1, 10, ipv4_gid(10, 0, 0, 5), "RoCE v2");
  sys.gid("mlx5_1", 1, 0, kLinkLocalGid, "IB/RoCE v1");
  sys.gid("mlx5_1", 1, 2, kZeroGid, "RoCE v2");  // an unused slot

  const auto ports = read_hca_ports(sys.root());
  ASSERT_EQ(ports.size(), 3u);
  EXPECT_EQ(ports[0].name(), "mlx5_0:1");
  EXPECT_EQ(ports[1].name(), "mlx5_0:2");
  EXPECT_EQ(ports[2].name(), "mlx5_1:1");
  EXPECT_TRUE(ports[0].active());
  EXPECT_FALSE(ports[1].active());
  EXPECT_FALSE(ports[0].roce());
  EXPECT_TRUE(ports[2].roce());
  EXPECT_EQ(ports[2].rate, "100 Gb/sec (4X EDR)");
  EXPECT_EQ(ports[1].state, "1: DOWN");
  ASSERT_EQ(ports[2].gids.size(), 2u) << "the zero GID is an unused slot";
  EXPECT_EQ(ports[2].gids[0].index, 0);
  EXPECT_EQ(ports[2].gids[0].type, "IB/RoCE v1");
  EXPECT_EQ(ports[2].gids[1].index, 10) << "sorted by number, not by name (10 after 0, not before 2)";
  EXPECT_EQ(ports[2].gids[1].gid, ipv4_gid(10, 0, 0, 5));
  EXPECT_EQ(ports[2].gids[1].type, "RoCE v2");
}

TEST(NodeFacts, UnreadableGidTypeIsEmptyAndOddEntriesAreSkipped) {
  FakeSysfs sys("odd");
  sys.port("mlx5_0", 1, "4: ACTIVE", "Ethernet");
  sys.gid("mlx5_0", 1, 1, ipv4_gid(10, 0, 0, 5), "");
  sys.file("class/infiniband/mlx5_0/ports/README/state", "not a port");
  sys.file("class/infiniband/mlx5_0/ports/1/gids/x", "not a gid");
  const auto ports = read_hca_ports(sys.root());
  ASSERT_EQ(ports.size(), 1u);
  ASSERT_EQ(ports[0].gids.size(), 1u);
  EXPECT_EQ(ports[0].gids[0].type, "");
}

TEST(NodeFacts, NoInfinibandClassMeansNoPorts) {
  FakeSysfs sys("none");
  EXPECT_TRUE(read_hca_ports(sys.root()).empty());
  EXPECT_TRUE(read_hca_ports(sys.root() + "/does-not-exist").empty());
}

TEST(NodeFacts, CountsNvidiaDisplayControllersNotSwitches) {
  FakeSysfs sys("gpus");
  sys.nvidia_device("0000:18:00.0", "0x030200");
  sys.nvidia_device("0000:2a:00.0", "0x030000");
  sys.nvidia_device("0000:c0:00.0", "0x068000");  // NVSwitch, bound to the same driver
  sys.file("bus/pci/drivers/nvidia/new_id", "");
  sys.file("bus/pci/drivers/nvidia/module/class", "0x030200");
  EXPECT_EQ(count_nvidia_gpus(sys.root()), 2);
  FakeSysfs empty("nogpus");
  EXPECT_EQ(count_nvidia_gpus(empty.root()), 0);
}

TEST(NodeFacts, LoopbackAddressesAreLoopback) {
  EXPECT_TRUE(is_loopback_address("127.0.0.1"));
  EXPECT_TRUE(is_loopback_address("127.1.2.3"));
  EXPECT_TRUE(is_loopback_address("::1"));
  EXPECT_TRUE(is_loopback_address("LocalHost"));
  EXPECT_FALSE(is_loopback_address("128.0.0.1"));
  EXPECT_FALSE(is_loopback_address("10.0.0.1"));
  EXPECT_FALSE(is_loopback_address("127.example.com"));
}

// The slurm case: where the agents run is not known, only the address the allocation gave the
// head. A head that listens on loopback is reached only when that address is loopback too.
TEST(NodeFacts, HeadOnLoopbackIsReachedOnlyOverLoopback) {
  EXPECT_NO_THROW(check_head_reach("127.0.0.1", "127.0.0.1", "", ""));
  EXPECT_NO_THROW(check_head_reach("0.0.0.0", "10.1.2.3", "", ""));
  EXPECT_NO_THROW(check_head_reach("0.0.0.0", "10.1.2.3", "10.1.2.4", "nodes[0].host 10.1.2.4"));
  try {
    check_head_reach("127.0.0.1", "10.1.2.3", "", "");
    FAIL() << "a loopback head dialled at 10.1.2.3 passed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_EQ(std::string(e.what()), "head.bind_host is 127.0.0.1, a loopback address, but the agents dial the head at 10.1.2.3, "
                                     "where it would not listen");
    EXPECT_EQ(e.hint(), "set head.bind_host=0.0.0.0 (or to the address the agents dial)");
  }
  // An agent elsewhere: the bind host is named first; head.host alone when it is the only fault.
  EXPECT_THROW(check_head_reach("localhost", "127.0.0.1", "10.1.2.4", "nodes[0].host 10.1.2.4"), Error);
  try {
    check_head_reach("0.0.0.0", "127.0.0.1", "10.1.2.4", "nodes[3].host 10.1.2.4");
    FAIL() << "head.host 127.0.0.1 for an agent at 10.1.2.4 passed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find("head.host is 127.0.0.1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nodes[3].host 10.1.2.4"), std::string::npos) << e.what();
  }
  EXPECT_EQ(reaches_loopback("127.0.0.5"), true);
  EXPECT_EQ(reaches_loopback("10.1.2.3"), false);
}

TEST(NodeFacts, ThisMachineByLoopbackHostnameOrAddress) {
  const std::vector<InterfaceAddress> ifs = {{"lo", "127.0.0.1", true, true}, {"eth0", "10.0.0.5", false, true}};
  EXPECT_TRUE(is_this_machine("localhost", ifs, "gpu-17.cluster"));
  EXPECT_TRUE(is_this_machine("gpu-17", ifs, "gpu-17.cluster"));
  EXPECT_TRUE(is_this_machine("gpu-17.cluster", ifs, "gpu-17"));
  EXPECT_TRUE(is_this_machine("GPU-17.cluster", ifs, "gpu-17.cluster"));
  EXPECT_TRUE(is_this_machine("10.0.0.5", ifs, "gpu-17"));
  EXPECT_FALSE(is_this_machine("10.0.0.6", ifs, "gpu-17"));
  EXPECT_FALSE(is_this_machine("gpu-18", ifs, "gpu-17.cluster"));
  EXPECT_FALSE(is_this_machine("gpu-1", ifs, "gpu-17"));
  EXPECT_FALSE(is_this_machine("", ifs, ""));
}

TEST(NodeFacts, SystemReaderFindsLoopbackRouteAndInterface) {
  FakeSysfs sys("route");
  const SystemReader reader(sys.root());
  const auto facts = read_node_facts(reader, "127.0.0.1");
  EXPECT_EQ(facts.sysfs_root, sys.root());
  EXPECT_EQ(facts.head_source_address, "127.0.0.1") << "the kernel sends to 127.0.0.1 from 127.0.0.1";
  const auto lo = std::find_if(facts.interfaces.begin(), facts.interfaces.end(),
                               [](const InterfaceAddress& i) { return i.address == "127.0.0.1"; });
  ASSERT_NE(lo, facts.interfaces.end()) << "getifaddrs() lists no 127.0.0.1";
  EXPECT_TRUE(lo->loopback);
  EXPECT_TRUE(facts.notes.empty());
}

// read_node_facts() over a reader that knows nothing: every gap becomes a note, nothing throws.
class BlindReader : public NodeFactsReader {
 public:
  std::string sysfs_root() const override { return "/blind"; }
  std::vector<HcaPort> hca_ports() const override { return {}; }
  int gpu_count() const override { return 0; }
  std::vector<InterfaceAddress> interfaces() const override { return {}; }
  SourceAddress source_address_to(const std::string& host) const override {
    return {"", "the head address " + host + " does not resolve"};
  }
  std::string hostname() const override { return ""; }
};

TEST(NodeFacts, AHeadWithoutRouteIsANote) {
  const auto facts = read_node_facts(BlindReader(), "head.example");
  EXPECT_EQ(facts.head, "head.example");
  EXPECT_TRUE(facts.head_source_address.empty());
  ASSERT_EQ(facts.notes.size(), 1u);
  EXPECT_EQ(facts.notes[0], "the head address head.example does not resolve");
}

}  // namespace
}  // namespace verl::launcher

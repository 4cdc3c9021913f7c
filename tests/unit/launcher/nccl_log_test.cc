// What NCCL chose, read from its INFO lines. The Socket cases read real NCCL 2.28.9 output
// captured on the H200 machine (tests/data/nccl/, its README says how); that machine has no
// InfiniBand HCA, so the IB lines below are built from NCCL's own format strings instead
// (src/transport/net_ib/init.cc "NET/IB : Using%s %s; OOB %s:%s" with " [%d]%s:%d" + "/%s" per
// device, src/transport/net.cc "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s%s",
// src/init.cc "Using network %s", "comm %p rank %d nRanks %d nNodes %d ...", "%d coll channels, ...",
// src/transport/generic.cc "Connected all rings, use ring PXN %d GDR %d"), with debug.cc's prefix.
#include "launcher/nccl_log.h"

#include <gtest/gtest.h>

#include <fstream>

namespace verl::launcher {
namespace {

std::vector<std::string> read_lines(const std::string& name) {
  std::ifstream in(std::string(VERL_SOURCE_DIR) + "/tests/data/nccl/" + name);
  EXPECT_TRUE(in) << name;
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// Two nodes of 8 GPUs over IB, rank 0's view (as NCCL formats it).
std::vector<std::string> ib_lines(const std::string& second_hca = "mlx5_3") {
  const std::string p = "gpu-a:4242:4242 [0] NCCL INFO ";
  return {p + "NET/IB : Using [0]mlx5_0:1/IB [1]" + second_hca + ":1/IB [RO]; OOB ibp26s0:10.1.0.11<0>",
          p + "Using network IB",
          p + "comm 0x55d5c8a0 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0",
          p + "Channel 00/0 : 15[7] -> 0[0] [receive] via NET/IB/0/GDRDMA",
          p + "Channel 01/0 : 15[7] -> 0[0] [receive] via NET/IB/1/GDRDMA",
          p + "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
          p + "Connected all rings, use ring PXN 0 GDR 1",
          p + "Connected all trees",
          p + "32 coll channels, 32 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer"};
}

TEST(NcclLog, RealOutputWithIbEnabledButNoDeviceFallsBackToSockets) {
  const NcclChoice c = parse_nccl_info(read_lines("one_rank_ib_disable_0.txt"));
  EXPECT_EQ(c.network, "Socket");
  ASSERT_EQ(c.devices.size(), 1u) << "the socket interface, not the IB plugin's empty list";
  EXPECT_EQ(c.devices[0].name, "eth0");
  EXPECT_EQ(c.devices[0].link, "192.0.2.2<0>");
  EXPECT_EQ(c.coll_channels, 64);
  EXPECT_EQ(c.nnodes, 1);
  EXPECT_TRUE(c.trees);
  EXPECT_TRUE(c.rings);
  EXPECT_EQ(c.net_channels, 0) << "one rank: no NET channel";
  // Sockets on a node with ACTIVE IB ports: a warning, even with one node.
  NcclExpectation ib;
  ib.has_ib = true;
  ib.ib_hca = "=mlx5_0:1";
  const auto d = nccl_diagnosis("node-0", c, ib);
  EXPECT_EQ(d["status"], "warn");
  EXPECT_NE(d["reason"].get<std::string>().find("fell back to TCP sockets"), std::string::npos);
  EXPECT_TRUE(d.contains("try"));
  // On a node without IB ports it is what it should be.
  EXPECT_EQ(nccl_diagnosis("node-0", c, NcclExpectation{})["status"], "pass");
}

TEST(NcclLog, RealOutputWithIbDisabled) {
  const NcclChoice c = parse_nccl_info(read_lines("one_rank_ib_disable_1.txt"));
  EXPECT_EQ(c.network, "Socket");
  ASSERT_EQ(c.devices.size(), 1u);
  EXPECT_EQ(c.devices[0].label(), "eth0");
  const auto d = nccl_diagnosis("node-0", c, NcclExpectation{});
  EXPECT_EQ(d["status"], "pass");
  EXPECT_EQ(d["coll_channels"], 64);
}

TEST(NcclLog, IbWithTheHcasVerlctlEnvComputedPasses) {
  const NcclChoice c = parse_nccl_info(ib_lines());
  EXPECT_EQ(c.network, "IB");
  ASSERT_EQ(c.devices.size(), 2u);
  EXPECT_EQ(c.devices[1].label(), "mlx5_3:1");
  EXPECT_EQ(c.devices[1].link, "IB");
  EXPECT_EQ(c.used, (std::set<int>{0, 1}));
  EXPECT_TRUE(c.gdr);
  EXPECT_EQ(c.nnodes, 2);
  EXPECT_TRUE(c.rings && c.trees);
  NcclExpectation e;
  e.has_ib = true;
  e.ib_hca = "=mlx5_0:1,mlx5_3:1";
  const auto d = nccl_diagnosis("node-0", c, e);
  EXPECT_EQ(d["status"], "pass") << d.dump();
  EXPECT_EQ(d["used"], nlohmann::ordered_json({"mlx5_0:1", "mlx5_3:1"}));
  EXPECT_EQ(d["algorithms"], nlohmann::ordered_json({"ring", "tree"}));
  EXPECT_NE(d["reason"].get<std::string>().find("GPUDirect RDMA"), std::string::npos);
}

TEST(NcclLog, AnotherHcaThanVerlctlEnvComputedWarns) {
  NcclExpectation e;
  e.has_ib = true;
  e.ib_hca = "=mlx5_0:1,mlx5_3:1";
  const auto d = nccl_diagnosis("node-1", parse_nccl_info(ib_lines("mlx5_bond_0")), e);
  EXPECT_EQ(d["status"], "warn");
  EXPECT_NE(d["reason"].get<std::string>().find("used mlx5_bond_0:1"), std::string::npos) << d.dump();
}

TEST(NcclLog, NoNcclLinesIsASkip) {
  const NcclChoice c = parse_nccl_info({"[rank 0] step 1/3", "verlctl agent: job-1/0/0 ..."});
  EXPECT_FALSE(c.seen());
  EXPECT_EQ(nccl_diagnosis("node-0", c, NcclExpectation{})["status"], "skip");
}

}  // namespace
}  // namespace verl::launcher

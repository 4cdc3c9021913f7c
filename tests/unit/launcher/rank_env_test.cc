// torchrun's variables per placed rank (rank_env.h): what train and command jobs' ranks get.
#include "launcher/rank_env.h"

#include <gtest/gtest.h>

namespace verl::launcher {
namespace {

Placement rank(int r, const std::string& node, int local, const std::string& device) {
  Placement p;
  p.job = 1;
  p.rank = r;
  p.node = node;
  p.local_rank = local;
  p.device = device;
  return p;
}

// Two nodes of two GPUs each, one rank per GPU, as the scheduler places them (node-1 on GPUs 2, 3).
std::vector<Placement> two_by_two() {
  return {rank(0, "node-0", 0, "cuda:0"), rank(1, "node-0", 1, "cuda:1"), rank(2, "node-1", 0, "cuda:2"),
          rank(3, "node-1", 1, "cuda:3")};
}

TEST(RankEnv, EveryRankGetsTorchrunsVariablesForItsNode) {
  const auto all = two_by_two();
  const auto e = rank_env(all[3], all, "10.0.0.1", 29500);
  EXPECT_EQ(torchrun_vars(e),
            (std::vector<std::string>{"RANK=3", "LOCAL_RANK=1", "WORLD_SIZE=4", "LOCAL_WORLD_SIZE=2", "GROUP_RANK=1",
                                      "MASTER_ADDR=10.0.0.1", "MASTER_PORT=29500", "CUDA_VISIBLE_DEVICES=2,3"}));
  const auto e0 = rank_env(all[1], all, "10.0.0.1", 29500);
  EXPECT_EQ(e0.group_rank, 0);
  EXPECT_EQ(e0.visible_devices, "0,1") << "the job's GPUs on its own node: LOCAL_RANK 1 is cuda:1 of them";
}

TEST(RankEnv, GroupRankFollowsTheNodesLowestRankWhateverTheOrderGiven) {
  auto all = two_by_two();
  std::swap(all[0], all[3]);
  EXPECT_EQ(rank_env(all[0], all, "h", 1).group_rank, 1) << "rank 3 is on node-1, the second node";
  EXPECT_EQ(rank_env(all[3], all, "h", 1).group_rank, 0);
}

TEST(RankEnv, CpuRanksGetNoCudaVisibleDevices) {
  const std::vector<Placement> all = {rank(0, "a", 0, "cpu"), rank(1, "a", 1, "cpu"), rank(2, "b", 0, "cpu")};
  const auto vars = torchrun_vars(rank_env(all[2], all, "h", 7));
  for (const auto& v : vars) EXPECT_NE(v.rfind("CUDA_VISIBLE_DEVICES=", 0), 0u) << v;
  EXPECT_EQ(rank_env(all[2], all, "h", 7).local_world_size, 1);
  EXPECT_EQ(rank_env(all[1], all, "h", 7).local_world_size, 2);
}

TEST(RankEnv, OneRankPerNodeHoldsEveryGpuOfItsNode) {
  const auto one = one_rank_per_node(two_by_two());
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(one[0].node, "node-0");
  EXPECT_EQ(one[0].device, "cuda:0,1");
  EXPECT_EQ(one[1].rank, 1);
  EXPECT_EQ(one[1].local_rank, 0);
  EXPECT_EQ(one[1].device, "cuda:2,3");
  EXPECT_EQ(torchrun_vars(rank_env(one[1], one, "h", 1)),
            (std::vector<std::string>{"RANK=1", "LOCAL_RANK=0", "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=1", "GROUP_RANK=1",
                                      "MASTER_ADDR=h", "MASTER_PORT=1", "CUDA_VISIBLE_DEVICES=2,3"}));
  EXPECT_EQ(device_gpus(one[1].device), (std::vector<int>{2, 3})) << "the scheduler counts both GPUs busy";
}

TEST(RankEnv, OneRankPerNodeOnCpusCountsItsSlots) {
  const std::vector<Placement> all = {rank(0, "a", 0, "cpu"), rank(1, "a", 1, "cpu"), rank(2, "a", 2, "cpu"),
                                      rank(3, "b", 0, "cpu")};
  const auto one = one_rank_per_node(all);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(one[0].device, "cpu:3");
  EXPECT_EQ(device_cpu_slots(one[0].device), 3);
  EXPECT_EQ(one[1].device, "cpu") << "a lone slot is a train rank's device";
  EXPECT_EQ(device_cpu_slots("cuda:0,1"), 0);
  EXPECT_TRUE(device_gpus("cpu:3").empty());
}

}  // namespace
}  // namespace verl::launcher

// Placement of ranks on nodes: GPU slots, CPU slots (n_gpus_per_node per CPU node), distinct
// nodes, busy slots, rank numbering, and the reason when a job does not fit.
#include "launcher/scheduler.h"

#include <gtest/gtest.h>

namespace verl::launcher {
namespace {

NodeSlots cpu(const std::string& name) { return NodeSlots{name, name + ".host", 0, {}, 0}; }
NodeSlots gpu(const std::string& name, int gpus, std::set<int> busy = {}) {
  return NodeSlots{name, name + ".host", gpus, std::move(busy), 0};
}

TEST(Scheduler, TwoCpuNodesTakeOneRankEach) {
  auto r = place({2, 1}, {cpu("node-0"), cpu("node-1")});
  ASSERT_TRUE(r.placed()) << r.why;
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.ranks[0].node, "node-0");
  EXPECT_EQ(r.ranks[0].rank, 0);
  EXPECT_EQ(r.ranks[1].node, "node-1");
  EXPECT_EQ(r.ranks[1].rank, 1);
  EXPECT_EQ(r.ranks[1].local_rank, 0);
  EXPECT_EQ(r.ranks[1].device, "cpu");
}

TEST(Scheduler, ACpuNodeOffersTheJobsRanksPerNode) {
  auto r = place({1, 3}, {cpu("node-0")});
  ASSERT_TRUE(r.placed());
  ASSERT_EQ(r.ranks.size(), 3u);
  EXPECT_EQ(r.ranks[2].local_rank, 2);
  EXPECT_EQ(r.ranks[2].node, "node-0");
}

TEST(Scheduler, RanksAreNumberedNodeByNode) {
  auto r = place({2, 2}, {gpu("a", 2), gpu("b", 2)});
  ASSERT_TRUE(r.placed());
  ASSERT_EQ(r.ranks.size(), 4u);
  EXPECT_EQ(r.ranks[2].node, "b");
  EXPECT_EQ(r.ranks[2].rank, 2);
  EXPECT_EQ(r.ranks[2].local_rank, 0);
  EXPECT_EQ(r.ranks[3].device, "cuda:1");
}

TEST(Scheduler, BusyGpusAreSkippedAndTheLowestFreeOnesTaken) {
  auto r = place({1, 2}, {gpu("a", 4, {0, 2})});
  ASSERT_TRUE(r.placed());
  EXPECT_EQ(r.ranks[0].device, "cuda:1");
  EXPECT_EQ(r.ranks[1].device, "cuda:3");
  EXPECT_FALSE(place({1, 3}, {gpu("a", 4, {0, 2})}).placed());
}

TEST(Scheduler, NodesMustBeDistinctAndFree) {
  const auto none = place({2, 1}, {cpu("node-0")});
  EXPECT_FALSE(none.placed());
  EXPECT_EQ(none.why, "needs 2 nodes with 1 free slot each; 1 of 1 alive node has them");
  NodeSlots busy = cpu("node-0");
  busy.busy_cpu_slots = 1;
  auto r = place({1, 1}, {busy, cpu("node-1")});
  ASSERT_TRUE(r.placed()) << r.why;
  EXPECT_EQ(r.ranks[0].node, "node-1") << "a CPU node running another job's ranks has no free slot";
  EXPECT_FALSE(place({2, 1}, {busy, cpu("node-1")}).placed());
}

TEST(Scheduler, AGpuNodeWithTooFewGpusIsPassedOver) {
  auto r = place({1, 4}, {gpu("small", 2), gpu("big", 8)});
  ASSERT_TRUE(r.placed());
  EXPECT_EQ(r.ranks[0].node, "big");
}

TEST(Scheduler, DeclaredGpuIdsAreTheOnlyGpusRanksGet) {
  NodeSlots n = gpu("a", 2);
  n.gpu_ids = {5, 3};  // declared resources.gpu_ids: indices 3 and 5 of an 8-GPU node
  auto r = place({1, 2}, {n});
  ASSERT_TRUE(r.placed());
  EXPECT_EQ(r.ranks[0].device, "cuda:3");
  EXPECT_EQ(r.ranks[1].device, "cuda:5");
  n.busy_gpus = {3};
  EXPECT_FALSE(place({1, 2}, {n}).placed()) << "one of the two declared GPUs is busy";
}

TEST(Scheduler, DeclaredCpusBoundTheRanksACpuNodeTakes) {
  NodeSlots small = cpu("small"), big = cpu("big");
  small.cpu_slots = 2;
  auto r = place({1, 4}, {small, big});
  ASSERT_TRUE(r.placed());
  EXPECT_EQ(r.ranks[0].node, "big") << "4 ranks do not fit in 2 declared CPUs";
  r = place({1, 2}, {small, big});
  ASSERT_TRUE(r.placed());
  EXPECT_EQ(r.ranks[0].node, "small");
}

// Role placement (common/role_placement.h): 2 ranks per node on 4 GPUs, rank i using GPU numbers
// {i, i + 2} (actor on 0,1; critic on 2,3), on a node whose GPUs 0 and 3 are busy.
TEST(Scheduler, RolePlacementReservesTheRolesGpusAndGivesEachRankItsOwn) {
  PlacementRequest req{1, 2};
  req.gpus_per_node = 4;
  req.rank_gpu_positions = {{0, 2}, {1, 3}};
  auto r = place(req, {gpu("a", 6, {0, 3})});
  ASSERT_TRUE(r.placed()) << r.why;
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.ranks[0].device, "cuda:1,4");  // free GPUs 1, 2, 4, 5 are numbers 0..3
  EXPECT_EQ(r.ranks[1].device, "cuda:2,5");
  const auto none = place(req, {gpu("a", 5, {0, 3})});
  EXPECT_FALSE(none.placed());
  EXPECT_NE(none.why.find("4 free slots each (role placement: 2 ranks on 4 GPUs)"), std::string::npos) << none.why;
}

}  // namespace
}  // namespace verl::launcher

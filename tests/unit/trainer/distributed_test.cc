// Multi-rank tests run several ranks in one process, one thread each, over Gloo on loopback
// (as c10d's own tests do); parametrized over world sizes.
#include "trainer/distributed.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>
#include <exception>
#include <functional>
#include <thread>

#include "common/error.h"
#include "common/ports.h"
#include "trainer/core_algos.h"
#include "tests/unit/trainer/rank_harness.h"

namespace verl::trainer {
namespace {


class ScopedEnv {
 public:
  ScopedEnv() {
    for (const char* k : kVars) ::unsetenv(k);
  }
  ~ScopedEnv() {
    for (const char* k : kVars) ::unsetenv(k);
  }
  void set(const char* k, const std::string& v) { ::setenv(k, v.c_str(), 1); }

 private:
  static constexpr const char* kVars[] = {"RANK",        "WORLD_SIZE",
                                          "LOCAL_RANK",  "MASTER_ADDR",
                                          "MASTER_PORT", "VERL_STORE_IS_EXTERNAL",
                                          "VERL_DIST_TIMEOUT_S"};
};

using testing::RanksOptions;
using testing::run_ranks;

TEST(Distributed, EmptyEnvironmentIsOneRankWithNoOpCollectives) {
  ScopedEnv env;
  auto o = Distributed::options_from_env();
  EXPECT_EQ(o.world_size, 1);
  EXPECT_EQ(o.rank, 0);
  Distributed d(o, torch::kCPU);
  EXPECT_FALSE(d.is_distributed());
  EXPECT_EQ(d.backend_name(), "none");
  auto p = torch::ones({3}).requires_grad_(true);
  p.mutable_grad() = torch::full({3}, 5.0);
  d.all_reduce_gradients({p});
  EXPECT_TRUE(torch::equal(p.grad(), torch::full({3}, 5.0)));
  std::map<std::string, double> m{{"a", 2.0}};
  d.all_reduce_metrics(m);
  EXPECT_EQ(m["a"], 2.0);
  d.barrier();
}

TEST(Distributed, EnvironmentAsTorchrunSetsIt) {
  ScopedEnv env;
  env.set("RANK", "3");
  env.set("WORLD_SIZE", "4");
  env.set("LOCAL_RANK", "1");
  env.set("MASTER_ADDR", "10.0.0.7");
  env.set("MASTER_PORT", "29511");
  env.set("VERL_STORE_IS_EXTERNAL", "1");
  auto o = Distributed::options_from_env();
  EXPECT_EQ(o.rank, 3);
  EXPECT_EQ(o.world_size, 4);
  EXPECT_EQ(o.local_rank, 1);
  EXPECT_EQ(o.master_addr, "10.0.0.7");
  EXPECT_EQ(o.master_port, 29511);
  EXPECT_TRUE(o.store_is_external);
}

TEST(Distributed, RankOutsideWorldIsInvalidConfigNamingTheVariable) {
  ScopedEnv env;
  env.set("RANK", "2");
  env.set("WORLD_SIZE", "2");
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", "29500");
  try {
    Distributed::options_from_env();
    FAIL() << "no throw";
  } catch (const verl::Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find("RANK='2'"), std::string::npos) << e.what();
  }
}

TEST(Distributed, WorldWithoutMasterAddressIsInvalidConfig) {
  ScopedEnv env;
  env.set("RANK", "0");
  env.set("WORLD_SIZE", "2");
  EXPECT_THROW(Distributed::options_from_env(), verl::Error);
}

TEST(Distributed, UnreachableStoreNamesRankAndAddress) {
  const int port = free_tcp_port();  // nobody listens there
  DistributedOptions o;
  o.rank = 1;
  o.world_size = 2;
  o.master_port = port;
  o.timeout = std::chrono::seconds(1);
  try {
    Distributed d(o, torch::kCPU);
    FAIL() << "no throw";
  } catch (const verl::Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUnreachable);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("rank 1 could not reach the store at 127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("is rank 0 running?"), std::string::npos) << msg;
  }
}

TEST(Distributed, MissingPeersTimeOutNamingTheGroup) {
  DistributedOptions o;
  o.rank = 0;
  o.world_size = 2;
  o.master_port = free_tcp_port();
  o.timeout = std::chrono::seconds(2);
  try {
    Distributed d(o, torch::kCPU);
    FAIL() << "no throw";
  } catch (const verl::Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kTimedOut);
    EXPECT_NE(std::string(e.what()).find("not all ranks joined"), std::string::npos) << e.what();
  }
}

class DistributedWorld : public ::testing::TestWithParam<int> {};

TEST_P(DistributedWorld, AllReduceGradientsAveragesAcrossBuckets) {
  const int world = GetParam();
  run_ranks(world, [&](Distributed& d) {
    EXPECT_EQ(d.backend_name(), "gloo");
    const double v = d.rank() + 1;
    // Mixed dtypes and a tiny bucket force several buckets; one parameter has no gradient.
    auto a = torch::zeros({5}).requires_grad_(true);
    auto b = torch::zeros({2, 3}, torch::kFloat64).requires_grad_(true);
    auto c = torch::zeros({7}).requires_grad_(true);
    auto none = torch::zeros({2}).requires_grad_(true);
    a.mutable_grad() = torch::full({5}, v);
    b.mutable_grad() = torch::full({2, 3}, 10 * v, torch::kFloat64);
    c.mutable_grad() = torch::arange(7, torch::kFloat32) * v;
    d.all_reduce_gradients({a, b, none, c}, /*bucket_bytes=*/16);
    const double mean = (world + 1) / 2.0;  // mean of 1..world
    EXPECT_TRUE(torch::allclose(a.grad(), torch::full({5}, mean)));
    EXPECT_TRUE(torch::allclose(b.grad(), torch::full({2, 3}, 10 * mean, torch::kFloat64)));
    EXPECT_TRUE(torch::allclose(c.grad(), torch::arange(7, torch::kFloat32) * mean));
    EXPECT_FALSE(none.grad().defined());
  });
}

TEST_P(DistributedWorld, AllReduceMetricsMeanMaxMin) {
  const int world = GetParam();
  run_ranks(world, [&](Distributed& d) {
    const double r = d.rank();
    std::map<std::string, double> m{
        {"critic/score/mean", r}, {"response_length/max", r}, {"x_min", 10 + r}};
    d.all_reduce_metrics(m);
    EXPECT_DOUBLE_EQ(m["critic/score/mean"], (world - 1) / 2.0);
    EXPECT_DOUBLE_EQ(m["response_length/max"], world - 1);
    EXPECT_DOUBLE_EQ(m["x_min"], 10);
  });
}

TEST_P(DistributedWorld, AllReduceMetricsRefusesDifferentKeys) {
  const int world = GetParam();
  std::atomic<int> thrown{0};
  run_ranks(world, [&](Distributed& d) {
    std::map<std::string, double> m{{"a", 1}};
    if (d.rank() == world - 1) m["b"] = 2;
    try {
      d.all_reduce_metrics(m);
    } catch (const verl::Error& e) {
      ++thrown;
    }
  });
  EXPECT_EQ(thrown.load(), world);
}

TEST_P(DistributedWorld, BroadcastParametersCopiesRootWeights) {
  const int world = GetParam();
  run_ranks(world, [&](Distributed& d) {
    auto w = torch::full({3, 2}, static_cast<double>(d.rank() + 7)).requires_grad_(true);
    auto t = torch::full({4}, static_cast<float>(d.rank()), torch::kFloat32);
    d.broadcast_parameters({w, t});
    EXPECT_TRUE(torch::equal(w.detach(), torch::full({3, 2}, 7.0)));
    EXPECT_TRUE(torch::equal(t, torch::zeros({4})));
    d.barrier();
  });
}

TEST_P(DistributedWorld, ExternalStoreServesEveryRankAsClient) {
  const int world = GetParam();
  // The head's store, hosted outside the ranks (port 0: the OS picks one).
  c10d::TCPStoreOptions so;
  so.port = 0;
  so.isServer = true;
  so.waitWorkers = false;
  auto server = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
  run_ranks(world, [&](Distributed& d) {
    auto x = torch::ones({1});
    d.all_reduce_sum(x);
    EXPECT_EQ(x.item<float>(), static_cast<float>(world));
  }, RanksOptions{static_cast<int>(server->getPort()), /*store_is_external=*/true, std::chrono::seconds(30)});
}

TEST_P(DistributedWorld, GlobalWhitenMatchesOneRankOnTheWholeBatch) {
  const int world = GetParam();
  // Rows 2r and 2r+1 live on rank r.
  auto all = torch::arange(world * 2 * 3, torch::kFloat64).view({world * 2, 3}).pow(1.5);
  auto mask = torch::ones_like(all);
  mask.index_put_({0, 2}, 0.0);
  mask.index_put_({world * 2 - 1, 0}, 0.0);
  auto expected = algos::masked_whiten(all, mask);
  run_ranks(world, [&](Distributed& d) {
    auto rows = all.slice(0, 2 * d.rank(), 2 * d.rank() + 2);
    auto got = global_masked_whiten(rows, mask.slice(0, 2 * d.rank(), 2 * d.rank() + 2), d);
    EXPECT_TRUE(torch::allclose(got, expected.slice(0, 2 * d.rank(), 2 * d.rank() + 2),
                                /*rtol=*/1e-9, /*atol=*/1e-9));
  });
}

// A 2 x 2 mesh of four ranks: contiguous pairs (tensor-parallel groups) and strided pairs
// (the data-parallel groups across them); each group's sums stay within it.
TEST(Distributed, SubgroupsFormAMeshAndReduceWithinThemselves) {
  run_ranks(4, [&](Distributed& d) {
    const int r = d.rank();
    auto tp = d.subgroup({r / 2 * 2, r / 2 * 2 + 1}, "tp");
    auto dp = d.subgroup({r % 2, r % 2 + 2}, "dp");
    ASSERT_TRUE(tp && dp);
    EXPECT_EQ(tp->world_size(), 2);
    EXPECT_EQ(tp->rank(), r % 2);
    EXPECT_EQ(dp->rank(), r / 2);
    auto x = torch::full({1}, static_cast<float>(r));
    tp->all_reduce_sum(x);
    EXPECT_EQ(x.item<float>(), static_cast<float>(r / 2 * 4 + 1));  // {0,1} -> 1, {2,3} -> 5
    auto y = torch::full({1}, static_cast<float>(r));
    dp->all_reduce_sum(y);
    EXPECT_EQ(y.item<float>(), static_cast<float>(2 * (r % 2) + 2));  // {0,2} -> 2, {1,3} -> 4
    // The world ran no collective of its own, yet its subgroups' time counts in it (timing_s/comm
    // covers the mesh).
    EXPECT_GT(tp->comm_seconds(), 0.0);
    EXPECT_DOUBLE_EQ(d.comm_seconds(), tp->comm_seconds() + dp->comm_seconds());
    // The same ranks and name again (a recreated engine's groups): a group of its own, not one
    // that reads the first one's rendezvous keys.
    tp.reset();
    // The second member comes late: the first must not find its old address in the store.
    if (r % 2 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto again = d.subgroup({r / 2 * 2, r / 2 * 2 + 1}, "tp");
    ASSERT_TRUE(again);
    auto z = torch::ones({1});
    again->all_reduce_sum(z);
    EXPECT_EQ(z.item<float>(), 2.0f);
    EXPECT_EQ(d.subgroup({(r + 1) % 4}, "other"), nullptr);  // not a member
    auto one = d.subgroup({r}, "self");
    ASSERT_TRUE(one);
    EXPECT_FALSE(one->is_distributed());
    try {
      d.subgroup({0, 0}, "bad");
      ADD_FAILURE() << "no throw";
    } catch (const verl::Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
      EXPECT_NE(std::string(e.what()).find("'bad'"), std::string::npos) << e.what();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DistributedWorld, ::testing::Values(2, 3));

}  // namespace
}  // namespace verl::trainer

// The NCCL probes where they run without a GPU: nccl-tests' bandwidth factors, the size sweep
// and its parser, the data check's expected values against the collectives computed on the
// host, the TCP rendezvous (several ranks as threads: who met whom, strays dropped, timeouts and
// a taken port named), and the skips without a device or a job, after a real rendezvous.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "common/error.h"
#include "common/ports.h"
#include "probes/gpu_probe.h"
#include "probes/harness.h"
#include "probes/net.h"
#include "probes/nccl_probe.h"
#include "probes/probes.h"
#include "tests/testing/fake_gpus.h"

namespace verl::probes {
namespace {

TEST(NcclFactors, AreNcclTestsBusBandwidthFactors) {
  const auto& ar = collective(Collective::kAllReduce);
  const auto& ag = collective(Collective::kAllGather);
  const auto& rs = collective(Collective::kReduceScatter);
  EXPECT_DOUBLE_EQ(ar.bus_factor(8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(ag.bus_factor(8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(rs.bus_factor(16), 15.0 / 16);
  // One rank: nothing crosses a link.
  EXPECT_DOUBLE_EQ(ar.bus_factor(1), 0);
  EXPECT_DOUBLE_EQ(ag.bus_factor(1), 0);
  // 1 GiB all-reduce in 10 ms over 8 ranks: algbw 107.4 GB/s, busbw 1.75 times that.
  EXPECT_NEAR(algbw_gbps(1ull << 30, 0.010), 107.374, 1e-3);
  EXPECT_NEAR(busbw_gbps(Collective::kAllReduce, 1ull << 30, 0.010, 8), 107.374 * 1.75, 1e-2);
  EXPECT_EQ(std::string(ar.name), "all_reduce");
  EXPECT_EQ(collectives().size(), 3u);
}

TEST(NcclSizes, CountsPerRankAndTheSizeReported) {
  EXPECT_EQ(nccl_count(Collective::kAllReduce, 1024, 8), 256u);
  EXPECT_EQ(nccl_count(Collective::kAllGather, 1024, 8), 32u);  // per rank's send
  EXPECT_EQ(nccl_bytes(Collective::kAllGather, 32, 8), 1024u);
  EXPECT_EQ(nccl_count(Collective::kReduceScatter, 8, 8), 0u);  // too small: skipped
  EXPECT_EQ(nccl_bytes(Collective::kReduceScatter, nccl_count(Collective::kReduceScatter, 1000, 3), 3), 996u);
}

TEST(NcclSizes, DefaultSweepAndParser) {
  const auto d = nccl_default_sizes();
  ASSERT_EQ(d.size(), 10u);
  EXPECT_EQ(d.front(), 8u);
  EXPECT_EQ(d.back(), 1ull << 30);
  EXPECT_EQ(parse_size_sweep("8:1G:8"), d);
  EXPECT_EQ(parse_bytes("64K"), 65536u);
  EXPECT_EQ(parse_bytes("1GiB"), 1ull << 30);
  EXPECT_EQ(parse_bytes("2mb"), 2u << 20);
  EXPECT_EQ(parse_size_sweep("1M,64M"), (std::vector<uint64_t>{1 << 20, 64 << 20}));
  // A list is swept (and its largest size judged) in ascending order, each size once.
  EXPECT_EQ(parse_size_sweep("1G,1M,1M"), (std::vector<uint64_t>{1 << 20, 1ull << 30}));
  EXPECT_EQ(parse_size_sweep("1K:8K"), (std::vector<uint64_t>{1024, 2048, 4096, 8192}));
  for (const char* bad : {"", "x", "1Q", "0", "8:4", "8:1G:1", "1:2:3:4"}) {
    try {
      parse_size_sweep(bad);
      ADD_FAILURE() << bad << " parsed";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kUsage) << bad;
    }
  }
}

// The collectives computed on the host from nccl_fill: what the device check compares against.
TEST(NcclDataCheck, ExpectedValuesAreTheCollectivesOfTheFill) {
  const int n = 3;
  const uint64_t count = 7;
  for (int r = 0; r < n; ++r) {
    for (uint64_t i = 0; i < count; ++i) {
      float sum = 0;
      for (int s = 0; s < n; ++s) sum += nccl_fill(s, i);
      EXPECT_EQ(nccl_expected(Collective::kAllReduce, n, r, count, i), sum);
      float rs = 0;
      for (int s = 0; s < n; ++s) rs += nccl_fill(s, static_cast<uint64_t>(r) * count + i);
      EXPECT_EQ(nccl_expected(Collective::kReduceScatter, n, r, count, i), rs);
    }
    for (uint64_t i = 0; i < count * n; ++i)
      EXPECT_EQ(nccl_expected(Collective::kAllGather, n, r, count, i), nccl_fill(static_cast<int>(i / count), i % count));
  }
  // Rank-dependent: a rank whose data went missing or doubled changes the result.
  EXPECT_NE(nccl_fill(0, 3), nccl_fill(1, 3));
  // Exact for large worlds: float has 24 bits of integer.
  EXPECT_EQ(nccl_expected(Collective::kAllReduce, 2048, 0, 1, 4), 2048.0f * 2049 / 2 * 5);
}

TEST(NcclRendezvous, RankZeroHandsOutTheIdAndEachProcessesFirstRank) {
  const int port = free_tcp_port();
  const int gpus[] = {2, 0, 3};
  const char* hosts[] = {"node-a", "node-b", "node-a"};
  std::vector<std::future<RendezvousResult>> f;
  int made = 0;
  for (int r = 0; r < 3; ++r)
    f.push_back(std::async(std::launch::async, [&, r] {
      return rendezvous(World{r, 3, {"127.0.0.1", port}}, {r, "node-" + std::to_string(r), hosts[r], gpus[r]}, true, "",
                        [&made] {
                          ++made;
                          NcclUniqueId id{};
                          for (size_t i = 0; i < kNcclUniqueIdBytes; ++i) id.internal[i] = static_cast<char>(i * 7);
                          return id;
                        },
                        std::chrono::seconds(30));
    }));
  std::vector<RendezvousResult> got;
  for (auto& x : f) got.push_back(x.get());
  EXPECT_EQ(made, 1);
  const int first[] = {0, 2, 2};
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(got[r].go);
    EXPECT_EQ(got[r].first_rank, first[r]) << r;
    EXPECT_EQ(got[r].nranks, 5);
    EXPECT_EQ(got[r].nprocs, 3);
    EXPECT_EQ(got[r].nnodes, 2);
    EXPECT_EQ(got[r].id.internal[5], static_cast<char>(35));
    EXPECT_EQ(got[r].id.internal[127], static_cast<char>(127 * 7));
    ASSERT_EQ(got[r].members.size(), 3u);
    EXPECT_EQ(got[r].members[2].node, "node-2");
    EXPECT_EQ(got[r].members[2].host, "node-a");
    EXPECT_EQ(got[r].members[2].gpus, 3);
  }
  EXPECT_EQ(describe_rendezvous(World{1, 3, {"127.0.0.1", port}}, got[1]),
            "rank 1 of 3 met rank 0 at 127.0.0.1:" + std::to_string(port) +
                ": 3 processes on 2 hosts, 5 GPUs (node-0, node-1, node-2)");
  const Json j = rendezvous_json(World{1, 3, {"127.0.0.1", port}}, got[1]);
  EXPECT_EQ(j["world_size"], 3);
  EXPECT_EQ(j["members"][1]["node"], "node-1");
}

TEST(NcclRendezvous, StrayConnectionsAreDroppedNotWaitedFor) {
  // The ports probe's connect-and-close and a peer that speaks another protocol reach rank 0's
  // port first; the two ranks still meet, each once.
  const int port = free_tcp_port();
  auto r0 = std::async(std::launch::async, [port] {
    return rendezvous(World{0, 2, {"127.0.0.1", port}}, {0, "n0", "h", 0}, true, "", [] { return NcclUniqueId{}; },
                      std::chrono::seconds(30));
  });
  auto wait_listening = [port] {
    for (int i = 0; i < 300; ++i) {
      std::string why;
      if (auto s = try_connect({"127.0.0.1", port}, std::chrono::milliseconds(200), &why)) return;  // closed: a stray
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL() << "rank 0 never listened";
  };
  wait_listening();
  {
    std::string why;
    auto s = try_connect({"127.0.0.1", port}, std::chrono::seconds(2), &why);
    ASSERT_TRUE(s) << why;
    const char junk[] = "GET / HTTP/1.0\r\n\r\n";
    send_all(s->fd(), junk, sizeof junk);
  }
  const auto start = std::chrono::steady_clock::now();
  const auto r1 = rendezvous(World{1, 2, {"127.0.0.1", port}}, {1, "n1", "h", 0}, true, "",
                             [] { return NcclUniqueId{}; }, std::chrono::seconds(30));
  EXPECT_TRUE(r1.go);
  EXPECT_EQ(r1.nprocs, 2);
  EXPECT_EQ(r1.members.size(), 2u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(r0.get().go);
}

TEST(NcclRendezvous, RankZeroNamesTheTakenPort) {
  Endpoint e;
  const Socket taken = listen_on("0.0.0.0", 0, &e);
  try {
    rendezvous(World{0, 2, {"127.0.0.1", e.port}}, {0, "node-0", "host-a", 1}, true, "", [] { return NcclUniqueId{}; },
               std::chrono::seconds(5));
    ADD_FAILURE() << "listened on a taken port";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ExitCode::kFailure);
    EXPECT_NE(std::string(err.what()).find("rank 0 on node-0 (host-a) cannot listen on port " + std::to_string(e.port)),
              std::string::npos)
        << err.what();
    EXPECT_NE(err.hint().find("head.store_port"), std::string::npos) << err.hint();
  }
}

TEST(NcclRendezvous, OneProcessNotReadyStopsEveryRankNamingIt) {
  const int port = free_tcp_port();
  auto r1 = std::async(std::launch::async, [port] {
    return rendezvous(World{1, 2, {"127.0.0.1", port}}, {1, "node-b", "node-b", 0}, false,
                      "NCCL is not loadable: libnccl.so.2", [] { return NcclUniqueId{}; }, std::chrono::seconds(30));
  });
  const auto r0 = rendezvous(World{0, 2, {"127.0.0.1", port}}, {0, "node-a", "node-a", 1}, true, "",
                             [] { ADD_FAILURE() << "no id without a go"; return NcclUniqueId{}; },
                             std::chrono::seconds(30));
  const auto b = r1.get();
  for (const auto* r : {&r0, &b}) {
    EXPECT_FALSE(r->go);
    EXPECT_NE(r->why_not.find("rank 1 on node-b is not ready: NCCL is not loadable"), std::string::npos) << r->why_not;
  }
}

TEST(NcclRendezvous, RankZeroTimesOutNamingTheMissingRanks) {
  const int port = free_tcp_port();
  try {
    rendezvous(World{0, 3, {"127.0.0.1", port}}, {0, "node-a", "host-a", 1}, true, "", [] { return NcclUniqueId{}; },
               std::chrono::milliseconds(300));
    ADD_FAILURE() << "no timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kTimedOut);
    EXPECT_NE(std::string(e.what()).find("ranks 1, 2 of 3 never reached rank 0 on node-a (host-a) port " +
                                         std::to_string(port)),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("(joined: 0 node-a (host-a))"), std::string::npos) << e.what();
  }
}

TEST(NcclRendezvous, AnotherRankTimesOutWhenRankZeroNeverListens) {
  const int port = free_tcp_port();
  try {
    rendezvous(World{2, 3, {"127.0.0.1", port}}, {2, "node-c", "node-c", 1}, true, "", [] { return NcclUniqueId{}; },
               std::chrono::milliseconds(300));
    ADD_FAILURE() << "no timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kTimedOut);
    EXPECT_NE(std::string(e.what()).find("rank 2 on node-c could not reach rank 0 at 127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << e.what();
  }
}

class NoGpus : public testing::FakeGpus {
 public:
  NoGpus() : FakeGpus(testing::no_gpu()) {}
};

TEST(NcclProbes, SkippedWithoutADeviceOrAJob) {
  const NoGpus none;
  Context ctx;
  ctx.node = "here";
  ctx.spec = {{"probes", {{"min_busbw_gbps", 100.0}}}, {"nodes", Json::array()}};
  ctx.gpus = &none;
  auto rows = run_probes({nccl_intra_probe(), nccl_inter_probe()}, ctx);
  ASSERT_EQ(rows.size(), 6u);
  for (const auto& r : rows) {
    EXPECT_EQ(r.status, Status::kSkipped) << r.probe << "." << r.metric << ": " << r.detail;
    EXPECT_EQ(r.unit, "GB/s");
    EXPECT_EQ(r.threshold_key, "min_busbw_gbps");
  }
  EXPECT_EQ(rows[0].metric, "all_reduce");
  EXPECT_EQ(rows[2].metric, "reduce_scatter");
  EXPECT_EQ(rows[0].detail.rfind("skipped: no CUDA device", 0), 0u) << rows[0].detail;
  EXPECT_NE(rows[3].detail.find("RANK/WORLD_SIZE"), std::string::npos) << rows[3].detail;

  // The spec promises GPUs: intra fails.
  ctx.spec["nodes"] = Json::array({{{"host", "localhost"}, {"gpus", 8}}});
  rows = run_probes({nccl_intra_probe()}, ctx);
  EXPECT_EQ(rows[0].status, Status::kFail);
}

// nccl_inter as ranks 0 and 1 of one job on this machine, neither with a GPU (rank 1 in a
// thread); the spec may promise rank 1's node GPUs. Returns each rank's rows.
std::pair<std::vector<Row>, std::vector<Row>> two_gpu_less_ranks(int port, int gpus_promised_to_rank_1) {
  const NoGpus none;
  auto run_rank = [&](int rank) {
    Context ctx;
    ctx.node = "n" + std::to_string(rank);
    ctx.spec = {{"nodes", Json::array()}};
    if (rank == 1 && gpus_promised_to_rank_1 > 0)
      ctx.spec["nodes"] = Json::array({{{"host", "h"}, {"gpus", gpus_promised_to_rank_1}}});
    ctx.gpus = &none;
    ctx.world = World{rank, 2, {"127.0.0.1", port}};
    ctx.rendezvous_timeout = std::chrono::seconds(30);
    return run_probes({nccl_inter_probe()}, ctx);
  };
  auto other = std::async(std::launch::async, run_rank, 1);
  auto rows0 = run_rank(0);
  return {std::move(rows0), other.get()};
}

TEST(NcclProbes, AGpuLessRankStillJoinsTheRendezvousAndSkips) {
  // A job of two GPU-less processes: both meet at rank 0, nobody hangs, both skip and say whom
  // they met.
  const int port = free_tcp_port();
  const auto [rows0, rows1] = two_gpu_less_ranks(port, /*gpus_promised_to_rank_1=*/0);
  int rank = 0;
  for (const auto* rows : {&rows0, &rows1}) {
    ASSERT_EQ(rows->size(), 3u);
    const Row& r = (*rows)[0];
    EXPECT_EQ(r.status, Status::kSkipped) << r.detail;
    EXPECT_EQ(r.detail.rfind("skipped: no CUDA device", 0), 0u) << r.detail;
    EXPECT_NE(r.detail.find("rank " + std::to_string(rank) + " of 2 met rank 0 at 127.0.0.1:" + std::to_string(port) +
                            ": 2 processes on 1 host, 0 GPUs (n0, n1)"),
              std::string::npos)
        << r.detail;
    EXPECT_EQ(r.data["rendezvous"]["members"].size(), 2u) << r.data.dump();
    EXPECT_EQ(r.data["rendezvous"]["members"][1]["node"], "n1");
    ++rank;
  }
}

TEST(NcclProbes, ANodeWithoutThePromisedGpusFailsEveryRankNamingIt) {
  // The spec gives rank 1's node GPUs it lacks: it still joins, and every rank fails naming it
  // instead of rank 0 running NCCL alone or waiting for it.
  const auto [rows0, rows1] = two_gpu_less_ranks(free_tcp_port(), /*gpus_promised_to_rank_1=*/8);
  for (const auto* rows : {&rows0, &rows1}) {
    ASSERT_EQ(rows->size(), 3u);
    EXPECT_EQ((*rows)[2].status, Status::kFail) << (*rows)[2].detail;
    EXPECT_NE((*rows)[2].detail.find("rank 1 on n1"), std::string::npos) << (*rows)[2].detail;
    EXPECT_NE((*rows)[2].detail.find("is not ready: the spec gives this node 8 GPUs"), std::string::npos)
        << (*rows)[2].detail;
  }
}

TEST(NcclProbes, AWorldOfOneStillRendezvousesOnItsPort) {
  // WORLD_SIZE=1 (a one-node cluster): rank 0 binds MASTER_PORT and meets itself; a taken port
  // is a failed row naming it, not a silent skip.
  const NoGpus none;
  Context ctx;
  ctx.node = "solo";
  ctx.spec = {{"nodes", Json::array()}};
  ctx.gpus = &none;
  ctx.world = World{0, 1, {"127.0.0.1", free_tcp_port()}};
  auto rows = run_probes({nccl_inter_probe()}, ctx);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].status, Status::kSkipped) << rows[0].detail;
  EXPECT_NE(rows[0].detail.find("rank 0 of 1 met rank 0"), std::string::npos) << rows[0].detail;

  Endpoint e;
  const Socket taken = listen_on("0.0.0.0", 0, &e);
  ctx.world = World{0, 1, {"127.0.0.1", e.port}};
  rows = run_probes({nccl_inter_probe()}, ctx);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows[0].status, Status::kFail);
  EXPECT_NE(rows[0].detail.find("cannot listen on port " + std::to_string(e.port)), std::string::npos) << rows[0].detail;
}

TEST(Harness, JsonCarriesAMeasurementsData) {
  Probe p;
  p.descriptor = {"x", "test", {{"m", "GB/s", Bound::kNone, ""}}};
  p.run = [](const Context&) {
    return std::vector<Measurement>{{"m", 1.0, "d", {}, Json{{"sweep", Json::array({1, 2})}}},
                                    {"m", 2.0, "e", {}}};
  };
  const Json j = to_json(run_probes({p}, Context{}));
  EXPECT_EQ(j["rows"][0]["data"]["sweep"].size(), 2u);
  EXPECT_FALSE(j["rows"][1].contains("data"));
}

}  // namespace
}  // namespace verl::probes

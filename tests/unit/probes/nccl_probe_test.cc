// The NCCL probes where they run without a GPU: nccl-tests' bandwidth factors, the size sweep
// and its parser, the data check's expected values against the collectives computed on the
// host, the TCP rendezvous (several ranks as threads), and the skips without a device or a job.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "common/error.h"
#include "probes/gpu_probe.h"
#include "probes/harness.h"
#include "probes/net.h"
#include "probes/nccl_probe.h"
#include "probes/probes.h"

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

int free_port() {
  Endpoint e;
  Socket s = listen_on("127.0.0.1", 0, &e);
  return e.port;  // closed on return; the rendezvous binds it again (SO_REUSEADDR)
}

TEST(NcclRendezvous, RankZeroHandsOutTheIdAndEachProcessesFirstRank) {
  const int port = free_port();
  const int gpus[] = {2, 0, 3};
  const char* hosts[] = {"node-a", "node-b", "node-a"};
  std::vector<std::future<RendezvousResult>> f;
  int made = 0;
  for (int r = 0; r < 3; ++r)
    f.push_back(std::async(std::launch::async, [&, r] {
      return rendezvous(World{r, 3, {"127.0.0.1", port}}, gpus[r], true, "", hosts[r],
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
  }
}

TEST(NcclRendezvous, OneProcessNotReadyStopsEveryRankNamingIt) {
  const int port = free_port();
  auto r1 = std::async(std::launch::async, [port] {
    return rendezvous(World{1, 2, {"127.0.0.1", port}}, 0, false, "NCCL is not loadable: libnccl.so.2", "node-b",
                      [] { return NcclUniqueId{}; }, std::chrono::seconds(30));
  });
  const auto r0 = rendezvous(World{0, 2, {"127.0.0.1", port}}, 1, true, "", "node-a",
                             [] { ADD_FAILURE() << "no id without a go"; return NcclUniqueId{}; },
                             std::chrono::seconds(30));
  const auto b = r1.get();
  for (const auto* r : {&r0, &b}) {
    EXPECT_FALSE(r->go);
    EXPECT_NE(r->why_not.find("rank 1 on node-b is not ready: NCCL is not loadable"), std::string::npos) << r->why_not;
  }
}

TEST(NcclRendezvous, RankZeroTimesOutNamingTheMissingRanks) {
  const int port = free_port();
  try {
    rendezvous(World{0, 3, {"127.0.0.1", port}}, 1, true, "", "node-a", [] { return NcclUniqueId{}; },
               std::chrono::milliseconds(300));
    ADD_FAILURE() << "no timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kTimedOut);
    EXPECT_NE(std::string(e.what()).find("ranks 1, 2 never reached rank 0"), std::string::npos) << e.what();
  }
}

TEST(NcclRendezvous, AnotherRankTimesOutWhenRankZeroNeverListens) {
  const int port = free_port();
  try {
    rendezvous(World{2, 3, {"127.0.0.1", port}}, 1, true, "", "node-c", [] { return NcclUniqueId{}; },
               std::chrono::milliseconds(300));
    ADD_FAILURE() << "no timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kTimedOut);
    EXPECT_NE(std::string(e.what()).find("rank 2 could not reach rank 0 at 127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << e.what();
  }
}

class NoGpus : public GpuSource {
 public:
  GpuInfo query() const override {
    GpuInfo i;
    i.why_none = "libnvidia-ml.so.1: not found";
    return i;
  }
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

TEST(NcclProbes, AGpuLessRankStillJoinsTheRendezvousAndSkips) {
  // A job of two GPU-less processes: both meet at rank 0, nobody hangs, both skip.
  const NoGpus none;
  const int port = free_port();
  auto run_rank = [&](int rank) {
    Context ctx;
    ctx.node = "n" + std::to_string(rank);
    ctx.spec = {{"nodes", Json::array()}};
    ctx.gpus = &none;
    ctx.world = World{rank, 2, {"127.0.0.1", port}};
    ctx.rendezvous_timeout = std::chrono::seconds(30);
    return run_probes({nccl_inter_probe()}, ctx);
  };
  auto other = std::async(std::launch::async, run_rank, 1);
  const auto rows0 = run_rank(0);
  const auto rows1 = other.get();
  for (const auto* rows : {&rows0, &rows1}) {
    ASSERT_EQ(rows->size(), 3u);
    EXPECT_EQ((*rows)[0].status, Status::kSkipped) << (*rows)[0].detail;
  }
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

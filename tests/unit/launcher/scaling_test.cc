// Scaling health from metric rows, GPU samples, a failure and a baseline: the communication
// share, utilisation mean/min over the job's GPUs only and within its run, the reserved-memory
// share, the OOM verdict, scaling efficiency against the same job on fewer nodes, and skip rows
// with their reason where a figure cannot be had.
#include "launcher/scaling.h"

#include <gtest/gtest.h>

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;

Json step_row(int step, double step_s, double comm_s, double tps, double reserved_gb = -1) {
  Json r = {{"step", step}, {"timing_s/step", step_s}, {"timing_s/comm", comm_s}, {"perf/throughput", tps}};
  if (reserved_gb >= 0) r["perf/max_memory_reserved_gb"] = reserved_gb;
  return r;
}

Placement rank(int r, const std::string& node, const std::string& device) {
  Placement p;
  p.rank = r;
  p.node = node;
  p.device = device;
  return p;
}

const Json& check(const Json& s, const std::string& name) {
  for (const auto& c : s["checks"])
    if (c["name"] == name) return c;
  static const Json none;
  ADD_FAILURE() << "no check " << name << " in " << s.dump();
  return none;
}

ScalingInput two_cpu_ranks() {
  ScalingInput in;
  in.job.id = 2;
  in.job.kind = JobKind::kTrain;
  in.job.nnodes = 2;
  in.job.n_gpus_per_node = 1;
  in.job.world_size = 2;
  in.job.started_ms = 1000;
  in.job.ended_ms = 9000;
  in.placement = {rank(0, "node-0", "cpu"), rank(1, "node-1", "cpu")};
  // The first step (start-up) is left out: comm 3 / step 20 = 15 % over steps 2 and 3.
  in.rows = Json::array({step_row(1, 100, 90, 1), step_row(2, 10, 1, 50), step_row(3, 10, 2, 70)});
  return in;
}

TEST(Scaling, CommunicationShareAndThroughputOfCpuRanks) {
  const Json s = scaling_health(two_cpu_ranks());
  EXPECT_EQ(s["device"], "cpu");
  EXPECT_DOUBLE_EQ(s["comm_share"].get<double>(), 0.15);
  EXPECT_DOUBLE_EQ(s["tokens_per_s_per_rank"].get<double>(), 60);
  EXPECT_EQ(check(s, "comm_share")["status"], "warn") << "15 % is over the guide's 10 %";
  EXPECT_TRUE(check(s, "comm_share").contains("try"));
  EXPECT_EQ(check(s, "gpu_util")["status"], "skip");
  EXPECT_EQ(check(s, "reserved_memory")["status"], "skip");
  EXPECT_EQ(check(s, "oom")["status"], "pass");
  EXPECT_EQ(check(s, "scaling_efficiency")["status"], "skip");
  EXPECT_FALSE(s.contains("gpu_util_mean_pct"));
}

TEST(Scaling, GpuUtilisationCountsTheJobsGpusWhileItRan) {
  ScalingInput in = two_cpu_ranks();
  in.placement = {rank(0, "node-0", "cuda:1"), rank(1, "node-1", "cuda:0")};
  in.rows = Json::array({step_row(1, 10, 0.5, 100, 70), step_row(2, 10, 0.5, 100, 60)});
  auto sample = [](int64_t t, int util0, int util1) {
    return Json{{"time_ms", t},
                {"gpus", Json::array({{{"index", 0}, {"util_pct", util0}, {"mem_total_mib", 81920}},
                                      {{"index", 1}, {"util_pct", util1}, {"mem_total_mib", 81920}}})}};
  };
  // node-0's GPU 0 is another job's (idle); the sample at 20000 is after the job ended.
  in.gpu_samples["node-0"] = {sample(2000, 0, 90), sample(3000, 0, 80), sample(20000, 0, 0)};
  in.gpu_samples["node-1"] = {sample(2000, 60, 100), sample(3000, 40, 100)};
  const Json s = scaling_health(in);
  EXPECT_DOUBLE_EQ(s["gpu_util_mean_pct"].get<double>(), (90 + 80 + 60 + 40) / 4.0);
  EXPECT_DOUBLE_EQ(s["gpu_util_min_pct"].get<double>(), 50) << "node-1's GPU 0";
  EXPECT_EQ(check(s, "gpu_util")["status"], "warn") << "one GPU averages 50 %";
  EXPECT_EQ(check(s, "comm_share")["status"], "pass");
  EXPECT_NEAR(s["peak_memory_share"].get<double>(), 70.0 / 80.0, 1e-9) << "the peak over every step";
  EXPECT_EQ(check(s, "reserved_memory")["status"], "pass");
  in.rows[0]["perf/max_memory_reserved_gb"] = 78.0;
  EXPECT_EQ(check(scaling_health(in), "reserved_memory")["status"], "warn") << "78 of 80 GiB is over 95 %";
}

TEST(Scaling, AnOutOfMemoryFailureWarns) {
  ScalingInput in = two_cpu_ranks();
  in.job.failure = {{"reason", "rank 1 exited with code 1"},
                    {"last_lines", {"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"}}};
  EXPECT_EQ(check(scaling_health(in), "oom")["status"], "warn");
}

TEST(Scaling, EfficiencyAgainstTheSameJobOnFewerNodes) {
  ScalingInput in = two_cpu_ranks();
  in.baseline = ScalingBaseline{"job-1", 1, 64};
  Json s = scaling_health(in);
  EXPECT_NEAR(s["efficiency"].get<double>(), 60.0 / 64.0, 1e-12);
  EXPECT_EQ(check(s, "scaling_efficiency")["status"], "pass");
  EXPECT_EQ(s["baseline"]["job"], "job-1");
  in.baseline = ScalingBaseline{"job-1", 1, 80};
  EXPECT_EQ(check(scaling_health(in), "scaling_efficiency")["status"], "warn") << "75 % of linear";
}

TEST(Scaling, TheBaselineIsTheSameShapeOnFewerNodes) {
  JobStore store(":memory:");
  auto add = [&](int nnodes, const std::string& experiment, JobState state, double tps) {
    JobRecord j;
    j.kind = JobKind::kTrain;
    j.nnodes = nnodes;
    j.n_gpus_per_node = 1;
    j.world_size = nnodes;
    j.config = {{"trainer", {{"nnodes", nnodes}, {"experiment_name", experiment}, {"total_epochs", 1}}}};
    j = store.create(j, 0);
    j.state = state;
    store.update(j, 1);
    store.put_metrics(j.id, Json::array({step_row(1, 1, 0, tps), step_row(2, 1, 0, tps)}), 1);
    return j;
  };
  add(1, "one", JobState::kSucceeded, 100);
  add(2, "two-failed", JobState::kFailed, 90);
  const auto two = add(2, "two", JobState::kSucceeded, 95);
  const auto four = add(4, "four", JobState::kRunning, 80);
  auto b = find_scaling_baseline(store, four);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->job, two.name()) << "the most nodes below 4 that succeeded";
  EXPECT_DOUBLE_EQ(b->tokens_per_s_per_rank, 95);
  b = find_scaling_baseline(store, two);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->nnodes, 1);
  EXPECT_FALSE(same_job_shape(Json{{"trainer", {{"total_epochs", 1}}}}, Json{{"trainer", {{"total_epochs", 2}}}}));
}

}  // namespace
}  // namespace verl::launcher

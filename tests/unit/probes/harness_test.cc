// The harness: the judging rule at and around each threshold, measurements becoming rows with
// their unit and threshold, a throwing probe becoming a failed row, the exit code, the report.
#include "probes/harness.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "common/config.h"
#include "common/error.h"

namespace verl::probes {
namespace {

TEST(Judge, AtLeastPassesWarnsWithinTenPercentAndFailsBelow) {
  EXPECT_EQ(judge(20.0, Bound::kAtLeast, 10.0), Status::kPass);
  EXPECT_EQ(judge(11.0, Bound::kAtLeast, 10.0), Status::kPass);  // exactly 10% above
  EXPECT_EQ(judge(10.9, Bound::kAtLeast, 10.0), Status::kWarn);
  EXPECT_EQ(judge(10.0, Bound::kAtLeast, 10.0), Status::kWarn);  // on the threshold still passes, warned
  EXPECT_EQ(judge(9.99, Bound::kAtLeast, 10.0), Status::kFail);
  EXPECT_EQ(judge(0.0, Bound::kAtLeast, 0.0), Status::kPass);    // min 0: anything measured passes
}

TEST(Judge, AtMostJudgesTheMagnitude) {
  EXPECT_EQ(judge(5.0, Bound::kAtMost, 100.0), Status::kPass);
  EXPECT_EQ(judge(-5.0, Bound::kAtMost, 100.0), Status::kPass);
  EXPECT_EQ(judge(95.0, Bound::kAtMost, 100.0), Status::kWarn);
  EXPECT_EQ(judge(-95.0, Bound::kAtMost, 100.0), Status::kWarn);
  EXPECT_EQ(judge(100.0, Bound::kAtMost, 100.0), Status::kWarn);
  EXPECT_EQ(judge(-100.5, Bound::kAtMost, 100.0), Status::kFail);
}

TEST(Judge, NoBoundAlwaysPasses) { EXPECT_EQ(judge(-1e9, Bound::kNone, 5.0), Status::kPass); }

Probe fake(std::vector<Measurement> got) {
  Probe p;
  p.descriptor = {"fake", "a fixed answer",
                  {{"size", "GiB", Bound::kAtLeast, "min_shm_gib"}, {"offset", "ms", Bound::kAtMost, "max_clock_offset_ms"},
                   {"note", "", Bound::kNone, ""}}};
  p.run = [got](const Context&) { return got; };
  return p;
}

Context with_thresholds() {
  Context ctx;
  ctx.node = "n0";
  ctx.spec = {{"probes", {{"min_shm_gib", 10.0}, {"max_clock_offset_ms", 100.0}}}};
  return ctx;
}

TEST(RunProbes, RowsCarryUnitThresholdAndStatus) {
  const auto rows = run_probes({fake({{"size", 10.5, "/dev/shm", {}}, {"offset", 3.0, "head", {}},
                                      {"note", std::nullopt, "text", {}}})},
                               with_thresholds());
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].node, "n0");
  EXPECT_EQ(rows[0].probe, "fake");
  EXPECT_EQ(rows[0].unit, "GiB");
  ASSERT_TRUE(rows[0].threshold);
  EXPECT_EQ(*rows[0].threshold, 10.0);
  EXPECT_EQ(rows[0].status, Status::kWarn);
  EXPECT_EQ(rows[1].status, Status::kPass);
  EXPECT_EQ(rows[2].status, Status::kPass);
  EXPECT_FALSE(rows[2].threshold);
  EXPECT_EQ(exit_code(rows), ExitCode::kOk);
}

TEST(RunProbes, BelowTheThresholdFailsAndTheExitCodeIsCheckFailed) {
  const auto rows = run_probes({fake({{"size", 2.0, "/dev/shm", {}}})}, with_thresholds());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, Status::kFail);
  EXPECT_EQ(exit_code(rows), ExitCode::kCheckFailed);
  EXPECT_EQ(failed_names(rows), "fake.size");
}

TEST(RunProbes, TheProbesVerdictWinsOverTheThreshold) {
  const auto rows = run_probes({fake({{"size", 2.0, "skipped here", Status::kSkipped},
                                      {"offset", 0.0, "refused", Status::kFail}})},
                               with_thresholds());
  EXPECT_EQ(rows[0].status, Status::kSkipped);
  EXPECT_EQ(rows[1].status, Status::kFail);
  EXPECT_EQ(exit_code({rows[0]}), ExitCode::kOk);  // skipped is not a failure
}

TEST(RunProbes, AThrowingProbeIsOneFailedRowAndTheOthersStillRun) {
  Probe bad;
  bad.descriptor = {"bad", "throws", {{"x", "s", Bound::kNone, ""}}};
  bad.run = [](const Context&) -> std::vector<Measurement> { throw std::runtime_error("cannot read /nowhere"); };
  const auto rows = run_probes({bad, fake({{"size", 20.0, "", {}}})}, with_thresholds());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].status, Status::kFail);
  EXPECT_EQ(rows[0].detail, "cannot read /nowhere");
  EXPECT_EQ(rows[1].status, Status::kPass);
}

TEST(RunProbes, AThrownErrorsHintStaysInTheRow) {
  Probe bad;
  bad.descriptor = {"bad", "throws", {{"x", "s", Bound::kNone, ""}}};
  bad.run = [](const Context&) -> std::vector<Measurement> {
    throw Error(ExitCode::kTimedOut, "rank 2 never came", "is port 6379 open?");
  };
  const auto rows = run_probes({bad}, with_thresholds());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].detail, "rank 2 never came (try: is port 6379 open?)");
}

TEST(RunProbes, AnUndeclaredMetricIsAFailedRow) {
  const auto rows = run_probes({fake({{"bogus", 1.0, "", {}}})}, with_thresholds());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, Status::kFail);
  EXPECT_NE(rows[0].detail.find("bogus"), std::string::npos);
}

TEST(Report, TableShowsUnitsWithTheMetricAndTheLimit) {
  const auto rows = run_probes({fake({{"size", 23.5, "/dev/shm", {}}, {"note", std::nullopt, "v1", {}}})},
                               with_thresholds());
  const auto cells = table_cells(rows);
  ASSERT_EQ(cells.size(), 2u);
  ASSERT_EQ(cells[0].size(), table_header().size());
  EXPECT_EQ(cells[0][2], "size [GiB]");
  EXPECT_EQ(cells[0][3], "23.5");
  EXPECT_EQ(cells[0][4], ">= 10");
  EXPECT_EQ(cells[0][5], "pass");
  EXPECT_EQ(cells[1][2], "note");
  EXPECT_EQ(cells[1][3], "-");
}

TEST(Report, JsonHasRowsAndASummary) {
  const auto rows = run_probes({fake({{"size", 2.0, "", {}}, {"offset", 1.0, "", {}}})}, with_thresholds());
  const Json j = to_json(rows);
  ASSERT_EQ(j.at("rows").size(), 2u);
  EXPECT_EQ(j["rows"][0]["status"], "fail");
  EXPECT_EQ(j["rows"][0]["unit"], "GiB");
  EXPECT_EQ(j["rows"][0]["threshold"]["key"], "probes.min_shm_gib");
  EXPECT_EQ(j["rows"][0]["threshold"]["bound"], "at_least");
  EXPECT_EQ(j["summary"]["fail"], 1);
  EXPECT_EQ(j["summary"]["pass"], 1);
}

TEST(Report, FormatValueKeepsThreeSignificantDigitsWithoutExponent) {
  EXPECT_EQ(format_value(23.5), "23.5");
  EXPECT_EQ(format_value(24.0), "24");  // a count of GPUs reads "1", not "1.00"
  EXPECT_EQ(format_value(1234.4), "1234");
  EXPECT_EQ(format_value(0.125), "0.125");
  EXPECT_EQ(format_value(3.14159), "3.14");
  EXPECT_EQ(format_value(0), "0");
}

TEST(Registry, EveryLocalProbeHasADescriptorWhoseThresholdKeysAreInTheSchema) {
  const Json& schema = config::defaults(config::Kind::kCluster);
  for (const auto& p : local_probes()) {
    EXPECT_FALSE(p.descriptor.name.empty());
    EXPECT_FALSE(p.descriptor.measures.empty()) << p.descriptor.name;
    EXPECT_TRUE(p.run) << p.descriptor.name;
    for (const auto& m : p.descriptor.metrics)
      if (!m.threshold_key.empty())
        EXPECT_TRUE(schema["probes"].contains(m.threshold_key)) << p.descriptor.name << "." << m.name;
  }
}

Row skipped_row(const std::string& node, const std::string& probe, const std::string& metric, const std::string& detail) {
  Row r;
  r.node = node;
  r.probe = probe;
  r.metric = metric;
  r.status = Status::kSkipped;
  r.detail = detail;
  return r;
}

// A CPU-only node: 15 "skipped: no CUDA device" rows become one line naming the probes and the
// cause once (what a newcomer saw in up's preflight table, issue 16); nodes alike share it.
TEST(FoldNoDeviceRows, OneLinePerCauseInsteadOfARowPerMetric) {
  const std::string cause = "cudaGetDeviceCount: no CUDA-capable device is detected (error 100)";
  std::vector<Row> rows;
  Row shm;
  shm.node = "node-0";
  shm.probe = "shm";
  shm.metric = "size";
  shm.status = Status::kPass;
  rows.push_back(shm);
  for (const std::string node : {"node-0", "node-1"}) {
    rows.push_back(skipped_row(node, "gpu", "count", "skipped: no CUDA device (" + cause + ")"));
    for (const std::string m : {"bf16", "fp16", "tf32"})
      rows.push_back(skipped_row(node, "matmul", m, "skipped: no CUDA device (" + cause + ")"));
    rows.push_back(skipped_row(node, "nccl_inter", "all_reduce",
                               "skipped: no CUDA device (" + cause + "); rank 0 of 2 met rank 0 at 127.0.0.1:1"));
  }
  rows.push_back(skipped_row("node-1", "disk", "free", "skipped: not asked for"));
  std::vector<std::string> lines;
  const auto kept = fold_no_device_rows(rows, &lines);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].probe, "shm");
  EXPECT_EQ(kept[1].probe, "disk") << "another reason to skip stays a row";
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "node-0, node-1: no CUDA device: gpu, matmul, nccl_inter skipped \u2014 " + cause);

  rows.push_back(skipped_row("node-2", "gpu", "count", "skipped: no CUDA device (libcudart: not loadable)"));
  lines.clear();
  fold_no_device_rows(rows, &lines);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], "node-2: no CUDA device: gpu skipped \u2014 libcudart: not loadable");
}

}  // namespace
}  // namespace verl::probes

#include "trainer/metrics.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "common/error.h"
#include "common/log.h"

namespace verl::trainer {
namespace {
namespace fs = std::filesystem;

fs::path temp_file(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("verl_metrics_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto p = dir / name;
  fs::remove(p);
  return p;
}

std::vector<nlohmann::json> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(Metrics, WritesOneFlushedJsonLinePerStep) {
  const auto path = temp_file("a/b/steps.jsonl");  // parent directories are created
  MetricsOptions o;
  o.jsonl_path = path.string();
  o.console = false;
  MetricsRecorder r(o);
  r.record(1, {{"critic/score/mean", 0.25}, {"actor/pg_loss", -0.5}});
  // Readable while the recorder is still open: flushed per line.
  auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["step"], 1);
  EXPECT_DOUBLE_EQ(lines[0]["critic/score/mean"].get<double>(), 0.25);
  r.record(2, {{"critic/score/mean", std::numeric_limits<double>::quiet_NaN()}});
  lines = read_lines(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["step"], 2);
  EXPECT_TRUE(lines[1]["critic/score/mean"].is_null());
}

TEST(Metrics, ResumeDropsLinesOfStepsToBeRedone) {
  const auto path = temp_file("resume.jsonl");
  {
    MetricsOptions o;
    o.jsonl_path = path.string();
    o.console = false;
    MetricsRecorder r(o);
    for (int s = 1; s <= 5; ++s) r.record(s, {{"x", static_cast<double>(s)}});
  }
  std::ofstream(path, std::ios::app) << "{\"step\": 6, \"x\"";  // torn by a crash
  MetricsOptions o;
  o.jsonl_path = path.string();
  o.console = false;
  o.resume_from_step = 3;
  MetricsRecorder r(o);
  r.record(4, {{"x", 40.0}});
  auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[2]["step"], 3);
  EXPECT_EQ(lines[3]["step"], 4);
  EXPECT_DOUBLE_EQ(lines[3]["x"].get<double>(), 40.0);
}

TEST(Metrics, NewRunTruncatesOldFile) {
  const auto path = temp_file("new.jsonl");
  std::ofstream(path) << "{\"step\": 9}\n";
  MetricsOptions o;
  o.jsonl_path = path.string();
  o.console = false;
  MetricsRecorder r(o);
  r.record(1, {});
  EXPECT_EQ(read_lines(path).size(), 1u);
}

TEST(Metrics, ProgressLineShowsStepPercentKeysRateAndEta) {
  MetricsOptions o;
  o.total_steps = 60;
  o.console_keys = {"critic/score/mean", "actor/pg_loss", "critic/vf_loss"};
  MetricsRecorder r(o);
  const std::string line =
      r.progress_line(12, {{"critic/score/mean", 0.41}, {"actor/pg_loss", -0.02}}, 3.125);
  // 48 steps left * 3.125 s = 150 s
  EXPECT_EQ(line, "step 12/60 [20%] score 0.41 pg_loss -0.02 3.12 s/step ETA 2m30s");
}

TEST(Metrics, FormatDuration) {
  EXPECT_EQ(format_duration(45), "45s");
  EXPECT_EQ(format_duration(150), "2m30s");
  EXPECT_EQ(format_duration(3720), "1h02m");
  EXPECT_EQ(format_duration(3 * 86400 + 4 * 3600 + 59), "3d04h");
  EXPECT_EQ(format_duration(-1), "?");
  EXPECT_EQ(format_duration(std::nan("")), "?");
}

TEST(Metrics, ScopedTimerAccumulatesSeconds) {
  MetricMap m;
  for (int i = 0; i < 2; ++i) {
    ScopedTimer t(m, "gen");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(m.count("timing_s/gen"));
  EXPECT_GE(m["timing_s/gen"], 0.04);
  EXPECT_LT(m["timing_s/gen"], 2.0);
}

TEST(Metrics, UnwritablePathIsAnErrorNamingIt) {
  MetricsOptions o;
  o.jsonl_path = "/proc/verl-no-such-dir/metrics.jsonl";
  try {
    MetricsRecorder r(o);
    FAIL() << "no throw";
  } catch (const verl::Error& e) {
    EXPECT_NE(std::string(e.what()).find(o.jsonl_path), std::string::npos) << e.what();
  }
}

// A step's error names its phase: the innermost timer an exception left; a failure handled
// inside a phase that then ends well names nothing.
TEST(ScopedTimer, AnExceptionNamesTheInnermostPhaseItLeft) {
  MetricMap m;
  try {
    ScopedTimer outer(m, "update_actor");
    ScopedTimer inner(m, "inner");
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(take_failed_phase(), "inner");
  EXPECT_EQ(take_failed_phase(), "");
  EXPECT_EQ(m.count("timing_s/inner"), 1u);  // still timed
  {
    ScopedTimer gen(m, "gen");
    try {
      ScopedTimer reward(m, "reward");
      throw std::runtime_error("handled");
    } catch (const std::runtime_error&) {
    }
  }
  EXPECT_EQ(take_failed_phase(), "");
}

}  // namespace
}  // namespace verl::trainer

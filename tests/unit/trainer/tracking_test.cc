// trainer.logger as verl names it: which files each name writes and where (verl's env variables
// and default paths), verl's file-logger lines, TensorBoard files read back by a protobuf runtime
// that is not ours, and a full disk as an error naming the file.
#include "trainer/tracking.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "common/error.h"

namespace verl::trainer {
namespace {
namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("verl_tracking_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::vector<nlohmann::json> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

// Runs the peer reader on an event file: one JSON object per event.
std::vector<nlohmann::json> read_with_peer(const fs::path& file) {
  const std::string cmd = "/usr/bin/python3 " + std::string(VERL_SOURCE_DIR) + "/tests/peers/read_tfevents.py '" +
                          file.string() + "' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  EXPECT_EQ(status, 0) << "the peer refused the file: " << out;
  std::vector<nlohmann::json> events;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) events.push_back(nlohmann::json::parse(line));
  return events;
}

fs::path only_event_file(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  EXPECT_EQ(files.size(), 1u);
  return files.empty() ? fs::path() : files[0];
}

TEST(Tracking, KnowsVerlsNamesInVerlsOrder) {
  const std::vector<std::string> want = {"wandb", "mlflow", "swanlab", "vemlp_wandb", "tensorboard",
                                         "console", "clearml", "trackio", "file", "tracking"};
  EXPECT_EQ(known_loggers(), want);
}

TEST(Tracking, DefaultPathsAreVerls) {
  const auto plan = plan_tracking({"console", "file", "tensorboard"}, "proj", "exp", env_of({}));
  EXPECT_TRUE(plan.console);
  EXPECT_EQ(plan.verl_file_path, "./proj/exp.jsonl");
  EXPECT_EQ(plan.tensorboard_dir, "tensorboard_log/proj/exp");
  EXPECT_TRUE(plan.skipped.empty());
}

TEST(Tracking, EnvironmentMovesTheFiles) {
  auto plan = plan_tracking({"file", "tensorboard"}, "proj", "exp",
                            env_of({{"VERL_FILE_LOGGER_PATH", "/x/m.jsonl"}, {"TENSORBOARD_DIR", "/tb"}}));
  EXPECT_EQ(plan.verl_file_path, "/x/m.jsonl");
  EXPECT_EQ(plan.tensorboard_dir, "/tb");
  plan = plan_tracking({"file"}, "proj", "exp", env_of({{"VERL_FILE_LOGGER_ROOT", "~/logs"}, {"HOME", "/home/u"}}));
  EXPECT_EQ(plan.verl_file_path, "/home/u/logs/proj/exp.jsonl");
  EXPECT_FALSE(plan.console);
}

TEST(Tracking, ServiceLoggersAreSkippedOnceEach) {
  const auto plan = plan_tracking({"console", "wandb", "mlflow", "wandb", "swanlab"}, "p", "e", env_of({}));
  EXPECT_EQ(plan.skipped, (std::vector<std::string>{"wandb", "mlflow", "swanlab"}));
  EXPECT_TRUE(plan.verl_file_path.empty());
  const std::string w = skipped_logger_warning("wandb", "ck/metrics.jsonl");
  EXPECT_NE(w.find("'wandb'"), std::string::npos) << w;
  EXPECT_NE(w.find("skipped"), std::string::npos) << w;
  EXPECT_NE(w.find("ck/metrics.jsonl"), std::string::npos) << w;
}

TEST(Tracking, UnknownNameIsAConfigErrorListingTheKnownOnes) {
  try {
    plan_tracking({"console", "tensorbord"}, "p", "e", env_of({}));
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    const std::string what = e.what();
    EXPECT_NE(what.find("'tensorbord'"), std::string::npos) << what;
    EXPECT_NE(what.find("tensorboard"), std::string::npos) << what;
    EXPECT_NE(what.find("vemlp_wandb"), std::string::npos) << what;
  }
}

TEST(Tracking, VerlFileLinesNestTheMetricsUnderData) {
  const auto dir = fresh_dir("verl_file");
  const auto path = dir / "p" / "e.jsonl";  // parent directories are created
  {
    JsonLinesLogger log(path.string(), JsonLinesLogger::Format::kVerl, -1, "file logger");
    log.log(1, {{"critic/score/mean", 0.5}, {"actor/pg_loss", std::numeric_limits<double>::quiet_NaN()}});
    // Readable before the logger closes: every line is written through.
    const auto lines = read_lines(path);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0].size(), 2u) << lines[0].dump();
    EXPECT_EQ(lines[0]["step"], 1);
    EXPECT_DOUBLE_EQ(lines[0]["data"]["critic/score/mean"].get<double>(), 0.5);
    EXPECT_TRUE(lines[0]["data"]["actor/pg_loss"].is_null());  // orjson writes NaN as null too
  }
  {
    JsonLinesLogger log(path.string(), JsonLinesLogger::Format::kFlat, -1, "metrics");
    log.log(7, {{"x", 2.0}});
  }
  const auto flat = read_lines(path);
  ASSERT_EQ(flat.size(), 1u) << "a fresh run starts the file afresh";
  EXPECT_EQ(flat[0], nlohmann::json::parse(R"({"step": 7, "x": 2.0})"));
}

TEST(Tracking, ResumedVerlFileKeepsTheStepsThatStand) {
  const auto path = fresh_dir("verl_resume") / "e.jsonl";
  {
    JsonLinesLogger log(path.string(), JsonLinesLogger::Format::kVerl, -1, "file logger");
    for (int s = 1; s <= 4; ++s) log.log(s, {{"x", static_cast<double>(s)}});
  }
  JsonLinesLogger log(path.string(), JsonLinesLogger::Format::kVerl, /*resume_from_step=*/2, "file logger");
  log.log(3, {{"x", 30.0}});
  const auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["step"], 2);
  EXPECT_DOUBLE_EQ(lines[2]["data"]["x"].get<double>(), 30.0);
}

TEST(Tracking, TensorboardFileReadsBackThroughProtobuf) {
  const auto dir = fresh_dir("tb");
  {
    TensorboardLogger tb(dir.string(), -1);
    EXPECT_EQ(fs::path(tb.path()).filename().string().rfind("events.out.tfevents.", 0), 0u) << tb.path();
    tb.log(1, {{"critic/score/mean", 0.25}, {"val-core/openai/gsm8k/reward/mean@1", -3.5}});
    tb.log(300, {{"critic/score/mean", std::numeric_limits<double>::quiet_NaN()}, {"perf/total_num_tokens", 1e6}});
  }
  const auto events = read_with_peer(only_event_file(dir));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["file_version"], "brain.Event:2");
  EXPECT_GT(events[0]["wall_time"].get<double>(), 1.6e9);
  EXPECT_EQ(events[1]["step"], 1);
  EXPECT_DOUBLE_EQ(events[1]["values"]["critic/score/mean"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(events[1]["values"]["val-core/openai/gsm8k/reward/mean@1"].get<double>(), -3.5);
  EXPECT_EQ(events[2]["step"], 300);
  EXPECT_EQ(events[2]["values"]["critic/score/mean"], "nan");
  EXPECT_DOUBLE_EQ(events[2]["values"]["perf/total_num_tokens"].get<double>(), 1e6);
}

TEST(Tracking, ResumedTensorboardRunStartsASessionAfterTheResumedStep) {
  const auto dir = fresh_dir("tb_resume");
  {
    TensorboardLogger tb(dir.string(), /*resume_from_step=*/10);
    tb.log(11, {{"x", 1.0}});
  }
  const auto events = read_with_peer(only_event_file(dir));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1]["session_log"], "START");
  EXPECT_EQ(events[1]["step"], 11);
  EXPECT_EQ(events[2]["step"], 11);
}

TEST(Tracking, RecorderWritesEveryLoggerAndMetricsJsonl) {
  const auto dir = fresh_dir("recorder");
  MetricsOptions o;
  o.console = false;
  o.jsonl_path = (dir / "ck" / "metrics.jsonl").string();
  o.verl_file_path = (dir / "verl" / "e.jsonl").string();
  o.tensorboard_dir = (dir / "tb").string();
  {
    MetricsRecorder r(o);
    r.record(1, {{"critic/score/mean", 0.5}});
    r.record(2, {{"critic/score/mean", 0.75}});
  }
  EXPECT_EQ(read_lines(o.jsonl_path).size(), 2u);
  const auto verl = read_lines(o.verl_file_path);
  ASSERT_EQ(verl.size(), 2u);
  EXPECT_DOUBLE_EQ(verl[1]["data"]["critic/score/mean"].get<double>(), 0.75);
  const auto events = read_with_peer(only_event_file(o.tensorboard_dir));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_DOUBLE_EQ(events[2]["values"]["critic/score/mean"].get<double>(), 0.75);
}

// /dev/full accepts open() and fails every write with ENOSPC, as a full disk does.
TEST(Tracking, FullDiskIsAnErrorNamingTheFile) {
  ASSERT_TRUE(fs::exists("/dev/full"));
  for (const auto& [path_field, label] : {std::pair<int, std::string>{0, "metrics"}, {1, "file logger"}}) {
    MetricsOptions o;
    o.console = false;
    (path_field == 0 ? o.jsonl_path : o.verl_file_path) = "/dev/full";
    MetricsRecorder r(o);
    try {
      r.record(1, {{"x", 1.0}});
      FAIL() << "no throw for " << label;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.code(), ExitCode::kFailure);
      EXPECT_NE(what.find(label + ": cannot write /dev/full"), std::string::npos) << what;
      EXPECT_NE(what.find("No space left on device"), std::string::npos) << what;
      EXPECT_FALSE(e.hint().empty());
    }
  }
}

TEST(Tracking, UnopenableDirectoryIsAnErrorNamingIt) {
  try {
    TensorboardLogger tb("/proc/verl-no-such-dir/tb", -1);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensorboard: cannot"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("/proc/verl-no-such-dir/tb"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace verl::trainer

// submit's closing summary and its status line while it follows a job (issue 16's newcomer items).
#include "cli/job_view.h"

#include <gtest/gtest.h>

#include <sstream>

#include "cli/status_line.h"

namespace verl::cli {
namespace {

using Json = nlohmann::ordered_json;
using namespace std::chrono_literals;

Json train_job(int64_t save_freq) {
  return Json{{"id", "job-2"},
              {"kind", "train"},
              {"state", "SUCCEEDED"},
              {"config", {{"trainer", {{"default_local_dir", "checkpoints/verlctl/default"}, {"save_freq", save_freq}}}}},
              {"placement", Json::array({{{"rank", 0}, {"host", "h0"}, {"dir", "/w/jobs/job-2"}}})}};
}

Json rows() {
  return Json::array({{{"step", 0}, {"val/score/mean", 0.285}},
                      {{"step", 1}, {"critic/score/mean", 0.5}},
                      {{"step", 300}, {"critic/score/mean", 0.7344}, {"val/score/mean", 0.789}}});
}

TEST(ClosingSummary, NamesValScoreFirstToLastAndTheLastBatchScore) {
  const std::string s = closing_summary(train_job(50), rows());
  EXPECT_NE(s.find("  val/score:     0.285 (step 0) -> 0.789 (step 300)\n"), std::string::npos) << s;
  EXPECT_NE(s.find("  last batch:    critic/score/mean 0.7344 (step 300) (training rollouts)\n"), std::string::npos) << s;
  EXPECT_NE(s.find("  checkpoints:   /w/jobs/job-2/checkpoints/verlctl/default\n"), std::string::npos) << s;
}

// The rank log says "checkpoints: none saved (trainer.save_freq=-1)": so does the summary,
// instead of a directory with nothing in it.
TEST(ClosingSummary, NoCheckpointDirectoryWhenNoneWasSaved) {
  const std::string s = closing_summary(train_job(-1), rows());
  EXPECT_EQ(s.find("/w/jobs/job-2/checkpoints"), std::string::npos) << s;
  EXPECT_NE(s.find("  checkpoints:   none saved (trainer.save_freq=-1)\n"), std::string::npos) << s;
  EXPECT_NE(s.find("  job directory: /w/jobs/job-2 (on h0)\n"), std::string::npos) << s;
}

TEST(ClosingSummary, NoScoreLinesWithoutTheMetrics) {
  const std::string s = closing_summary(train_job(-1), Json::array());
  EXPECT_EQ(s.find("score"), std::string::npos) << s;
}

// On a terminal: one line, redrawn in place; log lines go above it.
TEST(StatusLine, LiveIsOneLineRedrawnBelowTheLogLines) {
  std::ostringstream err;
  StatusLine s(err, /*live=*/true, 10s);
  const auto t = StatusLine::Clock::now();
  s.update("job-2 RUNNING step 1/300", t);
  s.update("job-2 RUNNING step 2/300", t);
  EXPECT_EQ(err.str(), "\r\033[Kjob-2 RUNNING step 1/300\r\033[Kjob-2 RUNNING step 2/300");
  err.str("");
  s.clear();
  err << "[rank 0] a log line\n";
  s.draw();
  EXPECT_EQ(err.str(), "\r\033[K[rank 0] a log line\n\r\033[Kjob-2 RUNNING step 2/300");
  err.str("");
  s.finish();
  EXPECT_EQ(err.str(), "\r\033[K");
}

// In a pipe: whole lines, a changed status at most once every interval, no control characters.
TEST(StatusLine, PipedIsALineEveryIntervalWhenItChanged) {
  std::ostringstream err;
  StatusLine s(err, /*live=*/false, 10s);
  const auto t = StatusLine::Clock::now();
  s.update("job-2 RUNNING step 1/300", t);
  s.update("job-2 RUNNING step 2/300", t + 2s);   // too soon
  s.clear();
  s.draw();
  s.update("job-2 RUNNING step 3/300", t + 11s);  // printed
  s.update("job-2 RUNNING step 3/300", t + 30s);  // unchanged
  s.finish();
  EXPECT_EQ(err.str(), "job-2 RUNNING step 1/300\njob-2 RUNNING step 3/300\n");
}

}  // namespace
}  // namespace verl::cli

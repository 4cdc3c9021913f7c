// submit's closing summary and its status line while it follows a job (issue 16's newcomer items).
#include "cli/job_view.h"

#include <gtest/gtest.h>

#include <sstream>

#include "cli/status_line.h"
#include "common/config.h"

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
// status JOB under role placement: the roles line, and each rank's GPUs.
TEST(PrintJob, ShowsTheRolesGpusAndEachRanksDevices) {
  Json job{{"id", "job-3"}, {"kind", "train"}, {"state", "RUNNING"}};
  job["config"] = config::load_job("", {"trainer.n_gpus_per_node=2", "actor_rollout_ref.actor.device=cuda:0,1",
                                        "actor_rollout_ref.ref.device=cuda:0,1", "actor_rollout_ref.rollout.device=cuda:2,3",
                                        "critic.device=cuda:2,3", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
                                        "critic.ppo_micro_batch_size_per_gpu=8"});
  job["placement"] = Json::array({{{"rank", 1}, {"node", "node-0"}, {"host", "h0"}, {"device", "cuda:1,3"}, {"state", "running"}}});
  std::ostringstream out;
  print_job(out, job);
  EXPECT_NE(out.str().find("  roles:    actor, ref: cuda:0,1; rollout, critic: cuda:2,3 (the job's GPUs on each node)\n"),
            std::string::npos) << out.str();
  EXPECT_NE(out.str().find("  rank 1:   node-0 (h0, cuda:1,3) running"), std::string::npos) << out.str();
  // The hybrid default: no roles line.
  job["config"] = config::load_job("", {});
  std::ostringstream plain;
  print_job(plain, job);
  EXPECT_EQ(plain.str().find("roles:"), std::string::npos) << plain.str();
}

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

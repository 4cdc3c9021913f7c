// submit's closing summary and its status line while it follows a job (issue 16's newcomer items).
#include "cli/job_view.h"

#include <gtest/gtest.h>

#include <sstream>

#include "cli/output.h"
#include "cli/status_line.h"
#include "common/config.h"
#include "common/strings.h"

namespace verl::cli {
namespace {

using Json = nlohmann::ordered_json;
using namespace std::chrono_literals;

// A job as GET /api/jobs/<id> reads it: the body through its message (wire::Job).
launcher::wire::Job job_of(const Json& body) { return launcher::wire::parse<launcher::wire::Job>(body); }

launcher::wire::Job train_job(int64_t save_freq) {
  return job_of(Json{{"id", "job-2"},
              {"kind", "train"},
              {"state", "SUCCEEDED"},
              {"config", {{"trainer", {{"default_local_dir", "checkpoints/verlctl/default"}, {"save_freq", save_freq}}}}},
              {"placement", Json::array({{{"rank", 0}, {"host", "h0"}, {"dir", "/w/jobs/job-2"}}})}});
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
  print_job(out, job_of(job));
  EXPECT_NE(out.str().find("  roles:    actor, ref: cuda:0,1; rollout, critic: cuda:2,3 (the job's GPUs on each node)\n"),
            std::string::npos) << out.str();
  EXPECT_NE(out.str().find("  rank 1:   node-0 (h0, cuda:1,3) running"), std::string::npos) << out.str();
  // The hybrid default: no roles line.
  job["config"] = config::load_job("", {});
  std::ostringstream plain;
  print_job(plain, job_of(job));
  EXPECT_EQ(plain.str().find("roles:"), std::string::npos) << plain.str();
}

// status JOB: every part of the body, in its place and form.
TEST(PrintJob, PrintsEveryPartOfTheJob) {
  const Json body = {
      {"id", "job-4"}, {"kind", "train"}, {"state", "RUNNING"}, {"submitted_ms", 1000}, {"started_ms", 2000},
      {"step", 5}, {"total_steps", 20}, {"restarts", 2}, {"pending_reason", "waiting"},
      {"placement", Json::array({{{"rank", 0}, {"node", "node-0"}, {"host", "h0"}, {"device", "cuda:0"}, {"state", "running"},
                                  {"dir", "/w/jobs/job-4"}},
                                 {{"rank", 1}, {"node", "node-1"}, {"host", "h1"}, {"device", "cpu"}, {"state", "assigned"}}})},
      {"events", Json::array({{{"state", "RESTARTING"}, {"time_ms", 3000}, {"detail", "rank 1 exited 1"}}})},
      {"failure", {{"reason", "rank 1 on h1 exited 1"}, {"rank", 1}, {"host", "h1"}, {"last_lines", {"boom"}}}},
      {"latest_metrics", {{"step", 5}, {"critic/score/mean", 0.5}}},
      {"score_trend", {0.25, 0.5}},
      {"eta_s", 30},
      {"scaling", {{"checks", Json::array({{{"status", "warn"}, {"name", "mfu"}, {"threshold", ">= 0.3"}, {"reason", "low"},
                                            {"try", "more"}}})}}},
      {"nccl", Json::array({{{"node", "node-0"}, {"status", "pass"}, {"reason", "ok"}, {"coll_channels", 4},
                             {"algorithms", {"Ring", "Tree"}}}})}};
  std::ostringstream out;
  print_job(out, job_of(body));
  EXPECT_EQ(out.str(), "job-4 (train): RUNNING, restarted 2x (waiting)\n"
                       "  step:     5/20 (25%), ETA " + format_duration(30) + "\n"
                       "  started:  " + clock_time(2000) + "\n"
                       "  rank 0:   node-0 (h0, cuda:0) running, /w/jobs/job-4\n"
                       "  rank 1:   node-1 (h1, cpu) assigned\n"
                       "  score:    " + sparkline(Json{0.25, 0.5}) + " 0.25 -> 0.5\n"
                       "  metrics (step 5):\n"
                       "    critic/score/mean = 0.5\n"
                       "  scaling:\n"
                       "    warn  mfu (>= 0.3): low\n"
                       "          try: more\n"
                       "  nccl node-0: pass  ok; 4 coll channels, Ring/Tree\n"
                       "  " + clock_time(3000) + " RESTARTING rank 1 exited 1\n"
                       "failure: rank 1 on h1 exited 1\n"
                       "last lines of rank 1 (h1):\n"
                       "  boom\n");
  EXPECT_EQ(progress_line(job_of(body)), "job-4 RUNNING step 5/20 score 0.5 ETA " + format_duration(30) + " (waiting)");
}

// A command job: what its ranks run instead of steps; an ended one its run time.
TEST(PrintJob, ACommandJobShowsItsCommandAndRunTime) {
  const Json body = {{"id", "job-5"},          {"kind", "command"},  {"state", "SUCCEEDED"}, {"started_ms", 2000},
                     {"ended_ms", 62000},      {"command", "python3 t.py"}};
  std::ostringstream out;
  print_job(out, job_of(body));
  EXPECT_EQ(out.str(), "job-5 (command): SUCCEEDED\n"
                       "  command:  python3 t.py\n"
                       "  started:  " + clock_time(2000) + ", ended " + clock_time(62000) + " (" + format_duration(60) + ")\n");
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

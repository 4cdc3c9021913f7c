// What the job commands share: how a job, its failure and its log lines look in text, and the
// loop that follows a job's merged logs until it ends (submit without --no-wait, logs -f). A job
// is GET /api/jobs/<id>'s body read once into its typed message (wire::Job, get_job()); what
// only the head computes or the job defines (failure, scaling, nccl, metrics, config) is the
// JSON the message keeps of it.
#pragma once

#include <atomic>
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "launcher/head_client.h"
#include "launcher/wire.h"

namespace verl::cli {

// "[rank 1 host] text"
std::string log_prefix(const launcher::wire::LogLineView& line);
// ▁▂▃▅▇ over the values (empty for none).
std::string sparkline(const nlohmann::ordered_json& values);
// GET /api/jobs/<id>, read into its message. Throws verl::Error naming the head and the job when
// the body is not a Job this verlctl can read (a head of another version).
launcher::wire::Job get_job(launcher::HeadClient& client, const std::string& id);
// GET /api/jobs: every job's summary, newest first (errors as get_job's).
std::vector<launcher::wire::JobSummary> list_jobs(launcher::HeadClient& client);
// GET /api/jobs/<id>/metrics: the job's metric rows (rank 0's), each an object (errors as get_job's).
nlohmann::ordered_json get_metric_rows(launcher::HeadClient& client, const std::string& id);
// The failure of a job as lines: reason, then its last log lines indented.
std::string format_failure(const launcher::wire::Job& job);
// The job in a few lines (status JOB).
void print_job(std::ostream& out, const launcher::wire::Job& job);
// One line of progress: "job-1 RUNNING step 5/20 score 0.41 ETA 30 s".
std::string progress_line(const launcher::wire::Job& job);
// submit's closing lines after the state: the scores, named (the validation score users track,
// first -> last, and the last training batch's), from the job's metric rows
// (GET /api/jobs/<id>/metrics), then where the job's files are: its directory, its logs, and its
// checkpoints only when trainer.save_freq saved some.
std::string closing_summary(const launcher::wire::Job& job, const nlohmann::ordered_json& metric_rows);

struct FollowOptions {
  int rank = -1;            // -1: all ranks
  int tail = -1;            // >= 0: start with the last tail lines
  bool follow = true;       // false: print what is there and return
  bool json_lines = false;  // each line as one JSON object {seq, rank, host, stream, text}
  const std::atomic<bool>* interrupted = nullptr;
  // Called about every 2 s with the job (for progress lines); may be empty.
  std::function<void(const launcher::wire::Job&)> on_job;
  // Called before and after each batch of log lines is written (a live status line steps aside).
  std::function<void()> before_lines, after_lines;
};
// Prints the job's lines (prefixed) to out until the head says done (follow) or once; returns
// the job as last seen. Throws verl::Error(interrupted) when *interrupted becomes true.
launcher::wire::Job follow_logs(launcher::HeadClient& client, const std::string& job, std::ostream& out,
                                const FollowOptions& options);

}  // namespace verl::cli

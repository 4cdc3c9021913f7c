// trainer.logger: verl's tracking backends (verl/utils/tracking.py, Tracking.supported_backend)
// and what each one does here. Paths are verl's, relative to the trainer's working directory.
//   console      the progress line on stderr (MetricsRecorder)
//   file         verl's FileLogger: one line {"step": N, "data": {<metric>: value, ...}} per
//                record, at $VERL_FILE_LOGGER_PATH, else
//                ${VERL_FILE_LOGGER_ROOT:-.}/<project_name>/<experiment_name>.jsonl
//   tensorboard  TensorBoard event files (tfevents.h) in $TENSORBOARD_DIR, else
//                tensorboard_log/<project_name>/<experiment_name>
//   wandb, mlflow, swanlab, vemlp_wandb, clearml, trackio, and verl's old alias tracking (wandb):
//                a service or its Python client that this trainer has no way to reach: accepted,
//                one warning each (the trainer logs it), skipped.
// Whatever the list says, rank 0 also writes our own metrics file (trainer.metrics_file, else
// <default_local_dir>/metrics.jsonl, {"step": N, <metric>: value, ...}): `verlctl logs`, the
// head and the dashboard read it, so no choice of loggers can make it disappear.
//
// Every write goes through OutputFile: a failed write (a full disk, a lost mount) is a
// verl::Error naming the file and the system's reason, never an abort and never a silent gap.
// The sinks are not thread-safe: one thread (rank 0's loop) writes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainer/metrics.h"

namespace verl::trainer {

enum class LoggerKind { kConsole, kFile, kTensorboard, kService };

// verl's names, in verl's order, plus "tracking".
const std::vector<std::string>& known_loggers();
// nullopt for a name verl does not know.
std::optional<LoggerKind> logger_kind(const std::string& name);

// getenv, as a seam for tests: nullopt when the variable is unset.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
EnvLookup process_env();

struct TrackingPlan {
  bool console = false;
  std::string verl_file_path;        // empty: no verl file logger
  std::string tensorboard_dir;       // empty: no TensorBoard files
  std::vector<std::string> skipped;  // the service loggers named, in the order given
};
// Throws verl::Error (kInvalidConfig) for a name that is not in known_loggers(), listing them.
TrackingPlan plan_tracking(const std::vector<std::string>& loggers, const std::string& project_name,
                           const std::string& experiment_name, const EnvLookup& env);
// The one warning for a skipped service logger.
std::string skipped_logger_warning(const std::string& name, const std::string& metrics_path);

// A file written with write(2): each write() lands whole or throws verl::Error
// "<what>: cannot write <path>: <strerror>" (ENOSPC reads "No space left on device").
class OutputFile {
 public:
  enum class Mode { kTruncate, kAppend };
  // Creates the parent directories. Throws verl::Error naming the path when it cannot open.
  OutputFile(std::string path, Mode mode, std::string what);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  void write(const std::string& bytes);
  const std::string& path() const { return path_; }

 private:
  std::string path_, what_;
  int fd_ = -1;
};

// One destination of a step's metrics.
class MetricSink {
 public:
  virtual ~MetricSink() = default;
  virtual void log(int64_t step, const MetricMap& metrics) = 0;
};

// JSON lines, flushed per record (the head tails our file while the run goes on). Non-finite
// values are written as null (orjson does the same for verl's file). Resuming from step N
// (resume_from_step >= 0) keeps the lines with step <= N, rewritten through a temp file + rename,
// and appends; -1 starts the file afresh. verl's FileLogger truncates on every start; keeping
// the steps that stand is what a resumed run's curve needs.
class JsonLinesLogger : public MetricSink {
 public:
  enum class Format {
    kFlat,  // ours: {"step": N, "<metric>": value, ...}
    kVerl,  // verl's FileLogger: {"step": N, "data": {"<metric>": value, ...}}
  };
  JsonLinesLogger(const std::string& path, Format format, int64_t resume_from_step, std::string what);
  void log(int64_t step, const MetricMap& metrics) override;

 private:
  Format format_;
  std::unique_ptr<OutputFile> file_;
};

// A new event file in dir per run (as SummaryWriter). A resumed run first writes a SessionLog
// START at resume_from_step + 1, which tells TensorBoard to drop the earlier files' points from
// that step on (SummaryWriter's purge_step), so redone steps are not drawn twice.
class TensorboardLogger : public MetricSink {
 public:
  TensorboardLogger(const std::string& dir, int64_t resume_from_step);
  void log(int64_t step, const MetricMap& metrics) override;
  const std::string& path() const { return file_->path(); }

 private:
  std::unique_ptr<OutputFile> file_;
};

}  // namespace verl::trainer

// Per-step metrics: the loop fills a MetricMap (verl's key names: critic/score/mean,
// actor/pg_loss, timing_s/gen, ...), then MetricsRecorder::record() writes it
//   - as one JSON line {"step": N, "<key>": value, ...} to the JSONL file (flushed per line,
//     so `verlctl logs` and the head can tail it while the run goes on),
//   - to the loggers of trainer.logger that write files (tracking.h: verl's file logger,
//     TensorBoard), and
//   - as one console progress line on stderr through common/log.h:
//       step 12/60 [20%] score 0.41 pg_loss -0.02 vf_loss 0.13 ... 3.1 s/step ETA 2m30s
// A write that fails (a full disk) throws verl::Error naming the file (tracking.h OutputFile).
// Only rank 0 should own a recorder (the loop averages metrics across ranks first).
// Not thread-safe: one thread records.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace verl::trainer {

using MetricMap = std::map<std::string, double>;

class MetricSink;  // tracking.h

struct MetricsOptions {
  std::string jsonl_path;   // empty: no file
  std::string verl_file_path;   // verl's FileLogger format; empty: none
  std::string tensorboard_dir;  // a new event file there; empty: none
  bool console = true;      // progress line on stderr (log level info)
  int64_t total_steps = 0;  // for [pct] and ETA; 0: unknown
  // Keys shown on the console line, in this order, with the label after the last '/'
  // (critic/score/mean -> "score"). Keys absent from a step are skipped.
  std::vector<std::string> console_keys = {
      "critic/score/mean", "actor/pg_loss", "critic/vf_loss", "actor/entropy",
      "actor/ppo_kl",      "val/score/mean"};
  // Resuming from step N: lines with step > N in an existing file are dropped first (they
  // belong to steps that will be redone), the rest kept; the file is then appended to (both
  // JSONL files; TensorBoard is told to drop its points from step N+1 on). -1: start afresh.
  int64_t resume_from_step = -1;
};

class MetricsRecorder {
 public:
  // Opens (creates parent directories of) the files. Throws verl::Error (kFailure) naming the
  // path when one cannot be written.
  explicit MetricsRecorder(MetricsOptions options);
  ~MetricsRecorder();

  // Writes the step's line and the console line. Non-finite values are written as null.
  void record(int64_t step, const MetricMap& metrics);

  // The console line for a step, without writing it (what record() logs).
  std::string progress_line(int64_t step, const MetricMap& metrics, double seconds_per_step) const;

 private:
  MetricsOptions options_;
  std::vector<std::unique_ptr<MetricSink>> sinks_;
  std::chrono::steady_clock::time_point last_record_;
  int64_t first_step_ = -1;
  int64_t steps_recorded_ = 0;
  double seconds_total_ = 0;
};

// "2m30s", "45s", "1h02m", "3d04h" (ETA style; negative or non-finite -> "?").
std::string format_duration(double seconds);
// A short number for the console: 4 significant digits, no trailing noise.
std::string format_metric_value(double value);

// Adds the seconds between construction and destruction to metrics["timing_s/" + name]
// (summed, so a phase timed in several pieces accumulates).
// Also says which phase failed: an exception that leaves a timer marks it (the innermost one)
// as this thread's failed phase, which take_failed_phase() reads, so that a step's error can
// name the phase it happened in (out of memory in update_actor, not just "out of memory").
class ScopedTimer {
 public:
  ScopedTimer(MetricMap& metrics, std::string name);
  ~ScopedTimer();
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;
  // Seconds so far.
  double elapsed() const;

 private:
  MetricMap& metrics_;
  std::string key_;
  std::chrono::steady_clock::time_point start_;
  int exceptions_ = 0;  // std::uncaught_exceptions() when it started
};

// The phase (a ScopedTimer's name: "gen", "update_actor") that the exception now propagating on
// this thread left first; empty when none did. Reading it clears it.
std::string take_failed_phase();

}  // namespace verl::trainer

#include "trainer/metrics.h"

#include <exception>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "common/log.h"
#include "trainer/tracking.h"

namespace verl::trainer {
namespace {

std::string label_of(const std::string& key) {
  // critic/score/mean -> score; actor/pg_loss -> pg_loss; val/score/mean -> val_score
  std::string k = key;
  const bool val = k.rfind("val/", 0) == 0 || k.rfind("val-core/", 0) == 0;
  if (k.size() > 5 && k.compare(k.size() - 5, 5, "/mean") == 0) k = k.substr(0, k.size() - 5);
  const auto slash = k.rfind('/');
  std::string label = slash == std::string::npos ? k : k.substr(slash + 1);
  return val ? "val_" + label : label;
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>((s % 3600) / 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>((s % 86400) / 3600));
  }
  return buf;
}

std::string format_metric_value(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", value);
  return buf;
}

MetricsRecorder::MetricsRecorder(MetricsOptions options) : options_(std::move(options)) {
  last_record_ = std::chrono::steady_clock::now();
  const int64_t resume = options_.resume_from_step;
  if (!options_.jsonl_path.empty())
    sinks_.push_back(std::make_unique<JsonLinesLogger>(options_.jsonl_path, JsonLinesLogger::Format::kFlat,
                                                       resume, "metrics"));
  if (!options_.verl_file_path.empty())
    sinks_.push_back(std::make_unique<JsonLinesLogger>(options_.verl_file_path, JsonLinesLogger::Format::kVerl,
                                                       resume, "file logger"));
  if (!options_.tensorboard_dir.empty())
    sinks_.push_back(std::make_unique<TensorboardLogger>(options_.tensorboard_dir, resume));
}

MetricsRecorder::~MetricsRecorder() = default;

std::string MetricsRecorder::progress_line(int64_t step, const MetricMap& metrics,
                                           double seconds_per_step) const {
  std::ostringstream out;
  out << "step " << step;
  if (options_.total_steps > 0) {
    const double pct = 100.0 * static_cast<double>(step) / static_cast<double>(options_.total_steps);
    out << "/" << options_.total_steps << " [" << static_cast<int>(std::floor(pct)) << "%]";
  }
  for (const auto& key : options_.console_keys) {
    auto it = metrics.find(key);
    if (it == metrics.end()) continue;
    out << " " << label_of(key) << " " << format_metric_value(it->second);
  }
  if (seconds_per_step > 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", seconds_per_step);
    out << " " << buf << " s/step";
    if (options_.total_steps > 0) {
      const double left = static_cast<double>(options_.total_steps - step) * seconds_per_step;
      out << " ETA " << format_duration(std::max(0.0, left));
    }
  }
  return out.str();
}

void MetricsRecorder::record(int64_t step, const MetricMap& metrics) {
  const auto now = std::chrono::steady_clock::now();
  const double dt = std::chrono::duration<double>(now - last_record_).count();
  last_record_ = now;
  // The first interval includes setup (model build, validation): leave it out of the average.
  if (first_step_ < 0) {
    first_step_ = step;
  } else {
    seconds_total_ += dt;
    ++steps_recorded_;
  }
  double per_step = steps_recorded_ > 0 ? seconds_total_ / static_cast<double>(steps_recorded_)
                                        : 0.0;
  if (per_step == 0) {
    auto it = metrics.find("timing_s/step");
    if (it != metrics.end()) per_step = it->second;
  }

  for (auto& sink : sinks_) sink->log(step, metrics);
  if (options_.console) log::Info() << progress_line(step, metrics, per_step);
}

namespace {
thread_local std::string failed_phase;
constexpr size_t kTimingPrefix = sizeof("timing_s/") - 1;
}  // namespace

ScopedTimer::ScopedTimer(MetricMap& metrics, std::string name)
    : metrics_(metrics), key_("timing_s/" + std::move(name)),
      start_(std::chrono::steady_clock::now()), exceptions_(std::uncaught_exceptions()) {
  failed_phase.clear();  // an earlier exception that was handled does not name this one
}

ScopedTimer::~ScopedTimer() {
  metrics_[key_] += elapsed();
  if (std::uncaught_exceptions() <= exceptions_) failed_phase.clear();  // ended well: nothing failed in it
  else if (failed_phase.empty()) failed_phase = key_.substr(kTimingPrefix);
}

std::string take_failed_phase() {
  std::string p;
  p.swap(failed_phase);
  return p;
}

double ScopedTimer::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace verl::trainer

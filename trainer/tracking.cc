#include "trainer/tracking.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "common/error.h"
#include "trainer/tfevents.h"

namespace verl::trainer {
namespace fs = std::filesystem;
namespace {

struct Known {
  const char* name;
  LoggerKind kind;
};
// verl's Tracking.supported_backend order, then its deprecated alias.
constexpr Known kKnown[] = {
    {"wandb", LoggerKind::kService},   {"mlflow", LoggerKind::kService},
    {"swanlab", LoggerKind::kService}, {"vemlp_wandb", LoggerKind::kService},
    {"tensorboard", LoggerKind::kTensorboard}, {"console", LoggerKind::kConsole},
    {"clearml", LoggerKind::kService}, {"trackio", LoggerKind::kService},
    {"file", LoggerKind::kFile},       {"tracking", LoggerKind::kService},
};

std::string hint_for(const std::string& what) {
  if (what == "metrics") return "check trainer.metrics_file / trainer.default_local_dir and the free space there";
  if (what == "file logger") return "check VERL_FILE_LOGGER_PATH / VERL_FILE_LOGGER_ROOT and the free space there";
  if (what == "tensorboard") return "check TENSORBOARD_DIR and the free space there";
  return "check the path and the free space there";
}

Error cannot(const std::string& what, const std::string& verb, const std::string& path, const std::string& why) {
  return Error{ExitCode::kFailure, what + ": cannot " + verb + " " + path + ": " + why, hint_for(what)};
}

// Keeps the lines of an existing JSONL whose step is <= last_step; rewrites the file through a
// temp file + rename so a crash cannot lose the kept part.
void truncate_after(const std::string& path, int64_t last_step, const std::string& what) {
  std::ifstream in(path);
  if (!in) return;
  std::ostringstream kept;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      auto js = nlohmann::json::parse(line);
      if (js.value("step", int64_t{-1}) <= last_step) kept << line << '\n';
    } catch (const std::exception&) {
      // A torn last line from a crash: drop it.
    }
  }
  in.close();
  const std::string tmp = path + ".tmp";
  {
    OutputFile out(tmp, OutputFile::Mode::kTruncate, what);
    out.write(kept.str());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw cannot(what, "write", path, ec.message());
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace

const std::vector<std::string>& known_loggers() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& k : kKnown) v.emplace_back(k.name);
    return v;
  }();
  return names;
}

std::optional<LoggerKind> logger_kind(const std::string& name) {
  for (const auto& k : kKnown)
    if (name == k.name) return k.kind;
  return std::nullopt;
}

EnvLookup process_env() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

TrackingPlan plan_tracking(const std::vector<std::string>& loggers, const std::string& project_name,
                           const std::string& experiment_name, const EnvLookup& env) {
  TrackingPlan plan;
  for (const auto& name : loggers) {
    const auto kind = logger_kind(name);
    if (!kind) {
      std::string list;
      for (const auto& k : known_loggers()) list += (list.empty() ? "" : ", ") + k;
      throw Error{ExitCode::kInvalidConfig, "trainer.logger: '" + name + "' is not one of: " + list,
                  "console and file are the usual pair; tensorboard writes event files"};
    }
    switch (*kind) {
      case LoggerKind::kConsole:
        plan.console = true;
        break;
      case LoggerKind::kFile:
        if (auto p = env("VERL_FILE_LOGGER_PATH"); p && !p->empty()) {
          plan.verl_file_path = *p;
        } else {
          std::string root = env("VERL_FILE_LOGGER_ROOT").value_or(".");
          if (root.empty()) root = ".";
          if (root[0] == '~') root = env("HOME").value_or("") + root.substr(1);  // os.path.expanduser
          plan.verl_file_path = (fs::path(root) / project_name / (experiment_name + ".jsonl")).string();
        }
        break;
      case LoggerKind::kTensorboard:
        if (auto d = env("TENSORBOARD_DIR"); d && !d->empty())
          plan.tensorboard_dir = *d;
        else
          plan.tensorboard_dir = "tensorboard_log/" + project_name + "/" + experiment_name;
        break;
      case LoggerKind::kService:
        if (std::find(plan.skipped.begin(), plan.skipped.end(), name) == plan.skipped.end())
          plan.skipped.push_back(name);
        break;
    }
  }
  return plan;
}

std::string skipped_logger_warning(const std::string& name, const std::string& metrics_path) {
  return "trainer.logger: '" + name + "' needs " +
         (name == "trackio" ? "the trackio Python package" : "a network service and its Python client") +
         ", which this trainer does not have: skipped; every metric still goes to " + metrics_path;
}

// ---------------------------------------------------------------- OutputFile

OutputFile::OutputFile(std::string path, Mode mode, std::string what)
    : path_(std::move(path)), what_(std::move(what)) {
  std::error_code ec;
  const fs::path parent = fs::path(path_).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) throw cannot(what_, "write", path_, ec.message());
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (mode == Mode::kTruncate ? O_TRUNC : O_APPEND);
  fd_ = ::open(path_.c_str(), flags, 0644);
  if (fd_ < 0) throw cannot(what_, "open", path_, std::strerror(errno));
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutputFile::write(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw cannot(what_, "write", path_, std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
}

// ---------------------------------------------------------------- sinks

JsonLinesLogger::JsonLinesLogger(const std::string& path, Format format, int64_t resume_from_step,
                                 std::string what)
    : format_(format) {
  if (resume_from_step >= 0) {
    // Parent directories first: truncate_after's temp file lives beside the file.
    std::error_code ec;
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty()) fs::create_directories(parent, ec);
    if (ec) throw cannot(what, "write", path, ec.message());
    truncate_after(path, resume_from_step, what);
  }
  file_ = std::make_unique<OutputFile>(
      path, resume_from_step >= 0 ? OutputFile::Mode::kAppend : OutputFile::Mode::kTruncate, std::move(what));
}

void JsonLinesLogger::log(int64_t step, const MetricMap& metrics) {
  // "step" first, then the metrics in key order: as verl builds its dict, and easy to read.
  nlohmann::ordered_json values = nlohmann::ordered_json::object();
  for (const auto& [k, v] : metrics)
    values[k] = std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
  nlohmann::ordered_json line = nlohmann::ordered_json::object();
  line["step"] = step;
  if (format_ == Format::kVerl) {
    line["data"] = std::move(values);
  } else {
    for (auto& [k, v] : values.items()) line[k] = std::move(v);
  }
  file_->write(line.dump() + "\n");
}

TensorboardLogger::TensorboardLogger(const std::string& dir, int64_t resume_from_step) {
  const double now = unix_seconds();
  const std::string name =
      tfevents::event_file_name(static_cast<int64_t>(now), host_name(), static_cast<int64_t>(::getpid()));
  file_ = std::make_unique<OutputFile>((fs::path(dir) / name).string(), OutputFile::Mode::kTruncate, "tensorboard");
  std::string head = tfevents::frame_record(tfevents::file_version_event(now));
  if (resume_from_step >= 0) head += tfevents::frame_record(tfevents::session_start_event(now, resume_from_step + 1));
  file_->write(head);
}

void TensorboardLogger::log(int64_t step, const MetricMap& metrics) {
  file_->write(tfevents::frame_record(tfevents::scalars_event(unix_seconds(), step, metrics)));
}

}  // namespace verl::trainer

#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>

#include "common/error.h"

namespace verl::log {
namespace {

std::atomic<Level> g_level{Level::kInfo};

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> l = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto lg = std::make_shared<spdlog::logger>("verlctl", sink);
    lg->set_pattern("%^%L%$ %H:%M:%S.%e %v");
    lg->set_level(spdlog::level::trace);
    return lg;
  }();
  return *l;
}

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::kDebug: return spdlog::level::debug;
    case Level::kInfo: return spdlog::level::info;
    case Level::kWarn: return spdlog::level::warn;
    case Level::kError: return spdlog::level::err;
    case Level::kOff: return spdlog::level::off;
  }
  return spdlog::level::info;
}

}  // namespace

void set_level(Level level) { g_level = level; }
Level level() { return g_level; }

Level parse_level(const std::string& name) {
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warn") return Level::kWarn;
  if (name == "error") return Level::kError;
  if (name == "off") return Level::kOff;
  throw Error(ExitCode::kUsage, "unknown log level '" + name + "'",
              "use one of debug, info, warn, error, off");
}

void write(Level level, const std::string& message) {
  if (level < g_level) return;
  logger().log(to_spdlog(level), "{}", message);
}

}  // namespace verl::log

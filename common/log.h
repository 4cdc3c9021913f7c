// The log facade. Everything logs through these functions; spdlog sits behind them in log.cc.
// This header includes neither spdlog nor fmt on purpose: torch's headers bundle their own fmt
// (v12 on the GPU machine), which must never meet Debian's fmt 9 in one translation unit.
// Logs go to stderr (stdout is data). Thread-safe.
#pragma once

#include <sstream>
#include <string>

namespace verl::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

void set_level(Level level);
Level level();
// Parses "debug|info|warn|error|off"; throws verl::Error (usage) naming the bad value.
Level parse_level(const std::string& name);
void write(Level level, const std::string& message);

// A line built with <<, written when the statement ends:  log::Info() << "node " << host << " up";
class Line {
 public:
  explicit Line(Level level) : level_(level) {}
  ~Line() { if (level_ >= log::level()) write(level_, out_.str()); }
  Line(const Line&) = delete;
  Line& operator=(const Line&) = delete;
  template <typename T>
  Line& operator<<(const T& v) {
    if (level_ >= log::level()) out_ << v;
    return *this;
  }

 private:
  Level level_;
  std::ostringstream out_;
};

inline Line Debug() { return Line(Level::kDebug); }
inline Line Info() { return Line(Level::kInfo); }
inline Line Warn() { return Line(Level::kWarn); }
inline Line Err() { return Line(Level::kError); }

}  // namespace verl::log

#include "cli/status_line.h"

namespace verl::cli {
namespace {
constexpr const char* kEraseLine = "\r\033[K";  // to the line's start, erase it
}  // namespace

void StatusLine::update(const std::string& line, Clock::time_point now) {
  line_ = line;
  if (live_) {
    draw();
    return;
  }
  if (line_ == printed_ || (printed_once_ && now - last_print_ < every_)) return;
  err_ << line_ << "\n";
  err_.flush();
  printed_ = line_;
  printed_once_ = true;
  last_print_ = now;
}

void StatusLine::clear() {
  if (!live_ || !shown_) return;
  err_ << kEraseLine;
  err_.flush();
  shown_ = false;
}

void StatusLine::draw() {
  if (!live_ || line_.empty()) return;
  err_ << kEraseLine << line_;
  err_.flush();
  shown_ = true;
}

}  // namespace verl::cli

// The status line `submit` shows while it follows a job's logs ("job-2 RUNNING step 23/300 ...").
// Printed after every change it interleaved with each rank's log line. Now:
//  - live (stderr is a terminal): one line at the bottom, redrawn in place; log lines are
//    written above it (clear() before them, draw() after);
//  - otherwise (a pipe, a file): the line when it changed, at most once every `every`, so that a
//    log holds the rank lines and a status line now and then.
// Time is passed in. Not thread-safe: the follow loop calls it.
#pragma once

#include <chrono>
#include <ostream>
#include <string>

namespace verl::cli {

class StatusLine {
 public:
  using Clock = std::chrono::steady_clock;
  StatusLine(std::ostream& err, bool live, std::chrono::milliseconds every) : err_(err), live_(live), every_(every) {}

  void update(const std::string& line, Clock::time_point now);
  void clear();  // before log lines: a live line is erased (nothing otherwise)
  void draw();   // after them: a live line is drawn again
  void finish() { clear(); }  // the end: a live line is erased (the closing summary follows)

 private:
  std::ostream& err_;
  const bool live_;
  const std::chrono::milliseconds every_;
  std::string line_, printed_;
  bool shown_ = false;  // live: the line is on the screen
  bool printed_once_ = false;
  Clock::time_point last_print_{};
};

}  // namespace verl::cli

// SIGINT/SIGTERM as a flag that loops poll: the head, the agent and up's waits end cleanly (the
// agent tells the head it leaves, up stops what it started) instead of dying mid-way.
// install_stop_flag() is idempotent; the flag is process-wide.
#pragma once

#include <atomic>

namespace verl::launcher {

const std::atomic<bool>& install_stop_flag();
// The signal that set the flag (SIGINT, SIGTERM), 0 while it is not set.
int stop_signal();

}  // namespace verl::launcher

#include "launcher/states.h"

#include <stdexcept>

namespace verl::launcher {

TaskKind task_kind(JobKind kind) {
  switch (kind) {
    case JobKind::kTrain: return TaskKind::kTrain;
    case JobKind::kProbe: return TaskKind::kProbe;
    case JobKind::kCommand: return TaskKind::kCommand;
  }
  return TaskKind::kTrain;
}

bool is_terminal(JobState s) { return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kStopped; }

size_t index_of_name(const char* what, const char* const* names, size_t n, const std::string& name) {
  for (size_t i = 0; i < n; ++i)
    if (name == names[i]) return i;
  std::string choices;
  for (size_t i = 0; i < n; ++i) choices += std::string(i == 0 ? "" : i + 1 == n ? " or " : ", ") + names[i];
  throw std::invalid_argument("unknown " + std::string(what) + " '" + name.substr(0, 60) + "' (" + choices + ")");
}

}  // namespace verl::launcher

#include "launcher/states.h"

#include <array>
#include <cstddef>
#include <stdexcept>

namespace verl::launcher {
namespace {

// Each enum's names, indexed by its value (the enums count from 0 without gaps), and what one
// of them is called in an error.
template <typename E>
struct Table;

template <>
struct Table<JobKind> {
  static constexpr const char* kWhat = "job kind";
  static constexpr std::array<const char*, 3> kNames = {"train", "probe", "command"};
};
template <>
struct Table<TaskKind> {
  static constexpr const char* kWhat = "task kind";
  static constexpr std::array<const char*, 4> kNames = {"train", "probe", "command", "preflight"};
};
template <>
struct Table<JobState> {
  static constexpr const char* kWhat = "job state";
  static constexpr std::array<const char*, 5> kNames = {"PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"};
};
template <>
struct Table<TaskState> {
  static constexpr const char* kWhat = "task state";
  static constexpr std::array<const char*, 3> kNames = {"assigned", "running", "exited"};
};
template <>
struct Table<NodeState> {
  static constexpr const char* kWhat = "node state";
  static constexpr std::array<const char*, 3> kNames = {"alive", "lost", "left"};
};
template <>
struct Table<ReportState> {
  static constexpr const char* kWhat = "task state";
  static constexpr std::array<const char*, 2> kNames = {"running", "exited"};
};
template <>
struct Table<OrderAction> {
  static constexpr const char* kWhat = "order action";
  static constexpr std::array<const char*, 2> kNames = {"start", "stop"};
};

template <>
struct Table<ProcessRole> {
  static constexpr const char* kWhat = "process role";
  static constexpr std::array<const char*, 3> kNames = {"head", "agent", "process"};
};
template <>
struct Table<ClusterStatus> {
  static constexpr const char* kWhat = "cluster status";
  static constexpr std::array<const char*, 4> kNames = {"starting", "up", "failed", "down"};
};

template <typename E>
const char* name_of(E v) {
  const auto i = static_cast<size_t>(v);
  return i < Table<E>::kNames.size() ? Table<E>::kNames[i] : "?";
}

template <typename E>
E parse(const std::string& name) {
  const auto& all = Table<E>::kNames;
  for (size_t i = 0; i < all.size(); ++i)
    if (name == all[i]) return static_cast<E>(i);
  std::string choices;
  for (size_t i = 0; i < all.size(); ++i)
    choices += std::string(i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + all[i];
  throw std::invalid_argument("unknown " + std::string(Table<E>::kWhat) + " '" + name.substr(0, 60) + "' (" + choices + ")");
}

template <typename E>
std::vector<std::string> all_names() {
  return {Table<E>::kNames.begin(), Table<E>::kNames.end()};
}

}  // namespace

TaskKind task_kind(JobKind kind) {
  switch (kind) {
    case JobKind::kTrain: return TaskKind::kTrain;
    case JobKind::kProbe: return TaskKind::kProbe;
    case JobKind::kCommand: return TaskKind::kCommand;
  }
  return TaskKind::kTrain;
}

bool is_terminal(JobState s) { return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kStopped; }

const char* to_string(JobKind v) { return name_of(v); }
const char* to_string(TaskKind v) { return name_of(v); }
const char* to_string(JobState v) { return name_of(v); }
const char* to_string(TaskState v) { return name_of(v); }
const char* to_string(NodeState v) { return name_of(v); }
const char* to_string(ReportState v) { return name_of(v); }
const char* to_string(OrderAction v) { return name_of(v); }
const char* to_string(ProcessRole v) { return name_of(v); }
const char* to_string(ClusterStatus v) { return name_of(v); }

template <>
JobKind from_string<JobKind>(const std::string& name) { return parse<JobKind>(name); }
template <>
TaskKind from_string<TaskKind>(const std::string& name) { return parse<TaskKind>(name); }
template <>
JobState from_string<JobState>(const std::string& name) { return parse<JobState>(name); }
template <>
TaskState from_string<TaskState>(const std::string& name) { return parse<TaskState>(name); }
template <>
NodeState from_string<NodeState>(const std::string& name) { return parse<NodeState>(name); }
template <>
ReportState from_string<ReportState>(const std::string& name) { return parse<ReportState>(name); }
template <>
OrderAction from_string<OrderAction>(const std::string& name) { return parse<OrderAction>(name); }
template <>
ProcessRole from_string<ProcessRole>(const std::string& name) { return parse<ProcessRole>(name); }
template <>
ClusterStatus from_string<ClusterStatus>(const std::string& name) { return parse<ClusterStatus>(name); }

template <>
std::vector<std::string> names<JobKind>() { return all_names<JobKind>(); }
template <>
std::vector<std::string> names<TaskKind>() { return all_names<TaskKind>(); }
template <>
std::vector<std::string> names<JobState>() { return all_names<JobState>(); }
template <>
std::vector<std::string> names<TaskState>() { return all_names<TaskState>(); }
template <>
std::vector<std::string> names<NodeState>() { return all_names<NodeState>(); }
template <>
std::vector<std::string> names<ReportState>() { return all_names<ReportState>(); }
template <>
std::vector<std::string> names<OrderAction>() { return all_names<OrderAction>(); }
template <>
std::vector<std::string> names<ProcessRole>() { return all_names<ProcessRole>(); }
template <>
std::vector<std::string> names<ClusterStatus>() { return all_names<ClusterStatus>(); }

}  // namespace verl::launcher

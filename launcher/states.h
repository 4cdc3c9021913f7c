// The launcher's closed sets of names (kinds and states) as enums, with their wire and storage
// names in one place: to_string() gives the name the API, the store and the CLI show;
// from_string<E>() reads one back and throws std::invalid_argument naming the value and the
// names it could have been (the head answers that with a 400, docs/API.md). Code compares the
// enums, never the names.
//
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace verl::launcher {

// A job's kind (POST /api/jobs's `kind`).
enum class JobKind { kTrain, kProbe, kCommand };  // train | probe | command
// What a start order runs: a job's rank, or a job preflight on a node (job_controller.h).
enum class TaskKind { kTrain, kProbe, kCommand, kPreflight };  // ... | preflight
TaskKind task_kind(JobKind kind);

enum class JobState { kPending, kRunning, kSucceeded, kFailed, kStopped };  // PENDING | RUNNING | ...
bool is_terminal(JobState state);
// A placement as the head counts it; assigned: ordered, not yet seen running.
enum class TaskState { kAssigned, kRunning, kExited };  // assigned | running | exited
enum class NodeState { kAlive, kLost, kLeft };          // alive | lost | left
// A task as its agent reports it in a heartbeat.
enum class ReportState { kRunning, kExited };  // running | exited
enum class OrderAction { kStart, kStop };      // start | stop
// A daemon of a cluster (state.json, backend.h); process: a leftover that down found by its
// command line and never recorded.
enum class ProcessRole { kHead, kAgent, kProcess };            // head | agent | process
enum class ClusterStatus { kStarting, kUp, kFailed, kDown };  // a cluster as up/down left it (state.json)

// Each enum's names, indexed by its value (the enums count from 0 without gaps), and what one
// of them is called in an error: the one table each enum has. to_string, from_string and names
// take exactly the enums that have one.
template <typename E>
struct EnumNames {};
template <>
struct EnumNames<JobKind> {
  static constexpr const char* kWhat = "job kind";
  static constexpr std::array<const char*, 3> kNames = {"train", "probe", "command"};
};
template <>
struct EnumNames<TaskKind> {
  static constexpr const char* kWhat = "task kind";
  static constexpr std::array<const char*, 4> kNames = {"train", "probe", "command", "preflight"};
};
template <>
struct EnumNames<JobState> {
  static constexpr const char* kWhat = "job state";
  static constexpr std::array<const char*, 5> kNames = {"PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"};
};
template <>
struct EnumNames<TaskState> {
  static constexpr const char* kWhat = "task state";
  static constexpr std::array<const char*, 3> kNames = {"assigned", "running", "exited"};
};
template <>
struct EnumNames<NodeState> {
  static constexpr const char* kWhat = "node state";
  static constexpr std::array<const char*, 3> kNames = {"alive", "lost", "left"};
};
template <>
struct EnumNames<ReportState> {
  static constexpr const char* kWhat = "task state";
  static constexpr std::array<const char*, 2> kNames = {"running", "exited"};
};
template <>
struct EnumNames<OrderAction> {
  static constexpr const char* kWhat = "order action";
  static constexpr std::array<const char*, 2> kNames = {"start", "stop"};
};
template <>
struct EnumNames<ProcessRole> {
  static constexpr const char* kWhat = "process role";
  static constexpr std::array<const char*, 3> kNames = {"head", "agent", "process"};
};
template <>
struct EnumNames<ClusterStatus> {
  static constexpr const char* kWhat = "cluster status";
  static constexpr std::array<const char*, 4> kNames = {"starting", "up", "failed", "down"};
};

// The name of v; "?" for a value outside the enum.
template <typename E, typename Table = EnumNames<E>, size_t = Table::kNames.size()>
const char* to_string(E v) {
  const auto i = static_cast<size_t>(v);
  return i < Table::kNames.size() ? Table::kNames[i] : "?";
}

// The index of name among names[0, n); throws std::invalid_argument naming what, the value and
// the choices when it is none of them.
size_t index_of_name(const char* what, const char* const* names, size_t n, const std::string& name);

// "train" -> JobKind::kTrain; anything else throws std::invalid_argument:
// "unknown job kind 'x' (train, probe or command)".
template <typename E, typename Table = EnumNames<E>, size_t = Table::kNames.size()>
E from_string(const std::string& name) {
  return static_cast<E>(index_of_name(Table::kWhat, Table::kNames.data(), Table::kNames.size(), name));
}

// Every name of E, in declaration order ("train, probe or command" in errors and docs tests).
template <typename E, typename Table = EnumNames<E>, size_t = Table::kNames.size()>
std::vector<std::string> names() {
  return {Table::kNames.begin(), Table::kNames.end()};
}

}  // namespace verl::launcher

// The launcher's closed sets of names (kinds and states) as enums, with their wire and storage
// names in one place: to_string() gives the name the API, the store and the CLI show;
// from_string<E>() reads one back and throws std::invalid_argument naming the value and the
// names it could have been (the head answers that with a 400, docs/API.md). Code compares the
// enums, never the names.
//
// Pure functions; thread-safe.
#pragma once

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

const char* to_string(JobKind v);
const char* to_string(TaskKind v);
const char* to_string(JobState v);
const char* to_string(TaskState v);
const char* to_string(NodeState v);
const char* to_string(ReportState v);
const char* to_string(OrderAction v);
const char* to_string(ProcessRole v);
const char* to_string(ClusterStatus v);

// "train" -> JobKind::kTrain; anything else throws std::invalid_argument:
// "unknown job kind 'x' (train, probe or command)".
template <typename E>
E from_string(const std::string& name);
template <>
JobKind from_string<JobKind>(const std::string& name);
template <>
TaskKind from_string<TaskKind>(const std::string& name);
template <>
JobState from_string<JobState>(const std::string& name);
template <>
TaskState from_string<TaskState>(const std::string& name);
template <>
NodeState from_string<NodeState>(const std::string& name);
template <>
ReportState from_string<ReportState>(const std::string& name);
template <>
OrderAction from_string<OrderAction>(const std::string& name);
template <>
ProcessRole from_string<ProcessRole>(const std::string& name);
template <>
ClusterStatus from_string<ClusterStatus>(const std::string& name);

// Every name of E, in declaration order ("train, probe or command" in errors and docs tests).
template <typename E>
std::vector<std::string> names();
template <>
std::vector<std::string> names<JobKind>();
template <>
std::vector<std::string> names<TaskKind>();
template <>
std::vector<std::string> names<JobState>();
template <>
std::vector<std::string> names<TaskState>();
template <>
std::vector<std::string> names<NodeState>();
template <>
std::vector<std::string> names<ReportState>();
template <>
std::vector<std::string> names<OrderAction>();
template <>
std::vector<std::string> names<ProcessRole>();
template <>
std::vector<std::string> names<ClusterStatus>();

}  // namespace verl::launcher

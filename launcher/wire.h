// The head's HTTP API bodies (docs/API.md) as typed messages, one struct per body, shared by the
// head (which reads requests and writes answers), the agent (which writes register, heartbeat,
// log, metric and result bodies and reads orders) and the CLI (which writes submit and stop
// bodies and reads job summaries and the cluster's view). Each has to_json/from_json for nlohmann (`j.get<Heartbeat>()`,
// `Json(order)`), so that no side builds or picks apart a body by hand and both agree on one
// definition. tests/unit/launcher/wire_test.cc checks these definitions against docs/API.md.
//
// from_json checks what the receiver relies on: types, that numbers fit what they are stored in
// (a 1e300 read as an int is undefined behaviour, not an error), the names of enums (states.h)
// and required fields. A malformed body throws BadMessage (a std::invalid_argument) naming the
// message and the field: "heartbeat: tasks[2]: 'signal' must be an integer within 0..128"; the
// head answers it with a 400. Absent optional fields take the defaults written below; a field the
// receiver does not know is ignored (an older peer's extras).
//
// parse_body() turns a request body into JSON: an empty body is {}; nesting deeper than
// kMaxJsonDepth is refused before nlohmann's parser, which recurses once per level, sees it; it
// lets nlohmann's exceptions through (parse_error, out_of_range for 1e999), which the head also
// answers with a 400. Pure functions; thread-safe. Fuzzed: tests/fuzz/head_requests_fuzz.cc.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "launcher/command_job.h"
#include "launcher/gpu_sampler.h"
#include "launcher/resources.h"
#include "launcher/states.h"

namespace verl::launcher::wire {

using Json = nlohmann::ordered_json;

constexpr int kMaxJsonDepth = 64;

struct BadMessage : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

Json parse_body(const std::string& body);

// ---- nodes (agents) ----

// POST /api/nodes/register
struct Register {
  std::string name;  // non-empty
  std::string host;
  int64_t pid = 0;
  Resources resources;
};
// ... its answer
struct RegisterReply {
  int64_t id = 0;
  double heartbeat_interval_s = 1;
};

// One task an agent reports in a heartbeat.
struct TaskReport {
  std::string task;  // "<job>/<rank>/<attempt>" or "<job>/preflight/<attempt>"; may name nothing
  ReportState state = ReportState::kRunning;  // absent: running
  // When exited: its exit code or the signal that killed it (0: none), or why it could not start.
  std::optional<int> exit_code;
  int signal = 0;
  std::string error;
  // A job preflight's end (kind preflight): its JSON report (an object), or the end of its stderr
  // when it wrote none (JobController reads them).
  std::optional<Json> result;
  std::string output;
};

// POST /api/nodes/<id>/heartbeat
struct Heartbeat {
  std::vector<TaskReport> tasks;
  std::string work_dir;
  std::optional<std::vector<GpuSample>> gpus;  // sent by agents on nodes with GPUs
};

// What an agent must do, in a heartbeat's answer (docs/API.md, TaskOrder).
struct TaskOrder {
  std::string task;
  OrderAction action = OrderAction::kStart;
  // action start:
  std::string job;
  int rank = 0;
  int attempt = 0;
  TaskKind kind = TaskKind::kTrain;
  std::vector<std::string> argv;  // argv[0] "verlctl" (this node's), or a command job's program
  std::vector<std::string> env;   // NAME=value, added to the agent's environment
  std::string cwd;                // relative to the agent's work directory
  std::string owner;              // "<store incarnation>/<job>" (agent.h)
  std::vector<std::pair<std::string, std::string>> files;  // name -> text, written into cwd first
  std::optional<std::string> metrics_file;  // train orders: rank 0's metrics JSONL, "" for the others
  std::optional<int64_t> working_dir_bytes;  // a command job's working directory: its tar's size
  Json container;  // null, or the spec's container section plus the container's `name`
  // action stop:
  double grace_s = 10;  // SIGTERM, then SIGKILL after it
};

// ... the heartbeat's answer
struct HeartbeatReply {
  bool shutdown = false;
  std::vector<TaskOrder> tasks;
};

// GET /api/nodes's entries: a node as the head's registry holds it.
struct NodeView {
  int64_t id = 0;
  std::string name, host;
  int64_t pid = 0;
  NodeState state = NodeState::kAlive;
  Resources resources;
  int64_t registered_ms = 0, last_heartbeat_ms = 0;
  double heartbeat_age_s = 0;
  int64_t heartbeats = 0;
  std::optional<int64_t> lost_ms;  // when it was lost or left; null while alive
  std::string reason;              // why it was lost or left
  std::optional<Json> gpu_samples;  // ?samples=1: [{time_ms, gpus}], the last 600
};

// POST /api/nodes/<id>/leave
struct Leave {
  std::string reason = "agent left";
};

// ---- the cluster ----

// GET /api/cluster's head: where it listens and since when.
struct HeadView {
  std::string bind;  // bind_host:port
  std::string hostname;
  int64_t pid = 0;
  int64_t started_ms = 0;
  double uptime_s = 0;
};

// GET /api/cluster's probe_ports: the servers `verlctl probe` measures every node against,
// beside the head (cli/cmd_head.cc).
struct ProbePorts {
  int tcp = 0;   // TCP bandwidth
  int time = 0;  // clock offset
};

// GET /api/cluster
struct ClusterView {
  std::string name, backend;
  bool shutting_down = false;
  HeadView head;
  double heartbeat_interval_s = 0, heartbeat_timeout_s = 0;
  std::vector<std::string> expected_nodes;
  int store_port = 0;
  std::optional<ProbePorts> probe_ports;  // null: none run
  int alive = 0, lost = 0, left = 0;      // counts: the registry's nodes by state (states.h names)
  // Its `state`: "shutting_down", else "up".
  const char* state() const { return shutting_down ? "shutting_down" : "up"; }
};

// ---- jobs ----

// POST /api/jobs's `command` (kind command): {argv: [..] (non-empty), env?: ["NAME=value"],
// ranks_per_node?, working_dir?: {source, tar_base64}}. The tar travels as base64 and is held
// decoded here; at most kMaxWorkingDirBytes.
struct SubmitCommand {
  CommandSpec spec;  // working_dir_bytes set from the tar
  std::string working_dir_tar;
};

// POST /api/jobs
struct Submit {
  JobKind kind = JobKind::kTrain;
  std::string yaml;  // the job config's text ("" : defaults and overrides only)
  std::string file;  // where it came from, for issue locations
  std::vector<std::string> overrides;
  std::optional<std::vector<std::string>> argv;  // kind probe: the verlctl subcommand and its arguments
  bool preflight = false;
  bool nccl_debug = false;
  std::optional<SubmitCommand> command;  // kind command (required there; read only there)
};

// The answer to POST /api/jobs (201) and POST /api/jobs/<id>/stop.
struct JobRef {
  std::string id;  // job-<N>
  JobState state = JobState::kPending;
};

// POST /api/jobs/<id>/stop
struct Stop {
  double grace_s = 10;  // 0..3600
};

// GET /api/jobs/<id>/working-dir (agents): a command job's working directory.
struct WorkingDir {
  std::string source;  // the submitter's directory
  std::string tar;     // travels as tar_base64 with its size as bytes
};

// POST /api/jobs/<id>/logs (agents)
struct LogChunk {
  std::string stream = "stdout";
  int64_t offset = 0;  // >= 0, per attempt
  std::string data;
  bool eof = false;
};
struct Logs {
  int rank = 0;  // required, >= 0
  int attempt = 0;
  std::string host;
  std::vector<LogChunk> chunks;
};

// GET /api/jobs/<id>/logs: one page of lines, merged over ranks in seq order, and where the
// next page starts; done: the job ended and nothing is left.
struct LogLineView {
  int64_t seq = 0;
  int rank = 0;
  std::string host, stream, text;
};
struct LogsPage {
  std::vector<LogLineView> lines;
  int64_t next = 0;
  bool done = false;
};

// POST /api/jobs/<id>/results (agents)
struct Result {
  int rank = 0;  // required
  Json result;   // null when absent
};

// POST /api/jobs/<id>/metrics (agents), and GET's answer: rank 0's metric rows, each an object.
struct Metrics {
  Json rows = Json::array();
};

// GET /api/jobs's entries, and the start of GET /api/jobs/<id>'s Job.
struct JobSummary {
  std::string id;
  JobKind kind = JobKind::kTrain;
  JobState state = JobState::kPending;
  int64_t submitted_ms = 0;
  std::optional<int64_t> started_ms, ended_ms;
  int64_t step = 0;
  int64_t total_steps = 0;  // 0: unknown
  int nnodes = 0, n_gpus_per_node = 0, world_size = 0;
  int restarts = 0;
  std::optional<std::string> command;  // a command job's argv as one shell-quoted line
};

// GET /api/jobs/<id>'s placement entries: a rank of the job's current attempt, where it runs.
struct PlacementView {
  int rank = 0;
  std::string node, host;
  int local_rank = 0;
  std::string device;  // cpu | cuda:<index>
  int attempt = 0;
  std::string task;  // <job>/<rank>/<attempt>
  TaskState state = TaskState::kAssigned;
  std::optional<int> exit_code;
  int signal = 0;     // 0: none (left out)
  std::string error;  // empty: none (left out)
  std::optional<std::string> dir;  // the job directory on its node, once its agent said where
};

// GET /api/jobs/<id>'s events: a job's state changes and what else happened to it.
struct JobEventView {
  std::string state;  // a JobState name, or RESTARTING / STOPPING / PREFLIGHT ...
  int64_t time_ms = 0;
  std::string detail;
};

// GET /api/jobs/<id>: a JobSummary and the rest of the record. What only the head computes
// from metric rows and logs (scaling.h, nccl_log.h) and what the job itself defines (config,
// failure, metric rows, probe results) travel as the JSON they are.
struct Job {
  JobSummary summary;
  int attempt = 0;
  Json config;
  std::optional<CommandSpec> command_spec;
  std::optional<std::string> pending_reason;  // PENDING: why it waits
  std::vector<PlacementView> placement;
  Json rendezvous = Json::object();  // {master_addr, master_port}
  std::vector<JobEventView> events;
  Json failure;  // null: none
  Json latest_metrics = Json::object();
  Json score_trend = Json::array();
  std::optional<double> eta_s;
  std::optional<Json> results;  // probe jobs: {"<rank>": report}
  std::optional<Json> scaling;  // train jobs
  std::optional<Json> nccl;     // jobs submitted with nccl_debug: [per node]
};

#define VERL_WIRE_MESSAGE(T)            \
  void to_json(Json& j, const T& v);    \
  void from_json(const Json& j, T& v);

VERL_WIRE_MESSAGE(Register)
VERL_WIRE_MESSAGE(RegisterReply)
VERL_WIRE_MESSAGE(TaskReport)
VERL_WIRE_MESSAGE(Heartbeat)
VERL_WIRE_MESSAGE(TaskOrder)
VERL_WIRE_MESSAGE(HeartbeatReply)
VERL_WIRE_MESSAGE(NodeView)
VERL_WIRE_MESSAGE(Leave)
VERL_WIRE_MESSAGE(HeadView)
VERL_WIRE_MESSAGE(ProbePorts)
VERL_WIRE_MESSAGE(ClusterView)
VERL_WIRE_MESSAGE(SubmitCommand)
VERL_WIRE_MESSAGE(Submit)
VERL_WIRE_MESSAGE(JobRef)
VERL_WIRE_MESSAGE(Stop)
VERL_WIRE_MESSAGE(WorkingDir)
VERL_WIRE_MESSAGE(LogChunk)
VERL_WIRE_MESSAGE(Logs)
VERL_WIRE_MESSAGE(LogLineView)
VERL_WIRE_MESSAGE(LogsPage)
VERL_WIRE_MESSAGE(Result)
VERL_WIRE_MESSAGE(Metrics)
VERL_WIRE_MESSAGE(JobSummary)
VERL_WIRE_MESSAGE(PlacementView)
VERL_WIRE_MESSAGE(JobEventView)
VERL_WIRE_MESSAGE(Job)

#undef VERL_WIRE_MESSAGE

// j.get<T>() with the message's errors only: nlohmann's own (a type_error from a get<> a check
// lacks) become BadMessage too, so that a receiver catches one type.
template <typename T>
T parse(const Json& j) {
  try {
    return j.get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw BadMessage(e.what());
  }
}

}  // namespace verl::launcher::wire

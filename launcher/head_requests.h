// The head's request bodies as typed values, apart from the HTTP server so that a fuzzer and a
// unit test can reach them (tests/fuzz/head_requests_fuzz.cc). parse_body() turns a body into
// JSON (an empty body is {}; nesting deeper than kMaxJsonDepth is refused before nlohmann's
// parser, which recurses once per level, sees it); each parse_<endpoint>() checks the fields that
// endpoint reads: their types and that numbers fit what they are stored in (a 1e300 read as an
// int is undefined behaviour, not an error).
//
// Errors: std::invalid_argument naming the field ("logs: 'rank' must be an integer within
// 0..2147483647"); parse_body() lets nlohmann's exceptions through (parse_error, and out_of_range
// for a number past a double: 1e999). The head answers both with a 400. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "launcher/command_job.h"
#include "launcher/resources.h"

namespace verl::launcher::requests {

using Json = nlohmann::ordered_json;

constexpr int kMaxJsonDepth = 64;

Json parse_body(const std::string& body);

// POST /api/nodes/register
struct Register {
  std::string name;  // non-empty
  std::string host;
  int64_t pid = 0;
  Resources resources;
};
Register parse_register(const Json& body);

// One task an agent reports in a heartbeat (launcher/agent.cc writes them).
struct TaskReport {
  std::string task;   // "job-<id>.<attempt>.<rank>"; may name nothing
  std::string state;  // "running" | "exited" | ...
  std::optional<int> exit_code;
  int signal = 0;
  std::string error;
  // A job preflight's end (kind preflight): its JSON report, or the end of its stderr when it
  // wrote none (JobController::preflight_reported reads them).
  std::optional<Json> result;
  std::string output;
};
// POST /api/nodes/<id>/heartbeat
struct Heartbeat {
  std::optional<Json> gpus;  // an array of samples, as the agent sends them
  std::vector<TaskReport> tasks;
  std::string work_dir;
};
Heartbeat parse_heartbeat(const Json& body);
// The reports back as the JSON the job controller reads (JobController::heartbeat).
Json to_json(const std::vector<TaskReport>& tasks);

// POST /api/jobs's `command` field (kind command): {argv: [..] (non-empty), env?: ["NAME=value"],
// ranks_per_node?: 0|1, working_dir?: {source, tar_base64}}. The tar is decoded here and must
// be at most kMaxWorkingDirBytes.
struct SubmitCommand {
  CommandSpec spec;  // working_dir_bytes set from the decoded tar
  std::string working_dir_tar;
};
SubmitCommand parse_submit_command(const Json& body);

// POST /api/nodes/<id>/leave
std::string parse_leave_reason(const Json& body);  // "agent left" when absent

// POST /api/jobs/<id>/stop: grace_s within 0..3600, 10 when absent.
double parse_stop_grace(const Json& body);

// POST /api/jobs/<id>/logs
struct LogChunk {
  std::string stream = "stdout";
  int64_t offset = 0;  // >= 0
  std::string data;
  bool eof = false;
};
struct Logs {
  int rank = 0;     // >= 0
  int attempt = 0;  // >= 0
  std::string host;
  std::vector<LogChunk> chunks;
};
Logs parse_logs(const Json& body);

// POST /api/jobs/<id>/results
struct Result {
  int rank = 0;
  Json result;  // null when absent
};
Result parse_result(const Json& body);

// POST /api/jobs/<id>/metrics: the rows, an array of objects.
Json parse_metrics_rows(const Json& body);

}  // namespace verl::launcher::requests

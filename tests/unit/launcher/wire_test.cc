// The API's typed messages (launcher/wire.h): each round trips through JSON, a malformed body is
// refused naming the message and the field (cases the fuzzer, tests/fuzz/head_requests_fuzz.cc,
// or a review turned up), enum names are checked, and docs/API.md lists exactly the fields each
// message writes, so that the contract and the code cannot drift apart.
#include "launcher/wire.h"

#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <stdexcept>
#include <string>

#include "common/files.h"

namespace verl::launcher {
namespace {

using wire::Json;

Json body(const std::string& text) { return wire::parse_body(text); }

// The message of the BadMessage that reading T from text throws; "" when it throws nothing.
template <typename T>
std::string refusal(const std::string& text) {
  try {
    (void)wire::parse<T>(body(text));
  } catch (const wire::BadMessage& e) {
    return e.what();
  }
  return "";
}

template <typename Fn>
std::string refusal_of(Fn fn) {
  try {
    fn();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// A message of each kind with every field set, as the head, an agent or the CLI sends it.
wire::Register full_register() {
  wire::Register r;
  r.name = "node-0";
  r.host = "h";
  r.pid = 12;
  r.resources.cpus = 8;
  r.resources.memory_bytes = 1024;
  r.resources.gpus = 1;
  return r;
}

wire::TaskReport full_report() {
  wire::TaskReport t;
  t.task = "job-3/preflight/0";
  t.state = ReportState::kExited;
  t.exit_code = 2;
  t.signal = 9;
  t.error = "could not start";
  t.result = Json{{"ok", false}};
  t.output = "no such file";
  return t;
}

wire::Heartbeat full_heartbeat() {
  wire::Heartbeat h;
  h.tasks = {full_report()};
  h.work_dir = "/w";
  h.gpus = std::vector<GpuSample>{GpuSample{0, 37, 1024, 143771}};
  return h;
}

wire::TaskOrder full_start() {
  wire::TaskOrder o;
  o.task = "job-1/0/0";
  o.action = OrderAction::kStart;
  o.job = "job-1";
  o.rank = 0;
  o.attempt = 1;
  o.kind = TaskKind::kCommand;
  o.argv = {"python3", "x.py"};
  o.env = {"RANK=0"};
  o.cwd = "jobs/job-1";
  o.owner = "0123456789abcdef/job-1";
  o.files = {{"job.yaml", "trainer: {}\n"}};
  o.metrics_file = "metrics.jsonl";
  o.working_dir_bytes = 10240;
  o.container = Json{{"runtime", "podman"}, {"image", "verl:1"}, {"name", "verlctl-c-job-1-0-0"}};
  return o;
}

wire::TaskOrder full_stop() {
  wire::TaskOrder o;
  o.task = "job-1/0/0";
  o.action = OrderAction::kStop;
  o.grace_s = 2.5;
  return o;
}

wire::SubmitCommand full_command() {
  wire::SubmitCommand c;
  c.spec.argv = {"python3", "x.py"};
  c.spec.env = {"A=1"};
  c.spec.ranks_per_node = 1;
  c.spec.working_dir = "/src";
  c.spec.working_dir_bytes = 8;
  c.working_dir_tar = "tarbytes";
  return c;
}

wire::Submit full_submit() {
  wire::Submit s;
  s.kind = JobKind::kCommand;
  s.yaml = "trainer: {}\n";
  s.file = "job.yaml";
  s.overrides = {"trainer.nnodes=2"};
  s.argv = std::vector<std::string>{"probe"};
  s.preflight = true;
  s.nccl_debug = true;
  s.command = full_command();
  return s;
}

wire::Logs full_logs() {
  wire::Logs l;
  l.rank = 3;
  l.attempt = 1;
  l.host = "h";
  l.chunks = {wire::LogChunk{"stderr", 7, "x\n", true}};
  return l;
}

wire::JobSummary full_summary() {
  wire::JobSummary s;
  s.id = "job-4";
  s.kind = JobKind::kCommand;
  s.state = JobState::kSucceeded;
  s.submitted_ms = 100;
  s.started_ms = 200;
  s.ended_ms = 300;
  s.step = 5;
  s.total_steps = 10;
  s.nnodes = 2;
  s.n_gpus_per_node = 4;
  s.world_size = 8;
  s.restarts = 1;
  s.command = "python3 x.py";
  return s;
}

wire::NodeView full_node() {
  wire::NodeView n;
  n.id = 3;
  n.name = "node-1";
  n.host = "h";
  n.pid = 77;
  n.state = NodeState::kLost;
  n.resources.cpus = 4;
  n.registered_ms = 100;
  n.last_heartbeat_ms = 200;
  n.heartbeat_age_s = 12.5;
  n.heartbeats = 9;
  n.lost_ms = 300;
  n.reason = "no heartbeat for 10.2 s";
  n.gpu_samples = Json::array({Json{{"time_ms", 200}, {"gpus", Json::array()}}});
  return n;
}

wire::ClusterView full_cluster() {
  wire::ClusterView c;
  c.name = "dev";
  c.backend = "ssh";
  c.shutting_down = true;
  c.head = wire::HeadView{"0.0.0.0:8265", "h0", 42, 100, 12.5};
  c.heartbeat_interval_s = 1;
  c.heartbeat_timeout_s = 10;
  c.expected_nodes = {"node-0", "node-1"};
  c.store_port = 6379;
  c.probe_ports = wire::ProbePorts{40123, 40124};
  c.alive = 1;
  c.lost = 1;
  return c;
}

wire::Job full_job() {
  wire::Job j;
  j.summary = full_summary();
  j.attempt = 1;
  j.config = Json{{"trainer", Json{{"nnodes", 2}}}};
  j.command_spec = full_command().spec;
  j.pending_reason = "waiting for 2 nodes";
  j.placement = {wire::PlacementView{0, "node-0", "h0", 0, "cuda:0", 1, "job-4/0/1", TaskState::kExited, 3, 9, "x", "/w/jobs/job-4"},
                 wire::PlacementView{1, "node-1", "h1", 0, "cpu", 1, "job-4/1/1", TaskState::kRunning, std::nullopt, 0, "", std::nullopt}};
  j.rendezvous = Json{{"master_addr", "10.0.0.1"}, {"master_port", 29500}};
  j.events = {wire::JobEventView{"PENDING", 100, "submitted"}, wire::JobEventView{"FAILED", 300, "rank 0 exited with 3"}};
  j.failure = Json{{"rank", 0},   {"node", "node-0"},  {"host", "h0"},       {"exit_code", 3},
                   {"signal", 0}, {"reason", "exited"}, {"last_lines", Json::array({"boom"})}, {"attempt", 1}};
  j.latest_metrics = Json{{"step", 5}};
  j.score_trend = Json::array({0.1, 0.2});
  j.eta_s = 12.5;
  j.results = Json{{"0", Json{{"rows", Json::array()}}}};
  j.scaling = Json{{"ranks", 8}};
  j.nccl = Json::array();
  return j;
}

// Writes v, reads it back, writes that: the same JSON.
template <typename T>
Json round_trip(const T& v) {
  const Json once = v;
  const Json twice = wire::parse<T>(once);
  EXPECT_EQ(once, twice) << once.dump();
  return once;
}

}  // namespace

TEST(WireMessages, EveryMessageRoundTripsThroughJson) {
  round_trip(full_register());
  round_trip(wire::RegisterReply{7, 0.5});
  round_trip(full_heartbeat());
  round_trip(full_start());
  round_trip(full_stop());
  round_trip(wire::HeartbeatReply{true, {full_start(), full_stop()}});
  round_trip(wire::Leave{"agent stopped by a signal"});
  round_trip(full_submit());
  round_trip(wire::JobRef{"job-1", JobState::kRunning});
  round_trip(wire::Stop{30});
  round_trip(wire::WorkingDir{"/src", std::string("\0\1tar", 5)});
  round_trip(full_logs());
  round_trip(wire::Result{2, Json{{"rows", Json::array()}}});
  round_trip(wire::Metrics{Json::array({Json{{"step", 1}}})});
  round_trip(full_summary());
  round_trip(full_node());
  round_trip(full_cluster());
  round_trip(full_job());
  round_trip(wire::ClusterView{});
  round_trip(wire::LogsPage{{wire::LogLineView{4, 1, "h", "stderr", "x"}}, 4, true});
  // What the receivers rely on comes back as it was sent.
  const auto order = wire::parse<wire::TaskOrder>(Json(full_start()));
  EXPECT_EQ(order.kind, TaskKind::kCommand);
  EXPECT_EQ(order.files.at(0).second, "trainer: {}\n");
  EXPECT_EQ(order.working_dir_bytes, 10240);
  const auto command = wire::parse<wire::Submit>(Json(full_submit())).command.value();
  EXPECT_EQ(command.working_dir_tar, "tarbytes");
  EXPECT_EQ(command.spec.working_dir_bytes, 8);
}

TEST(WireMessages, OptionalFieldsAreLeftOutWhenUnset) {
  // The controller reads an exit code only when sent; a running task says nothing more.
  wire::TaskReport running;
  running.task = "job-1/0/0";
  EXPECT_EQ(Json(running), (Json{{"task", "job-1/0/0"}, {"state", "running"}}));
  wire::TaskReport killed = running;
  killed.state = ReportState::kExited;
  killed.signal = 9;
  EXPECT_FALSE(Json(killed).contains("exit_code"));
  // A stop order is only what a stop needs.
  EXPECT_EQ(Json(full_stop()), (Json{{"task", "job-1/0/0"}, {"action", "stop"}, {"grace_s", 2.5}}));
  // A train order's metrics_file is "" for ranks other than 0; other kinds have none.
  wire::TaskOrder probe = full_start();
  probe.metrics_file.reset();
  probe.working_dir_bytes.reset();
  probe.container = nullptr;
  const Json p = probe;
  EXPECT_FALSE(p.contains("metrics_file") || p.contains("working_dir") || p.contains("container")) << p.dump();
  wire::JobSummary pending = full_summary();
  pending.started_ms.reset();
  pending.ended_ms.reset();
  pending.command.reset();
  const Json s = pending;
  EXPECT_FALSE(s.contains("started_ms") || s.contains("ended_ms") || s.contains("command")) << s.dump();
}

TEST(WireMessages, EmptyBodyIsAnEmptyObjectAndDeepNestingIsRefusedBeforeParsing) {
  EXPECT_EQ(body(""), Json::object());
  EXPECT_NE(refusal_of([] { body(std::string(100000, '[')); }).find("nested deeper than 64"), std::string::npos);
  // Brackets inside strings do not count.
  EXPECT_EQ(body("{\"a\": \"" + std::string(1000, '[') + "\"}")["a"].get<std::string>().size(), 1000u);
}

TEST(WireMessages, ANumberPastADoubleIsNlohmannsOutOfRangeWhichTheHeadAnswers400) {
  // Found by tests/fuzz/head_requests_fuzz.cc: not a parse_error but out_of_range.406; the head's
  // exception handler answers every nlohmann exception with 400 "bad request body".
  EXPECT_THROW(body(R"({"grace_s": 1e999})"), nlohmann::json::out_of_range);
  EXPECT_THROW(body("{\"a\": 1"), nlohmann::json::parse_error);
}

TEST(WireMessages, ANumberThatDoesNotFitItsFieldIsRefusedNotConverted) {
  // nlohmann's get<int>() of 1e300 was a float-to-int overflow (UBSan) in the logs, results and
  // register handlers; 2^40 as a rank wrapped.
  EXPECT_EQ(refusal<wire::Logs>(R"({"rank": 1e300})"), "logs: 'rank' must be an integer within 0..2147483647");
  EXPECT_NE(refusal<wire::Logs>(R"({"rank": 1099511627776})"), "");
  EXPECT_NE(refusal<wire::Logs>(R"({"rank": -1})"), "");
  EXPECT_NE(refusal<wire::Logs>(R"({"rank": 0, "attempt": 2.5})").find("'attempt'"), std::string::npos);
  EXPECT_NE(refusal<wire::Result>(R"({"rank": 1e300})"), "");
  EXPECT_EQ(refusal<wire::Register>(R"({"name": "n", "resources": {"cpus": 1e300, "memory_bytes": 1, "gpus": 0}})"),
            "register: resources: 'cpus' must be an integer within 0..2147483647");
  EXPECT_NE(refusal<wire::Register>(R"({"name": "n", "pid": 18446744073709551615})").find("'pid'"), std::string::npos);
  EXPECT_EQ(refusal<wire::Heartbeat>(R"({"tasks": [{"task": "job-1/0/0"}, {"task": "job-1/1/0", "signal": 1e300}]})"),
            "heartbeat: tasks[1]: 'signal' must be an integer within 0..128");
  EXPECT_NE(refusal<wire::Heartbeat>(R"({"tasks": [{"task": "job-1/0/0", "exit_code": 4294967296}]})"), "");
  EXPECT_EQ(refusal<wire::HeartbeatReply>(R"({"tasks": [{"task": "t", "action": "start", "rank": 2.5}]})"),
            "heartbeat answer: tasks[0]: 'rank' must be an integer within 0..2147483647");
}

TEST(WireMessages, AFieldOfTheWrongTypeOrMissingIsRefusedNamingIt) {
  EXPECT_EQ(refusal<wire::Heartbeat>(R"({"tasks": [7]})"), "heartbeat: tasks[0]: must be a JSON object");
  EXPECT_EQ(refusal<wire::Heartbeat>(R"({"tasks": {}})"), "heartbeat: 'tasks' must be an array");
  EXPECT_EQ(refusal<wire::Logs>(R"({"rank": 0, "chunks": [{}, {"data": 5}]})"), "logs: chunks[1]: 'data' must be a string");
  EXPECT_EQ(refusal<wire::Metrics>(R"({"rows": [1]})"), "metrics: rows[0]: must be a JSON object");
  EXPECT_NE(refusal<wire::Stop>(R"({"grace_s": "10"})").find("'grace_s' must be a number of seconds within 0..3600"),
            std::string::npos);
  EXPECT_NE(refusal<wire::Stop>(R"({"grace_s": 3601})"), "");
  EXPECT_NE(refusal<wire::Register>(R"({"name": ""})").find("'name'"), std::string::npos);
  EXPECT_EQ(refusal<wire::Leave>("[1]"), "leave: the body must be a JSON object");
  EXPECT_EQ(refusal<wire::Logs>("{}"), "logs: 'rank' is required");
  EXPECT_EQ(refusal<wire::RegisterReply>("{}"), "register answer: 'id' is required (the node's id)");
  EXPECT_EQ(refusal<wire::HeartbeatReply>(R"({"tasks": [{"task": "t"}]})"),
            "heartbeat answer: tasks[0]: 'action' is required (start or stop)");
  EXPECT_EQ(refusal<wire::HeartbeatReply>(R"({"tasks": [{"task": "t", "action": "start", "files": {"a": 1}}]})"),
            "heartbeat answer: tasks[0]: files: 'a' must be the file's text (a string)");
  EXPECT_EQ(refusal<wire::HeartbeatReply>(R"({"shutdown": "yes"})"), "heartbeat answer: 'shutdown' must be true or false");
  EXPECT_EQ(refusal<wire::Submit>(R"({"overrides": ["a=1", 2]})"), "jobs: overrides[1] must be a string");
  EXPECT_EQ(refusal<wire::Submit>(R"({"kind": "command"})"), "jobs: a job of kind command needs 'command': {argv: [...]}");
  EXPECT_EQ(refusal<wire::Submit>(R"({"preflight": 1})"), "jobs: 'preflight' must be true or false");
  EXPECT_EQ(refusal<wire::Submit>(R"({"kind": "command", "command": {"argv": ["x"], "working_dir": {"source": "/s", "tar_base64": ""}}})"),
            "jobs: command.working_dir: 'tar_base64' (the directory as a tar) is empty");
  EXPECT_EQ(refusal<wire::NodeView>(R"({"name": "n", "state": "alive", "resources": {"gpus": -1}})"),
            "node: resources: 'gpus' must be an integer within 0..2147483647");
  EXPECT_EQ(refusal<wire::NodeView>(R"({"name": "n"})"), "node: 'state' is required (alive, lost or left)");
  EXPECT_EQ(refusal<wire::JobSummary>(R"({"id": "job-1", "nnodes": "2"})"),
            "job summary: 'nnodes' must be an integer within 0..2147483647");
}

TEST(WireMessages, AnUnknownEnumNameIsRefusedNamingTheValue) {
  EXPECT_EQ(refusal<wire::Submit>(R"({"kind": "tain"})"), "jobs: 'kind' names an unknown job kind 'tain' (train, probe or command)");
  EXPECT_EQ(refusal<wire::Heartbeat>(R"({"tasks": [{"task": "t", "state": "done"}]})"),
            "heartbeat: tasks[0]: 'state' names an unknown task state 'done' (running or exited)");
  EXPECT_EQ(refusal<wire::HeartbeatReply>(R"({"tasks": [{"task": "t", "action": "pause"}]})"),
            "heartbeat answer: tasks[0]: 'action' names an unknown order action 'pause' (start or stop)");
  EXPECT_NE(refusal<wire::HeartbeatReply>(R"({"tasks": [{"task": "t", "action": "start", "kind": "rl"}]})")
                .find("unknown task kind 'rl' (train, probe, command or preflight)"),
            std::string::npos);
  EXPECT_NE(refusal<wire::JobRef>(R"({"id": "job-1", "state": "DONE"})").find("unknown job state 'DONE'"), std::string::npos);
  EXPECT_NE(refusal<wire::Heartbeat>(R"({"tasks": [{"task": "t", "state": 1}]})").find("'state' must be a string"),
            std::string::npos);
}

TEST(WireMessages, EnumNamesRoundTripAndUnknownOnesNameTheValue) {
  for (const auto& n : names<JobKind>()) EXPECT_EQ(to_string(from_string<JobKind>(n)), n);
  for (const auto& n : names<TaskKind>()) EXPECT_EQ(to_string(from_string<TaskKind>(n)), n);
  for (const auto& n : names<JobState>()) EXPECT_EQ(to_string(from_string<JobState>(n)), n);
  for (const auto& n : names<TaskState>()) EXPECT_EQ(to_string(from_string<TaskState>(n)), n);
  for (const auto& n : names<NodeState>()) EXPECT_EQ(to_string(from_string<NodeState>(n)), n);
  for (const auto& n : names<ReportState>()) EXPECT_EQ(to_string(from_string<ReportState>(n)), n);
  for (const auto& n : names<OrderAction>()) EXPECT_EQ(to_string(from_string<OrderAction>(n)), n);
  for (const auto& n : names<ProcessRole>()) EXPECT_EQ(to_string(from_string<ProcessRole>(n)), n);
  for (const auto& n : names<ClusterStatus>()) EXPECT_EQ(to_string(from_string<ClusterStatus>(n)), n);
  EXPECT_EQ(refusal_of([] { from_string<ClusterStatus>("Up"); }), "unknown cluster status 'Up' (starting, up, failed or down)");
  EXPECT_EQ(refusal_of([] { from_string<NodeState>("gone"); }), "unknown node state 'gone' (alive, lost or left)");
  EXPECT_EQ(refusal_of([] { from_string<JobState>("running"); }),
            "unknown job state 'running' (PENDING, RUNNING, SUCCEEDED, FAILED or STOPPED)");
  EXPECT_EQ(task_kind(JobKind::kProbe), TaskKind::kProbe);
  EXPECT_TRUE(is_terminal(JobState::kStopped));
  EXPECT_FALSE(is_terminal(JobState::kRunning));
}

TEST(WireMessages, WhatAgentsSendReadsBack) {
  const auto r = wire::parse<wire::Register>(body(
      R"({"name": "node-0", "host": "h", "pid": 12, "resources": {"cpus": 8, "memory_bytes": 1024, "gpus": 1,
          "gpu_names": ["H200"], "ib_ports": [{"device": "mlx5_0", "port": 1}]}})"));
  EXPECT_EQ(r.name, "node-0");
  EXPECT_EQ(r.pid, 12);
  EXPECT_EQ(r.resources.cpus, 8);
  EXPECT_EQ(r.resources.ib_ports.at(0).device, "mlx5_0");
  const auto h = wire::parse<wire::Heartbeat>(body(
      R"({"gpus": [{"index": 0}], "work_dir": "/w", "tasks": [{"task": "job-1/0/0", "state": "exited", "exit_code": -1},
          {"task": "job-2/0/0", "state": "exited", "signal": 9}, {"task": "job-3/0/0"}]})"));
  ASSERT_TRUE(h.gpus.has_value());
  EXPECT_EQ(h.work_dir, "/w");
  ASSERT_EQ(h.tasks.size(), 3u);
  EXPECT_EQ(h.tasks[0].exit_code, -1);
  EXPECT_FALSE(h.tasks[1].exit_code.has_value());
  EXPECT_EQ(h.tasks[1].signal, 9);
  EXPECT_EQ(h.tasks[2].state, ReportState::kRunning) << "a report without a state is a running task";
  // A job preflight's end carries its report (or its stderr's end): the controller needs both.
  const auto p = wire::parse<wire::Heartbeat>(body(
      R"({"tasks": [{"task": "job-3/preflight/0", "state": "exited", "exit_code": 0, "result": {"ok": true}},
          {"task": "job-4/preflight/0", "state": "exited", "exit_code": 2, "output": "no such file"}]})"));
  EXPECT_EQ((*p.tasks[0].result)["ok"], true);
  EXPECT_EQ(p.tasks[1].output, "no such file");
  EXPECT_FALSE(p.tasks[1].result.has_value());
  EXPECT_EQ(wire::parse<wire::Stop>(body("{}")).grace_s, 10.0);
  EXPECT_EQ(wire::parse<wire::Stop>(body(R"({"grace_s": 0.5})")).grace_s, 0.5);
  EXPECT_EQ(wire::parse<wire::Leave>(body("{}")).reason, "agent left");
  const auto l = wire::parse<wire::Logs>(body(R"({"rank": 3, "attempt": 1, "host": "h",
      "chunks": [{"stream": "stderr", "offset": 7, "data": "x\n", "eof": true}, {}]})"));
  EXPECT_EQ(l.rank, 3);
  ASSERT_EQ(l.chunks.size(), 2u);
  EXPECT_EQ(l.chunks[0].offset, 7);
  EXPECT_TRUE(l.chunks[0].eof);
  EXPECT_EQ(l.chunks[1].stream, "stdout");
  EXPECT_EQ(wire::parse<wire::Result>(body(R"({"rank": 0})")).result, nullptr);
  EXPECT_EQ(wire::parse<wire::Metrics>(body("{}")).rows, Json::array());
  // A submit body with only its kind: the defaults the CLI relies on.
  const auto s = wire::parse<wire::Submit>(body(R"({"kind": "probe"})"));
  EXPECT_EQ(s.kind, JobKind::kProbe);
  EXPECT_FALSE(s.argv.has_value());
  EXPECT_FALSE(s.preflight);
}

// ---- docs/API.md against the messages ----

namespace {

// A documented body, `{a, b?: X, c: [{d, e}]}`: each key (without its `?`), and the keys of an
// object it holds, when the doc spells them out.
struct DocShape {
  std::map<std::string, DocShape> keys;
};

// The text between the brace at s[open] and its match.
std::string braced(const std::string& s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '{' || s[i] == '[') ++depth;
    if (s[i] == '}' || s[i] == ']') --depth;
    if (depth == 0) return s.substr(open + 1, i - open - 1);
  }
  ADD_FAILURE() << "unbalanced braces in docs/API.md: " << s.substr(open, 80);
  return "";
}

DocShape parse_shape(const std::string& inside) {
  DocShape shape;
  std::vector<std::string> parts;
  int depth = 0;
  std::string cur;
  bool quoted = false;
  for (char c : inside) {
    if (c == '"') quoted = !quoted;
    if (!quoted && (c == '{' || c == '[' || c == '(')) ++depth;
    if (!quoted && (c == '}' || c == ']' || c == ')')) --depth;
    if (!quoted && c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  for (auto part : parts) {
    const auto start = part.find_first_not_of(" \n");
    if (start == std::string::npos) continue;
    part = part.substr(start);
    size_t end = 0;
    while (end < part.size() && (std::isalnum(static_cast<unsigned char>(part[end])) || part[end] == '_')) ++end;
    const std::string key = part.substr(0, end);
    if (key.empty()) continue;  // "..", "...verl metric names..."
    DocShape& sub = shape.keys[key];
    const auto brace = part.find('{', end);
    if (brace != std::string::npos) sub = parse_shape(braced(part, brace));
  }
  return shape;
}

// The first {...} after `anchor` (and then `after`) in the doc; it may span lines.
DocShape documented(const std::string& doc, const std::string& anchor, const std::string& after = "") {
  auto at = doc.find(anchor);
  EXPECT_NE(at, std::string::npos) << "docs/API.md lacks " << anchor;
  if (at == std::string::npos) return {};
  if (!after.empty()) at = doc.find(after, at);
  const auto open = doc.find('{', at);
  return parse_shape(braced(doc, open));
}

// The keys a message writes, and those of the objects it holds (the first of an array's).
DocShape written(const Json& j) {
  DocShape shape;
  for (const auto& [key, value] : j.items()) {
    DocShape& sub = shape.keys[key];
    const Json* inner = value.is_array() && !value.empty() ? &value[0] : &value;
    if (inner->is_object() && key != "result" && key != "container" && key != "files" && key != "resources")
      sub = written(*inner);
  }
  return shape;
}

void expect_same(const DocShape& doc, const DocShape& code, const std::string& what) {
  for (const auto& [key, sub] : code.keys) {
    auto it = doc.keys.find(key);
    if (it == doc.keys.end()) {
      ADD_FAILURE() << what << ": the message writes '" << key << "', which docs/API.md does not list there";
      continue;
    }
    if (!it->second.keys.empty() && !sub.keys.empty()) expect_same(it->second, sub, what + "." + key);
  }
  for (const auto& [key, sub] : doc.keys)
    if (!code.keys.count(key)) ADD_FAILURE() << what << ": docs/API.md lists '" << key << "', which the message does not have";
}

}  // namespace

TEST(WireMessages, DocsApiMdListsExactlyTheFieldsOfEveryMessage) {
  const std::string doc = files::read_file(std::string(VERL_SOURCE_DIR) + "/docs/API.md");
  auto row = [&](const std::string& method, const std::string& path) { return "| " + method + " | `" + path + "` |"; };
  expect_same(documented(doc, row("POST", "/api/nodes/register")), written(Json(full_register())), "register");
  expect_same(documented(doc, row("POST", "/api/nodes/register"), "->"), written(Json(wire::RegisterReply{})),
              "register answer");
  expect_same(documented(doc, row("POST", "/api/nodes/<id>/heartbeat")), written(Json(full_heartbeat())), "heartbeat");
  expect_same(documented(doc, row("POST", "/api/nodes/<id>/heartbeat"), "->"),
              written(Json(wire::HeartbeatReply{false, {}})), "heartbeat answer");
  expect_same(documented(doc, "A `TaskOrder` is"), written(Json(full_start())), "TaskOrder (start)");
  expect_same(documented(doc, "A `TaskOrder` is", " or `{"), written(Json(full_stop())), "TaskOrder (stop)");
  expect_same(documented(doc, row("POST", "/api/nodes/<id>/leave")), written(Json(wire::Leave{})), "leave");
  expect_same(documented(doc, row("POST", "/api/jobs")), written(Json(full_submit())), "submit");
  expect_same(documented(doc, row("POST", "/api/jobs"), "->"), written(Json(wire::JobRef{})), "submit answer");
  expect_same(documented(doc, "`Command` is"), written(Json(full_command())), "Command");
  expect_same(documented(doc, row("GET", "/api/jobs/<id>/working-dir")), written(Json(wire::WorkingDir{})), "working-dir");
  expect_same(documented(doc, row("POST", "/api/jobs/<id>/stop")), written(Json(wire::Stop{})), "stop");
  expect_same(documented(doc, row("POST", "/api/jobs/<id>/stop"), "->"), written(Json(wire::JobRef{})), "stop answer");
  expect_same(documented(doc, row("POST", "/api/jobs/<id>/logs")), written(Json(full_logs())), "logs");
  expect_same(documented(doc, row("GET", "/api/jobs/<id>/logs"), "->"),
              written(Json(wire::LogsPage{{wire::LogLineView{4, 1, "h", "stderr", "x"}}, 4, true})), "logs page");
  expect_same(documented(doc, row("POST", "/api/jobs/<id>/results")), written(Json(wire::Result{})), "results");
  expect_same(documented(doc, row("POST", "/api/jobs/<id>/metrics")), written(Json(wire::Metrics{})), "metrics");
  expect_same(documented(doc, "`JobSummary`:"), written(Json(full_summary())), "JobSummary");
  DocShape job = documented(doc, "`Job`: a `JobSummary` plus");  // the summary's fields and these
  for (const auto& [key, sub] : documented(doc, "`JobSummary`:").keys) job.keys[key] = sub;
  expect_same(job, written(Json(full_job())), "Job");
  expect_same(documented(doc, row("GET", "/api/cluster")), written(Json(full_cluster())), "cluster");
  expect_same(documented(doc, row("GET", "/api/nodes")), written(Json{{"nodes", Json::array({Json(full_node())})}}), "nodes");
  // The names of the enums the bodies carry.
  const auto submit_row = doc.substr(doc.find(row("POST", "/api/jobs")), 200);
  for (const auto& kind : names<JobKind>()) EXPECT_NE(submit_row.find('"' + kind + '"'), std::string::npos) << kind;
  for (const auto& state : names<JobState>()) EXPECT_NE(doc.find('`' + state + '`'), std::string::npos) << state;
  for (const auto& state : names<ReportState>()) EXPECT_NE(doc.find('"' + state + '"'), std::string::npos) << state;
  for (const auto& action : names<OrderAction>()) EXPECT_NE(doc.find("action: \"" + action + '"'), std::string::npos) << action;
}

}  // namespace verl::launcher

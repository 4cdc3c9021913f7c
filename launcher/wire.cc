#include "launcher/wire.h"

#include <cstdio>
#include <limits>

#include "common/error.h"

namespace verl::launcher::wire {
namespace {

constexpr int64_t kIntMax = std::numeric_limits<int>::max();
constexpr int64_t kIntMin = std::numeric_limits<int>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// A place in a message: the message ("heartbeat") and the path to an object in it ("tasks[2]",
// "command.working_dir"; empty: the body itself).
struct Where {
  std::string message, path;
  Where(const char* m) : message(m) {}  // NOLINT: a message's body
  Where(std::string m, std::string p) : message(std::move(m)), path(std::move(p)) {}
  std::string str() const { return path.empty() ? message : message + ": " + path; }
};

// Reads the fields of one JSON object; every error names the message, the path to the object
// and the key ("heartbeat: tasks[2]: 'signal' must be ..."). A null value counts as absent.
class Reader {
 public:
  Reader(const Json& j, Where where) : j_(j), where_(std::move(where)) {
    if (!j_.is_object()) bad(where_.path.empty() ? "the body must be a JSON object" : "must be a JSON object");
  }

  [[noreturn]] void bad(const std::string& what) const { throw BadMessage(where_.str() + ": " + what); }
  [[noreturn]] void bad_key(const char* key, const std::string& what) const {
    bad("'" + std::string(key) + "' " + what);
  }
  Where at(const char* key) const { return {where_.message, where_.path.empty() ? key : where_.path + "." + key}; }
  Where at(const char* key, size_t i) const {
    return {where_.message, (where_.path.empty() ? "" : where_.path + ".") + key + "[" + std::to_string(i) + "]"};
  }

  const Json* field(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const char* key) const { return field(key) != nullptr; }
  void require(const char* key, const std::string& what) const {
    if (!has(key)) bad_key(key, "is required" + (what.empty() ? std::string() : " (" + what + ")"));
  }

  // An integer within [lo, hi]: a float (1e300), a bool or a number past the range is refused,
  // never converted (nlohmann's get<int> of 1e300 is a float-to-int overflow, undefined).
  int64_t integer(const char* key, int64_t dflt, int64_t lo, int64_t hi) const {
    const Json* v = field(key);
    if (!v) return dflt;
    bool ok = false;
    int64_t out = 0;
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      ok = u <= static_cast<uint64_t>(kInt64Max);
      out = static_cast<int64_t>(u);
    } else if (v->is_number_integer()) {
      ok = true;
      out = v->get<int64_t>();
    }
    if (!ok || out < lo || out > hi)
      bad_key(key, "must be an integer within " + std::to_string(lo) + ".." + std::to_string(hi));
    return out;
  }
  int int32(const char* key, int dflt, int64_t lo = 0, int64_t hi = kIntMax) const {
    return static_cast<int>(integer(key, dflt, lo, hi));
  }
  std::optional<int64_t> opt_integer(const char* key, int64_t lo, int64_t hi) const {
    if (!has(key)) return std::nullopt;
    return integer(key, 0, lo, hi);
  }
  double number(const char* key, double dflt, double lo, double hi, const char* unit) const {
    const Json* v = field(key);
    if (!v) return dflt;
    const double x = v->is_number() ? v->get<double>() : lo - 1;
    if (!(x >= lo && x <= hi)) {
      char range[64];
      std::snprintf(range, sizeof range, "%g..%g", lo, hi);
      bad_key(key, std::string("must be a number of ") + unit + " within " + range);
    }
    return x;
  }
  std::string string(const char* key, const std::string& dflt = {}) const {
    const Json* v = field(key);
    if (!v) return dflt;
    if (!v->is_string()) bad_key(key, "must be a string");
    return v->get<std::string>();
  }
  bool boolean(const char* key, bool dflt) const {
    const Json* v = field(key);
    if (!v) return dflt;
    if (!v->is_boolean()) bad_key(key, "must be true or false");
    return v->get<bool>();
  }
  const Json* array(const char* key) const {
    const Json* v = field(key);
    if (v && !v->is_array()) bad_key(key, "must be an array");
    return v;
  }
  const Json* object(const char* key) const {
    const Json* v = field(key);
    if (v && !v->is_object()) bad_key(key, "must be an object");
    return v;
  }
  std::vector<std::string> strings(const char* key) const {
    std::vector<std::string> out;
    if (const Json* a = array(key)) {
      for (size_t i = 0; i < a->size(); ++i) {
        if (!(*a)[i].is_string()) bad(std::string(key) + "[" + std::to_string(i) + "] must be a string");
        out.push_back((*a)[i].get<std::string>());
      }
    }
    return out;
  }
  // An enum by its name (states.h); dflt when absent.
  template <typename E>
  E enumeration(const char* key, E dflt) const {
    if (!has(key)) return dflt;
    const std::string name = string(key);
    try {
      return from_string<E>(name);
    } catch (const std::invalid_argument& e) {
      bad_key(key, std::string("names an ") + e.what());
    }
  }

 private:
  const Json& j_;
  Where where_;
};

TaskReport read_task_report(const Json& j, const Where& where) {
  const Reader r(j, where);
  TaskReport t;
  t.task = r.string("task");
  t.state = r.enumeration("state", ReportState::kRunning);
  if (r.has("exit_code")) t.exit_code = r.int32("exit_code", 0, kIntMin, kIntMax);
  t.signal = r.int32("signal", 0, 0, 128);
  t.error = r.string("error");
  if (const Json* result = r.field("result"); result && result->is_object()) t.result = *result;
  t.output = r.string("output");
  return t;
}

TaskOrder read_task_order(const Json& j, const Where& where) {
  const Reader r(j, where);
  TaskOrder o;
  o.task = r.string("task");
  r.require("action", "start or stop");
  o.action = r.enumeration("action", OrderAction::kStart);
  if (o.action == OrderAction::kStop) {
    o.grace_s = r.number("grace_s", 10, 0, 3600, "seconds");
    return o;
  }
  o.job = r.string("job");
  o.rank = r.int32("rank", 0);
  o.attempt = r.int32("attempt", 0);
  o.kind = r.enumeration("kind", TaskKind::kTrain);
  o.argv = r.strings("argv");
  o.env = r.strings("env");
  o.cwd = r.string("cwd");
  o.owner = r.string("owner");
  if (const Json* files = r.object("files")) {
    for (const auto& [name, text] : files->items()) {
      if (!text.is_string()) r.bad("files: '" + name + "' must be the file's text (a string)");
      o.files.emplace_back(name, text.get<std::string>());
    }
  }
  if (r.has("metrics_file")) o.metrics_file = r.string("metrics_file");
  if (const Json* wd = r.object("working_dir")) o.working_dir_bytes = Reader(*wd, r.at("working_dir")).integer("bytes", 0, 0, kInt64Max);
  if (const Json* c = r.object("container")) o.container = *c;
  return o;
}

LogChunk read_log_chunk(const Json& j, const Where& where) {
  const Reader r(j, where);
  LogChunk c;
  c.stream = r.string("stream", "stdout");
  c.offset = r.integer("offset", 0, 0, kInt64Max);
  c.data = r.string("data");
  c.eof = r.boolean("eof", false);
  return c;
}

}  // namespace

Json parse_body(const std::string& body) {
  if (body.empty()) return Json::object();
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        throw BadMessage("the JSON body is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return Json::parse(body);  // nlohmann's parse_error or out_of_range (1e999): a 400 "bad request body"
}

// ---- Register ----

void to_json(Json& j, const Register& v) {
  j = Json{{"name", v.name}, {"host", v.host}, {"pid", v.pid}, {"resources", to_json(v.resources)}};
}

namespace {

// A node's resources (resources.h), when the body has them.
void read_resources(const Reader& r, Resources* out) {
  const Json* res = r.object("resources");
  if (!res) return;
  // resources_from_json converts with get<int>: check the numbers it reads first.
  const Reader rr(*res, r.at("resources"));
  rr.integer("cpus", 0, 0, kIntMax);
  rr.integer("memory_bytes", 0, 0, kInt64Max);
  rr.integer("gpus", 0, 0, kIntMax);
  if (const Json* ports = rr.array("ib_ports"))
    for (size_t i = 0; i < ports->size(); ++i) Reader((*ports)[i], rr.at("ib_ports", i)).integer("port", 0, 0, kIntMax);
  try {
    *out = resources_from_json(*res);
  } catch (const Error& e) {
    r.bad(e.what());
  }
}

}  // namespace

void from_json(const Json& j, Register& v) {
  const Reader r(j, "register");
  v = Register{};
  v.name = r.string("name");
  if (v.name.empty()) r.bad("'name' (a non-empty string) is required");
  v.host = r.string("host");
  v.pid = r.integer("pid", 0, 0, kInt64Max);
  read_resources(r, &v.resources);
}

void to_json(Json& j, const NodeView& v) {
  j = Json{{"id", v.id},
           {"name", v.name},
           {"host", v.host},
           {"pid", v.pid},
           {"state", to_string(v.state)},
           {"resources", to_json(v.resources)},
           {"registered_ms", v.registered_ms},
           {"last_heartbeat_ms", v.last_heartbeat_ms},
           {"heartbeat_age_s", v.heartbeat_age_s},
           {"heartbeats", v.heartbeats},
           {"lost_ms", v.lost_ms ? Json(*v.lost_ms) : Json(nullptr)},
           {"reason", v.reason}};
  if (v.gpu_samples) j["gpu_samples"] = *v.gpu_samples;
}

void from_json(const Json& j, NodeView& v) {
  const Reader r(j, "node");
  v = NodeView{};
  v.id = r.integer("id", 0, 0, kInt64Max);
  v.name = r.string("name");
  v.host = r.string("host");
  v.pid = r.integer("pid", 0, 0, kInt64Max);
  r.require("state", "alive, lost or left");
  v.state = r.enumeration("state", NodeState::kAlive);
  read_resources(r, &v.resources);
  v.registered_ms = r.integer("registered_ms", 0, 0, kInt64Max);
  v.last_heartbeat_ms = r.integer("last_heartbeat_ms", 0, 0, kInt64Max);
  v.heartbeat_age_s = r.number("heartbeat_age_s", 0, -1e12, 1e12, "seconds");
  v.heartbeats = r.integer("heartbeats", 0, 0, kInt64Max);
  v.lost_ms = r.opt_integer("lost_ms", 0, kInt64Max);
  v.reason = r.string("reason");
  if (const Json* samples = r.array("gpu_samples")) v.gpu_samples = *samples;
}

void to_json(Json& j, const HeadView& v) {
  j = Json{{"bind", v.bind}, {"hostname", v.hostname}, {"pid", v.pid}, {"started_ms", v.started_ms}, {"uptime_s", v.uptime_s}};
}

void from_json(const Json& j, HeadView& v) {
  const Reader r(j, "cluster: head");
  v = HeadView{};
  v.bind = r.string("bind");
  v.hostname = r.string("hostname");
  v.pid = r.integer("pid", 0, 0, kInt64Max);
  v.started_ms = r.integer("started_ms", 0, 0, kInt64Max);
  v.uptime_s = r.number("uptime_s", 0, -1e12, 1e12, "seconds");
}

void to_json(Json& j, const ProbePorts& v) { j = Json{{"tcp", v.tcp}, {"time", v.time}}; }

void from_json(const Json& j, ProbePorts& v) {
  const Reader r(j, "cluster: probe_ports");
  r.require("tcp", "a port");
  r.require("time", "a port");
  v.tcp = r.int32("tcp", 0, 1, 65535);
  v.time = r.int32("time", 0, 1, 65535);
}

void to_json(Json& j, const ClusterView& v) {
  j = Json{{"name", v.name},
           {"backend", v.backend},
           {"state", v.state()},
           {"head", v.head},
           {"heartbeat_interval_s", v.heartbeat_interval_s},
           {"heartbeat_timeout_s", v.heartbeat_timeout_s},
           {"expected_nodes", v.expected_nodes},
           {"store_port", v.store_port},
           {"probe_ports", v.probe_ports ? Json(*v.probe_ports) : Json(nullptr)},
           {"counts",
            {{to_string(NodeState::kAlive), v.alive}, {to_string(NodeState::kLost), v.lost}, {to_string(NodeState::kLeft), v.left}}}};
}

void from_json(const Json& j, ClusterView& v) {
  const Reader r(j, "cluster");
  v = ClusterView{};
  v.name = r.string("name");
  v.backend = r.string("backend");
  v.shutting_down = r.string("state", "up") == "shutting_down";
  if (const Json* head = r.object("head")) v.head = head->get<HeadView>();
  v.heartbeat_interval_s = r.number("heartbeat_interval_s", 0, 0, 1e9, "seconds");
  v.heartbeat_timeout_s = r.number("heartbeat_timeout_s", 0, 0, 1e9, "seconds");
  v.expected_nodes = r.strings("expected_nodes");
  v.store_port = r.int32("store_port", 0, 0, 65535);
  if (const Json* ports = r.object("probe_ports")) v.probe_ports = ports->get<ProbePorts>();
  if (const Json* counts = r.object("counts")) {
    const Reader c(*counts, r.at("counts"));
    v.alive = c.int32(to_string(NodeState::kAlive), 0);
    v.lost = c.int32(to_string(NodeState::kLost), 0);
    v.left = c.int32(to_string(NodeState::kLeft), 0);
  }
}

void to_json(Json& j, const RegisterReply& v) { j = Json{{"id", v.id}, {"heartbeat_interval_s", v.heartbeat_interval_s}}; }

void from_json(const Json& j, RegisterReply& v) {
  const Reader r(j, "register answer");
  r.require("id", "the node's id");
  v.id = r.integer("id", 0, 0, kInt64Max);
  v.heartbeat_interval_s = r.number("heartbeat_interval_s", 1, 0, 86400, "seconds");
}

// ---- Heartbeat ----

void to_json(Json& j, const TaskReport& v) {
  j = Json{{"task", v.task}, {"state", to_string(v.state)}};
  if (v.exit_code) j["exit_code"] = *v.exit_code;
  if (v.signal) j["signal"] = v.signal;
  if (!v.error.empty()) j["error"] = v.error;
  if (v.result) j["result"] = *v.result;
  if (!v.output.empty()) j["output"] = v.output;
}

void from_json(const Json& j, TaskReport& v) { v = read_task_report(j, "task report"); }

void to_json(Json& j, const Heartbeat& v) {
  j = Json{{"tasks", v.tasks}, {"work_dir", v.work_dir}};
  if (v.gpus) j["gpus"] = to_json(*v.gpus);
}

void from_json(const Json& j, Heartbeat& v) {
  const Reader r(j, "heartbeat");
  v = Heartbeat{};
  if (const Json* tasks = r.array("tasks"))
    for (size_t i = 0; i < tasks->size(); ++i) v.tasks.push_back(read_task_report((*tasks)[i], r.at("tasks", i)));
  v.work_dir = r.string("work_dir");
  // Samples are shown, never relied on: what is not a sample is skipped (gpu_sampler.h).
  if (const Json* gpus = r.field("gpus"); gpus && gpus->is_array()) v.gpus = gpu_samples_from_json(*gpus);
}

void to_json(Json& j, const TaskOrder& v) {
  j = Json{{"task", v.task}, {"action", to_string(v.action)}};
  if (v.action == OrderAction::kStop) {
    j["grace_s"] = v.grace_s;
    return;
  }
  j["job"] = v.job;
  j["rank"] = v.rank;
  j["attempt"] = v.attempt;
  j["kind"] = to_string(v.kind);
  j["cwd"] = v.cwd;
  j["owner"] = v.owner;
  j["argv"] = v.argv;
  Json files = Json::object();
  for (const auto& [name, text] : v.files) files[name] = text;
  j["files"] = files;
  if (v.metrics_file) j["metrics_file"] = *v.metrics_file;
  if (v.working_dir_bytes) j["working_dir"] = {{"bytes", *v.working_dir_bytes}};
  j["env"] = v.env;
  if (!v.container.is_null()) j["container"] = v.container;
}

void from_json(const Json& j, TaskOrder& v) { v = read_task_order(j, "task order"); }

void to_json(Json& j, const HeartbeatReply& v) { j = Json{{"shutdown", v.shutdown}, {"tasks", v.tasks}}; }

void from_json(const Json& j, HeartbeatReply& v) {
  const Reader r(j, "heartbeat answer");
  v = HeartbeatReply{};
  v.shutdown = r.boolean("shutdown", false);
  if (const Json* tasks = r.array("tasks"))
    for (size_t i = 0; i < tasks->size(); ++i) v.tasks.push_back(read_task_order((*tasks)[i], r.at("tasks", i)));
}

void to_json(Json& j, const Leave& v) { j = Json{{"reason", v.reason}}; }

void from_json(const Json& j, Leave& v) { v.reason = Reader(j, "leave").string("reason", "agent left"); }

// ---- jobs ----

void to_json(Json& j, const SubmitCommand& v) {
  j = Json{{"argv", v.spec.argv}, {"env", v.spec.env}, {"ranks_per_node", v.spec.ranks_per_node}};
  if (!v.spec.working_dir.empty())
    j["working_dir"] = {{"source", v.spec.working_dir}, {"tar_base64", base64_encode(v.working_dir_tar)}};
}

namespace {

SubmitCommand read_submit_command(const Json& j, const Where& where) {
  const Reader r(j, where);
  SubmitCommand out;
  out.spec.argv = r.strings("argv");
  if (out.spec.argv.empty()) r.bad("'argv' must be a non-empty array of strings (the command and its arguments)");
  if (out.spec.argv[0].empty()) r.bad("'argv[0]' (the program) is empty");
  out.spec.env = r.strings("env");
  for (size_t i = 0; i < out.spec.env.size(); ++i)
    if (const std::string why = env_entry_problem(out.spec.env[i]); !why.empty())
      r.bad("'env[" + std::to_string(i) + "]': " + why);
  out.spec.ranks_per_node = r.int32("ranks_per_node", 0);
  if (const Json* wd = r.object("working_dir")) {
    const Reader w(*wd, r.at("working_dir"));
    out.spec.working_dir = w.string("source");
    if (out.spec.working_dir.empty()) w.bad("'source' (the submitter's directory) is required");
    try {
      out.working_dir_tar = base64_decode(w.string("tar_base64"));
    } catch (const std::invalid_argument& e) {
      w.bad(std::string("'tar_base64': ") + e.what());
    }
    if (out.working_dir_tar.empty()) w.bad("'tar_base64' (the directory as a tar) is empty");
    if (static_cast<int64_t>(out.working_dir_tar.size()) > kMaxWorkingDirBytes)
      w.bad("the tar is " + std::to_string(out.working_dir_tar.size()) + " bytes, more than " +
            std::to_string(kMaxWorkingDirBytes));
    out.spec.working_dir_bytes = static_cast<int64_t>(out.working_dir_tar.size());
  }
  return out;
}

}  // namespace

void from_json(const Json& j, SubmitCommand& v) { v = read_submit_command(j, Where("jobs", "command")); }

void to_json(Json& j, const Submit& v) {
  j = Json{{"kind", to_string(v.kind)}, {"overrides", v.overrides}, {"preflight", v.preflight}, {"nccl_debug", v.nccl_debug}};
  if (!v.yaml.empty()) j["yaml"] = v.yaml;
  if (!v.file.empty()) j["file"] = v.file;
  if (v.argv) j["argv"] = *v.argv;
  if (v.command) j["command"] = *v.command;
}

void from_json(const Json& j, Submit& v) {
  const Reader r(j, "jobs");
  v = Submit{};
  v.kind = r.enumeration("kind", JobKind::kTrain);
  v.yaml = r.string("yaml");
  v.file = r.string("file");
  v.overrides = r.strings("overrides");
  if (r.has("argv")) v.argv = r.strings("argv");
  v.preflight = r.boolean("preflight", false);
  v.nccl_debug = r.boolean("nccl_debug", false);
  if (v.kind == JobKind::kCommand) {
    if (!r.has("command")) r.bad("a job of kind command needs 'command': {argv: [...]}");
    v.command = read_submit_command(*r.field("command"), r.at("command"));
  }
}

void to_json(Json& j, const JobRef& v) { j = Json{{"id", v.id}, {"state", to_string(v.state)}}; }

void from_json(const Json& j, JobRef& v) {
  const Reader r(j, "job");
  r.require("id", "job-<N>");
  v.id = r.string("id");
  v.state = r.enumeration("state", JobState::kPending);
}

void to_json(Json& j, const Stop& v) { j = Json{{"grace_s", v.grace_s}}; }

void from_json(const Json& j, Stop& v) { v.grace_s = Reader(j, "stop").number("grace_s", 10, 0, 3600, "seconds"); }

void to_json(Json& j, const WorkingDir& v) {
  j = Json{{"source", v.source}, {"bytes", v.tar.size()}, {"tar_base64", base64_encode(v.tar)}};
}

void from_json(const Json& j, WorkingDir& v) {
  const Reader r(j, "working-dir");
  v.source = r.string("source");
  try {
    v.tar = base64_decode(r.string("tar_base64"));
  } catch (const std::invalid_argument& e) {
    r.bad(std::string("'tar_base64': ") + e.what());
  }
}

void to_json(Json& j, const LogChunk& v) {
  j = Json{{"stream", v.stream}, {"offset", v.offset}, {"data", v.data}, {"eof", v.eof}};
}

void from_json(const Json& j, LogChunk& v) { v = read_log_chunk(j, "log chunk"); }

void to_json(Json& j, const Logs& v) {
  j = Json{{"rank", v.rank}, {"attempt", v.attempt}, {"host", v.host}, {"chunks", v.chunks}};
}

void from_json(const Json& j, Logs& v) {
  const Reader r(j, "logs");
  v = Logs{};
  r.require("rank", "");
  v.rank = r.int32("rank", 0);
  v.attempt = r.int32("attempt", 0);
  v.host = r.string("host");
  if (const Json* chunks = r.array("chunks"))
    for (size_t i = 0; i < chunks->size(); ++i) v.chunks.push_back(read_log_chunk((*chunks)[i], r.at("chunks", i)));
}

void to_json(Json& j, const LogLineView& v) {
  j = Json{{"seq", v.seq}, {"rank", v.rank}, {"host", v.host}, {"stream", v.stream}, {"text", v.text}};
}

namespace {

LogLineView read_log_line(const Json& j, const Where& where) {
  const Reader r(j, where);
  LogLineView l;
  l.seq = r.integer("seq", 0, 0, kInt64Max);
  l.rank = r.int32("rank", 0);
  l.host = r.string("host");
  l.stream = r.string("stream");
  l.text = r.string("text");
  return l;
}

}  // namespace

void from_json(const Json& j, LogLineView& v) { v = read_log_line(j, "log line"); }

void to_json(Json& j, const LogsPage& v) { j = Json{{"lines", v.lines}, {"next", v.next}, {"done", v.done}}; }

void from_json(const Json& j, LogsPage& v) {
  const Reader r(j, "logs page");
  v = LogsPage{};
  if (const Json* lines = r.array("lines"))
    for (size_t i = 0; i < lines->size(); ++i) v.lines.push_back(read_log_line((*lines)[i], r.at("lines", i)));
  v.next = r.integer("next", 0, 0, kInt64Max);
  v.done = r.boolean("done", false);
}

void to_json(Json& j, const Result& v) { j = Json{{"rank", v.rank}, {"result", v.result}}; }

void from_json(const Json& j, Result& v) {
  const Reader r(j, "results");
  v = Result{};
  r.require("rank", "");
  v.rank = r.int32("rank", 0);
  if (const Json* result = r.field("result")) v.result = *result;
}

void to_json(Json& j, const Metrics& v) { j = Json{{"rows", v.rows}}; }

void from_json(const Json& j, Metrics& v) {
  const Reader r(j, "metrics");
  v.rows = Json::array();
  if (const Json* rows = r.array("rows")) {
    for (size_t i = 0; i < rows->size(); ++i) Reader((*rows)[i], r.at("rows", i));
    v.rows = *rows;
  }
}

void to_json(Json& j, const JobSummary& v) {
  j = Json{{"id", v.id}, {"kind", to_string(v.kind)}, {"state", to_string(v.state)}, {"submitted_ms", v.submitted_ms}};
  if (v.started_ms) j["started_ms"] = *v.started_ms;
  if (v.ended_ms) j["ended_ms"] = *v.ended_ms;
  j["step"] = v.step;
  j["total_steps"] = v.total_steps;
  j["nnodes"] = v.nnodes;
  j["n_gpus_per_node"] = v.n_gpus_per_node;
  j["world_size"] = v.world_size;
  j["restarts"] = v.restarts;
  if (v.command) j["command"] = *v.command;
}

void from_json(const Json& j, JobSummary& v) {
  const Reader r(j, "job summary");
  v = JobSummary{};
  r.require("id", "job-<N>");
  v.id = r.string("id");
  v.kind = r.enumeration("kind", JobKind::kTrain);
  v.state = r.enumeration("state", JobState::kPending);
  v.submitted_ms = r.integer("submitted_ms", 0, 0, kInt64Max);
  v.started_ms = r.opt_integer("started_ms", 0, kInt64Max);
  v.ended_ms = r.opt_integer("ended_ms", 0, kInt64Max);
  v.step = r.integer("step", 0, std::numeric_limits<int64_t>::min(), kInt64Max);
  v.total_steps = r.integer("total_steps", 0, 0, kInt64Max);
  v.nnodes = r.int32("nnodes", 0);
  v.n_gpus_per_node = r.int32("n_gpus_per_node", 0);
  v.world_size = r.int32("world_size", 0);
  v.restarts = r.int32("restarts", 0);
  if (r.has("command")) v.command = r.string("command");
}

void to_json(Json& j, const PlacementView& v) {
  j = Json{{"rank", v.rank},         {"node", v.node},     {"host", v.host}, {"local_rank", v.local_rank},
           {"device", v.device},     {"attempt", v.attempt}, {"task", v.task}, {"state", to_string(v.state)}};
  if (v.exit_code) j["exit_code"] = *v.exit_code;
  if (v.signal) j["signal"] = v.signal;
  if (!v.error.empty()) j["error"] = v.error;
  if (v.dir) j["dir"] = *v.dir;
}

namespace {

PlacementView read_placement(const Json& j, const Where& where) {
  const Reader r(j, where);
  PlacementView p;
  p.rank = r.int32("rank", 0);
  p.node = r.string("node");
  p.host = r.string("host");
  p.local_rank = r.int32("local_rank", 0);
  p.device = r.string("device");
  p.attempt = r.int32("attempt", 0);
  p.task = r.string("task");
  p.state = r.enumeration("state", TaskState::kAssigned);
  if (r.has("exit_code")) p.exit_code = r.int32("exit_code", 0, kIntMin, kIntMax);
  p.signal = r.int32("signal", 0, 0, 128);
  p.error = r.string("error");
  if (r.has("dir")) p.dir = r.string("dir");
  return p;
}

JobEventView read_event(const Json& j, const Where& where) {
  const Reader r(j, where);
  return JobEventView{r.string("state"), r.integer("time_ms", 0, 0, kInt64Max), r.string("detail")};
}

}  // namespace

void from_json(const Json& j, PlacementView& v) { v = read_placement(j, "placement"); }

void to_json(Json& j, const JobEventView& v) { j = Json{{"state", v.state}, {"time_ms", v.time_ms}, {"detail", v.detail}}; }

void from_json(const Json& j, JobEventView& v) { v = read_event(j, "event"); }

void to_json(Json& j, const Job& v) {
  j = v.summary;  // the summary's fields first
  j["attempt"] = v.attempt;
  j["config"] = v.config;
  if (v.command_spec) j["command_spec"] = *v.command_spec;
  if (v.pending_reason) j["pending_reason"] = *v.pending_reason;
  j["placement"] = v.placement;
  j["rendezvous"] = v.rendezvous;
  j["events"] = v.events;
  if (!v.failure.is_null()) j["failure"] = v.failure;
  j["latest_metrics"] = v.latest_metrics;
  j["score_trend"] = v.score_trend;
  if (v.eta_s) j["eta_s"] = *v.eta_s;
  if (v.results) j["results"] = *v.results;
  if (v.scaling) j["scaling"] = *v.scaling;
  if (v.nccl) j["nccl"] = *v.nccl;
}

void from_json(const Json& j, Job& v) {
  v = Job{};
  v.summary = j.get<JobSummary>();
  const Reader r(j, "job");
  v.attempt = r.int32("attempt", 0);
  if (const Json* config = r.field("config")) v.config = *config;
  if (const Json* spec = r.object("command_spec")) v.command_spec = spec->get<CommandSpec>();
  if (r.has("pending_reason")) v.pending_reason = r.string("pending_reason");
  if (const Json* placement = r.array("placement"))
    for (size_t i = 0; i < placement->size(); ++i) v.placement.push_back(read_placement((*placement)[i], r.at("placement", i)));
  if (const Json* rendezvous = r.object("rendezvous")) v.rendezvous = *rendezvous;
  if (const Json* events = r.array("events"))
    for (size_t i = 0; i < events->size(); ++i) v.events.push_back(read_event((*events)[i], r.at("events", i)));
  if (const Json* failure = r.field("failure")) v.failure = *failure;
  if (const Json* latest = r.object("latest_metrics")) v.latest_metrics = *latest;
  if (const Json* trend = r.array("score_trend")) v.score_trend = *trend;
  if (r.has("eta_s")) v.eta_s = r.number("eta_s", 0, 0, 1e15, "seconds");
  if (const Json* results = r.object("results")) v.results = *results;
  if (const Json* scaling = r.object("scaling")) v.scaling = *scaling;
  if (const Json* nccl = r.array("nccl")) v.nccl = *nccl;
}

}  // namespace verl::launcher::wire

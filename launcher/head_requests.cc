#include "launcher/head_requests.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "common/error.h"

namespace verl::launcher::requests {
namespace {

[[noreturn]] void bad(const char* endpoint, const std::string& what) {
  throw std::invalid_argument(std::string(endpoint) + ": " + what);
}

const Json* field(const Json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

void need_object(const Json& body, const char* endpoint) {
  if (!body.is_object()) bad(endpoint, "the body must be a JSON object");
}

// An integer within [lo, hi]: a float (1e300), a bool or a number past the range is refused,
// never converted (nlohmann's get<int> of 1e300 is a float-to-int overflow, undefined).
int64_t integer(const Json& body, const char* endpoint, const char* key, int64_t dflt, int64_t lo, int64_t hi) {
  const Json* v = field(body, key);
  if (!v) return dflt;
  bool ok = false;
  int64_t out = 0;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    ok = u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    out = static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    ok = true;
    out = v->get<int64_t>();
  }
  if (!ok || out < lo || out > hi)
    bad(endpoint, "'" + std::string(key) + "' must be an integer within " + std::to_string(lo) + ".." + std::to_string(hi));
  return out;
}

std::string string(const Json& body, const char* endpoint, const char* key, const std::string& dflt) {
  const Json* v = field(body, key);
  if (!v) return dflt;
  if (!v->is_string()) bad(endpoint, "'" + std::string(key) + "' must be a string");
  return v->get<std::string>();
}

bool boolean(const Json& body, const char* endpoint, const char* key, bool dflt) {
  const Json* v = field(body, key);
  if (!v) return dflt;
  if (!v->is_boolean()) bad(endpoint, "'" + std::string(key) + "' must be true or false");
  return v->get<bool>();
}

const Json* array(const Json& body, const char* endpoint, const char* key) {
  const Json* v = field(body, key);
  if (v && !v->is_array()) bad(endpoint, "'" + std::string(key) + "' must be an array");
  return v;
}

constexpr int64_t kIntMax = std::numeric_limits<int>::max();
constexpr int64_t kIntMin = std::numeric_limits<int>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

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
        throw std::invalid_argument("the JSON body is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return Json::parse(body);  // nlohmann's parse_error or out_of_range (1e999): a 400 "bad request body"
}

Register parse_register(const Json& body) {
  constexpr const char* kWhere = "register";
  need_object(body, kWhere);
  Register r;
  r.name = string(body, kWhere, "name", "");
  if (r.name.empty()) bad(kWhere, "'name' (a non-empty string) is required");
  r.host = string(body, kWhere, "host", "");
  r.pid = integer(body, kWhere, "pid", 0, 0, kInt64Max);
  const Json* res = field(body, "resources");
  if (res) {
    if (!res->is_object()) bad(kWhere, "'resources' must be an object");
    // resources_from_json converts with get<int>: check the numbers it reads first.
    integer(*res, "register: resources", "cpus", 0, 0, kIntMax);
    integer(*res, "register: resources", "memory_bytes", 0, 0, kInt64Max);
    integer(*res, "register: resources", "gpus", 0, 0, kIntMax);
    if (const Json* ports = array(*res, "register: resources", "ib_ports")) {
      for (const auto& p : *ports) {
        need_object(p, "register: resources.ib_ports[]");
        integer(p, "register: resources.ib_ports[]", "port", 0, 0, kIntMax);
      }
    }
    try {
      r.resources = resources_from_json(*res);
    } catch (const Error& e) {
      bad(kWhere, e.what());
    }
  }
  return r;
}

Heartbeat parse_heartbeat(const Json& body) {
  constexpr const char* kWhere = "heartbeat";
  need_object(body, kWhere);
  Heartbeat h;
  if (const Json* gpus = field(body, "gpus"); gpus && gpus->is_array()) h.gpus = *gpus;
  if (const Json* tasks = array(body, kWhere, "tasks")) {
    for (const auto& t : *tasks) {
      need_object(t, "heartbeat: tasks[]");
      TaskReport r;
      r.task = string(t, "heartbeat: tasks[]", "task", "");
      r.state = string(t, "heartbeat: tasks[]", "state", "");
      if (field(t, "exit_code"))
        r.exit_code = static_cast<int>(integer(t, "heartbeat: tasks[]", "exit_code", 0, kIntMin, kIntMax));
      r.signal = static_cast<int>(integer(t, "heartbeat: tasks[]", "signal", 0, 0, 128));
      r.error = string(t, "heartbeat: tasks[]", "error", "");
      if (const Json* result = field(t, "result"); result && result->is_object()) r.result = *result;
      r.output = string(t, "heartbeat: tasks[]", "output", "");
      h.tasks.push_back(std::move(r));
    }
  }
  h.work_dir = string(body, kWhere, "work_dir", "");
  return h;
}

Json to_json(const std::vector<TaskReport>& tasks) {
  Json out = Json::array();
  for (const auto& t : tasks) {
    Json j = {{"task", t.task}, {"state", t.state}, {"signal", t.signal}, {"error", t.error}};
    if (t.exit_code) j["exit_code"] = *t.exit_code;
    if (t.result) j["result"] = *t.result;
    if (!t.output.empty()) j["output"] = t.output;
    out.push_back(std::move(j));
  }
  return out;
}

SubmitCommand parse_submit_command(const Json& body) {
  constexpr const char* kWhere = "jobs: command";
  need_object(body, "jobs");
  const Json* c = field(body, "command");
  if (!c) bad("jobs", "a job of kind command needs 'command': {argv: [...]}");
  need_object(*c, kWhere);
  SubmitCommand out;
  const Json* argv = array(*c, kWhere, "argv");
  if (!argv || argv->empty()) bad(kWhere, "'argv' must be a non-empty array of strings (the command and its arguments)");
  for (const auto& a : *argv) {
    if (!a.is_string()) bad(kWhere, "'argv' must hold strings only");
    out.spec.argv.push_back(a.get<std::string>());
  }
  if (out.spec.argv[0].empty()) bad(kWhere, "'argv[0]' (the program) is empty");
  if (const Json* env = array(*c, kWhere, "env")) {
    for (const auto& e : *env) {
      if (!e.is_string()) bad(kWhere, "'env' must hold NAME=value strings");
      if (const std::string why = env_entry_problem(e.get<std::string>()); !why.empty()) bad(kWhere, "'env': " + why);
      out.spec.env.push_back(e.get<std::string>());
    }
  }
  out.spec.ranks_per_node = static_cast<int>(integer(*c, kWhere, "ranks_per_node", 0, 0, kIntMax));
  if (const Json* wd = field(*c, "working_dir")) {
    need_object(*wd, "jobs: command.working_dir");
    out.spec.working_dir = string(*wd, "jobs: command.working_dir", "source", "");
    if (out.spec.working_dir.empty()) bad("jobs: command.working_dir", "'source' (the submitter's directory) is required");
    try {
      out.working_dir_tar = base64_decode(string(*wd, "jobs: command.working_dir", "tar_base64", ""));
    } catch (const std::invalid_argument& e) {
      bad("jobs: command.working_dir", std::string("'tar_base64': ") + e.what());
    }
    if (out.working_dir_tar.empty()) bad("jobs: command.working_dir", "'tar_base64' (the directory as a tar) is empty");
    if (static_cast<int64_t>(out.working_dir_tar.size()) > kMaxWorkingDirBytes)
      bad("jobs: command.working_dir", "the tar is " + std::to_string(out.working_dir_tar.size()) + " bytes, more than " +
                                           std::to_string(kMaxWorkingDirBytes));
    out.spec.working_dir_bytes = static_cast<int64_t>(out.working_dir_tar.size());
  }
  return out;
}

std::string parse_leave_reason(const Json& body) {
  need_object(body, "leave");
  return string(body, "leave", "reason", "agent left");
}

double parse_stop_grace(const Json& body) {
  need_object(body, "stop");
  const Json* v = field(body, "grace_s");
  if (!v) return 10.0;
  const double grace = v->is_number() ? v->get<double>() : -1;
  if (!(grace >= 0 && grace <= 3600)) bad("stop", "'grace_s' must be a number of seconds within 0..3600");
  return grace;
}

Logs parse_logs(const Json& body) {
  constexpr const char* kWhere = "logs";
  need_object(body, kWhere);
  Logs l;
  if (!field(body, "rank")) bad(kWhere, "'rank' is required");
  l.rank = static_cast<int>(integer(body, kWhere, "rank", 0, 0, kIntMax));
  l.attempt = static_cast<int>(integer(body, kWhere, "attempt", 0, 0, kIntMax));
  l.host = string(body, kWhere, "host", "");
  if (const Json* chunks = array(body, kWhere, "chunks")) {
    for (const auto& c : *chunks) {
      need_object(c, "logs: chunks[]");
      LogChunk chunk;
      chunk.stream = string(c, "logs: chunks[]", "stream", "stdout");
      chunk.offset = integer(c, "logs: chunks[]", "offset", 0, 0, kInt64Max);
      chunk.data = string(c, "logs: chunks[]", "data", "");
      chunk.eof = boolean(c, "logs: chunks[]", "eof", false);
      l.chunks.push_back(std::move(chunk));
    }
  }
  return l;
}

Result parse_result(const Json& body) {
  need_object(body, "results");
  if (!field(body, "rank")) bad("results", "'rank' is required");
  Result r;
  r.rank = static_cast<int>(integer(body, "results", "rank", 0, 0, kIntMax));
  if (const Json* v = field(body, "result")) r.result = *v;
  return r;
}

Json parse_metrics_rows(const Json& body) {
  need_object(body, "metrics");
  const Json* rows = array(body, "metrics", "rows");
  if (!rows) return Json::array();
  for (const auto& r : *rows) need_object(r, "metrics: rows[]");
  return *rows;
}

}  // namespace verl::launcher::requests

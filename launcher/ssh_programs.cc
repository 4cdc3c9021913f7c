#include "launcher/ssh_programs.h"

#include <algorithm>

#include "common/process.h"
#include "common/template.h"

namespace verl::launcher::ssh_programs {
namespace {

using Json = nlohmann::ordered_json;
using process::quote;

// stop.sh polls this often; its step counts are the C++ protocol's times in these steps.
constexpr std::chrono::milliseconds kPoll{50};

std::string line(const std::string& name, const Json& vars) { return tmpl::render_line(tmpl::load("ssh/" + name), vars); }

}  // namespace

std::string ticks_fn() { return line("proc_ticks.sh", Json::object()); }

std::string start(const std::string& cd_shell, const std::vector<std::string>& env, const std::string& agent_shell) {
  Json quoted = Json::array();
  for (const auto& e : env) quoted.push_back(quote(e));
  return line("start.sh", {{"cd", cd_shell}, {"has_env", !env.empty()}, {"env", quoted}, {"agent", agent_shell}, {"ticks_fn", ticks_fn()}});
}

std::string sync(const Sync& s) {
  const bool auto_copy = s.copy == CopyBinary::kAuto;
  return line("sync.sh", {{"dir", s.dir_shell},
                          {"bin_dir", s.bin_dir_shell},
                          {"exe", s.exe_shell},
                          {"auto", auto_copy},
                          {"never", s.copy == CopyBinary::kNever},
                          {"version", quote(s.version)},
                          {"size", quote(s.size)},
                          {"module", auto_copy ? s.module_shell : std::string()},
                          {"module_size", quote(s.module_size)},
                          {"start", s.start}});
}

std::string check(pid_t pid, int64_t start_ticks, const std::string& log_shell) {
  return line("check.sh", {{"pid", std::to_string(pid)}, {"start_ticks", std::to_string(start_ticks)}, {"log", log_shell},
                           {"ticks_fn", ticks_fn()}});
}

std::string stop(pid_t pid, int64_t start_ticks, std::chrono::milliseconds grace) {
  return line("stop.sh", {{"pid", std::to_string(pid)},
                          {"start_ticks", std::to_string(start_ticks)},
                          {"grace_steps", std::to_string(std::max<long>(1, static_cast<long>(grace.count() / kPoll.count())))},
                          {"kill_steps", std::to_string(process::kStopKillWait.count() / kPoll.count())},
                          {"poll_s", "0.05"},
                          {"ticks_fn", ticks_fn()}});
}

}  // namespace verl::launcher::ssh_programs

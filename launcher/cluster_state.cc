#include "launcher/cluster_state.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/files.h"
#include "common/process.h"

namespace verl::launcher {
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

Json to_json(const ClusterState& s) {
  Json procs = Json::array();
  for (const auto& p : s.processes)
    procs.push_back({{"role", to_string(p.role)}, {"node", p.node}, {"host", p.host}, {"pid", static_cast<int64_t>(p.pid)},
                     {"start_ticks", p.start_ticks}, {"log", p.log}});
  return {{"name", s.name},       {"backend", s.backend},     {"status", to_string(s.status)},
          {"head_host", s.head_host}, {"head_port", s.head_port}, {"updated_ms", s.updated_ms},
          {"processes", procs}};
}

ClusterState state_from_json(const Json& j) {
  ClusterState s;
  s.name = j.at("name").get<std::string>();
  s.backend = j.at("backend").get<std::string>();
  s.status = from_string<ClusterStatus>(j.at("status").get<std::string>());
  s.head_host = j.at("head_host").get<std::string>();
  s.head_port = j.at("head_port").get<int>();
  s.updated_ms = j.value("updated_ms", int64_t{0});
  for (const auto& p : j.at("processes"))
    s.processes.push_back({from_string<ProcessRole>(p.at("role").get<std::string>()), p.value("node", ""), p.value("host", ""),
                           static_cast<pid_t>(p.at("pid").get<int64_t>()), p.at("start_ticks").get<int64_t>(),
                           p.value("log", "")});
  return s;
}

void write_state(const StatePaths& paths, const ClusterState& state) {
  files::write_atomic(paths.state(), to_json(state).dump(2) + "\n", 0600);
}

std::optional<ClusterState> read_state(const StatePaths& paths) {
  std::error_code ec;
  if (!fs::exists(paths.state(), ec)) return std::nullopt;
  try {
    return state_from_json(Json::parse(files::read_file(paths.state())));
  } catch (const nlohmann::json::exception& e) {
    throw Error(ExitCode::kFailure, "corrupt cluster state " + paths.state() + ": " + e.what(),
                "stop what is left with 'verlctl down', or remove the directory");
  } catch (const std::invalid_argument& e) {  // a role or status states.h does not know
    throw Error(ExitCode::kFailure, "corrupt cluster state " + paths.state() + ": " + e.what(),
                "stop what is left with 'verlctl down', or remove the directory");
  }
}

std::string generate_token() {
  unsigned char bytes[32];
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? ::read(fd, bytes, sizeof bytes) : -1;
  if (fd >= 0) ::close(fd);
  if (n != static_cast<ssize_t>(sizeof bytes))
    throw Error(ExitCode::kFailure, "cannot read /dev/urandom for the head's token", "is /dev mounted?");
  std::string hex;
  char buf[3];
  for (unsigned char b : bytes) {
    std::snprintf(buf, sizeof buf, "%02x", b);
    hex += buf;
  }
  return hex;
}

std::string read_token(const std::string& path) {
  std::string t = files::read_file(path);
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ' || t.back() == '\r')) t.pop_back();
  if (t.empty()) throw Error(ExitCode::kFailure, "the token file " + path + " is empty", "bring the cluster up again");
  return t;
}

namespace {

// A /proc/<pid>/ file's text; nullopt when the process is gone. It may end between the open
// and the read, which then fails with ESRCH and libstdc++ throws from inside the iterator.
std::optional<std::string> read_proc_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<int64_t> process_start_ticks(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  const auto read = read_proc_file("/proc/" + std::to_string(pid) + "/stat");
  if (!read) return std::nullopt;
  const std::string& text = *read;
  // The command name (field 2) is in parentheses and may hold anything: parse after the last ')'.
  const auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(text.substr(close + 1));
  std::string state;
  rest >> state;
  if (state == "Z" || state == "X") return std::nullopt;
  std::string field;
  for (int i = 4; i < 22; ++i) rest >> field;  // fields 4..21
  int64_t start = 0;
  if (!(rest >> start)) return std::nullopt;
  return start;
}

bool is_same_process(const ProcessRecord& p) {
  auto start = process_start_ticks(p.pid);
  return start && *start == p.start_ticks;
}

bool stop_recorded(const ProcessRecord& p, std::chrono::milliseconds grace) {
  if (!is_same_process(p)) return true;
  const pid_t pid = p.pid;
  return process::stop_escalating(
      [pid](int sig) {
        ::kill(-pid, sig);
        ::kill(pid, sig);  // in case it left its group
      },
      [&p](std::optional<std::chrono::milliseconds> timeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout.value_or(process::kStopKillWait);
        while (std::chrono::steady_clock::now() < deadline) {
          if (!is_same_process(p)) return true;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return false;
      },
      grace, process::kStopKillWait);
}

std::vector<pid_t> find_cluster_processes(const std::string& dir) {
  std::vector<pid_t> out;
  std::error_code ec;
  const uid_t me = getuid();
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == getpid()) continue;
    struct stat st {};
    if (stat(e.path().c_str(), &st) != 0 || st.st_uid != me) continue;
    const auto read = read_proc_file(e.path() / "cmdline");
    if (!read) continue;  // gone
    const std::string& cmd = *read;
    std::vector<std::string> argv;
    std::string cur;
    for (char c : cmd) {
      if (c == '\0') {
        argv.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    if (argv.size() < 2 || (argv[1] != "head" && argv[1] != "agent")) continue;
    if (fs::path(argv[0]).filename().string().find("verlctl") == std::string::npos) continue;
    bool mine = false;
    for (const auto& a : argv)
      if (a == dir || a.rfind(dir + "/", 0) == 0) mine = true;
    if (mine && process_start_ticks(pid)) out.push_back(pid);
  }
  return out;
}

}  // namespace verl::launcher

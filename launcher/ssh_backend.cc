// The ssh backend: the head runs on this machine (where `verlctl up` runs; it is the local
// backend's head), and one agent per nodes[] entry runs on that node, started over SSH
// (launcher/ssh_session.h). Per node, in its own thread (at most ssh.parallel at once):
//   connecting  SSH connect, host key check, authentication
//   syncing     one command makes <remote_dir>/<cluster>/nodes/<node>/ (0700) and reports the
//               node's verlctl; SFTP then writes the token (0600), the spec, and verlctl itself
//               and the trainer module beside it when ssh.copy_binary asks for it (auto: the
//               node's differs in version or size)
//   starting    one command starts the agent detached (setsid nohup, stdin /dev/null, output
//               appended to agent.log in the node's directory) and prints its pid and its
//               /proc start time, so that a later stop never signals a reused pid
// Per-node directories keep nodes apart even when several share one filesystem (NFS homes, or
// the loopback "hosts" of the tests). Every remote argument is quoted by process::quote; the
// remote directory's "~/" becomes "$HOME"/ so that the remote shell expands it. What agent_spec
// reports in `remote` is exactly what start() runs.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/files.h"
#include "common/log.h"
#include "common/process.h"
#include "launcher/backend.h"
#include "launcher/ssh_session.h"
#include "verl/build_info.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
using process::quote;

// A path on the remote side: under the remote user's home ("~/x") or absolute.
struct RemotePath {
  bool home = false;
  std::string path;  // relative to home when home, else absolute

  static RemotePath parse(const std::string& p) {
    if (p == "~") return {true, ""};
    if (p.rfind("~/", 0) == 0) return {true, p.substr(2)};
    if (!p.empty() && p[0] == '/') return {false, p};
    throw Error(ExitCode::kInvalidConfig, "ssh.remote_dir must be absolute or start with ~/, not '" + p + "'",
                "for example ssh.remote_dir=~/.verlctl");
  }
  RemotePath operator/(const std::string& part) const {
    return {home, path.empty() ? part : path + "/" + part};
  }
  // For a remote shell command line.
  std::string shell() const { return home ? (path.empty() ? "\"$HOME\"" : "\"$HOME\"/" + quote(path)) : quote(path); }
  // For SFTP (absolute) once the remote home is known.
  std::string resolve(const std::string& remote_home) const { return home ? remote_home + "/" + path : path; }
  std::string display() const { return home ? "~/" + path : path; }
};

enum class CopyBinary { kAuto, kAlways, kNever };

struct Node {
  std::string name;
  SshTarget target;
  RemotePath dir;  // <remote_dir>/<cluster>/nodes/<name>
};

// The start time of a remote pid, the /proc/<pid>/stat field after the command name that
// process_start_ticks() reads locally; empty when gone or a zombie.
const char* const kTicksFn =
    "t() { sed 's/.*) //' \"/proc/$1/stat\" 2>/dev/null | awk '$1 != \"Z\" && $1 != \"X\" {print $20}'; }";

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// key=value lines of a remote command's output.
std::map<std::string, std::string> parse_fields(const std::string& out) {
  std::map<std::string, std::string> m;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) m[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return m;
}

std::string mib(uintmax_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

// The nodes of a resolved spec with their SSH targets and directories.
std::vector<Node> nodes_of(const Json& spec) {
  std::vector<Node> out;
  const Json& ssh = spec.at("ssh");
  const RemotePath root = RemotePath::parse(ssh.value("remote_dir", std::string("~/.verlctl")));
  const std::string cluster = spec.at("name").get<std::string>();
  const auto names = node_names(spec);
  const Json& nodes = spec.at("nodes");
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Json& n = nodes[i];
    Node node;
    node.name = names[i];
    SshTarget& t = node.target;
    t.host = n.at("host").get<std::string>();
    const int node_port = n.value("port", 22);
    t.port = node_port != 22 ? node_port : ssh.value("port", 22);
    if (n.contains("user") && n["user"].is_string()) t.user = n["user"].get<std::string>();
    else if (ssh.contains("user") && ssh["user"].is_string()) t.user = ssh["user"].get<std::string>();
    if (ssh.contains("identity_file") && ssh["identity_file"].is_string())
      t.identity_file = ssh["identity_file"].get<std::string>();
    t.known_hosts = ssh.value("known_hosts", std::string("~/.ssh/known_hosts"));
    t.host_keys = ssh.value("strict_host_keys", true) ? SshTarget::HostKeys::kStrict : SshTarget::HostKeys::kAcceptNew;
    t.connect_timeout = std::chrono::milliseconds(static_cast<int64_t>(ssh.value("connect_timeout_s", 10.0) * 1000));
    t.command_timeout = std::chrono::milliseconds(static_cast<int64_t>(ssh.value("command_timeout_s", 60.0) * 1000));
    // Whole seconds (what TCP keepalive takes); any positive value keeps them on.
    const double keepalive = ssh.value("keepalive_s", 15.0);
    t.keepalive = std::chrono::seconds(keepalive > 0 ? std::max<int64_t>(1, std::llround(keepalive)) : 0);
    node.dir = root / cluster / "nodes" / node.name;
    out.push_back(std::move(node));
  }
  return out;
}

class SshBackend : public Backend {
 public:
  SshBackend(Json spec, std::string dir, std::string exe)
      : spec_(std::move(spec)), paths_(dir), exe_(exe), local_(make_local_backend(spec_, dir, exe)) {
    const Json& ssh = spec_.at("ssh");
    const std::string copy = ssh.value("copy_binary", "auto");
    copy_ = copy == "always" ? CopyBinary::kAlways : copy == "never" ? CopyBinary::kNever : CopyBinary::kAuto;
    parallel_ = std::max(1, ssh.value("parallel", 32));
    root_ = RemotePath::parse(ssh.value("remote_dir", std::string("~/.verlctl")));
    nodes_ = nodes_of(spec_);
    agents_ = nodes_.size();
  }

  std::string name() const override { return "ssh"; }
  LaunchSpec head_spec() const override { return local_->head_spec(); }
  size_t agent_count() const override { return agents_; }

  LaunchSpec agent_spec(size_t index) const override {
    const Node& n = nodes_.at(index);
    LaunchSpec s = local_->agent_spec(index);  // the agent's flags, as the local backend gives them
    s.host = n.target.host;
    s.log = n.target.host + ":" + (n.dir / "agent.log").display();
    // The same argv with this node's paths: shown (display) and run (shell).
    std::vector<std::string> shown{exe_display()}, run{exe_shell()};
    for (size_t i = 1; i < s.argv.size(); ++i) {
      if (s.argv[i - 1] == "--token-file") {
        shown.push_back((n.dir / "token").display());
        run.push_back((n.dir / "token").shell());
      } else {
        shown.push_back(s.argv[i]);
        run.push_back(quote(s.argv[i]));
      }
    }
    s.argv = shown;
    std::string env;
    for (const auto& e : s.env) env += " " + quote(e);
    std::string cmd;
    for (const auto& a : run) cmd += (cmd.empty() ? "" : " ") + a;
    s.remote.push_back("# ssh " + n.target.label() + " (host keys: " + n.target.known_hosts +
                       (n.target.host_keys == SshTarget::HostKeys::kAcceptNew ? ", unknown ones added" : ", strict") +
                       (n.target.identity_file.empty() ? "" : "; key " + n.target.identity_file) + ")");
    s.remote.push_back(prepare_command(n));
    s.remote.push_back("# sftp: " + paths_.token() + " -> " + (n.dir / "token").display() + " (0600, atomic)");
    s.remote.push_back("# sftp: " + paths_.spec() + " -> " + (n.dir / "cluster.json").display() + " (0600, atomic)");
    if (copy_ != CopyBinary::kNever) {
      s.remote.push_back("# sftp: " + exe_ + " -> " + exe_display() + " (0755, atomic)" +
                         (copy_ == CopyBinary::kAuto ? " when the node's differs in version or size" : ""));
      if (const std::string mod = local_module(); !mod.empty())
        s.remote.push_back("# sftp: " + mod + " -> " + module().display() + " (0755, atomic)" +
                           (copy_ == CopyBinary::kAuto ? " when the node's differs in size or verlctl was copied" : ""));
    }
    s.remote.push_back("cd " + n.dir.shell() + " || exit 1; setsid nohup" + (env.empty() ? "" : " env" + env) + " " + cmd +
                       " </dev/null >>agent.log 2>&1 & pid=$!; " + kTicksFn +
                       "; printf 'pid=%s\\nticks=%s\\n' \"$pid\" \"$(t \"$pid\")\"");
    return s;
  }

  ProcessRecord start(const LaunchSpec& spec) override {
    if (spec.role != "agent") return local_->start(spec);
    return start_node(index_of(spec.node), spec, [](const std::string&, const std::string&) {});
  }

  void start_agents(const std::vector<LaunchSpec>& specs, const std::function<void(const ProcessRecord&)>& started,
                    const ProgressFn& progress) override {
    std::mutex mu;  // serializes the callbacks
    auto report = [&](const std::string& who, const std::string& what) {
      std::lock_guard<std::mutex> lock(mu);
      progress(who, what);
    };
    std::vector<std::optional<Error>> errors(specs.size());
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t i; (i = next++) < specs.size();) {
        try {
          const ProcessRecord p = start_node(index_of(specs[i].node), specs[i], report);
          std::lock_guard<std::mutex> lock(mu);
          started(p);
        } catch (const Error& e) {
          errors[i] = e;
        } catch (const std::exception& e) {
          errors[i] = Error(ExitCode::kFailure, specs[i].node + ": " + e.what());
        }
      }
    };
    std::vector<std::thread> threads;
    const size_t n = std::min<size_t>(static_cast<size_t>(parallel_), specs.size());
    for (size_t t = 0; t < n; ++t) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
    std::vector<std::string> failed;
    const Error* first = nullptr;
    for (size_t i = 0; i < specs.size(); ++i)
      if (errors[i]) {
        failed.push_back(specs[i].node);
        if (!first) first = &*errors[i];
      }
    if (!first) return;
    std::string more;
    if (failed.size() > 1) {
      more = " (" + std::to_string(failed.size() - 1) + " more failed:";
      for (size_t i = 1; i < failed.size(); ++i) more += " " + failed[i];
      more += "; see above)";
    }
    throw Error(first->code(), first->what() + more, first->hint());
  }

  std::optional<std::string> ended(const ProcessRecord& p) override {
    if (p.role != "agent") return local_->ended(p);  // the head and unrecorded leftovers run here
    const size_t i = record_index(p.node);
    // up polls every 50 ms; over SSH once a second is plenty.
    const std::string key = p.node + "/" + std::to_string(p.pid);
    auto c = checked_.find(key);
    if (c != checked_.end() && Clock::now() - c->second < std::chrono::seconds(1)) return std::nullopt;
    const Node& n = nodes_[i];
    const std::string cmd = std::string(kTicksFn) + "; if [ \"$(t " + std::to_string(p.pid) + ")\" = " +
                            std::to_string(p.start_ticks) + " ]; then echo running; else echo gone; tail -n 3 " +
                            (n.dir / "agent.log").shell() + " 2>/dev/null; fi";
    ExecResult r;
    try {
      r = run(i, cmd, "checking the agent (pid " + std::to_string(p.pid) + ")");
    } catch (const Error& e) {
      if (e.code() != ExitCode::kUnreachable && e.code() != ExitCode::kTimedOut) throw;
      // A node that cannot be reached must not block down or the next up forever: an agent
      // that cannot reach its head leaves by itself.
      checked_.erase(key);
      return std::string("could not be checked (") + e.what() +
             "); an agent that cannot reach its head exits by itself within head.agent_exit_after_s";
    }
    if (first_line(r.out) == "running") {
      checked_[key] = Clock::now();
      return std::nullopt;
    }
    checked_.erase(key);
    std::string tail = r.out.substr(std::min(r.out.size(), r.out.find('\n') + 1));
    tail = trim(tail);
    std::replace(tail.begin(), tail.end(), '\n', ' ');
    return "ended on " + n.target.host + " (log " + p.log + (tail.empty() ? "" : ": ..." + tail) + ")";
  }

  bool stop(const ProcessRecord& p, std::chrono::milliseconds grace) override {
    if (p.role != "agent") return local_->stop(p, grace);
    const size_t i = record_index(p.node);
    const std::string pid = std::to_string(p.pid);
    const long steps = std::max<long>(1, static_cast<long>(grace.count() / 50));
    // Only while it is still the recorded process: its group first (its children), then itself.
    const std::string cmd = std::string(kTicksFn) + "; same() { [ \"$(t " + pid + ")\" = " +
                            std::to_string(p.start_ticks) + " ]; }; wait_gone() { i=0; while same && [ $i -lt $1 ]; do sleep 0.05; i=$((i+1)); done; }; "
                            "if same; then kill -TERM -" + pid + " " + pid + " 2>/dev/null; wait_gone " + std::to_string(steps) +
                            "; if same; then kill -KILL -" + pid + " " + pid + " 2>/dev/null; wait_gone 40; fi; fi; "
                            "if same; then echo running; else echo gone; fi";
    const ExecResult r = run(i, cmd, "stopping the agent (pid " + pid + ")", grace + std::chrono::seconds(10));
    checked_.erase(p.node + "/" + pid);
    return first_line(r.out) == "gone";
  }

  std::string describe(const ProcessRecord& p) override {
    if (p.role != "agent") return local_->describe(p);
    return "pid " + std::to_string(p.pid) + " on " + p.host;
  }

  void detach() override {
    local_->detach();
    std::lock_guard<std::mutex> lock(sessions_mu_);
    sessions_.clear();
  }

 private:
  size_t index_of(const std::string& node) const {
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i].name == node) return i;
    throw Error(ExitCode::kFailure, "node '" + node + "' is not in the cluster spec",
                "the recorded spec (cluster.json) and the state disagree; 'verlctl down' then 'verlctl up' again");
  }

  // A recorded agent may be on a node the new spec no longer lists (up with other nodes after
  // a down): its place is in the spec it was started with, still recorded in cluster.json.
  size_t record_index(const std::string& node) {
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i].name == node) return i;
    try {
      for (auto& n : nodes_of(Json::parse(files::read_file(paths_.spec()))))
        if (n.name == node) {
          nodes_.push_back(std::move(n));
          return nodes_.size() - 1;
        }
    } catch (const std::exception&) {
      // no readable recorded spec: the error below says what is missing
    }
    return index_of(node);
  }

  RemotePath bin() const { return root_ / "bin" / "verlctl"; }
  std::string exe_shell() const { return copy_ == CopyBinary::kNever ? "verlctl" : bin().shell(); }
  std::string exe_display() const { return copy_ == CopyBinary::kNever ? "verlctl" : bin().display(); }

  // Makes the node's directories and reports its home and its verlctl (version line, size).
  std::string prepare_command(const Node& n) const {
    const std::string e = exe_shell();
    std::string dirs = n.dir.shell();
    if (copy_ != CopyBinary::kNever) dirs += " " + (root_ / "bin").shell();
    return "umask 077 && mkdir -p " + dirs + " && printf 'home=%s\\n' \"$HOME\" && if command -v " + e +
           " >/dev/null 2>&1; then printf 'version=%s\\nsize=%s\\n' \"$(" + e + " --version 2>/dev/null | head -n 1)\" \"$(wc -c < \"$(command -v " +
           e + ")\")\"; fi" +
           (copy_ == CopyBinary::kNever ? std::string()
                                        : "; if [ -f " + module().shell() + " ]; then printf 'module_size=%s\\n' \"$(wc -c < " +
                                              module().shell() + ")\"; fi");
  }

  // The trainer module travels with verlctl: `verlctl train` on a node looks for it beside the
  // binary first (cli/trainer_loader.h).
  RemotePath module() const { return root_ / "bin" / VERL_TRAINER_MODULE_NAME; }

  // This machine's trainer module: beside verlctl, or in the install layout; empty when this
  // build has none (a build without libtorch: its nodes can run everything but trainer ranks).
  std::string local_module() const {
    const fs::path dir = fs::path(exe_).parent_path();
    for (const fs::path& p : {dir / VERL_TRAINER_MODULE_NAME, dir.parent_path() / VERL_INSTALL_MODULE_DIR / VERL_TRAINER_MODULE_NAME}) {
      std::error_code ec;
      if (fs::is_regular_file(p, ec)) return p.string();
    }
    return {};
  }

  // This machine's verlctl: its --version line and size, what auto compares with.
  std::pair<std::string, std::string> local_version() {
    std::call_once(version_once_, [this] {
      process::Options o;
      o.timeout = std::chrono::seconds(10);
      const auto r = process::run({exe_, "--version"}, o);
      std::error_code ec;
      local_version_ = {first_line(r.out), std::to_string(fs::file_size(exe_, ec))};
    });
    return local_version_;
  }

  SshSession& session(size_t i) {
    {
      std::lock_guard<std::mutex> lock(sessions_mu_);
      auto it = sessions_.find(i);
      if (it != sessions_.end()) return *it->second;
    }
    auto s = SshSession::connect(nodes_[i].target);  // outside the lock: connects run in parallel
    std::lock_guard<std::mutex> lock(sessions_mu_);
    return *(sessions_[i] = std::move(s));
  }

  void drop_session(size_t i) {
    std::lock_guard<std::mutex> lock(sessions_mu_);
    sessions_.erase(i);
  }

  // exec on node i's session; a broken connection is retried once on a new one. Errors name
  // the node and what was being done ("node h1, checking the agent (pid 42): ...").
  ExecResult run(size_t i, const std::string& cmd, const std::string& what,
                 std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    try {
      try {
        return session(i).exec(cmd, what, timeout);
      } catch (const Error& e) {
        if (e.code() != ExitCode::kUnreachable) throw;
        drop_session(i);
        return session(i).exec(cmd, what, timeout);
      }
    } catch (const Error& e) {
      const std::string inner = e.what();
      throw Error(e.code(), "node " + nodes_[i].name + (inner.find(what) == std::string::npos ? ", " + what : "") + ": " + inner,
                  e.hint());
    }
  }

  ProcessRecord start_node(size_t i, const LaunchSpec& spec, const ProgressFn& progress) {
    const Node& n = nodes_[i];
    const auto t0 = Clock::now();
    std::string stage = "connecting";
    auto elapsed = [&] {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2f s", std::chrono::duration<double>(Clock::now() - t0).count());
      return std::string(buf);
    };
    try {
      if (spec.remote.size() < 3) throw Error(ExitCode::kFailure, "no remote commands for node " + n.name);
      progress(n.name, "connecting to " + n.target.label());
      SshSession& s = session(i);

      stage = "syncing";
      const ExecResult prep = s.exec(spec.remote.at(1), "making " + n.dir.display());
      if (prep.exit_status != 0)
        throw Error(ExitCode::kFailure, n.target.label() + ": cannot make " + n.dir.display() + " (exit " +
                                            std::to_string(prep.exit_status) + "): " + trim(prep.err),
                    "check ssh.remote_dir and the permissions of that directory on " + n.target.host);
      auto f = parse_fields(prep.out);
      const std::string home = f["home"];
      if (home.empty() && (n.dir.home || root_.home))
        throw Error(ExitCode::kFailure, n.target.label() + ": the remote shell has no $HOME",
                    "set ssh.remote_dir to an absolute path");
      std::string binary = "verlctl up to date";
      if (copy_ == CopyBinary::kNever) {
        if (!f.count("version"))
          throw Error(ExitCode::kFailure, n.target.label() + ": verlctl is not on the PATH of " + n.target.user,
                      "install it there, or let up copy it: ssh.copy_binary=auto");
      } else {
        const auto mine = local_version();
        const bool same = f.count("version") && f["version"] == mine.first && trim(f["size"]) == mine.second;
        if (copy_ == CopyBinary::kAlways || !same) {
          s.upload_file(exe_, bin().resolve(home), 0755);
          std::error_code ec;
          binary = "copied verlctl (" + mib(fs::file_size(exe_, ec)) + ")";
        }
        const std::string mod = local_module();
        std::error_code ec;
        if (!mod.empty() && (copy_ == CopyBinary::kAlways || !same ||
                             trim(f["module_size"]) != std::to_string(fs::file_size(mod, ec)))) {
          s.upload_file(mod, module().resolve(home), 0755);
          binary += std::string(binary == "verlctl up to date" ? "; " : ", ") + "copied the trainer module (" +
                    mib(fs::file_size(mod, ec)) + ")";
        }
      }
      s.upload_data(files::read_file(paths_.token()), (n.dir / "token").resolve(home), 0600);
      s.upload_data(files::read_file(paths_.spec()), (n.dir / "cluster.json").resolve(home), 0600);
      progress(n.name, "synced in " + elapsed() + " (token, spec; " + binary + ")");

      stage = "starting";
      const ExecResult st = s.exec(spec.remote.back(), "starting the agent");
      auto g = parse_fields(st.out);
      ProcessRecord p;
      p.role = "agent";
      p.node = n.name;
      p.host = n.target.host;
      p.log = spec.log;
      try {
        p.pid = static_cast<pid_t>(std::stol(g.at("pid")));
      } catch (const std::exception&) {
        throw Error(ExitCode::kFailure, n.target.label() + ": the start command printed no pid (exit " +
                                            std::to_string(st.exit_status) + "): " + trim(st.out + st.err),
                    "run it by hand (verlctl up --dry-run shows it)");
      }
      try {
        p.start_ticks = std::stoll(g.at("ticks"));
      } catch (const std::exception&) {
        throw Error(ExitCode::kFailure,
                    n.target.label() + ": the agent (pid " + std::to_string(p.pid) + ") ended right away",
                    "its log is " + spec.log);
      }
      return p;
    } catch (const Error& e) {
      progress(n.name, "failed while " + stage + " after " + elapsed() + ": " + e.what());
      throw Error(e.code(), "node " + n.name + " failed while " + stage + ": " + e.what(), e.hint());
    }
  }

  Json spec_;
  StatePaths paths_;
  std::string exe_;
  std::unique_ptr<Backend> local_;  // the head
  CopyBinary copy_ = CopyBinary::kAuto;
  int parallel_ = 32;
  RemotePath root_;
  std::vector<Node> nodes_;  // the spec's (agents_ of them), then recorded ones of an earlier spec
  size_t agents_ = 0;
  std::mutex sessions_mu_;
  std::map<size_t, std::unique_ptr<SshSession>> sessions_;
  std::map<std::string, Clock::time_point> checked_;
  std::once_flag version_once_;
  std::pair<std::string, std::string> local_version_;
};

}  // namespace

std::unique_ptr<Backend> make_ssh_backend(const Json& spec, const std::string& state_dir, const std::string& exe) {
  return std::make_unique<SshBackend>(spec, state_dir, exe);
}

}  // namespace verl::launcher

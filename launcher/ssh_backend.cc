// The ssh backend: the head runs on this machine (where `verlctl up` runs; it is the local
// backend's head), and one agent per nodes[] entry runs on that node, started over SSH
// (launcher/ssh_session.h). Per node, in its own thread (at most ssh.parallel at once), on one
// SSH session per node that every later step reuses:
//   connecting  SSH connect, host key check, authentication
//   syncing     one command makes <remote_dir>/<cluster>/nodes/<node>/ (0700), writes the token
//               and the spec there from its stdin (0600, each by a rename), checks the node's
//               verlctl and, when it is the one up would copy (auto: same version line and
//               size), starts the agent right away: one round trip per node, as many as a bare
//               parallel ssh needs (bench/up_ssh_vs_pdsh.sh). Otherwise SFTP copies verlctl
//               and the trainer module beside it (ssh.copy_binary) and a second command starts
//               the agent.
//   starting    the agent starts detached (setsid nohup, stdin /dev/null, output appended to
//               agent.log in the node's directory); the command prints its pid and its /proc
//               start time, so that a later stop never signals a reused pid
// ended_all and stop_all ask every node at once the same way (the same bounded pool, one
// command per node), and a process once seen gone is not asked about again.
// Per-node directories keep nodes apart even when several share one filesystem (NFS homes, or
// the loopback "hosts" of the tests). The commands that run on a node are templates
// (templates/ssh/*.sh: sync, start, check, stop; launcher/ssh_programs.h renders them), every
// value in them quoted by process::quote; the remote directory's "~/" becomes "$HOME"/ so that
// the remote shell expands it. agent_spec's `remote` (what up --dry-run shows) and start() take
// the commands from one function, programs(): what is shown is what runs.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <tuple>

#include "common/error.h"
#include "common/files.h"
#include "common/log.h"
#include "common/process.h"
#include "common/strings.h"
#include "launcher/backend.h"
#include "launcher/node_facts.h"
#include "launcher/ssh_programs.h"
#include "launcher/ssh_session.h"
#include "verl/build_info.h"

namespace verl::launcher {
namespace {

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

struct Node {
  std::string name;
  SshTarget target;
  RemotePath dir;  // <remote_dir>/<cluster>/nodes/<name>
};


// Whether path is the binary this process runs (the same file, whatever the path's spelling).
bool is_self(const std::string& path) {
  std::error_code ec;
  return fs::equivalent(path, process::self_exe(), ec);
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
std::vector<Node> nodes_of(const ClusterSpec& spec) {
  std::vector<Node> out;
  const SshSpec& ssh = spec.ssh;
  const RemotePath root = RemotePath::parse(ssh.remote_dir);
  const auto names = node_names(spec);
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    const NodeSpec& n = spec.nodes[i];
    Node node;
    node.name = names[i];
    SshTarget& t = node.target;
    t.host = n.host;
    t.port = n.port != 22 ? n.port : ssh.port;
    if (n.user) t.user = *n.user;
    else if (ssh.user) t.user = *ssh.user;
    if (ssh.identity_file) t.identity_file = *ssh.identity_file;
    t.known_hosts = ssh.known_hosts;
    t.host_keys = ssh.strict_host_keys ? SshTarget::HostKeys::kStrict : SshTarget::HostKeys::kAcceptNew;
    t.connect_timeout = std::chrono::seconds(ssh.connect_timeout_s);
    t.command_timeout = std::chrono::seconds(ssh.command_timeout_s);
    // Whole seconds (what TCP keepalive takes); any positive value keeps them on.
    t.keepalive = std::chrono::seconds(ssh.keepalive_s > 0 ? ssh.keepalive_s : 0);
    node.dir = root / spec.name / "nodes" / node.name;
    out.push_back(std::move(node));
  }
  return out;
}

class SshBackend : public Backend {
 public:
  SshBackend(ClusterSpec spec, std::string dir, std::string exe)
      : spec_(std::move(spec)), paths_(dir), exe_(exe), local_(make_local_backend(spec_, dir, exe)) {
    copy_ = spec_.ssh.copy_binary;
    parallel_ = std::max(1, spec_.ssh.parallel);
    root_ = RemotePath::parse(spec_.ssh.remote_dir);
    nodes_ = nodes_of(spec_);
    agents_ = nodes_.size();
  }

  std::string name() const override { return "ssh"; }

  // Each node's agent dials head.host; the head listens on head.bind_host.
  void check_spec() const override {
    for (size_t i = 0; i < agents_; ++i)
      check_head_reach(spec_.head.bind_host, spec_.head.host, nodes_[i].target.host,
                       "nodes[" + std::to_string(i) + "].host " + nodes_[i].target.host);
  }

  LaunchSpec head_spec() const override { return local_->head_spec(); }
  size_t agent_count() const override { return agents_; }

  LaunchSpec agent_spec(size_t index) const override {
    const Node& n = nodes_.at(index);
    LaunchSpec s = local_->agent_spec(index);
    s.host = n.target.host;
    s.log = n.target.host + ":" + (n.dir / "agent.log").display();
    // The local backend's agent with this node's paths, shown (display); what runs is programs().
    AgentCommand agent = agent_command(spec_, paths_, exe_display(), index);
    agent.token_file = (n.dir / "token").display();
    s.argv = agent.argv();
    s.work_dir = n.dir.display();
    const Programs run = programs(index, s.env);
    s.remote.push_back("# ssh " + n.target.label() + " (host keys: " + n.target.known_hosts +
                       (n.target.host_keys == SshTarget::HostKeys::kAcceptNew ? ", unknown ones added" : ", strict") +
                       (n.target.identity_file.empty() ? "" : "; key " + n.target.identity_file) + ")");
    s.remote.push_back("# stdin of the next command: " + paths_.token() + ", then " + paths_.spec());
    s.remote.push_back(run.sync);
    if (copy_ != CopyBinary::kNever) {
      const std::string mod = local_module();
      s.remote.push_back("# " + std::string(copy_ == CopyBinary::kAuto ? "when the node's verlctl differs in version or size" : "") +
                         (copy_ == CopyBinary::kAuto && !mod.empty() ? " or its trainer module in size" : "") +
                         (copy_ == CopyBinary::kAuto ? ": " : "") + "sftp: " + exe_ + " -> " + exe_display() +
                         (mod.empty() ? "" : " and " + mod + " -> " + module().display()) + " (0755, atomic), then:");
      s.remote.push_back(run.start_after_copy);
    }
    return s;
  }

  ProcessRecord start(const LaunchSpec& spec) override {
    if (spec.role != ProcessRole::kAgent) return local_->start(spec);
    ProcessRecord p = start_node(index_of(spec.node), spec, [](const std::string&, const std::string&) {});
    checked_[record_key(p)] = Clock::now();  // seen running, as in start_agents
    return p;
  }

  void start_agents(const std::vector<LaunchSpec>& specs, const std::function<void(const ProcessRecord&)>& started,
                    const ProgressFn& progress) override {
    std::mutex mu;  // serializes the callbacks
    auto report = [&](const std::string& who, const std::string& what) {
      std::lock_guard<std::mutex> lock(mu);
      progress(who, what);
    };
    std::vector<size_t> index;
    for (const auto& s : specs) index.push_back(index_of(s.node));
    std::vector<std::optional<Error>> errors(specs.size());
    std::vector<std::pair<std::string, Clock::time_point>> seen;  // record_key, when it was seen running
    fan_out(specs.size(), [&](size_t i) {
      try {
        const ProcessRecord p = start_node(index[i], specs[i], report);
        std::lock_guard<std::mutex> lock(mu);
        seen.emplace_back(record_key(p), Clock::now());
        started(p);
      } catch (const Error& e) {
        errors[i] = e;
      } catch (const std::exception& e) {
        errors[i] = Error(ExitCode::kFailure, specs[i].node + ": " + e.what());
      }
    });
    // The start command saw each agent running (it printed its start time): the liveness checks
    // of up's registration wait need not ask again within the second (ended_all's pace).
    for (const auto& [key, when] : seen) checked_[key] = when;
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

  // A remote node's GPUs are the spec's word (nodes[].gpus); its ports only its agent reads.
  KnownHost known_host(size_t index) const override {
    KnownHost k;
    k.host.gpus = index < spec_.nodes.size() && spec_.nodes[index].gpus > 0;
    k.note = "--device /dev/infiniband (docker, podman) is added on a node with InfiniBand/RoCE ports";
    return k;
  }

  // Every node at once (fan_out), one command per node on its session. The head and
  // unrecorded leftovers run here: the local backend answers for them.
  std::vector<std::optional<std::string>> ended_all(const std::vector<ProcessRecord>& ps) override {
    std::vector<std::optional<std::string>> out(ps.size());
    std::vector<std::pair<size_t, size_t>> ask;  // (record, node index)
    for (size_t k = 0; k < ps.size(); ++k) {
      const ProcessRecord& p = ps[k];
      if (p.role != ProcessRole::kAgent) {
        out[k] = local_->ended(p);
        continue;
      }
      const std::string key = record_key(p);
      if (auto g = gone_.find(key); g != gone_.end()) {
        out[k] = g->second;  // a process that ended stays ended
        continue;
      }
      // up polls every 50 ms; over SSH once a second is plenty.
      if (auto c = checked_.find(key); c != checked_.end() && Clock::now() - c->second < std::chrono::seconds(1)) continue;
      ask.emplace_back(k, record_index(p.node));
    }
    per_node(ask, [&](size_t k, size_t i) { out[k] = check_agent(i, ps[k]); });
    for (const auto& [k, i] : ask) {
      (void)i;
      if (out[k]) gone_[record_key(ps[k])] = *out[k], checked_.erase(record_key(ps[k]));
      else checked_[record_key(ps[k])] = Clock::now();
    }
    return out;
  }

  std::vector<bool> stop_all(const std::vector<ProcessRecord>& ps, std::chrono::milliseconds grace) override {
    std::vector<bool> out(ps.size(), false);
    std::vector<std::pair<size_t, size_t>> ask;
    for (size_t k = 0; k < ps.size(); ++k) {
      if (ps[k].role != ProcessRole::kAgent) out[k] = local_->stop(ps[k], grace);
      else ask.emplace_back(k, record_index(ps[k].node));
    }
    std::vector<std::optional<Error>> errors(ps.size());
    per_node(ask, [&](size_t k, size_t i) {
      try {
        out[k] = stop_agent(i, ps[k], grace);
      } catch (const Error& e) {
        errors[k] = e;
      }
    });
    for (const auto& [k, i] : ask) {
      (void)i;
      checked_.erase(record_key(ps[k]));
      if (out[k]) gone_[record_key(ps[k])] = "was stopped";
    }
    // Every node was tried; the first that could not be asked is the error (its node named).
    for (const auto& e : errors)
      if (e) throw *e;
    return out;
  }

  std::string describe(const ProcessRecord& p) override {
    if (p.role != ProcessRole::kAgent) return local_->describe(p);
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
      for (auto& n : nodes_of(read_cluster_spec(paths_.spec())))
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

  // The trainer module travels with verlctl: `verlctl train` on a node looks for it beside the
  // binary first (cli/trainer_loader.h).
  RemotePath module() const { return root_ / "bin" / VERL_TRAINER_MODULE_NAME; }

  // This machine's trainer module: beside verlctl, or in the install layout; empty when this
  // build has none (a build without libtorch: its nodes run everything but trainer ranks).
  std::string local_module() const {
    const fs::path dir = fs::path(exe_).parent_path();
    for (const fs::path& p : {dir / VERL_TRAINER_MODULE_NAME, dir.parent_path() / VERL_INSTALL_MODULE_DIR / VERL_TRAINER_MODULE_NAME}) {
      std::error_code ec;
      if (fs::is_regular_file(p, ec)) return p.string();
    }
    return {};
  }
  std::string exe_shell() const { return copy_ == CopyBinary::kNever ? "verlctl" : bin().shell(); }
  std::string exe_display() const { return copy_ == CopyBinary::kNever ? "verlctl" : bin().display(); }

  // The remote programs that start node i's agent (templates/ssh/, launcher/ssh_programs.h),
  // env being the agent's added environment: sync, the syncing stage's one command, which also
  // starts the agent when the node's verlctl will do (templates/ssh/sync.sh says when), and
  // start_after_copy, what starts it after SFTP copied verlctl (empty with copy_binary never).
  // agent_spec shows exactly these and start_node runs them: one source for both.
  struct Programs {
    std::string sync;
    std::string start_after_copy;
  };
  Programs programs(size_t index, const std::vector<std::string>& env) const {
    const Node& n = nodes_.at(index);
    AgentCommand agent = agent_command(spec_, paths_, exe_display(), index);
    agent.exe = exe_shell();
    agent.token_file = (n.dir / "token").shell();
    std::string cmd;
    for (const auto& a : agent.argv(quote)) cmd += (cmd.empty() ? "" : " ") + a;
    ssh_programs::Sync sync;
    sync.dir_shell = n.dir.shell();
    if (copy_ != CopyBinary::kNever) sync.bin_dir_shell = (root_ / "bin").shell();
    sync.exe_shell = exe_shell();
    sync.copy = copy_;
    if (copy_ == CopyBinary::kAuto) {
      std::tie(sync.version, sync.size) = local_version();
      if (const std::string mod = local_module(); !mod.empty()) {
        std::error_code ec;
        sync.module_shell = module().shell();
        sync.module_size = std::to_string(fs::file_size(mod, ec));
      }
    }
    sync.start = ssh_programs::start("", env, cmd);
    Programs p;
    p.sync = ssh_programs::sync(sync);
    if (copy_ != CopyBinary::kNever) p.start_after_copy = ssh_programs::start(n.dir.shell(), env, cmd);
    return p;
  }

  // This machine's verlctl: its --version line and size, what auto compares with (agent_spec
  // is const and may run on several threads: computed once).
  //
  // When exe_ is this process's own binary, its version is the one compiled in: nothing runs.
  // Running it would be wrong where this process is not verlctl: the unit tests pass their own
  // binary, whose `--version` is no flag to gtest, so it ran every test again, which ran it
  // again (a fork chain of `verl_unit_tests --version`). Any other binary runs with
  // VERLCTL_VERSION_PROBE set, and a process that has it set runs none: the chain ends at one.
  std::pair<std::string, std::string> local_version() const {
    std::call_once(version_once_, [this] {
      std::error_code ec;
      if (is_self(exe_)) {
        local_version_ = {VERL_VERSION_LINE, std::to_string(fs::file_size(exe_, ec))};
        return;
      }
      if (std::getenv("VERLCTL_VERSION_PROBE")) {
        local_version_ = {"(" + exe_ + " not run: this process is itself a --version probe)", "0"};
        return;
      }
      process::Options o;
      o.timeout = std::chrono::seconds(10);
      o.env = {"VERLCTL_VERSION_PROBE=1"};
      try {
        const auto r = process::run({exe_, "--version"}, o);
        local_version_ = {first_line(r.out), std::to_string(fs::file_size(exe_, ec))};
      } catch (const Error&) {
        // A binary that does not run here (a dry run's made-up path): nothing on a node matches it.
        local_version_ = {"(" + exe_ + " does not run)", "0"};
      }
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

  // Runs fn(0..count-1) on at most ssh.parallel threads at once.
  // The first exception of any call is thrown here once every thread is joined: one escaping a
  // thread's body would end the process (issue 16: every thread body catches).
  void fan_out(size_t count, const std::function<void(size_t)>& fn) const {
    std::atomic<size_t> next{0};
    std::mutex mu;
    std::exception_ptr first;
    auto worker = [&] {
      for (size_t i; (i = next++) < count;) {
        try {
          fn(i);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mu);
          if (!first) first = std::current_exception();
        }
      }
    };
    const size_t n = std::min<size_t>(static_cast<size_t>(parallel_), count);
    if (n <= 1) {
      worker();
    } else {
      std::vector<std::thread> threads;
      for (size_t t = 0; t < n; ++t) threads.emplace_back(worker);
      for (auto& t : threads) t.join();
    }
    if (first) std::rethrow_exception(first);
  }

  // fn(record, node) for each (record, node index) pair: the nodes in parallel (fan_out), the
  // records of one node one after the other (a session serves one thread at a time). fn must
  // not throw.
  void per_node(const std::vector<std::pair<size_t, size_t>>& items, const std::function<void(size_t, size_t)>& fn) {
    std::map<size_t, std::vector<size_t>> by_node;
    for (const auto& [k, i] : items) by_node[i].push_back(k);
    std::vector<std::pair<size_t, std::vector<size_t>>> groups(by_node.begin(), by_node.end());
    fan_out(groups.size(), [&](size_t g) {
      for (size_t k : groups[g].second) fn(k, groups[g].first);
    });
  }

  // A record's identity on its node: a pid is reused, pid + start time is not.
  static std::string record_key(const ProcessRecord& p) {
    return p.node + "/" + std::to_string(p.pid) + "/" + std::to_string(p.start_ticks);
  }

  // Whether the recorded agent still runs on node i: nullopt while it does, how it ended (with
  // the last line of its log, its own word on why) otherwise. A node that cannot be reached must not block down or
  // the next up forever: it answers how it could not be checked (an agent that cannot reach its
  // head leaves by itself).
  std::optional<std::string> check_agent(size_t i, const ProcessRecord& p) {
    const Node& n = nodes_[i];
    const std::string cmd = ssh_programs::check(p.pid, p.start_ticks, (n.dir / "agent.log").shell());
    ExecResult r;
    try {
      r = run(i, cmd, "checking the agent (pid " + std::to_string(p.pid) + ")");
    } catch (const Error& e) {
      return std::string("could not be checked (") + e.what() +
             "); an agent that cannot reach its head exits by itself within head.agent_exit_after_s";
    }
    if (first_line(r.out) == "running") return std::nullopt;
    const std::string last = trim(r.out.substr(std::min(r.out.size(), r.out.find('\n') + 1)));
    return "ended on " + n.target.host + " (log " + p.log + (last.empty() ? "" : ", its last line: " + last) + ")";
  }

  // Stops the recorded agent on node i, only while it is still that process: stop_recorded()'s
  // protocol, run on the node (templates/ssh/stop.sh). true: it is gone. Throws verl::Error
  // naming the node when the node cannot be asked.
  bool stop_agent(size_t i, const ProcessRecord& p, std::chrono::milliseconds grace) {
    const std::string pid = std::to_string(p.pid);
    const std::string cmd = ssh_programs::stop(p.pid, p.start_ticks, grace);
    const ExecResult r = run(i, cmd, "stopping the agent (pid " + pid + ")", grace + std::chrono::seconds(10));
    return first_line(r.out) == "gone";
  }

  // The record of the agent that a start command's output (pid=, ticks=) describes.
  ProcessRecord started_record(const Node& n, const LaunchSpec& spec, const ExecResult& r) const {
    auto g = parse_fields(r.out);
    ProcessRecord p;
    p.role = ProcessRole::kAgent;
    p.node = n.name;
    p.host = n.target.host;
    p.log = spec.log;
    try {
      p.pid = static_cast<pid_t>(std::stol(g.at("pid")));
    } catch (const std::exception&) {
      throw Error(ExitCode::kFailure, n.target.label() + ": the start command printed no pid (exit " +
                                          std::to_string(r.exit_status) + "): " + trim(r.out + r.err),
                  "run it by hand (verlctl up --dry-run shows it)");
    }
    try {
      p.start_ticks = std::stoll(g.at("ticks"));
    } catch (const std::exception&) {
      // It ended before the start command looked: the command printed its log's last line.
      const auto last = g.find("last");
      throw Error(ExitCode::kFailure,
                  n.target.label() + ": the agent (pid " + std::to_string(p.pid) + ") ended right away" +
                      (last != g.end() && !last->second.empty() ? ": " + last->second : std::string()),
                  "its log is " + spec.log);
    }
    return p;
  }

  // connecting, syncing (which starts the agent too when its verlctl is current), and, when
  // verlctl had to be copied first, starting: programs(), what agent_spec shows.
  ProcessRecord start_node(size_t i, const LaunchSpec& spec, const ProgressFn& progress) {
    const Node& n = nodes_[i];
    const auto t0 = Clock::now();
    std::string stage = "connecting";
    auto elapsed = [&] { return format_seconds(std::chrono::duration<double>(Clock::now() - t0).count(), 2); };
    try {
      const Programs programs = this->programs(i, spec.env);
      progress(n.name, "connecting to " + n.target.label());
      SshSession& s = session(i);

      stage = "syncing";
      const ExecResult sync = s.exec(programs.sync, "syncing " + n.dir.display(), std::nullopt,
                                     files::read_file(paths_.token()) + files::read_file(paths_.spec()));
      auto f = parse_fields(sync.out);
      if (sync.exit_status != 0 || !f.count("home"))
        throw Error(ExitCode::kFailure, n.target.label() + ": cannot make " + n.dir.display() + " and write the token and spec there (exit " +
                                            std::to_string(sync.exit_status) + "): " + trim(sync.err),
                    "check ssh.remote_dir and the permissions of that directory on " + n.target.host);
      const std::string home = f["home"];
      if (home.empty() && (n.dir.home || root_.home))
        throw Error(ExitCode::kFailure, n.target.label() + ": the remote shell has no $HOME",
                    "set ssh.remote_dir to an absolute path");
      if (f.count("pid")) {  // verlctl was current: the same command started the agent
        stage = "starting";
        ProcessRecord p = started_record(n, spec, sync);
        progress(n.name, "synced in " + elapsed() + " (token, spec; verlctl up to date)");
        return p;
      }
      if (copy_ == CopyBinary::kNever)
        throw Error(ExitCode::kFailure, n.target.label() + ": verlctl is not on the PATH of " + n.target.user,
                    "install it there, or let up copy it: ssh.copy_binary=auto");
      s.upload_file(exe_, bin().resolve(home), 0755);
      std::error_code ec;
      std::string copied = "copied verlctl (" + mib(fs::file_size(exe_, ec)) + ")";
      if (const std::string mod = local_module(); !mod.empty()) {
        s.upload_file(mod, module().resolve(home), 0755);
        copied += " and the trainer module (" + mib(fs::file_size(mod, ec)) + ")";
      }
      progress(n.name, "synced in " + elapsed() + " (token, spec; " + copied + ")");

      stage = "starting";
      return started_record(n, spec, s.exec(programs.start_after_copy, "starting the agent"));
    } catch (const Error& e) {
      progress(n.name, "failed while " + stage + " after " + elapsed() + ": " + e.what());
      throw Error(e.code(), "node " + n.name + " failed while " + stage + ": " + e.what(), e.hint());
    }
  }

  ClusterSpec spec_;
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
  std::map<std::string, Clock::time_point> checked_;  // record_key -> when it last ran
  std::map<std::string, std::string> gone_;             // record_key -> how it ended
  mutable std::once_flag version_once_;
  mutable std::pair<std::string, std::string> local_version_;
};

}  // namespace

std::unique_ptr<Backend> make_ssh_backend(const ClusterSpec& spec, const std::string& state_dir, const std::string& exe) {
  return std::make_unique<SshBackend>(spec, state_dir, exe);
}

}  // namespace verl::launcher

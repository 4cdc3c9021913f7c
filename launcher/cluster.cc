#include "launcher/cluster.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "common/config.h"
#include "common/error.h"
#include "common/files.h"
#include "common/strings.h"
#include "launcher/container.h"
#include "launcher/head.h"
#include "launcher/head_client.h"
#include "launcher/job_controller.h"
#include "launcher/node_facts.h"
#include "launcher/resources.h"

namespace verl::launcher {
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::chrono::milliseconds kPoll{50};

// "[  1.23s] head: starting" lines, timed from when the operation began.
class Progress {
 public:
  explicit Progress(std::ostream& out) : out_(out), start_(Clock::now()) {}
  void operator()(const std::string& who, const std::string& what) {
    char t[32];
    std::snprintf(t, sizeof t, "[%6.2fs] ", std::chrono::duration<double>(Clock::now() - start_).count());
    out_ << t << who << ": " << what << std::endl;
  }
  void raw(const std::string& line) { out_ << line << std::endl; }
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  std::ostream& out_;
  Clock::time_point start_;
};

// The last lines of a daemon's log, to show why it ended.
std::vector<std::string> log_tail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  std::string line;
  while (std::getline(in, line)) all.push_back(line);
  if (all.size() > lines) all.erase(all.begin(), all.end() - static_cast<long>(lines));
  return all;
}

HeadAddress head_address(const ClusterSpec& spec) {
  HeadAddress a;
  a.host = spec.head.host;
  a.port = spec.head.dashboard_port;
  return a;
}

HeadAddress head_address(const ClusterState& s) {
  HeadAddress a;
  a.host = s.head_host;
  a.port = s.head_port;
  return a;
}

ClusterSpec resolve_spec(const UpOptions& o) {
  std::vector<std::string> overrides = o.overrides;
  if (o.local_nodes) overrides.push_back("backend=local");
  if (!o.name.empty()) overrides.push_back("name=" + o.name);
  ClusterSpec spec = load_cluster_spec(o.file, overrides);
  if (o.local_nodes) {
    if (*o.local_nodes < 1)
      throw Error(ExitCode::kUsage, "--local needs at least 1 node, not " + std::to_string(*o.local_nodes));
    spec.nodes.assign(static_cast<size_t>(*o.local_nodes), default_node("127.0.0.1"));
  } else if (spec.backend == BackendKind::kLocal && spec.nodes.empty()) {
    spec.nodes.push_back(default_node("127.0.0.1"));  // local without nodes: this machine is the one node
  }
  return spec;
}

// The spec the backend of this up works from: the recorded one, with what applies to this run
// only (--accept-new-host-keys).
ClusterSpec backend_spec(const ClusterSpec& spec, const UpOptions& o) {
  ClusterSpec s = spec;
  if (o.accept_new_host_keys) s.ssh.strict_host_keys = false;
  return s;
}

std::optional<std::string> try_read_token(const StatePaths& paths) {
  try {
    return read_token(paths.token());
  } catch (const Error&) {
    return std::nullopt;  // the callers say "no token in <path>" themselves
  }
}

// probe_head's answer: the recorded cluster's view from its head, or why there is none.
struct HeadProbe {
  std::optional<wire::ClusterView> cluster;
  std::string why;  // when there is no cluster
};

// Whether the head of a recorded cluster answers with this token as that cluster.
HeadProbe probe_head(const ClusterState& s, const StatePaths& paths) {
  auto token = try_read_token(paths);
  if (!token) return {std::nullopt, "no token in " + paths.token()};
  HeadClient client(head_address(s), *token, std::chrono::milliseconds(1500));
  const HeadResponse r = client.try_request("GET", "/api/cluster", nullptr);
  if (!r.answered()) return {std::nullopt, r.unreachable};
  if (r.status != 200) return {std::nullopt, r.problem() + (r.status == 401 ? " (another head holds the port?)" : "")};
  if (!r.body.is_object() || r.body.value("name", "") != s.name)
    return {std::nullopt, "the head there belongs to another cluster"};
  return {wire::parse<wire::ClusterView>(r.body), ""};
}

// Stops those of ps that still run, asking the backend about all of them at once (ended_all,
// stop_all: over SSH every node in parallel). Returns how many it stopped; throws naming the
// first that does not stop.
int stop_running(Backend& backend, const std::vector<ProcessRecord>& ps, Progress& progress) {
  if (ps.empty()) return 0;
  const auto how = backend.ended_all(ps);
  std::vector<ProcessRecord> running;
  for (size_t i = 0; i < ps.size(); ++i)
    if (!how[i]) running.push_back(ps[i]);
  if (running.empty()) return 0;
  auto who = [](const ProcessRecord& p) { return p.role == ProcessRole::kHead ? std::string("head") : p.node; };
  for (const auto& p : running) progress(who(p), "stopping " + backend.describe(p) + " (SIGTERM, then SIGKILL)");
  const auto stopped = backend.stop_all(running, std::chrono::milliseconds(3000));
  for (size_t i = 0; i < running.size(); ++i)
    if (!stopped[i])
      throw Error(ExitCode::kFailure, who(running[i]) + " (" + backend.describe(running[i]) + ") does not stop",
                  "it may belong to another user; stop it by hand");
  return static_cast<int>(running.size());
}

// Stops every recorded process that is still the same process, and whatever else of this
// cluster's verlctl processes is left (found by command line). Returns how many it stopped.
int stop_leftovers(Backend& backend, const std::vector<ProcessRecord>& recorded, const std::string& dir,
                   Progress& progress) {
  std::vector<ProcessRecord> agents, rest;
  // pid + start time: a remote agent's pid may equal a local leftover's.
  std::set<std::pair<pid_t, int64_t>> seen;
  for (const auto& p : recorded) {
    seen.insert({p.pid, p.start_ticks});
    (p.role == ProcessRole::kHead ? rest : agents).push_back(p);
  }
  for (pid_t pid : find_cluster_processes(dir)) {
    ProcessRecord p;
    p.role = ProcessRole::kProcess;
    p.node = "unrecorded process";
    p.pid = pid;
    p.start_ticks = process_start_ticks(pid).value_or(0);
    if (!seen.count({p.pid, p.start_ticks})) rest.push_back(p);
  }
  // Agents first: a head that goes first would leave them to wait for it.
  const int stopped = stop_running(backend, agents, progress);
  return stopped + stop_running(backend, rest, progress);
}

// One up or down of a cluster at a time: an flock on <dir>/lock, held until the operation ends
// (O_CLOEXEC: the daemons it starts do not inherit it).
class StateLock {
 public:
  StateLock(const std::string& dir, const std::string& name) {
    const std::string path = dir + "/lock";
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) throw Error(ExitCode::kFailure, "cannot open " + path, "check the state directory's permissions");
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      throw Error(ExitCode::kFailure, "another 'verlctl up' or 'verlctl down' of cluster '" + name + "' is running",
                  "wait for it to finish, then try again");
    }
  }
  ~StateLock() { ::close(fd_); }
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;

 private:
  int fd_ = -1;
};

void rotate_log(const std::string& path) {
  std::error_code ec;
  if (fs::exists(path, ec)) fs::rename(path, path + ".1", ec);
}

// What agent index runs for rank 0 of a job job-N, as far as it is known before the node is
// reached (Backend::known_host): a local node's GPUs and InfiniBand ports are read here, a
// remote node's GPUs come from the spec and its ports are read by its agent.
ContainerLine container_line(const ClusterSpec& spec, Backend& backend, const LaunchSpec& agent, size_t index) {
  ContainerLine line;
  line.node = agent.node;
  const KnownHost known = backend.known_host(index);
  const std::string env_note = "the variables reach the container from the client's environment, values never on "
                               "the command line: the spec's env, the node's NCCL/Gloo variables ('verlctl env' on "
                               "the node) and the rank's own (RANK, WORLD_SIZE, MASTER_ADDR, ...)";
  line.note = known.note.empty() ? env_note : known.note + "; " + env_note;
  const std::vector<std::string> inner = {agent.argv.at(0), "train", "-f", "job.yaml", "--rank", "0"};
  line.argv = container_argv(spec.container, known.host, spec_assignments(spec.env), inner,
                             {container_name(spec.name, "job-N/0/0"), agent.work_dir + "/jobs/job-N"});
  return line;
}

}  // namespace

UpPlan plan_up(const UpOptions& o) {
  UpPlan plan;
  plan.spec = resolve_spec(o);
  plan.state_dir = files::state_dir(plan.spec.name, /*create=*/false);
  auto backend = make_backend(backend_spec(plan.spec, o), plan.state_dir, o.exe);
  backend->check_spec();
  plan.daemons.push_back(backend->head_spec());
  for (size_t i = 0; i < backend->agent_count(); ++i) plan.daemons.push_back(backend->agent_spec(i));
  if (plan.spec.container.runtime != ContainerRuntime::kNone)
    for (size_t i = 1; i < plan.daemons.size(); ++i)
      plan.containers.push_back(container_line(plan.spec, *backend, plan.daemons[i], i - 1));
  return plan;
}

namespace {

// One `verlctl up` after its plan and lock, as stages that run in order:
//   keep_what_answers  a cluster of this name whose head answers is kept (its ended agents
//                      started again); else what is left of an earlier run is stopped
//   record_fresh_state a new token, the spec, logs of the last run kept as .1, "starting"
//   start_head         the head, waited for until it answers (or the backend places it)
//   start_agents       one agent per node (the backend may start them in parallel)
//   wait_for_agents    until each has registered with the head as the daemon we started
//   finish             "up", the daemons let go of (detach)
// Each starting stage records what it started in state_.processes before anything later can
// fail, so that one rollback (roll_back: agents first, all at once, then the head) undoes every
// stage, and an interrupt (check_interrupt, at every poll) ends in it like any other failure.
class BringUp {
 public:
  BringUp(const UpOptions& o, const UpPlan& plan, Progress& progress, const std::atomic<bool>* interrupted)
      : plan_(plan),
        spec_(plan.spec),
        progress_(progress),
        interrupted_(interrupted),
        paths_(plan.state_dir),
        backend_(make_backend(backend_spec(spec_, o), plan.state_dir, o.exe)),
        deadline_(Clock::now() + o.timeout) {}

  // A cluster of this name that answers is left exactly as it is (UpOutcome::kAlreadyUp), but
  // for its agents that ended since. Otherwise what an earlier run left is stopped: nullopt.
  std::optional<UpResult> keep_what_answers() {
    auto old = read_state(paths_);
    if (!old) {
      stop_leftovers(*backend_, {}, plan_.state_dir, progress_);
      return std::nullopt;
    }
    if (old->status == ClusterStatus::kUp || old->status == ClusterStatus::kStarting) {
      const HeadProbe probe = probe_head(*old, paths_);
      if (probe.cluster) return keep(*old, *probe.cluster);
      progress_("cluster " + spec_.name, "recorded as " + std::string(to_string(old->status)) + " but its head does not answer (" + probe.why +
                                             "); cleaning up what is left of it");
    }
    // down records "down" only once every process has ended: nothing of those to check again
    // (over SSH that would be one connection per node, one node after another).
    stop_leftovers(*backend_, old->status == ClusterStatus::kDown ? std::vector<ProcessRecord>{} : old->processes, plan_.state_dir,
                   progress_);
    return std::nullopt;
  }

  // Fresh state: a new token, the spec the head reads, logs of the last run kept as .1.
  void record_fresh_state() {
    files::make_dirs(paths_.logs(), 0700);
    token_ = generate_token();
    files::write_atomic(paths_.token(), token_ + "\n", 0600);
    files::write_atomic(paths_.spec(), Json(spec_).dump(2) + "\n", 0600);
    for (const auto& d : plan_.daemons) rotate_log(d.log);
    state_.name = spec_.name;
    state_.backend = backend_->name();
    state_.status = ClusterStatus::kStarting;
    state_.head_host = spec_.head.host;
    state_.head_port = spec_.head.dashboard_port;
    save();
    // Where the head answers: the spec says, unless the backend places the head itself (slurm:
    // the allocation's first node), which up learns once the allocation runs.
    address_ = head_address(spec_);
    client_ = std::make_unique<HeadClient>(address_, token_, std::chrono::milliseconds(1000));
  }

  // The starting stages; any failure (an interrupt among them) rolls every one of them back.
  UpResult start() {
    try {
      const ProcessRecord head = start_head();
      check_deadline("the head answered; the agents were not started");
      const std::vector<ProcessRecord> agents = start_agents();
      wait_for_agents(head, agents);
    } catch (const Error&) {
      roll_back();
      throw;
    }
    return finish();
  }

 private:
  UpResult keep(const ClusterState& old, const wire::ClusterView& cluster) {
    const std::string& name = spec_.name;
    // Agents that ended since (killed, their node rebooted) are started again, as `ray up`
    // repairs a cluster (issue 16, case 10); they register again under their node's name.
    // A backend whose agents are steps of the head's allocation (slurm) cannot.
    ClusterState repaired = old;
    std::vector<std::string> restarted;
    if (backend_->can_restart_agent()) {
      for (auto& p : repaired.processes) {
        if (p.role != ProcessRole::kAgent) continue;
        const auto how = backend_->ended(p);
        if (!how) continue;
        const auto d = std::find_if(plan_.daemons.begin(), plan_.daemons.end(),
                                    [&](const LaunchSpec& l) { return l.role == ProcessRole::kAgent && l.node == p.node; });
        if (d == plan_.daemons.end()) continue;
        const std::string node = p.node;
        p = backend_->start(*d);
        restarted.push_back(node);
        progress_(node, "its agent had ended (" + *how + "); started again (" + backend_->describe(p) + ", log " +
                            p.log + ")");
      }
    }
    if (!restarted.empty()) {
      repaired.updated_ms = now_ms();
      write_state(paths_, repaired);
      backend_->detach();
    }
    std::string restarted_list;
    for (const auto& n : restarted) restarted_list += (restarted_list.empty() ? "" : ", ") + n;
    progress_("cluster " + name, "already up (head at " + head_address(old).url() + ", pid " +
                                     std::to_string(cluster.head.pid) + ", " + std::to_string(cluster.alive) +
                                     " nodes alive); " +
                                     (restarted.empty() ? std::string("nothing changed")
                                                        : "restarted the agents of " + restarted_list));
    try {
      const ClusterSpec running = read_cluster_spec(paths_.spec());
      if (running.nodes.size() != spec_.nodes.size() || running.head != spec_.head || running.backend != spec_.backend)
        progress_("cluster " + name, "warning: it runs a different spec than this command asks for; 'verlctl down --name " +
                                         name + "' first to change it");
    } catch (const std::exception&) {
      // no recorded spec to compare with: nothing to warn about
    }
    UpResult r;
    r.outcome = UpOutcome::kAlreadyUp;
    r.state = repaired;
    return r;
  }

  // The head, recorded as soon as it is started; returns once it answers at its address.
  ProcessRecord start_head() {
    const ProcessRecord head = backend_->start(plan_.daemons.front());
    state_.processes.push_back(head);
    save();
    progress_("head", "starting (" + backend_->describe(head) + ", log " + head.log + ")");
    const std::string configured_host = address_.host;
    std::string waiting;        // the backend's last word on what the head waits for
    std::string reach_checked;  // the head address check_head_reach last passed
    for (;;) {
      check_interrupt("waiting for the head");
      if (const std::string w = backend_->waiting_for(head); !w.empty() && w != waiting) {
        waiting = w;
        progress_("head", w);
      }
      const std::string host = backend_->head_host(configured_host);
      if (!host.empty() && host != reach_checked) {
        // Where the agents dial (the spec's head.host, or where the backend put the head).
        check_head_reach(spec_.head.bind_host, host, "", "");
        reach_checked = host;
      }
      if (!host.empty() && host != address_.host) {
        address_.host = host;
        client_ = std::make_unique<HeadClient>(address_, token_, std::chrono::milliseconds(1000));
        state_.head_host = host;
        save();
      }
      HeadResponse r;
      r.unreachable = "its address is not known yet";
      if (!host.empty()) r = client_->try_request("GET", "/api/cluster", nullptr);
      if (r.status == 200) {
        const int64_t pid = r.body.is_object() ? wire::parse<wire::ClusterView>(r.body).head.pid : 0;
        if (pid != 0 && head.pid != 0 && pid != head.pid)
          throw Error(ExitCode::kFailure, "another head (pid " + std::to_string(pid) + ") answers at " + address_.url(),
                      "pick another port with head.dashboard_port=PORT");
        break;
      }
      if (r.status == 401) {
        // Someone else's head holds the port; ours is about to fail to bind. Its own words
        // (the log) say more than ours, so give it a moment to end first.
        const auto until = Clock::now() + std::chrono::seconds(1);
        while (Clock::now() < until) {
          check_alive(head, "starting (another cluster's head answers at " + address_.url() + ")");
          std::this_thread::sleep_for(kPoll);
        }
        throw Error(ExitCode::kFailure, "another cluster's head answers at " + address_.url() + " (it rejects our token)",
                    "pick another port with head.dashboard_port=PORT, or 'verlctl down' that cluster");
      }
      const std::string error = r.problem();
      check_alive(head, "starting (before it answered at " + address_.url() + ")");
      if (Clock::now() >= deadline_)
        throw Error(ExitCode::kTimedOut,
                    "timed out after " + format_seconds(progress_.elapsed(), 1) + ": the head (" + backend_->describe(head) +
                        (waiting.empty() ? "" : ", " + waiting) + ") did not answer at " +
                        (host.empty() ? std::string("an address it has not been given yet") : address_.url()) +
                        " (last: " + error + ")",
                    "its log is " + head.log + "; a slow machine may need a longer --timeout");
      std::this_thread::sleep_for(kPoll);
    }
    progress_("head", "up at " + address_.url());
    return head;
  }

  // --timeout bounds the whole bring-up: checked between stages as well as while waiting (a
  // stage that succeeds at its first look never waits).
  void check_deadline(const std::string& where) const {
    if (Clock::now() >= deadline_)
      throw Error(ExitCode::kTimedOut, "timed out after " + format_seconds(progress_.elapsed(), 1) + ": " + where,
                  "a slow machine may need a longer --timeout");
  }

  // Every agent, each recorded as the backend reports it started.
  std::vector<ProcessRecord> start_agents() {
    std::vector<ProcessRecord> agents;
    backend_->start_agents(
        std::vector<LaunchSpec>(plan_.daemons.begin() + 1, plan_.daemons.end()),
        [&](const ProcessRecord& a) {
          agents.push_back(a);
          state_.processes.push_back(a);
          save();
          progress_(a.node, "starting (" + backend_->describe(a) + ", log " + a.log + ")");
        },
        [&](const std::string& who, const std::string& what) { progress_(who, what); });
    return agents;
  }

  // Until every agent has registered with the head as the daemon this run started; the head
  // and the agents not registered yet are watched the while.
  void wait_for_agents(const ProcessRecord& head, const std::vector<ProcessRecord>& agents) {
    std::set<std::string> registered;
    while (registered.size() < agents.size()) {
      check_interrupt("waiting for the agents to register");
      const HeadResponse r = client_->try_request("GET", "/api/nodes", nullptr);
      if (r.status == 200 && r.body.is_object()) {
        for (const auto& n : r.body.value("nodes", Json::array())) {
          const std::string node = n.value("name", "");
          auto a = std::find_if(agents.begin(), agents.end(), [&](const ProcessRecord& p) { return p.node == node; });
          if (a == agents.end() || registered.count(node) || n.value("state", "") != to_string(NodeState::kAlive)) continue;
          if (!backend_->started_as(*a, n.value("pid", int64_t{0}))) continue;  // another agent under its name
          registered.insert(node);
          const Resources res = resources_from_json(n.at("resources"));
          progress_(node, "registered (" + std::to_string(res.cpus) + " CPUs, " + format_bytes(res.memory_bytes) +
                              ", " + std::to_string(res.gpus) + " GPUs, " + std::to_string(res.ib_ports.size()) +
                              " IB ports)");
        }
      }
      check_alive(head, "the agents registered");
      // The agents not registered yet, all at once (over SSH: every node in parallel).
      std::vector<ProcessRecord> waiting;
      for (const auto& a : agents)
        if (!registered.count(a.node)) waiting.push_back(a);
      const auto how = backend_->ended_all(waiting);
      for (size_t i = 0; i < waiting.size(); ++i)
        if (how[i]) fail_ended(waiting[i], *how[i], "registering with the head");
      if (registered.size() == agents.size()) break;
      if (Clock::now() >= deadline_) {
        std::string missing;
        for (const auto& a : agents)
          if (!registered.count(a.node)) missing += (missing.empty() ? "" : ", ") + a.node + " (" + backend_->describe(a) + ")";
        throw Error(ExitCode::kTimedOut,
                    "timed out after " + format_seconds(progress_.elapsed(), 1) + " waiting for " + missing +
                        " to register with the head at " + address_.url(),
                    "the agents run but have not registered; their logs are under " + paths_.logs());
      }
      std::this_thread::sleep_for(kPoll);
    }
  }

  UpResult finish() {
    state_.status = ClusterStatus::kUp;
    save();
    backend_->detach();
    progress_("cluster " + spec_.name,
              "up: head at " + address_.url() + ", " + std::to_string(node_names(spec_).size()) + " nodes");
    UpResult r;
    r.state = state_;
    return r;
  }

  // Stops what this run started, agents first (all at once), and says so. The error that
  // brought us here is the one to report; a node that cannot be stopped is said in passing.
  void roll_back() {
    int n = 0;
    std::vector<ProcessRecord> agents, heads;
    for (const auto& p : state_.processes) (p.role == ProcessRole::kHead ? heads : agents).push_back(p);
    for (const auto* batch : {&agents, &heads}) {
      try {
        for (bool gone : backend_->stop_all(*batch, std::chrono::milliseconds(2000))) n += gone;
      } catch (const Error& e) {
        progress_("cluster " + spec_.name, std::string("cannot stop everything: ") + e.what());
      }
    }
    state_.status = ClusterStatus::kFailed;
    save();
    progress_("cluster " + spec_.name, "cleaned up: stopped the " + std::to_string(n) +
                                           (n == 1 ? " process" : " processes") + " this run started");
  }

  void save() {
    state_.updated_ms = now_ms();
    write_state(paths_, state_);
  }

  void check_interrupt(const std::string& stage) const {
    if (interrupted_ && *interrupted_)
      throw Error(ExitCode::kInterrupted, "interrupted while " + stage, "nothing of the cluster is left running");
  }

  static std::string who_of(const ProcessRecord& p) { return p.role == ProcessRole::kHead ? std::string("head") : p.node; }

  [[noreturn]] void fail_ended(const ProcessRecord& p, const std::string& how, const std::string& stage) {
    progress_(who_of(p), "failed: " + how + " while " + stage);
    for (const auto& line : log_tail(p.log, 8)) progress_.raw("    | " + line);
    throw Error(ExitCode::kFailure, who_of(p) + " " + how + " while " + stage, "its log is " + p.log);
  }

  void check_alive(const ProcessRecord& p, const std::string& stage) {
    if (auto how = backend_->ended(p)) fail_ended(p, *how, stage);
  }

  const UpPlan& plan_;
  const ClusterSpec& spec_;
  Progress& progress_;
  const std::atomic<bool>* interrupted_;
  const StatePaths paths_;
  std::unique_ptr<Backend> backend_;
  const Clock::time_point deadline_;
  ClusterState state_;
  std::string token_;
  HeadAddress address_;
  std::unique_ptr<HeadClient> client_;
};

}  // namespace

// plan -> lock -> the stages of BringUp.
UpResult bring_up(const UpOptions& o, std::ostream& out, const std::atomic<bool>* interrupted) {
  Progress progress(out);
  const UpPlan plan = plan_up(o);
  files::state_dir(plan.spec.name, /*create=*/true);
  const StateLock lock(plan.state_dir, plan.spec.name);
  BringUp up(o, plan, progress, interrupted);
  if (auto kept = up.keep_what_answers()) return *kept;
  up.record_fresh_state();
  return up.start();
}

DownResult tear_down(const std::string& name, std::chrono::milliseconds graceful, std::ostream& out,
                     const std::string& exe) {
  Progress progress(out);
  const std::string dir = files::state_dir(name, /*create=*/false);
  const StatePaths paths(dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(ExitCode::kFailure, "no cluster '" + name + "' (nothing under " + dir + ")",
                "the clusters are the directories under " + files::state_root() + "; pick one with --name");
  const StateLock lock(dir, name);
  auto state = read_state(paths);
  ClusterSpec spec;
  try {
    spec = read_cluster_spec(paths.spec());
  } catch (const std::exception&) {
    spec = load_cluster_spec("", {"name=" + name});  // no recorded spec: stop it as local processes
    spec.nodes.clear();
  }
  auto backend = make_backend(spec, dir, exe);
  DownResult result;
  std::vector<ProcessRecord> procs = state ? state->processes : std::vector<ProcessRecord>{};

  // A process of it here (the head, for local and ssh) says enough; else every recorded
  // process, all at once (over SSH: every node in parallel).
  bool any_alive = !find_cluster_processes(dir).empty();
  if (!any_alive)
    for (const auto& how : backend->ended_all(procs)) any_alive = any_alive || !how;
  if (!any_alive) {
    result.was_down = true;
    progress("cluster " + name, "already down; nothing to stop");
  } else {
    if (state) {
      auto token = try_read_token(paths);
      std::string why = "no token";
      if (token) {
        HeadClient client(head_address(*state), *token, std::chrono::milliseconds(2000));
        try {
          const Json r = client.post("/api/shutdown", Json::object());
          progress("head", "asked to shut down; it tells " + std::to_string(r.value("agents", 0)) + " agents");
          why.clear();
        } catch (const Error& e) {
          why = e.what();
        }
      }
      if (!why.empty()) {
        progress("head", "not answering (" + why + "); signalling the recorded processes");
        graceful = std::chrono::milliseconds(0);
      }
    }
    // Wait for the graceful end, reporting each process as it goes.
    const auto deadline = Clock::now() + graceful;
    std::set<size_t> gone;  // by index: pids on different nodes may be equal
    for (;;) {
      std::vector<size_t> index;
      std::vector<ProcessRecord> asked;
      for (size_t i = 0; i < procs.size(); ++i)
        if (!gone.count(i)) index.push_back(i), asked.push_back(procs[i]);
      const auto how = backend->ended_all(asked);
      for (size_t k = 0; k < asked.size(); ++k) {
        if (!how[k]) continue;
        const ProcessRecord& p = asked[k];
        gone.insert(index[k]);
        ++result.stopped;
        progress(p.role == ProcessRole::kHead ? "head" : p.node, "ended (" + backend->describe(p) + "): " + *how[k]);
      }
      if (gone.size() == procs.size() || Clock::now() >= deadline) break;
      std::this_thread::sleep_for(kPoll);
    }
    if (gone.size() < procs.size() && graceful.count() > 0)
      progress("cluster " + name, "not everything stopped within " + format_seconds(graceful.count() / 1000.0, 1) +
                                      "; signalling the rest");
    result.signalled = stop_leftovers(*backend, procs, dir, progress);
    result.stopped += result.signalled;
    const auto left = find_cluster_processes(dir);
    if (!left.empty())
      throw Error(ExitCode::kFailure, "processes of cluster '" + name + "' are still running (pid " +
                                          std::to_string(left.front()) + (left.size() > 1 ? ", ..." : "") + ")",
                  "stop them by hand with kill -9");
  }
  if (state) {
    state->status = ClusterStatus::kDown;
    state->updated_ms = now_ms();
    write_state(paths, *state);
  }
  if (!result.was_down) progress("cluster " + name, "down");
  return result;
}

StatusReport query_status(const std::string& name) {
  const std::string dir = files::state_dir(name, /*create=*/false);
  const StatePaths paths(dir);
  auto state = read_state(paths);
  if (!state)
    throw Error(ExitCode::kUnreachable, "no cluster '" + name + "' (no state under " + dir + ")",
                "bring one up with 'verlctl up --local 2 --name " + name + "'");
  const HeadAddress address = head_address(*state);
  if (state->status == ClusterStatus::kDown || state->status == ClusterStatus::kFailed)
    throw Error(ExitCode::kUnreachable,
                "cluster '" + name + "' is " + std::string(to_string(state->status)) + " (its head was at " + address.url() + ")",
                "bring it up with 'verlctl up --name " + name + "'; the head's log is " + paths.head_log());
  const std::string token = read_token(paths.token());
  HeadClient client(address, token, std::chrono::milliseconds(3000));
  StatusReport report;
  report.state = *state;
  try {
    report.allocation = make_backend(read_cluster_spec(paths.spec()), dir, "")->allocation();
  } catch (const std::exception&) {
    // no recorded spec: no backend to ask; the head still answers for the nodes
  }
  // What the backend holds, for the error when the head does not answer.
  const std::string summary = report.allocation.is_object() ? report.allocation.value("summary", "") : "";
  const std::string held = summary.empty() ? "" : " (" + summary + ")";
  try {
    report.cluster = wire::parse<wire::ClusterView>(client.get("/api/cluster"));
    report.nodes = client.get("/api/nodes").value("nodes", Json::array());
  } catch (const HeadUnreachable& e) {
    throw Error(ExitCode::kUnreachable,
                "the head of cluster '" + name + "' does not answer at " + address.url() + held + ": " + e.cause(),
                "is it up? 'verlctl up --name " + name + "' starts it, 'verlctl down --name " + name +
                    "' cleans up; the head's log is " + paths.head_log());
  }
  return report;
}

}  // namespace verl::launcher

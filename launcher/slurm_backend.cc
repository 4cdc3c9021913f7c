// The slurm backend: one batch job holds the cluster. up renders templates/sbatch.sh into the
// state directory (sbatch.sh) and submits it with `sbatch --parsable`; inside the allocation
// the script starts the head on the first node and one agent per node with srun (see the
// template). The job id is kept in <state>/slurm.json; the script writes the head's address to
// <state>/head_host once it knows it, which is where up, status and down then find the head.
// The state directory and the verlctl binary must be at the same paths on every node.
//
// There are no local processes to watch: a record's pid is 0, and whether a daemon still runs
// is whether the job is still listed by squeue. Queries to slurm (squeue, then sacct, then
// `scontrol show job` for a job that has left the queue, since sacct needs slurmdbd) are made
// at most every kQueryEvery however often up polls. down waits for the job to end after the
// head shut down, else scancels it, and returns once squeue no longer lists it.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/files.h"
#include "common/log.h"
#include "common/process.h"
#include "common/strings.h"
#include "common/template.h"
#include "launcher/backend.h"
#include "launcher/head.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
using process::quote;

constexpr std::chrono::milliseconds kQueryEvery{500};
constexpr std::chrono::seconds kCommandTimeout{60};
constexpr std::chrono::seconds kCancelTimeout{120};

// The states a job ends in (squeue and sacct spell them the same).
const std::set<std::string> kFinished = {"COMPLETED", "CANCELLED", "FAILED",    "TIMEOUT",       "NODE_FAIL", "PREEMPTED",
                                         "BOOT_FAIL", "DEADLINE",  "REVOKED",   "OUT_OF_MEMORY", "SPECIAL_EXIT"};

// All of a command's complaint on one line: "sbatch: error: a; sbatch: error: b".
std::string one_line(const std::string& s) {
  std::string out, line;
  std::istringstream in(s);
  while (std::getline(in, line)) {
    line = trim(line);
    if (!line.empty()) out += (out.empty() ? "" : "; ") + line;
  }
  return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

// The allocation as slurm sees it.
struct JobView {
  bool listed = false;  // squeue lists it as pending, running or completing
  bool ended = false;   // slurm says it has ended (or no longer knows it)
  std::string state;    // PENDING, RUNNING, COMPLETED, ...
  std::string reason, nodes, elapsed, limit, exit_code;
  std::string source;   // which command said so
  std::string error;    // why slurm could not be asked
};

process::Result run_slurm(const std::vector<std::string>& argv) {
  process::Options o;
  o.timeout = kCommandTimeout;
  return process::run(argv, o);
}

bool no_such_job(const process::Result& r) { return (r.err + r.out).find("Invalid job id") != std::string::npos; }

// "a=b c=d" tokens of `scontrol show -o`.
std::map<std::string, std::string> scontrol_fields(const std::string& line) {
  std::map<std::string, std::string> m;
  std::istringstream in(line);
  std::string tok;
  while (in >> tok) {
    const auto eq = tok.find('=');
    if (eq != std::string::npos) m[tok.substr(0, eq)] = tok.substr(eq + 1);
  }
  return m;
}

JobView query_job(const std::string& id) {
  JobView v;
  try {
    const auto q = run_slurm({"squeue", "-h", "-j", id, "-o", "%T|%r|%N|%M|%l"});
    if (q.exit_code == 0 && !trim(q.out).empty()) {
      std::vector<std::string> f;
      std::istringstream in(trim(first_line(q.out)));
      for (std::string part; std::getline(in, part, '|');) f.push_back(part);
      f.resize(5);
      v.state = f[0], v.reason = f[1], v.nodes = f[2], v.elapsed = f[3], v.limit = f[4];
      v.source = "squeue";
      v.listed = !kFinished.count(v.state);
      v.ended = !v.listed;
      if (v.listed) return v;
    } else if (q.exit_code != 0 && !no_such_job(q)) {
      v.error = "squeue: " + (one_line(q.err).empty() ? "exit code " + std::to_string(q.exit_code) : one_line(q.err));
      return v;  // slurm does not answer: nothing is known, least of all that the job ended
    }
    v.ended = true;
    // It left the queue: its end from accounting, else from the controller's memory of it.
    const auto a = run_slurm({"sacct", "-n", "-P", "-X", "-j", id, "-o", "State,ExitCode,NodeList,Elapsed,Timelimit"});
    if (a.exit_code == 0 && !trim(a.out).empty()) {
      std::vector<std::string> f;
      std::istringstream in(trim(first_line(a.out)));
      for (std::string part; std::getline(in, part, '|');) f.push_back(part);
      f.resize(5);
      v.state = f[0].substr(0, f[0].find(' ')), v.exit_code = f[1], v.nodes = f[2], v.elapsed = f[3], v.limit = f[4];
      v.source = "sacct";
      return v;
    }
    const auto c = run_slurm({"scontrol", "show", "job", "-o", id});
    if (c.exit_code == 0 && !trim(c.out).empty()) {
      auto m = scontrol_fields(trim(first_line(c.out)));
      v.state = m["JobState"], v.reason = m["Reason"], v.nodes = m["NodeList"], v.elapsed = m["RunTime"];
      v.limit = m["TimeLimit"], v.exit_code = m["ExitCode"];
      v.source = "scontrol";
      return v;
    }
    if (v.state.empty()) v.state = "GONE", v.source = "squeue";  // purged: slurm no longer knows it
  } catch (const Error& e) {
    v.error = e.what();  // a slurm command that cannot run (not installed here)
    v.ended = false;
  }
  return v;
}

// sbatch's refusal as the error it is: the key it is about (exit 3), the controller not
// answering (4), anything else (1). Its own words stay in the message.
Error sbatch_refused(const process::Result& r, const SlurmSpec& slurm, const std::string& script) {
  const std::string said = one_line(r.err + (r.err.empty() ? r.out : ""));
  std::string lower = said;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  auto has = [&](const char* w) { return lower.find(w) != std::string::npos; };
  // The key's value as the spec's JSON writes it (null, "gpu", 4).
  auto value = [&](const std::string& key) {
    auto text = [](const std::optional<std::string>& v) { return v ? Json(*v).dump() : std::string("null"); };
    if (key == "partition") return text(slurm.partition);
    if (key == "account") return text(slurm.account);
    if (key == "time") return Json(slurm.time).dump();
    return std::to_string(slurm.nodes);
  };
  std::string key;
  if (has("partition")) key = "partition";
  else if (has("account")) key = "account";
  else if (has("time limit")) key = "time";
  else if (has("node configuration") || has("node count")) key = "nodes";
  const std::string message = "sbatch refused the job (exit code " + std::to_string(r.exit_code) + "): " + said;
  if (has("unable to contact") || has("connection refused") || has("socket timed out"))
    return Error(ExitCode::kUnreachable, message,
                 "is slurmctld running? 'scontrol ping' says; SLURM_CONF picks the cluster; the script is " + script);
  if (!key.empty())
    return Error(ExitCode::kInvalidConfig, message + " (slurm." + key + "=" + value(key) + ")",
                 "fix slurm." + key + " in the cluster spec ('sinfo' lists the partitions and their limits); the script is " +
                     script);
  return Error(ExitCode::kFailure, message,
               "the script is " + script + "; 'sbatch --test-only " + script + "' tells what slurm would do with it");
}

class SlurmBackend : public OneAtATimeBackend {
 public:
  SlurmBackend(ClusterSpec spec, std::string dir, std::string exe)
      : spec_(std::move(spec)), paths_(dir), exe_(exe), local_(make_local_backend(spec_, dir, exe)) {
    try {
      const Json j = Json::parse(files::read_file(job_file()));
      job_id_ = j.value("job_id", "");
    } catch (const std::exception&) {
      // no job submitted yet (or its record is gone): nothing to ask slurm about
    }
  }

  std::string name() const override { return "slurm"; }

  // What up runs here: sbatch on the rendered script, which starts everything else.
  LaunchSpec head_spec() const override {
    LaunchSpec s;
    s.role = ProcessRole::kHead;
    s.host = "the first node of the allocation";
    s.script_path = paths_.dir + "/sbatch.sh";
    s.script = render_script();
    s.argv = {"sbatch", "--parsable", s.script_path};
    s.log = paths_.head_log();
    return s;
  }

  size_t agent_count() const override { return node_names(spec_).size(); }

  // What the script runs on node index of the allocation (through srun, with the head's
  // address that only the allocation knows).
  LaunchSpec agent_spec(size_t index) const override {
    LaunchSpec s;
    s.role = ProcessRole::kAgent;
    s.node = node_names(spec_).at(index);
    s.host = "node " + std::to_string(index) + " of the allocation (srun, in the script)";
    s.argv = agent_argv();
    s.argv.insert(s.argv.begin() + 2, {"--head", "<head node's NodeAddr>:" + port()});
    s.argv.insert(s.argv.end(), {"--node", s.node});
    s.log = paths_.agent_log(index);
    s.work_dir = paths_.dir;  // the token file's directory, the same path on every node
    return s;
  }

  // The allocation's nodes: slurm.gpus_per_node each; the node a step runs on is srun's.
  KnownHost known_host(size_t index) const override {
    (void)index;
    KnownHost k;
    k.host.gpus = spec_.slurm.gpus_per_node > 0;
    k.host.slurm_node = "$SLURMD_NODENAME";
    k.note = "--device /dev/infiniband (docker, podman) is added on a node with InfiniBand/RoCE ports";
    return k;
  }

  ProcessRecord start(const LaunchSpec& spec) override {
    if (spec.role != ProcessRole::kHead) return agent_record(spec);
    files::make_dirs(paths_.logs(), 0700);
    std::error_code ec;
    std::filesystem::remove(head_host_file(), ec);  // a former job's; this job writes its own
    files::write_atomic(spec.script_path, spec.script, 0700);
    process::Result r;
    process::Options o;
    o.timeout = kCommandTimeout;
    o.cwd = paths_.dir;
    try {
      r = process::run(spec.argv, o);
    } catch (const Error& e) {
      throw Error(ExitCode::kUnreachable, std::string("cannot submit the job: ") + e.what(),
                  "backend slurm submits from this machine with sbatch: is SLURM installed here and on PATH?");
    }
    if (r.timed_out)
      throw Error(ExitCode::kUnreachable, "sbatch did not answer within " + std::to_string(kCommandTimeout.count()) + " s",
                  "is slurmctld running? 'scontrol ping' says");
    if (r.exit_code != 0) throw sbatch_refused(r, spec_.slurm, spec.script_path);
    const std::string answer = trim(first_line(r.out));
    const std::string id = answer.substr(0, answer.find(';'));  // "12" or "12;cluster"
    if (id.empty() || id.find_first_not_of("0123456789_") != std::string::npos)
      throw Error(ExitCode::kFailure, "sbatch --parsable printed '" + answer + "', not a job id",
                  "run 'sbatch --parsable " + spec.script_path + "' by hand to see what it does");
    job_id_ = id;
    view_.reset();
    files::write_atomic(job_file(), Json{{"job_id", id}, {"script", spec.script_path}, {"submitted_ms", now_ms()}}.dump(2) + "\n",
                        0600);
    ProcessRecord p;
    p.role = ProcessRole::kHead;
    p.host = "slurm job " + id;
    p.log = output_file(true);
    return p;
  }

  // The agents are steps of the allocation's script: they start and end with it.
  bool can_restart_agent() const override { return false; }

  void detach() override {}  // nothing here to let go of: the job runs on its own

  // srun starts the agents inside the allocation: their pids are not known here (the records
  // say 0). Only this job's agents hold this up's token, so a registration under a node's name
  // is that node's agent.
  bool started_as(const ProcessRecord& p, int64_t pid) override {
    (void)p, (void)pid;
    return true;
  }

  std::string describe(const ProcessRecord& p) override {
    (void)p;
    return job_id_.empty() ? "no slurm job" : "slurm job " + job_id_;
  }

  std::string waiting_for(const ProcessRecord& p) override {
    if (job_id_.empty()) return {};
    const JobView& v = view(false);
    if (!v.error.empty()) return "asking slurm about job " + job_id_ + ": " + v.error;
    if (v.state == "PENDING") return "pending allocation (slurm job " + job_id_ + ", reason " + v.reason + ")";
    if (p.role != ProcessRole::kHead) return {};
    if (v.state == "RUNNING") {
      const std::string host = head_host("");
      if (host.empty()) return "allocation running on " + v.nodes + " (slurm job " + job_id_ + "); starting the head";
      return "starting at " + host + ":" + port() + " (slurm job " + job_id_ + " on " + v.nodes + ")";
    }
    return v.state.empty() ? std::string() : "slurm job " + job_id_ + " is " + v.state;
  }

  std::string head_host(const std::string& configured) override {
    (void)configured;  // the head runs where the allocation puts it
    std::error_code ec;
    if (job_id_.empty() || !std::filesystem::exists(head_host_file(), ec)) return {};
    try {
      return trim(first_line(files::read_file(head_host_file())));
    } catch (const Error&) {
      return {};  // the script has not written it yet: no head host known, as before it exists
    }
  }

  Json allocation() override {
    if (job_id_.empty()) return Json::object();
    const JobView& v = view(true);
    Json j = {{"job_id", job_id_}};
    if (!v.error.empty()) {
      j["error"] = v.error;
      j["summary"] = "slurm job " + job_id_ + ": " + v.error;
      return j;
    }
    j["state"] = v.state;
    j["reason"] = v.reason;
    j["nodes"] = v.nodes;
    j["elapsed"] = v.elapsed;
    j["time_limit"] = v.limit;
    j["source"] = v.source;
    std::string summary = "slurm job " + job_id_ + " " + v.state;
    if (!v.nodes.empty() && v.nodes != "(null)") summary += " on " + v.nodes;
    if (v.state == "PENDING" || (v.ended && !v.reason.empty() && v.reason != "None")) summary += " (" + v.reason + ")";
    if (!v.elapsed.empty()) summary += ", " + v.elapsed + " of " + (v.limit.empty() ? "?" : v.limit);
    j["summary"] = summary + " (" + v.source + ")";
    return j;
  }

 private:
  // Whether the allocation still runs (every record of it ends with it).
  std::optional<std::string> ended_one(const ProcessRecord& p) override {
    if (p.role == ProcessRole::kProcess) return local_->ended(p);  // a leftover found on this machine
    if (job_id_.empty()) return std::string("was never submitted");
    const JobView& v = view(false);
    if (!v.ended) return std::nullopt;
    std::string how = "ended with its allocation: slurm job " + job_id_ + " " + v.state;
    if (!v.reason.empty() && v.reason != "None") how += " (" + v.reason + ")";
    if (!v.exit_code.empty() && v.exit_code != "0:0") how += ", exit code " + v.exit_code;
    return how + "; the job's output is " + output_file(false) + " and " + output_file(true);
  }

  // Stopping the head cancels the allocation; agents end with it.
  bool stop_one(const ProcessRecord& p, std::chrono::milliseconds grace) override {
    if (p.role == ProcessRole::kProcess) return local_->stop(p, grace);
    if (p.role != ProcessRole::kHead || job_id_.empty()) return true;  // agents end with the job
    try {
      release(grace);
      return true;
    } catch (const Error& e) {
      log::Err() << e.what() << " (" << e.hint() << ")";
      return false;
    }
  }

  // Waits up to graceful for the job to end by itself (its head was asked to shut down), then
  // cancels it; returns once squeue no longer lists it. Throws verl::Error when it cannot.
  void release(std::chrono::milliseconds graceful) {
    if (job_id_.empty()) return;
    const auto deadline = Clock::now() + graceful;
    while (view(true).listed && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (view(true).listed) {
      log::Info() << "cancelling slurm job " << job_id_ << " (" << view_->state << ")";
      const auto r = run_slurm({"scancel", job_id_});
      if (r.exit_code != 0 && !no_such_job(r))
        throw Error(ExitCode::kFailure, "scancel " + job_id_ + " failed: " + one_line(r.err),
                    "cancel it by hand: scancel " + job_id_);
      const auto until = Clock::now() + kCancelTimeout;
      while (view(true).listed) {
        if (Clock::now() >= until)
          throw Error(ExitCode::kTimedOut,
                      "slurm job " + job_id_ + " is still listed by squeue (" + view_->state + ") " +
                          std::to_string(kCancelTimeout.count()) + " s after scancel",
                      "see 'squeue -j " + job_id_ + "'; 'scancel --signal=KILL " + job_id_ + "' forces it");
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    }
    if (!view_->error.empty())
      throw Error(ExitCode::kUnreachable, "cannot ask slurm whether job " + job_id_ + " ended: " + view_->error,
                  "is slurmctld running? 'squeue -j " + job_id_ + "' says; then run 'verlctl down' again");
    log::Info() << "slurm job " << job_id_ << " ended (" << view_->state << ", said " << view_->source << ")";
  }

  std::string job_file() const { return paths_.dir + "/slurm.json"; }
  std::string head_host_file() const { return paths_.dir + "/head_host"; }
  std::string port() const { return std::to_string(spec_.head.dashboard_port); }

  // sbatch's --output / --error: the spec's, else under logs/; with_job: %j filled in.
  std::string output_file(bool error, bool with_job = true) const {
    const std::optional<std::string>& v = error ? spec_.slurm.error : spec_.slurm.output;
    std::string path = v ? files::expand_home(*v) : paths_.logs() + (error ? "/slurm-%j.err" : "/slurm-%j.out");
    return with_job && !job_id_.empty() ? replace_all(path, "%j", job_id_) : path;
  }

  // The local agent's command without --head and --node: the script adds both on each node.
  std::vector<std::string> agent_argv() const {
    AgentCommand agent = agent_command(spec_, paths_, exe_, 0);
    agent.head.clear();
    agent.node.clear();
    return agent.argv();
  }

  std::string render_script() const {
    const SlurmSpec& slurm = spec_.slurm;
    auto optional_word = [](const std::optional<std::string>& v) { return v ? quote(*v) : std::string(); };
    Json vars = {
        {"job_name", quote("verl-" + spec_.name)},
        {"nodes", slurm.nodes},
        {"gpus_per_node", slurm.gpus_per_node},
        {"cpus_per_task", slurm.cpus_per_task},
        {"partition", optional_word(slurm.partition)},
        {"account", optional_word(slurm.account)},
        {"time", quote(slurm.time)},
        {"output", quote(output_file(false, false))},
        {"error", quote(output_file(true, false))},
        {"dashboard_port", port()},
        {"head_command", process::quote_argv(local_->head_spec().argv)},
        {"head_log", quote(paths_.head_log())},
        {"head_host_file", quote(head_host_file())},
        {"agent_command", process::quote_argv(agent_argv())},
        {"agent_log", quote(paths_.logs() + "/agent-%n.log")},
    };
    return tmpl::render(tmpl::load("sbatch.sh"), vars);
  }

  ProcessRecord agent_record(const LaunchSpec& s) const {
    ProcessRecord p;
    p.role = ProcessRole::kAgent;
    p.node = s.node;
    p.host = "slurm job " + job_id_;
    p.log = s.log;
    return p;
  }

  const JobView& view(bool fresh) {
    if (!view_ || fresh || Clock::now() - viewed_ >= kQueryEvery) {
      view_ = query_job(job_id_);
      viewed_ = Clock::now();
    }
    return *view_;
  }

  ClusterSpec spec_;
  StatePaths paths_;
  std::string exe_;
  std::unique_ptr<Backend> local_;  // the head's argv, the same as local's; leftovers on this machine
  std::string job_id_;
  std::optional<JobView> view_;
  Clock::time_point viewed_{};
};

}  // namespace

std::unique_ptr<Backend> make_slurm_backend(const ClusterSpec& spec, const std::string& state_dir, const std::string& exe) {
  return std::make_unique<SlurmBackend>(spec, state_dir, exe);
}

}  // namespace verl::launcher

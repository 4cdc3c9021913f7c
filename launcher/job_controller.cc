#include "launcher/job_controller.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include "common/error.h"
#include "common/job_config_view.h"
#include "common/log.h"
#include "common/strings.h"
#include "launcher/container.h"
#include "launcher/wire.h"
#include "launcher/rank_env.h"
#include "launcher/scheduler.h"
#include "common/role_placement.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kLastLines = 20;
constexpr int kTrendPoints = 40;

std::string job_dir(const JobRecord& j) { return "jobs/" + j.name(); }

Json issues_json(const std::vector<config::Issue>& issues) {
  Json arr = Json::array();
  for (const auto& i : issues)
    arr.push_back({{"path", i.path}, {"message", i.message}, {"hint", i.hint}, {"location", i.where.str()}});
  return arr;
}

// What to try after a body that wire::Submit refused: a command job's fields are their own part
// of the API.
std::string submit_hint(const Json& body) {
  const bool command = body.is_object() && body.contains("kind") && body["kind"] == "command";
  return command ? "see docs/API.md: POST /api/jobs, kind command" : "see docs/API.md: POST /api/jobs";
}

}  // namespace

std::vector<std::string> spec_assignments(const Json& env) {
  std::vector<std::string> out;
  if (!env.is_object()) return out;
  for (const auto& [k, v] : env.items()) {
    if (v.is_null()) continue;
    if (v.is_string()) out.push_back(k + "=" + v.get<std::string>());
    else if (v.is_boolean()) out.push_back(k + "=" + (v.get<bool>() ? "1" : "0"));
    else out.push_back(k + "=" + v.dump());
  }
  return out;
}

std::string describe_exit(const Placement& p, ExitCodes codes) {
  if (!p.error.empty()) return p.error;
  if (p.signal) {
    const char* name = strsignal(p.signal);
    return "killed by signal " + std::to_string(p.signal) + " (" + (name ? name : "?") + ")";
  }
  if (!p.exit_code) return "ended without an exit status";
  std::string meaning;
  if (codes == ExitCodes::kVerlctl)
    for (const auto& e : exit_code_table())
      if (static_cast<int>(e.code) == *p.exit_code) meaning = " (" + std::string(e.name) + ")";
  return "exited with code " + std::to_string(*p.exit_code) + meaning;
}

JobController::JobController(JobStore& store, NodeRegistry& registry, ControllerOptions options)
    : store_(store), registry_(registry), options_(std::move(options)) {}

std::optional<JobRecord> JobController::submit(const Json& body, int64_t now_ms, SubmitError* error) {
  wire::Submit submit;
  try {
    submit = wire::parse<wire::Submit>(body);
  } catch (const wire::BadMessage& e) {
    error->status = 400;
    error->error = e.what();
    error->hint = submit_hint(body);
    return std::nullopt;
  }
  return this->submit(submit, now_ms, error);
}

std::optional<JobRecord> JobController::submit(const wire::Submit& body, int64_t now_ms, SubmitError* error) {
  auto refuse = [&](const std::string& what, const std::string& hint) -> std::optional<JobRecord> {
    error->status = 400;
    error->error = what;
    error->hint = hint;
    return std::nullopt;
  };
  const JobKind kind = body.kind;
  JobRecord job;
  job.kind = kind;
  std::string working_dir_tar;
  if (kind == JobKind::kProbe) {
    std::vector<std::string> argv = body.argv.value_or(std::vector<std::string>{"probe"});
    if (argv.empty() || (argv[0] != "probe" && argv[0] != "train"))
      return refuse("a probe job's argv must start with a verlctl subcommand: probe or train",
                    "for example [\"probe\", \"--only\", \"shm,disk\"]");
    if (argv[0] == "probe") argv.insert(argv.begin() + 1, {"--local", "-o", "json"});
    job.config = Json{{"argv", argv}};
    job.nnodes = 0;  // one task per alive node, known when it is placed
    job.n_gpus_per_node = 1;
    job.world_size = 0;
  } else {
    const std::vector<std::string>& overrides = body.overrides;
    if (kind == JobKind::kCommand) {
      // Only the job's shape: a trainer's batch sizes must not refuse (or data keys silently
      // ride along with) a program that reads none of them.
      if (!body.yaml.empty())
        return refuse("a command job takes no job config file: it reads only " + command_job_keys(),
                      "give them as overrides before '--': verlctl submit trainer.nnodes=2 -- CMD");
      for (const auto& o : overrides)
        if (const std::string why = command_override_problem(o); !why.empty())
          return refuse(why, "a command job reads only " + command_job_keys());
    }
    auto doc = config::resolve_text(config::Kind::kJob, body.yaml, body.file, overrides);
    if (kind == JobKind::kCommand) doc.issues = command_job_issues(doc.issues);
    if (!doc.issues.empty() && (kind == JobKind::kCommand || !doc.ok())) {
      error->status = 400;
      const size_t n = doc.issues.size();
      error->error = std::to_string(n) + " problem" + (n == 1 ? "" : "s") + " in the job config";
      error->hint = "fix the keys named in issues; 'verlctl config validate' checks a file before submitting";
      error->issues = doc.issues;
      return std::nullopt;
    }
    // The head's metrics are the rows rank 0 writes to its metrics file, which the trainer writes
    // whatever trainer.logger says; where it goes stays the job's own choice (JobConfigView::metrics_path()).
    job.config = doc.value;
    const JobConfigView view(job.config);
    job.nnodes = view.nnodes();
    job.n_gpus_per_node = view.n_gpus_per_node();
    job.world_size = job.nnodes * job.n_gpus_per_node;
    job.total_steps = view.total_training_steps();
    job.preflight = body.preflight;
    job.nccl_debug = body.nccl_debug;
    if (kind == JobKind::kCommand) {
      // The same job with another per-rank argv (command_job.h); the config gives its shape
      // (trainer.nnodes, n_gpus_per_node, max_restarts).
      if (!body.command)
        return refuse("a job of kind command needs 'command': {argv: [...]}", "see docs/API.md: POST /api/jobs, kind command");
      wire::SubmitCommand c = *body.command;
      if (job.preflight)
        return refuse("a command job has no job preflight (it checks a train job's data, model and checkpoint paths)",
                      "send preflight: false");
      const int per_node = c.spec.ranks_per_node;
      if (per_node != 0 && per_node != 1 && per_node != job.n_gpus_per_node)
        return refuse("ranks_per_node " + std::to_string(per_node) + " is neither 1 (one process per node) nor trainer.n_gpus_per_node (" +
                          std::to_string(job.n_gpus_per_node) + ", one per slot, the default)",
                      "--ranks-per-node 1 for a launcher that starts its own processes (torchrun, deepspeed)");
      if (per_node == job.n_gpus_per_node) c.spec.ranks_per_node = 0;
      if (c.spec.ranks_per_node == 1) job.world_size = job.nnodes;
      job.total_steps = 0;  // no trainer: no steps
      job.config = command_job_config(job.config);
      job.command = c.spec;
      working_dir_tar = std::move(c.working_dir_tar);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  job = store_.create(job, now_ms);
  if (!working_dir_tar.empty()) store_.put_working_dir(job.id, working_dir_tar);
  log::Info() << job.name() << " (" << to_string(job.kind) << ") submitted" << (job.command ? ": " + job.command->display() : "");
  return job;
}

std::optional<JobRecord> JobController::stop(int64_t id, double grace_s, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto job = store_.job(id);
  if (!job) return std::nullopt;
  if (is_terminal(job->state) || job->stop_requested) return job;
  job->stop_requested = true;
  job->stop_grace_s = grace_s;
  bool any_active = false;
  for (const auto& p : store_.placements(id))
    if (p.state != TaskState::kExited) any_active = true;
  if (!any_active) {
    job->state = JobState::kStopped;
    store_.update(*job, now_ms, "stopped before it ran");
    settle(*job, now_ms);
  } else {
    store_.update(*job, now_ms);
    store_.add_event(id, "STOPPING", now_ms, "stop requested: SIGTERM, SIGKILL after " + format_seconds(grace_s, 1));
  }
  log::Info() << job->name() << ": stop requested";
  return store_.job(id);
}

bool JobController::wanted(const JobRecord& job, const Placement& p) const {
  return !is_terminal(job.state) && !job.stop_requested && p.attempt == job.attempt;
}

const std::string& JobController::job_yaml(const JobRecord& job) const {
  auto& yaml = job_yaml_[{job.id, job.attempt}];
  if (yaml.empty()) yaml = config::to_yaml(job.config);
  return yaml;
}

const std::vector<Placement>& JobController::attempt_placements(const JobRecord& job, int attempt) const {
  auto& placed = attempt_placements_[{job.id, attempt}];
  if (placed.empty()) placed = store_.placements(job.id, attempt);
  return placed;
}

wire::TaskOrder JobController::start_order(const JobRecord& job, const Placement& p) const {
  const Json& rv = job.rendezvous;
  const std::string addr = rv.value("master_addr", std::string("127.0.0.1"));
  const int port = rv.value("master_port", options_.store_port);
  std::vector<std::string> env = spec_assignments(options_.spec_env);
  wire::TaskOrder order;
  order.task = p.task_id();
  order.action = OrderAction::kStart;
  order.job = job.name();
  order.rank = p.rank;
  order.attempt = p.attempt;
  order.kind = task_kind(job.kind);
  order.cwd = job_dir(job);
  // Whose the directory is: job ids start again in a new cluster's store (agent.h).
  order.owner = store_.incarnation() + "/" + job.name();
  if (job.kind == JobKind::kTrain || job.kind == JobKind::kCommand) {
    // torchrun's variables (rank_env.h); CUDA_VISIBLE_DEVICES: the job's GPUs on this node only,
    // LOCAL_RANK i is then cuda:i of them.
    const auto vars = torchrun_vars(rank_env(p, attempt_placements(job, p.attempt), addr, port));
    env.insert(env.end(), vars.begin(), vars.end());
    env.push_back("VERLCTL_JOB=" + job.name());
    // submit --nccl-debug: NCCL says which transport, HCA and interface it chose (nccl_log.h
    // reads it back from the rank logs); after the spec's env, so that it wins for this job.
    if (job.nccl_debug) env.insert(env.end(), {"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET"});
  }
  if (job.kind == JobKind::kCommand && job.command) {
    // The submitter's --env last: it wins over the spec's, the rank's and the node's variables.
    env.push_back("VERLCTL_NODE=" + p.node);
    env.insert(env.end(), job.command->env.begin(), job.command->env.end());
    order.argv = job.command->argv;
    if (!job.command->working_dir.empty()) order.working_dir_bytes = job.command->working_dir_bytes;
  } else if (job.kind == JobKind::kTrain) {
    order.argv = {"verlctl", "train", "-f", "job.yaml", "--rank", std::to_string(p.rank),
                  "--world-size", std::to_string(job.world_size), "--local-rank", std::to_string(p.local_rank),
                  "--master-addr", addr, "--master-port", std::to_string(port)};
    order.files = {{"job.yaml", job_yaml(job)}};
    order.metrics_file = p.rank == 0 ? JobConfigView(job.config).metrics_path() : "";
  } else {
    // One rank per node, driving all its GPUs (nccl_inter's rendezvous, probes/nccl_probe.h):
    // the rendezvous a training job gets, so the probe meets where a job will. VERLCTL_NODE is
    // the name each rank gives itself there.
    env.insert(env.end(), {"RANK=" + std::to_string(p.rank), "WORLD_SIZE=" + std::to_string(job.world_size),
                           "MASTER_ADDR=" + addr, "MASTER_PORT=" + std::to_string(port), "VERLCTL_JOB=" + job.name(),
                           "VERLCTL_NODE=" + p.node});
    order.argv = {"verlctl"};
    for (const auto& a : job.config.at("argv")) order.argv.push_back(a.get<std::string>());
  }
  order.env = std::move(env);
  if (options_.container.is_object() && options_.container.value("runtime", std::string("none")) != "none") {
    order.container = options_.container;
    order.container["name"] = container_name(options_.cluster_name, p.task_id());
  }
  return order;
}

std::vector<wire::TaskOrder> JobController::heartbeat(const NodeRecord& node, const std::vector<wire::TaskReport>& tasks,
                                                     const std::string& address, const std::string& work_dir, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!address.empty()) address_[node.name] = address;
  if (!work_dir.empty()) work_dir_[node.name] = work_dir;
  std::vector<wire::TaskOrder> orders;
  std::set<std::string> reported;
  auto stop_order = [&](const std::string& task, double grace) {
    wire::TaskOrder o;
    o.task = task;
    o.action = OrderAction::kStop;
    o.grace_s = grace;
    orders.push_back(std::move(o));
  };
  {
    // Ends by a signal first: of two ranks that end together, the one that was killed is the cause.
    std::vector<wire::TaskReport> sorted(tasks.begin(), tasks.end());
    std::stable_sort(sorted.begin(), sorted.end(), [](const wire::TaskReport& a, const wire::TaskReport& b) {
      return a.signal != 0 && b.signal == 0;
    });
    for (const auto& t : sorted) {
      const std::string& id = t.task;
      if (parse_preflight_task_id(id)) {
        if (!preflight_reported(node, t, now_ms)) stop_order(id, 5);
        reported.insert(id);  // running: no new order for it
        continue;
      }
      const auto ref = parse_task_id(id);
      auto p = ref ? store_.placement(ref->job, ref->attempt, ref->rank) : std::nullopt;
      if (!p || p->node != node.name) {
        if (t.state != ReportState::kExited) stop_order(id, 5);
        continue;
      }
      reported.insert(id);
      const auto job = store_.job_brief(p->job);  // wanted() and the stop grace: no config
      if (t.state == ReportState::kExited) {
        if (p->state == TaskState::kExited) continue;
        p->state = TaskState::kExited;
        p->ended_ms = now_ms;
        p->exit_code = t.exit_code;
        p->signal = t.signal;
        p->error = t.error;
        task_ended(*p, now_ms);
        continue;
      }
      if (p->state == TaskState::kAssigned) {
        p->state = TaskState::kRunning;
        p->started_ms = now_ms;
        p->host = node.host;
        store_.update_placement(*p);
      }
      if (p->state == TaskState::kExited || !job || !wanted(*job, *p))
        stop_order(id, job ? job->stop_grace_s : 5);
    }
  }
  std::set<int64_t> preflight_ordered;
  // This node's own placements only (the store indexes them by node): every active placement
  // of every job per heartbeat was O(nodes x ranks) a second (issue 18).
  for (auto p : store_.active_placements_on(node.name)) {
    if (reported.count(p.task_id())) continue;
    auto job = store_.job_brief(p.job);  // the config only for an order (below)
    if (job && p.state == TaskState::kAssigned && wanted(*job, p) && awaiting_preflight(*job)) {
      // The ranks wait; this node runs the preflight once, unless it has reported already.
      const auto& run = preflight_[job->id];
      if (!run.reports.count(node.name) && !reported.count(preflight_task_id(*job)) &&
          preflight_ordered.insert(job->id).second)
        orders.push_back(preflight_order(*store_.job(job->id), node.name));
      continue;
    }
    if (p.state == TaskState::kRunning) {
      // It was running here and its agent no longer has it: the agent (or the head) restarted.
      p.state = TaskState::kExited;
      p.ended_ms = now_ms;
      p.error = std::string(p.started_ms < options_.head_started_ms ? "head restarted: " : "") + "rank " +
                std::to_string(p.rank) + "'s process is gone from node " + node.name + " (its agent restarted)";
      task_ended(p, now_ms);
    } else if (job && wanted(*job, p)) {
      orders.push_back(start_order(*store_.job(job->id), p));
    } else {
      p.state = TaskState::kExited;
      p.ended_ms = now_ms;
      p.error = "cancelled before it started";
      task_ended(p, now_ms);
    }
  }
  return orders;
}

std::string preflight_task_id(const JobRecord& job) {
  return job.name() + "/preflight/" + std::to_string(job.attempt);
}

std::optional<std::pair<int64_t, int>> parse_preflight_task_id(const std::string& task) {
  const auto a = task.find('/');
  if (task.rfind("job-", 0) != 0 || a == std::string::npos || task.compare(a, 11, "/preflight/") != 0) return std::nullopt;
  try {
    size_t used = 0;
    const int64_t job = std::stoll(task.substr(4, a - 4), &used);
    if (used != a - 4) return std::nullopt;
    const std::string attempt = task.substr(a + 11);
    const int n = std::stoi(attempt, &used);
    if (used != attempt.size() || n < 0) return std::nullopt;
    return std::make_pair(job, n);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool JobController::awaiting_preflight(const JobRecord& job) {
  if (!job.preflight || job.kind != JobKind::kTrain) return false;
  auto& run = preflight_[job.id];
  if (run.attempt != job.attempt) run = PreflightRun{job.attempt, false, {}};
  if (run.passed) return false;
  // A rank that started already means the preflight passed before the head restarted.
  for (const auto& q : store_.placements(job.id, job.attempt))
    if (q.state != TaskState::kAssigned) {
      run.passed = true;
      return false;
    }
  return true;
}

wire::TaskOrder JobController::preflight_order(const JobRecord& job, const std::string& node) const {
  wire::TaskOrder order;
  order.task = preflight_task_id(job);
  order.action = OrderAction::kStart;
  order.job = job.name();
  order.rank = 0;
  order.attempt = job.attempt;
  order.kind = TaskKind::kPreflight;
  order.cwd = job_dir(job);
  // The preflight runs in the job's directory first, so it claims it (agent.h).
  order.owner = store_.incarnation() + "/" + job.name();
  order.argv = {"verlctl", "job-preflight", "-f", "job.yaml", "-o", "json", "--exit-zero"};
  order.files = {{"job.yaml", job_yaml(job)}};
  order.env = spec_assignments(options_.spec_env);
  order.env.push_back("VERLCTL_JOB=" + job.name());
  order.env.push_back("VERLCTL_NODE=" + node);
  // In the job's container, as its ranks: paths resolve as they will, and a missing image fails here.
  if (options_.container.is_object() && options_.container.value("runtime", std::string("none")) != "none") {
    order.container = options_.container;
    order.container["name"] = container_name(options_.cluster_name, preflight_task_id(job) + "/" + node);
  }
  return order;
}

bool JobController::preflight_reported(const NodeRecord& node, const wire::TaskReport& t, int64_t now_ms) {
  const auto ref = parse_preflight_task_id(t.task);
  auto job = store_.job(ref->first);
  const bool exited = t.state == ReportState::kExited;
  if (!job || is_terminal(job->state) || job->stop_requested || job->attempt != ref->second) return exited;
  if (!exited || !awaiting_preflight(*job)) return true;
  auto& run = preflight_[job->id];
  if (run.reports.count(node.name)) return true;
  Json report = t.result.value_or(Json());
  // No report: the preflight did not run (its container could not start, verlctl is missing).
  if (!report.is_object()) {
    Placement as_task;
    as_task.exit_code = t.exit_code;
    as_task.signal = t.signal;
    as_task.error = t.error;
    std::string why = "the job preflight " + describe_exit(as_task);
    if (!t.output.empty()) why += ": " + t.output;
    report = {{"ok", false}, {"checks", Json::array({{{"check", "preflight"}, {"key", ""}, {"path", ""}, {"ok", false},
                                                      {"detail", why}}})}};
  }
  run.reports[node.name] = report;
  if (!report.value("ok", false)) {
    std::string what;
    Json bad = Json::array();
    for (const auto& c : report.value("checks", Json::array())) {
      if (c.value("ok", true)) continue;
      bad.push_back(c);
      if (what.empty())
        what = (c.value("key", std::string()).empty() ? "" : c.value("key", std::string()) + " ") +
               (c.value("path", std::string()).empty() ? "" : c.value("path", std::string()) + ": ") +
               c.value("detail", std::string());
    }
    const std::string reason = "job preflight failed on " + node.name + " (" + node.host + "): " + what;
    for (auto q : store_.placements(job->id, job->attempt)) {
      if (q.state == TaskState::kExited) continue;
      q.state = TaskState::kExited;
      q.ended_ms = now_ms;
      q.error = "not started: the job preflight failed";
      store_.update_placement(q);
    }
    job->failure = {{"node", node.name}, {"host", node.host}, {"reason", reason}, {"preflight", bad},
                    {"attempt", job->attempt}};
    if (!bad.empty() && bad[0].contains("hint")) job->failure["hint"] = bad[0]["hint"];
    job->state = JobState::kFailed;
    store_.update(*job, now_ms, reason);
    log::Warn() << job->name() << " FAILED: " << reason;
    settle(*job, now_ms);
    return true;
  }
  std::set<std::string> nodes;
  for (const auto& q : store_.placements(job->id, job->attempt)) nodes.insert(q.node);
  for (const auto& n : nodes)
    if (!run.reports.count(n)) return true;
  run.passed = true;
  size_t checks = 0;
  std::string where;
  for (const auto& n : nodes) {
    checks += run.reports[n].value("checks", Json::array()).size();
    where += (where.empty() ? "" : ", ") + n;
  }
  store_.add_event(job->id, "PREFLIGHT", now_ms,
                   "passed on " + where + " (" + std::to_string(checks) + " checks: data, model, checkpoint directory)");
  log::Info() << job->name() << ": job preflight passed on " << where;
  return true;
}

void JobController::task_ended(Placement p, int64_t now_ms) {
  store_.update_placement(p);
  auto job = store_.job(p.job);
  if (!job) return;
  log::Info() << job->name() << ": rank " << p.rank << " on " << p.node << " (" << p.host << ") "
              << describe_exit(p);
  if (!wanted(*job, p)) {
    if (job->stop_requested && !is_terminal(job->state)) {
      bool active = false;
      for (const auto& q : store_.placements(job->id))
        if (q.state != TaskState::kExited) active = true;
      if (!active) {
        job->state = JobState::kStopped;
        store_.update(*job, now_ms, "stopped by request");
      }
    }
    settle(*job, now_ms);
    return;
  }
  const bool ok = p.error.empty() && p.exit_code && *p.exit_code == 0 && p.signal == 0;
  bool active = false, all_ok = true;
  for (const auto& q : store_.placements(job->id, job->attempt)) {
    if (q.state != TaskState::kExited) active = true;
    else if (!(q.error.empty() && q.exit_code && *q.exit_code == 0 && q.signal == 0)) all_ok = false;
  }
  if (!ok) {
    // A rank killed by a signal, or lost with its node, is a cause; one that exited with an
    // error code may be reacting to a peer that died (a collective that broke). Its verdict
    // waits a quarter of the heartbeat timeout, so that the peer's report can arrive and be
    // named as the cause, unless every rank has ended already.
    if (p.signal == 0 && p.error.empty() && active) {
      settling_.emplace(job->id, std::make_pair(job->attempt, now_ms + options_.heartbeat_timeout_ms / 4));
      return;
    }
    decide_failure(*job, now_ms);
    return;
  }
  if (active) return;
  if (!all_ok) {
    decide_failure(*job, now_ms);
    return;
  }
  job->state = JobState::kSucceeded;
  store_.update(*job, now_ms, "every rank exited 0");
  log::Info() << job->name() << " SUCCEEDED";
  settle(*job, now_ms);
}

void JobController::decide_failure(const JobRecord& job, int64_t now_ms) {
  settling_.erase(job.id);
  std::optional<Placement> cause;
  auto rank_of = [](const Placement& q) {  // a signal first, then a lost node or start error, then an exit code
    return q.signal != 0 ? 0 : !q.error.empty() ? 1 : 2;
  };
  for (const auto& q : store_.placements(job.id, job.attempt)) {
    if (q.state != TaskState::kExited || (q.error.empty() && q.exit_code && *q.exit_code == 0 && q.signal == 0)) continue;
    if (!cause || rank_of(q) < rank_of(*cause) || (rank_of(q) == rank_of(*cause) && q.ended_ms < cause->ended_ms)) cause = q;
  }
  if (!cause) return;
  fail_attempt(job, *cause,
               "rank " + std::to_string(cause->rank) + " on " + cause->host + " (" + cause->node + ") " +
                   describe_exit(*cause, job.kind == JobKind::kCommand ? ExitCodes::kOwn : ExitCodes::kVerlctl),
               now_ms);
}

void JobController::fail_attempt(JobRecord job, const Placement& p, const std::string& reason, int64_t now_ms) {
  Json failure = {{"rank", p.rank}, {"node", p.node}, {"host", p.host}};
  if (p.exit_code) failure["exit_code"] = *p.exit_code;
  if (p.signal) failure["signal"] = p.signal;
  failure["reason"] = reason;
  Json last = Json::array();
  for (const auto& l : store_.tail_lines(job.id, p.rank, kLastLines)) last.push_back(l.text);
  failure["last_lines"] = last;
  failure["attempt"] = p.attempt;
  // A restart's cause is its RESTARTING event; `failure` is the reason a job ended FAILED, so a
  // job that succeeds after a restart carries none.
  const int max_restarts = JobConfigView(job.config).max_restarts();
  if (job.kind != JobKind::kProbe && job.restarts < max_restarts) {
    ++job.restarts;
    ++job.attempt;
    if (job.kind == JobKind::kTrain) set_resume_from_latest_checkpoint(job.config);
    store_.update(job, now_ms);
    store_.add_event(job.id, "RESTARTING", now_ms,
                     "attempt " + std::to_string(job.attempt + 1) + " of " + std::to_string(max_restarts + 1) +
                         " after: " + reason);
    log::Warn() << job.name() << ": " << reason << "; restarting (attempt " << job.attempt + 1 << ")";
    return;
  }
  job.failure = failure;
  job.state = JobState::kFailed;
  store_.update(job, now_ms, reason);
  log::Warn() << job.name() << " FAILED: " << reason;
  settle(job, now_ms);
}

void JobController::settle(const JobRecord& job, int64_t /*now_ms*/) {
  const auto fresh = store_.job(job.id);
  if (!fresh || !is_terminal(fresh->state)) return;
  job_yaml_.erase(job_yaml_.lower_bound({job.id, 0}), job_yaml_.upper_bound({job.id, std::numeric_limits<int>::max()}));
  attempt_placements_.erase(attempt_placements_.lower_bound({job.id, 0}),
                            attempt_placements_.upper_bound({job.id, std::numeric_limits<int>::max()}));
  for (const auto& q : store_.placements(job.id))
    if (q.state != TaskState::kExited) return;
  store_.flush_partials(job.id);
}

void JobController::note_restart(int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& j : store_.jobs_in({JobState::kRunning}))
    store_.add_event(j.id, "RUNNING", now_ms, "head restarted; waiting for the agents to report the ranks");
}

void JobController::tick(int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, due] : std::map<int64_t, std::pair<int, int64_t>>(settling_)) {
    const auto job = store_.job(id);
    if (!job || is_terminal(job->state) || job->attempt != due.first) settling_.erase(id);
    else if (now_ms >= due.second) decide_failure(*job, now_ms);
  }
  // Only the nodes that are not alive, and which names are known: a copy of every node each
  // sweep was 2,000 records a second per 100 nodes (issue 18).
  std::map<std::string, NodeRecord> by_name;
  for (const auto& n : registry_.not_alive()) by_name[n.name] = n;
  const bool grace_over = now_ms - options_.head_started_ms >= options_.heartbeat_timeout_ms;
  for (auto p : store_.active_placements()) {
    auto it = by_name.find(p.node);
    std::string why;
    if (it == by_name.end() && registry_.has_node(p.node)) continue;  // alive
    if (it == by_name.end()) {
      if (!grace_over) continue;
      why = "head restarted and node " + p.node + " did not register again within " +
            std::to_string(options_.heartbeat_timeout_ms / 1000) + " s";
    } else if (it->second.state != NodeState::kAlive) {
      why = "node " + p.node + " (" + it->second.host + ") " + to_string(it->second.state) + ": " + it->second.reason;
    } else {
      continue;
    }
    p.state = TaskState::kExited;
    p.ended_ms = now_ms;
    p.error = why;
    task_ended(p, now_ms);
  }
  schedule(now_ms);
}

// Rank 0 binds head.store_port on its node for the job's rendezvous; another running job (train
// or probe) whose rank 0 is there already holds it, so this one takes the next port up. A probe
// job meets on the same port as a training job on purpose: nccl_inter then crosses the very
// address and port (the firewall hole) a job's ranks will, and the ports probe, which checks the
// store port from every node, only connects and closes: the rendezvous drops such a connection
// (probes/nccl_probe.h) and the ports probe passes on an accept as on a refusal.
Json JobController::rendezvous_on(const Placement& rank0) const {
  std::set<int> used;
  for (const auto& other : store_.jobs_in({JobState::kRunning})) {
    if (other.id == rank0.job) continue;
    for (const auto& q : store_.placements(other.id, other.attempt))
      if (q.rank == 0 && q.node == rank0.node && q.state != TaskState::kExited)
        used.insert(other.rendezvous.value("master_port", 0));
  }
  int port = options_.store_port;
  while (used.count(port)) ++port;
  auto addr = address_.find(rank0.node);
  return {{"master_addr", addr != address_.end() ? addr->second : rank0.host}, {"master_port", port}};
}

void JobController::schedule(int64_t now_ms) {
  // Most sweeps have nothing to place: the node list (a copy of every node) and its sort are
  // only for a pass that places (issue 18: at 1,000 nodes, five sorts a second were the head's
  // largest cost).
  auto waiting = store_.jobs_in({JobState::kPending, JobState::kRunning});
  waiting.erase(std::remove_if(waiting.begin(), waiting.end(),
                               [&](const JobRecord& job) {
                                 return job.stop_requested || store_.has_placements(job.id, job.attempt);
                               }),
                waiting.end());
  if (waiting.empty()) return;
  std::vector<NodeRecord> alive;
  for (const auto& n : registry_.nodes())
    if (n.state == NodeState::kAlive) alive.push_back(n);
  std::map<std::string, size_t> order_index;
  for (size_t i = 0; i < options_.node_order.size(); ++i) order_index.emplace(options_.node_order[i], i);
  // The spec's order, not the registry's: agents register in whatever order they start (under
  // load node-1 before node-0), and a probe's or a job's rank 0 went to whichever came first
  // (issue 16, case 11: cluster_probe_test found nccl_inter's rank 0 on node-1 under ctest -j 2).
  std::stable_sort(alive.begin(), alive.end(), [&](const NodeRecord& a, const NodeRecord& b) {
    auto index = [&](const std::string& name) {
      const auto it = order_index.find(name);
      return it == order_index.end() ? options_.node_order.size() : it->second;
    };
    return index(a.name) < index(b.name);
  });
  // The slots in use: what the store holds, plus what this pass places (issue 16, case 4: ten
  // jobs placed in one pass all went to node-0, and GPU indices were handed out twice).
  auto active = store_.active_placements();
  bool train_blocked = false;  // first come, first served: a train job that waits holds back later ones
  for (auto job : waiting) {
    std::vector<Placement> placements;
    if (job.kind == JobKind::kProbe) {
      if (alive.empty()) {
        pending_reason_[job.id] = "waiting for an alive node";
        continue;
      }
      for (size_t i = 0; i < alive.size(); ++i) {
        Placement p;
        p.job = job.id;
        p.attempt = job.attempt;
        p.rank = static_cast<int>(i);
        p.node = alive[i].name;
        p.host = alive[i].host;
        p.device = "cpu";
        placements.push_back(p);
      }
      job.nnodes = job.world_size = static_cast<int>(alive.size());
      job.rendezvous = rendezvous_on(placements.front());
    } else {
      if (train_blocked) {
        pending_reason_[job.id] = "waiting for the jobs submitted before it";
        continue;
      }
      // A restart waits until the previous attempt's ranks are gone: they hold its rendezvous
      // port and their slots until their stop grace ends.
      std::vector<Placement> before;
      bool stopping = false;
      for (const auto& q : store_.placements(job.id)) {
        if (q.attempt == job.attempt - 1) before.push_back(q);
        if (q.attempt < job.attempt && q.state != TaskState::kExited) stopping = true;
      }
      if (stopping) {
        pending_reason_[job.id] = "waiting for attempt " + std::to_string(job.attempt) + "'s ranks to exit";
        train_blocked = true;
        continue;
      }
      // ... and goes back to the same nodes when they are free: its checkpoints are there unless
      // trainer.default_local_dir is on a filesystem every node shares.
      std::vector<NodeRecord> order = alive;
      std::stable_sort(order.begin(), order.end(), [&](const NodeRecord& a, const NodeRecord& b) {
        auto index = [&](const std::string& node) {
          for (size_t i = 0; i < before.size(); ++i)
            if (before[i].node == node) return i;
          return before.size();
        };
        return index(a.name) < index(b.name);
      });
      std::vector<NodeSlots> slots;
      for (const auto& n : order) {
        NodeSlots s;
        s.node = n.name;
        s.host = n.host;
        s.gpus = n.resources.gpus;
        s.gpu_ids = n.resources.gpu_ids;
        if (n.resources.declared && n.resources.gpus == 0) s.cpu_slots = n.resources.cpus;
        for (const auto& p : active) {
          if (p.node != n.name) continue;
          for (const int g : device_gpus(p.device)) s.busy_gpus.insert(g);
          s.busy_cpu_slots += device_cpu_slots(p.device);
        }
        slots.push_back(std::move(s));
      }
      PlacementRequest request{job.nnodes, job.n_gpus_per_node};
      if (job.kind == JobKind::kTrain) {
        // Roles that name GPUs (common/role_placement.h): the GPUs they use, and which each rank takes.
        RolePlacement roles;
        try {
          roles = role_placement(job.config, job.n_gpus_per_node);
        } catch (const Error& e) {  // validated at submit; a config from an older head may not be
          pending_reason_[job.id] = std::string(e.what()) + " (" + e.hint() + ")";
          train_blocked = true;
          continue;
        }
        if (roles.named) {
          request.gpus_per_node = roles.gpus_per_node;
          request.rank_gpu_positions = roles.rank_gpus;  // number N: the N-th GPU reserved on the node
        }
      }
      const PlaceResult placed = place(request, slots);
      if (!placed.placed()) {
        pending_reason_[job.id] = placed.why;
        train_blocked = true;
        continue;
      }
      for (const auto& r : placed.ranks) {
        Placement p;
        p.job = job.id;
        p.attempt = job.attempt;
        p.rank = r.rank;
        p.node = r.node;
        p.host = r.host;
        p.local_rank = r.local_rank;
        p.device = r.device;
        placements.push_back(p);
      }
      // submit --ranks-per-node 1: one process per node holds the node's slots (rank_env.h).
      if (job.command && job.command->ranks_per_node == 1) placements = one_rank_per_node(placements);
      job.rendezvous = rendezvous_on(placements.front());
    }
    store_.add_placements(placements);
    active.insert(active.end(), placements.begin(), placements.end());
    pending_reason_.erase(job.id);
    std::string where;
    for (const auto& p : placements)
      if (p.rank == 0 || placements[p.rank - 1].node != p.node) where += (where.empty() ? "" : ", ") + p.node;
    const bool first = job.state == JobState::kPending;
    job.state = JobState::kRunning;
    store_.update(job, now_ms, "placed on " + where);
    if (!first) store_.add_event(job.id, "RUNNING", now_ms, "attempt " + std::to_string(job.attempt + 1) + " placed on " + where);
    log::Info() << job.name() << ": attempt " << job.attempt + 1 << " placed on " << where;
  }
}

wire::JobSummary JobController::summary(const JobRecord& j) const {
  const Json latest = store_.latest_metrics(j.id, 1);
  wire::JobSummary s;
  s.id = j.name();
  s.kind = j.kind;
  s.state = j.state;
  s.submitted_ms = j.submitted_ms;
  if (j.started_ms) s.started_ms = j.started_ms;
  if (j.ended_ms) s.ended_ms = j.ended_ms;
  s.step = latest.empty() ? 0 : latest.back().value("step", 0);
  s.total_steps = j.total_steps;
  s.nnodes = j.nnodes;
  s.n_gpus_per_node = j.n_gpus_per_node;
  s.world_size = j.world_size;
  s.restarts = j.restarts;
  if (j.command) s.command = j.command->display();
  return s;
}

wire::Job JobController::detail(const JobRecord& j, int64_t /*now_ms*/) const {
  wire::Job d;
  d.summary = summary(j);
  d.attempt = j.attempt;
  d.config = j.config;
  d.command_spec = j.command;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& p : store_.placements(j.id, j.attempt)) {
      wire::PlacementView v{p.rank, p.node, p.host, p.local_rank, p.device, p.attempt, p.task_id(), p.state,
                            p.exit_code, p.signal, p.error, std::nullopt};
      auto w = work_dir_.find(p.node);
      if (w != work_dir_.end()) v.dir = w->second + "/" + job_dir(j);
      d.placement.push_back(std::move(v));
    }
    auto pr = pending_reason_.find(j.id);
    if (j.state == JobState::kPending && pr != pending_reason_.end()) d.pending_reason = pr->second;
  }
  d.rendezvous = j.rendezvous;
  for (const auto& e : store_.events(j.id)) d.events.push_back({e.state, e.time_ms, e.detail});
  d.failure = j.failure;
  const Json rows = store_.latest_metrics(j.id, kTrendPoints);
  d.latest_metrics = rows.empty() ? Json::object() : rows.back();
  d.latest_metrics.erase("_received_ms");
  for (const auto& r : rows)
    if (r.contains(metric_names::kScore) && r[metric_names::kScore].is_number()) d.score_trend.push_back(r[metric_names::kScore]);
  // ETA from the trainer's own step time (the last rows' mean), else from when rows arrived.
  if (!rows.empty() && j.total_steps > 0 && !is_terminal(j.state)) {
    const int64_t step = rows.back().value("step", 0);
    double per_step = 0;
    int n = 0;
    for (size_t i = rows.size() > 5 ? rows.size() - 5 : 0; i < rows.size(); ++i)
      if (rows[i].contains(metric_names::kStepSeconds) && rows[i][metric_names::kStepSeconds].is_number()) {
        per_step += rows[i][metric_names::kStepSeconds].get<double>();
        ++n;
      }
    if (n > 0) per_step /= n;
    else if (rows.size() >= 2 && rows.back().value("step", 0) > rows.front().value("step", 0))
      per_step = static_cast<double>(rows.back().value("_received_ms", int64_t{0}) - rows.front().value("_received_ms", int64_t{0})) /
                 1000.0 / static_cast<double>(rows.back().value("step", 0) - rows.front().value("step", 0));
    if (per_step > 0) d.eta_s = per_step * static_cast<double>(std::max<int64_t>(0, j.total_steps - step));
  }
  if (j.kind == JobKind::kProbe) d.results = store_.results(j.id);
  return d;
}

}  // namespace verl::launcher

// The head's job logic between the HTTP routes and the job store: submission (the same
// validation as `verlctl config validate`), scheduling onto alive nodes (scheduler.h), the
// orders agents get in their heartbeat answers, and what the task reports mean for a job:
// SUCCEEDED when every rank exited 0; FAILED naming the rank, host, exit status or signal and
// the last log lines, the other ranks stopped; a restart (event RESTARTING, the next attempt,
// trainer.resume_mode=auto) while trainer.max_restarts allows; STOPPED once a stop's ranks are
// gone. A node that is lost or left while it runs ranks fails their job naming the node.
//
// The head is stateless beyond the store: after a restart, agents re-register and report the
// tasks they still run; a task the head counted as running that its node no longer reports,
// or whose node does not come back within heartbeat_timeout, fails its job ("head restarted").
//
// Task ids are <job>/<rank>/<attempt>. An order to start is repeated in every heartbeat answer
// until the agent reports the task (agents ignore a start of a task they have); an order to stop
// until it reports the task's end.
//
// The job preflight (a job submitted with preflight, as `verlctl submit` does unless
// --skip-job-preflight): once an attempt is placed, each of its nodes gets one task
// <job>/preflight/<attempt> that runs `verlctl job-preflight` in the job's directory
// (cli/job_preflight.h) instead of the ranks' start orders; the agent reports its JSON report
// with the task's end. The ranks' start orders go out only when every node passed (event
// PREFLIGHT); the first node that failed fails the job before any rank started, naming node,
// host, key, path and what was wrong (no restart: it would fail alike). A head restarted before
// the ranks started runs the preflight again.
//
// Time is passed in (milliseconds since the epoch). Thread-safe: one mutex around the state
// machine; reads go to the store.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/config.h"
#include "launcher/job_store.h"
#include "launcher/node_registry.h"
#include "launcher/wire.h"

namespace verl::launcher {

struct ControllerOptions {
  int store_port = 6379;  // head.store_port: rank 0 binds it for the job's rendezvous
  nlohmann::ordered_json spec_env = nlohmann::ordered_json::object();  // the cluster spec's env
  // The cluster spec's container section (validated by container_config): when its runtime is
  // not none, start orders carry it with the task's container name, and agents run the task in it.
  nlohmann::ordered_json container = nullptr;
  std::string cluster_name = "local";  // in container names, so that clusters on one host differ
  int64_t heartbeat_timeout_ms = 10000;
  int64_t head_started_ms = 0;  // nodes missing this long after it are gone (head restarted)
  // The spec's nodes, in the spec's order: jobs take nodes in this order (rank 0 on the first
  // alive one), whatever order their agents registered in; nodes not in it come after, by id.
  std::vector<std::string> node_order;
};

// The spec's env as NAME=value entries, in the spec's order (null: verlctl sets nothing for it).
std::vector<std::string> spec_assignments(const nlohmann::ordered_json& env);

// A submission the head refused: bad request (usage) or an invalid config with its issues.
struct SubmitError {
  int status = 400;
  std::string error, hint;
  std::vector<config::Issue> issues;
};

class JobController {
 public:
  JobController(JobStore& store, NodeRegistry& registry, ControllerOptions options);

  // POST /api/jobs's body (wire::Submit). Returns the PENDING job, or fills *error (and returns
  // nullopt). The JSON form reads the body first: one wire::Submit refuses is a 400 naming the field.
  std::optional<JobRecord> submit(const wire::Submit& body, int64_t now_ms, SubmitError* error);
  std::optional<JobRecord> submit(const nlohmann::ordered_json& body, int64_t now_ms, SubmitError* error);
  // Asks a job to stop (its ranks get SIGTERM, SIGKILL after grace_s). nullopt: no such job.
  std::optional<JobRecord> stop(int64_t id, double grace_s, int64_t now_ms);

  // A node's heartbeat: what it reports of its tasks, its address as the head sees it and its
  // work directory. Returns its orders.
  std::vector<wire::TaskOrder> heartbeat(const NodeRecord& node, const std::vector<wire::TaskReport>& tasks,
                                         const std::string& address, const std::string& work_dir, int64_t now_ms);
  // Nodes lost or gone with ranks on them, then scheduling of waiting jobs. The head's sweeper
  // calls it.
  void tick(int64_t now_ms);
  // At head start: RUNNING jobs get an event saying the head restarted.
  void note_restart(int64_t now_ms);

  wire::JobSummary summary(const JobRecord& job) const;
  wire::Job detail(const JobRecord& job, int64_t now_ms) const;  // Job: the summary and more

 private:
  wire::TaskOrder start_order(const JobRecord& job, const Placement& p) const;
  // {master_addr, master_port} for a job whose rank 0 is placed so (mu_ held).
  nlohmann::ordered_json rendezvous_on(const Placement& rank0) const;
  void schedule(int64_t now_ms);
  // The task ended (exited, gone, node lost): records it and decides what it means for its job.
  void task_ended(Placement p, int64_t now_ms);
  void fail_attempt(JobRecord job, const Placement& p, const std::string& reason, int64_t now_ms);
  // Fails the job's attempt with the likeliest cause among its ranks that ended badly.
  void decide_failure(const JobRecord& job, int64_t now_ms);
  // A terminal job whose ranks are all gone: its partial log lines are flushed.
  void settle(const JobRecord& job, int64_t now_ms);
  bool wanted(const JobRecord& job, const Placement& p) const;
  // The job preflight (mu_ held): whether the attempt's ranks still wait for it, its order for a
  // node, and a node's report.
  bool awaiting_preflight(const JobRecord& job);
  wire::TaskOrder preflight_order(const JobRecord& job, const std::string& node) const;
  // Returns false for a preflight still running that its job no longer wants (stop it).
  bool preflight_reported(const NodeRecord& node, const wire::TaskReport& task, int64_t now_ms);

  JobStore& store_;
  NodeRegistry& registry_;
  ControllerOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, std::string> address_;   // node name -> the address its heartbeats come from
  std::map<std::string, std::string> work_dir_;  // node name -> its agent's work directory
  std::map<int64_t, std::string> pending_reason_;
  // job -> {attempt, when its failure is decided}: a rank exited with an error code, which may
  // be its reaction to a peer's death; the peer's report may still be on its way.
  std::map<int64_t, std::pair<int, int64_t>> settling_;
  struct PreflightRun {
    int attempt = 0;
    bool passed = false;
    std::map<std::string, nlohmann::ordered_json> reports;  // node -> its job-preflight report
  };
  std::map<int64_t, PreflightRun> preflight_;  // job id -> the current attempt's preflight
  // The job's config as job.yaml for its orders, rendered once per attempt (its config changes
  // only with the attempt): at 1,000 ranks, to_yaml per order under mu_ held the heartbeats for
  // ~1.5 s after a submit (issue 18). mu_ held; dropped when the job settles.
  const std::string& job_yaml(const JobRecord& job) const;
  mutable std::map<std::pair<int64_t, int>, std::string> job_yaml_;
  // An attempt's placements (rank, node, device: fixed once placed) for rank_env, read once per
  // attempt rather than copied per start order (1,000 x 1,000 at 1,000 ranks). Dropped likewise.
  const std::vector<Placement>& attempt_placements(const JobRecord& job, int attempt) const;
  mutable std::map<std::pair<int64_t, int>, std::vector<Placement>> attempt_placements_;
};

// "job-3/preflight/0": the task id of a job's preflight on a node, and its parse.
std::string preflight_task_id(const JobRecord& job);
std::optional<std::pair<int64_t, int>> parse_preflight_task_id(const std::string& task);

// "killed by signal 9 (Killed)" / "exited with code 3 (invalid-config)" / the error. The
// meaning of a code is verlctl's exit-code table: not for a command job's program (kOwn).
enum class ExitCodes { kVerlctl, kOwn };
std::string describe_exit(const Placement& p, ExitCodes codes = ExitCodes::kVerlctl);

}  // namespace verl::launcher

// The head's job store: every job submitted to a cluster with its config, state changes
// (events), placement of ranks on nodes, logs, metrics and probe results. Backed by SQLite in
// the cluster's state.db (WAL), beside the node registry, so that a head restarted after a crash
// (kill -9) still lists every job, its events and its logs. Unlike the node registry it is
// never cleared: job ids (job-N) come from an AUTOINCREMENT key and are never reused.
//
// Logs arrive as chunks of each rank's stdout/stderr at byte offsets (an agent resends after a
// failed POST): bytes before the stream's end are ignored, so a resend is harmless. Complete
// lines become rows with a sequence number that increases over the whole store (what
// `logs -f` follows); the bytes after the last newline are kept as the stream's partial line
// until more arrives or the stream ends (eof, or flush_partials() when its job ends), so a rank
// that dies mid-line loses nothing and no line is ever cut.
//
// Jobs and placements are also held in memory (the view), loaded at open and kept current by
// the writers under the same lock as their SQL write: job(), jobs(), placements() and friends
// never touch SQLite. The head reads them on every heartbeat, and a 1,000-node job made that a
// scan of 1,000 placements per heartbeat (issue 18). SQLite stays the durable store: a head
// restarted after a crash loads the view from it. version() counts the writes that change what
// a job summary shows (job rows, metrics), so that a reader can cache what it built from them.
//
// Time is passed in (milliseconds since the epoch). Thread-safe: SQL writes and log/metric reads
// take one mutex, view reads another; a writer holds both while it changes the view.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "launcher/command_job.h"
#include "launcher/states.h"

namespace SQLite {
class Database;
}

namespace verl::launcher {


struct JobRecord {
  int64_t id = 0;
  JobKind kind = JobKind::kTrain;
  nlohmann::ordered_json config;  // train, command: the resolved job config; probe: {argv: [...]}
  JobState state = JobState::kPending;
  int64_t submitted_ms = 0, started_ms = 0, ended_ms = 0;  // 0: not yet
  int attempt = 0;               // 0-based; a restart starts the next attempt
  int restarts = 0;
  int nnodes = 1, n_gpus_per_node = 1, world_size = 1;
  int64_t total_steps = 0;       // 0: unknown
  bool stop_requested = false;
  double stop_grace_s = 10;
  nlohmann::ordered_json rendezvous = nlohmann::ordered_json::object();  // {master_addr, master_port}
  nlohmann::ordered_json failure;  // null, or {rank, node, host, exit_code?, signal?, reason, last_lines}
  // How it was submitted (stored together as the `options` JSON column):
  bool preflight = false;   // each attempt's nodes run the job preflight before its ranks start
  bool nccl_debug = false;  // the ranks run with NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET
  std::optional<CommandSpec> command;  // kind command: what each rank runs (command_job.h)
  std::string name() const { return "job-" + std::to_string(id); }
};

// One rank of one attempt of a job on a node. The task id the agent sees is <job>/<rank>/<attempt>.
struct Placement {
  int64_t job = 0;
  int attempt = 0;
  int rank = 0;
  std::string node;  // the node's name (stable over a head restart, unlike its id)
  std::string host;
  int local_rank = 0;
  std::string device;  // cpu | cuda:<index>
  TaskState state = TaskState::kAssigned;
  int64_t started_ms = 0, ended_ms = 0;
  std::optional<int> exit_code;  // when it exited
  int signal = 0;
  std::string error;             // why it could not start, or why it is counted as ended
  std::string task_id() const;
};
// "job-3/1/0" -> (3, rank 1, attempt 0); nullopt when it is not a task id.
struct TaskRef {
  int64_t job;
  int rank;
  int attempt;
};
std::optional<TaskRef> parse_task_id(const std::string& task);

struct JobEvent {
  std::string state;  // a JobState name, or RESTARTING / STOPPING
  int64_t time_ms = 0;
  std::string detail;
};

struct LogLine {
  int64_t seq = 0;
  int rank = 0;
  std::string host, stream, text;
};

class JobStore {
 public:
  // Opens (creating) the tables in the database at path; ":memory:" for tests. Throws
  // verl::Error naming the path when SQLite cannot open it.
  explicit JobStore(const std::string& path);
  ~JobStore();

  // This store's identity: 16 hex digits drawn when the database was created, the same for
  // every head that opens it again (a restart), another for a new cluster's database. Job ids
  // start again at job-1 in a new one; with this, a node tells the new job-1 from an old head's
  // job-1 in the same directory (issue 16, case 12).
  const std::string& incarnation() const { return incarnation_; }

  // A new PENDING job (with its PENDING event); returns it with its id.
  JobRecord create(JobRecord job, int64_t now_ms);
  std::optional<JobRecord> job(int64_t id) const;
  // The job without its config (null there): what a heartbeat reads of a job, without copying
  // the resolved config (hundreds of JSON values) twice per heartbeat (issue 18).
  std::optional<JobRecord> job_brief(int64_t id) const;
  std::vector<JobRecord> jobs() const;  // newest first
  std::vector<JobRecord> jobs_in(const std::vector<JobState>& states) const;  // oldest first
  // Writes every field but id and submitted_ms; when the state changed, records an event with
  // detail and sets started_ms (first RUNNING) and ended_ms (terminal).
  void update(const JobRecord& job, int64_t now_ms, const std::string& detail = {});
  void add_event(int64_t job, const std::string& state, int64_t now_ms, const std::string& detail);
  std::vector<JobEvent> events(int64_t job) const;

  void add_placements(const std::vector<Placement>& placements);
  void update_placement(const Placement& p);
  std::vector<Placement> placements(int64_t job) const;           // every attempt, by attempt and rank
  std::vector<Placement> placements(int64_t job, int attempt) const;
  std::vector<Placement> active_placements() const;                // not exited, any job
  std::vector<Placement> active_placements_on(const std::string& node) const;  // ... on one node
  std::optional<Placement> placement(int64_t job, int attempt, int rank) const;
  bool has_placements(int64_t job, int attempt) const;  // whether the attempt is placed

  // Appends data found at byte offset of (job, rank, stream); eof: the stream is complete (its
  // partial line becomes a line). Returns how many complete lines it added.
  // Offsets count per attempt: each attempt of a rank writes its own files.
  int append_log(int64_t job, int attempt, int rank, const std::string& host, const std::string& stream,
                 int64_t offset, const std::string& data, bool eof);
  // Every stream of the job ends: partial lines become lines.
  void flush_partials(int64_t job);
  // The seq of the job's newest line (any rank), 0 when it has none: where a tail ends.
  int64_t last_seq(int64_t job) const;
  // Lines with seq > after (rank < 0: all ranks), at most limit, in order.
  std::vector<LogLine> log_lines(int64_t job, int rank, int64_t after, int limit) const;
  // The last n lines (rank < 0: all ranks), in order.
  std::vector<LogLine> tail_lines(int64_t job, int rank, int n) const;

  // Metric rows ({step, ...}) of rank 0; a row for a step seen before replaces it (a resent or
  // resumed step). Rows without a numeric step are ignored.
  void put_metrics(int64_t job, const nlohmann::ordered_json& rows, int64_t now_ms);
  // Rows with step > after_step, by step; each with its received_ms under "_received_ms".
  nlohmann::ordered_json metrics(int64_t job, int64_t after_step) const;
  nlohmann::ordered_json latest_metrics(int64_t job, int n) const;  // the last n rows, by step

  // A command job's working directory, the tar its submitter packed (command_job.h); "" when
  // it has none.
  void put_working_dir(int64_t job, const std::string& tar);
  std::string working_dir(int64_t job) const;

  void put_result(int64_t job, int rank, const nlohmann::ordered_json& result);
  nlohmann::ordered_json results(int64_t job) const;  // {"<rank>": result}

  // Bumped by every write to a job row or its metrics (see above).
  uint64_t version() const { return version_.load(); }

 private:
  using PlacementKey = std::tuple<int64_t, int, int>;  // job, attempt, rank
  void load_view();
  void view_put_job(int64_t id);  // re-reads the row (mu_ held)
  mutable std::mutex mu_;       // db_
  mutable std::mutex view_mu_;  // the view; taken after mu_ by writers
  std::unique_ptr<SQLite::Database> db_;
  std::string incarnation_;
  std::map<int64_t, JobRecord> jobs_;
  std::map<PlacementKey, Placement> placements_;
  std::map<std::string, std::set<PlacementKey>> active_by_node_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace verl::launcher

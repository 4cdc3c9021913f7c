#include "launcher/job_store.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>
#include <limits>
#include <random>

#include "common/error.h"
#include "launcher/sql.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;

template <typename F>
auto guarded(const char* what, F&& f) -> decltype(f()) {
  return sql::guarded("job store", what, std::forward<F>(f));
}

constexpr const char* kJobColumns =
    "id, kind, config, state, submitted_ms, started_ms, ended_ms, attempt, restarts, nnodes, n_gpus_per_node,"
    " world_size, total_steps, stop_requested, stop_grace_s, rendezvous, failure, options";

JobRecord job_row(SQLite::Statement& q) {
  JobRecord j;
  std::string options_text;
  sql::read(q, j.id, j.kind, j.config, j.state, j.submitted_ms, j.started_ms, j.ended_ms, j.attempt, j.restarts, j.nnodes,
            j.n_gpus_per_node, j.world_size, j.total_steps, j.stop_requested, j.stop_grace_s, j.rendezvous, j.failure,
            options_text);
  const Json options = Json::parse(options_text, nullptr, /*allow_exceptions=*/false);
  j.preflight = options.is_object() && options.value("preflight", false);
  j.nccl_debug = options.is_object() && options.value("nccl_debug", false);
  if (options.is_object() && options.contains("command")) j.command = options["command"].get<CommandSpec>();
  return j;
}

constexpr const char* kInsertEvent = "INSERT INTO job_events (job, state, time_ms, detail) VALUES (?, ?, ?, ?)";

constexpr const char* kPlacementColumns =
    "job, attempt, rank, node, host, local_rank, device, state, started_ms, ended_ms, exit_code, signal, error";


Placement placement_row(SQLite::Statement& q) {
  Placement p;
  sql::read(q, p.job, p.attempt, p.rank, p.node, p.host, p.local_rank, p.device, p.state, p.started_ms, p.ended_ms,
            p.exit_code, p.signal, p.error);
  return p;
}

LogLine line_row(SQLite::Statement& q) {
  LogLine l;
  sql::read(q, l.seq, l.rank, l.host, l.stream, l.text);
  return l;
}

// A job_metrics row (row, received_ms) as the API shows it: the row with _received_ms.
Json metric_row(SQLite::Statement& q) {
  Json r;
  int64_t received_ms = 0;
  sql::read(q, r, received_ms);
  r["_received_ms"] = received_ms;
  return r;
}

void insert_line(SQLite::Database& db, int64_t job, int rank, const std::string& host, const std::string& stream,
                 const std::string& text) {
  sql::exec(db, "INSERT INTO log_lines (job, rank, host, stream, text) VALUES (?, ?, ?, ?, ?)", job, rank, host, stream, text);
}

// n hex digits from the system's random source.
std::string random_hex(size_t n) {
  std::random_device rd;
  std::string out;
  static const char kDigits[] = "0123456789abcdef";
  while (out.size() < n) {
    uint32_t v = rd();
    for (int i = 0; i < 8 && out.size() < n; ++i, v >>= 4) out.push_back(kDigits[v & 15]);
  }
  return out;
}

}  // namespace

std::string Placement::task_id() const {
  return "job-" + std::to_string(job) + "/" + std::to_string(rank) + "/" + std::to_string(attempt);
}

std::optional<TaskRef> parse_task_id(const std::string& task) {
  long long job = 0;
  int rank = 0, attempt = 0, used = 0;
  if (std::sscanf(task.c_str(), "job-%lld/%d/%d%n", &job, &rank, &attempt, &used) != 3 ||
      used != static_cast<int>(task.size()) || job <= 0 || rank < 0 || attempt < 0)
    return std::nullopt;
  return TaskRef{job, rank, attempt};
}

JobStore::JobStore(const std::string& path) {
  try {
    db_ = std::make_unique<SQLite::Database>(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    // Writes take the lock up front (IMMEDIATE): a deferred transaction that reads and then
    // writes while the node registry's connection writes fails at once with "database is locked"
    // (SQLite cannot wait there without risking a deadlock), which lost log chunks under load.
    db_->setBusyTimeout(5000);
    if (path != ":memory:") {
      db_->exec("PRAGMA journal_mode=WAL");
      // NORMAL in WAL mode: a committed transaction survives a crash of the head (kill -9); only
      // a power loss may take the last ones back.
      db_->exec("PRAGMA synchronous=NORMAL");
    }
    db_->exec(
        "CREATE TABLE IF NOT EXISTS jobs ("
        " id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, config TEXT NOT NULL, state TEXT NOT NULL,"
        " submitted_ms INTEGER NOT NULL, started_ms INTEGER NOT NULL DEFAULT 0, ended_ms INTEGER NOT NULL DEFAULT 0,"
        " attempt INTEGER NOT NULL DEFAULT 0, restarts INTEGER NOT NULL DEFAULT 0, nnodes INTEGER NOT NULL,"
        " n_gpus_per_node INTEGER NOT NULL, world_size INTEGER NOT NULL, total_steps INTEGER NOT NULL DEFAULT 0,"
        " stop_requested INTEGER NOT NULL DEFAULT 0, stop_grace_s REAL NOT NULL DEFAULT 10,"
        " rendezvous TEXT NOT NULL DEFAULT '{}', failure TEXT NOT NULL DEFAULT 'null',"
        " options TEXT NOT NULL DEFAULT '{}');"
        "CREATE TABLE IF NOT EXISTS job_events ("
        " id INTEGER PRIMARY KEY AUTOINCREMENT, job INTEGER NOT NULL, state TEXT NOT NULL,"
        " time_ms INTEGER NOT NULL, detail TEXT NOT NULL DEFAULT '');"
        "CREATE INDEX IF NOT EXISTS job_events_job ON job_events (job);"
        "CREATE TABLE IF NOT EXISTS placements ("
        " job INTEGER NOT NULL, attempt INTEGER NOT NULL, rank INTEGER NOT NULL, node TEXT NOT NULL,"
        " host TEXT NOT NULL, local_rank INTEGER NOT NULL, device TEXT NOT NULL, state TEXT NOT NULL,"
        " started_ms INTEGER NOT NULL DEFAULT 0, ended_ms INTEGER NOT NULL DEFAULT 0, exit_code INTEGER,"
        " signal INTEGER NOT NULL DEFAULT 0, error TEXT NOT NULL DEFAULT '',"
        " PRIMARY KEY (job, attempt, rank));"
        "CREATE TABLE IF NOT EXISTS log_streams ("
        " job INTEGER NOT NULL, attempt INTEGER NOT NULL, rank INTEGER NOT NULL, stream TEXT NOT NULL,"
        " host TEXT NOT NULL, end_offset INTEGER NOT NULL DEFAULT 0, partial BLOB NOT NULL DEFAULT '',"
        " PRIMARY KEY (job, attempt, rank, stream));"
        "CREATE TABLE IF NOT EXISTS log_lines ("
        " seq INTEGER PRIMARY KEY AUTOINCREMENT, job INTEGER NOT NULL, rank INTEGER NOT NULL, host TEXT NOT NULL,"
        " stream TEXT NOT NULL, text TEXT NOT NULL);"
        "CREATE INDEX IF NOT EXISTS log_lines_job ON log_lines (job, seq);"
        "CREATE TABLE IF NOT EXISTS job_metrics ("
        " job INTEGER NOT NULL, step INTEGER NOT NULL, row TEXT NOT NULL, received_ms INTEGER NOT NULL,"
        " PRIMARY KEY (job, step));"
        "CREATE TABLE IF NOT EXISTS job_results ("
        " job INTEGER NOT NULL, rank INTEGER NOT NULL, result TEXT NOT NULL, PRIMARY KEY (job, rank));"
        "CREATE TABLE IF NOT EXISTS job_working_dirs (job INTEGER PRIMARY KEY, tar BLOB NOT NULL);"
        "CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);");
    // The first head to open the database draws its incarnation; later ones read it.
    {
      sql::exec(*db_, "INSERT OR IGNORE INTO store_meta (key, value) VALUES ('incarnation', ?)", random_hex(16));
      SQLite::Statement get(*db_, "SELECT value FROM store_meta WHERE key = 'incarnation'");
      if (get.executeStep()) incarnation_ = get.getColumn(0).getString();
    }
    // A state.db from before the submit options (issue 19: preflight, nccl_debug) lacks their column.
    bool has_options = false;
    SQLite::Statement cols(*db_, "PRAGMA table_info(jobs)");
    while (cols.executeStep()) has_options = has_options || cols.getColumn(1).getString() == "options";
    if (!has_options) db_->exec("ALTER TABLE jobs ADD COLUMN options TEXT NOT NULL DEFAULT '{}'");
    load_view();
  } catch (const SQLite::Exception& e) {
    throw Error(ExitCode::kFailure, "cannot open the job store " + path + ": " + e.what(),
                "check that the state directory is writable");
  }
}

JobStore::~JobStore() = default;

void JobStore::load_view() {
  SQLite::Statement jq(*db_, std::string("SELECT ") + kJobColumns + " FROM jobs");
  while (jq.executeStep()) {
    JobRecord j = job_row(jq);
    jobs_[j.id] = std::move(j);
  }
  SQLite::Statement pq(*db_, std::string("SELECT ") + kPlacementColumns + " FROM placements");
  while (pq.executeStep()) {
    Placement p = placement_row(pq);
    const PlacementKey key{p.job, p.attempt, p.rank};
    if (p.state != TaskState::kExited) active_by_node_[p.node].insert(key);
    placements_[key] = std::move(p);
  }
}

void JobStore::view_put_job(int64_t id) {
  SQLite::Statement q(*db_, std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?");
  sql::bind(q, id);
  if (!q.executeStep()) return;
  JobRecord j = job_row(q);
  std::lock_guard<std::mutex> view(view_mu_);
  jobs_[id] = std::move(j);
  ++version_;
}

JobRecord JobStore::create(JobRecord job, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  return guarded("create", [&] {
    SQLite::Transaction tx(*db_, SQLite::TransactionBehavior::IMMEDIATE);
    Json options = {{"preflight", job.preflight}, {"nccl_debug", job.nccl_debug}};
    if (job.command) options["command"] = *job.command;
    sql::exec(*db_,
              "INSERT INTO jobs (kind, config, state, submitted_ms, nnodes, n_gpus_per_node, world_size,"
              " total_steps, options) VALUES (?, ?, 'PENDING', ?, ?, ?, ?, ?, ?)",
              job.kind, job.config, now_ms, job.nnodes, job.n_gpus_per_node, job.world_size, job.total_steps, options);
    job.id = db_->getLastInsertRowid();
    job.state = JobState::kPending;
    job.submitted_ms = now_ms;
    sql::exec(*db_, "INSERT INTO job_events (job, state, time_ms, detail) VALUES (?, 'PENDING', ?, ?)", job.id, now_ms,
              "submitted");
    tx.commit();
    view_put_job(job.id);
    return job;
  });
}

std::optional<JobRecord> JobStore::job(int64_t id) const {
  std::lock_guard<std::mutex> lock(view_mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return it->second;
}

std::optional<JobRecord> JobStore::job_brief(int64_t id) const {
  std::lock_guard<std::mutex> lock(view_mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  const JobRecord& j = it->second;
  JobRecord b;
  b.id = j.id;
  b.kind = j.kind;
  b.state = j.state;
  b.submitted_ms = j.submitted_ms;
  b.started_ms = j.started_ms;
  b.ended_ms = j.ended_ms;
  b.attempt = j.attempt;
  b.restarts = j.restarts;
  b.nnodes = j.nnodes;
  b.n_gpus_per_node = j.n_gpus_per_node;
  b.world_size = j.world_size;
  b.total_steps = j.total_steps;
  b.stop_requested = j.stop_requested;
  b.stop_grace_s = j.stop_grace_s;
  b.rendezvous = j.rendezvous;
  b.failure = j.failure;
  b.preflight = j.preflight;
  b.nccl_debug = j.nccl_debug;
  return b;
}

std::vector<JobRecord> JobStore::jobs() const {
  std::lock_guard<std::mutex> lock(view_mu_);
  std::vector<JobRecord> out;
  out.reserve(jobs_.size());
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) out.push_back(it->second);
  return out;
}

std::vector<JobRecord> JobStore::jobs_in(const std::vector<JobState>& states) const {
  std::lock_guard<std::mutex> lock(view_mu_);
  std::vector<JobRecord> out;
  for (const auto& [id, j] : jobs_)
    if (std::find(states.begin(), states.end(), j.state) != states.end()) out.push_back(j);
  return out;
}

void JobStore::update(const JobRecord& job, int64_t now_ms, const std::string& detail) {
  std::lock_guard<std::mutex> lock(mu_);
  guarded("update job", [&] {
    SQLite::Transaction tx(*db_, SQLite::TransactionBehavior::IMMEDIATE);
    SQLite::Statement old(*db_, "SELECT state, started_ms, ended_ms FROM jobs WHERE id = ?");
    sql::bind(old, job.id);
    if (!old.executeStep()) return;
    JobState before = JobState::kPending;
    int64_t started = 0, ended = 0;
    sql::read(old, before, started, ended);
    if (job.state == JobState::kRunning && started == 0) started = now_ms;
    if (is_terminal(job.state) && !is_terminal(before)) ended = now_ms;
    sql::exec(*db_,
              "UPDATE jobs SET config = ?, state = ?, started_ms = ?, ended_ms = ?, attempt = ?, restarts = ?,"
              " nnodes = ?, n_gpus_per_node = ?, world_size = ?, total_steps = ?, stop_requested = ?,"
              " stop_grace_s = ?, rendezvous = ?, failure = ? WHERE id = ?",
              job.config, job.state, started, ended, job.attempt, job.restarts, job.nnodes, job.n_gpus_per_node,
              job.world_size, job.total_steps, job.stop_requested, job.stop_grace_s, job.rendezvous, job.failure, job.id);
    if (before != job.state)
      sql::exec(*db_, kInsertEvent, job.id, job.state, now_ms, detail);
    tx.commit();
    view_put_job(job.id);
  });
}

void JobStore::add_event(int64_t job, const std::string& state, int64_t now_ms, const std::string& detail) {
  std::lock_guard<std::mutex> lock(mu_);
  guarded("add event", [&] {
    sql::exec(*db_, kInsertEvent, job, state, now_ms, detail);
  });
}

std::vector<JobEvent> JobStore::events(int64_t job) const {
  std::lock_guard<std::mutex> lock(mu_);
  return guarded("events", [&] {
    std::vector<JobEvent> out;
    SQLite::Statement q(*db_, "SELECT state, time_ms, detail FROM job_events WHERE job = ? ORDER BY id");
    sql::bind(q, job);
    while (q.executeStep()) {
      JobEvent e;
      sql::read(q, e.state, e.time_ms, e.detail);
      out.push_back(std::move(e));
    }
    return out;
  });
}

void JobStore::add_placements(const std::vector<Placement>& placements) {
  std::lock_guard<std::mutex> lock(mu_);
  guarded("place", [&] {
    SQLite::Transaction tx(*db_, SQLite::TransactionBehavior::IMMEDIATE);
    for (const auto& p : placements) {
      sql::exec(*db_,
                "INSERT OR REPLACE INTO placements (job, attempt, rank, node, host, local_rank, device, state)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                p.job, p.attempt, p.rank, p.node, p.host, p.local_rank, p.device, p.state);
    }
    tx.commit();
    std::lock_guard<std::mutex> view(view_mu_);
    for (const auto& p : placements) {
      const PlacementKey key{p.job, p.attempt, p.rank};
      auto old = placements_.find(key);
      if (old != placements_.end() && old->second.state != TaskState::kExited) active_by_node_[old->second.node].erase(key);
      if (p.state != TaskState::kExited) active_by_node_[p.node].insert(key);
      placements_[key] = p;
    }
  });
}

void JobStore::update_placement(const Placement& p) {
  std::lock_guard<std::mutex> lock(mu_);
  guarded("update placement", [&] {
    const int changed = sql::exec(*db_,
                                  "UPDATE placements SET host = ?, state = ?, started_ms = ?, ended_ms = ?, exit_code = ?,"
                                  " signal = ?, error = ? WHERE job = ? AND attempt = ? AND rank = ?",
                                  p.host, p.state, p.started_ms, p.ended_ms, p.exit_code, p.signal, p.error, p.job,
                                  p.attempt, p.rank);
    if (changed == 0) return;
    std::lock_guard<std::mutex> view(view_mu_);
    auto it = placements_.find({p.job, p.attempt, p.rank});
    if (it == placements_.end()) return;
    Placement& v = it->second;
    if (v.state != TaskState::kExited && p.state == TaskState::kExited) {
      auto& set = active_by_node_[v.node];
      set.erase(it->first);
      if (set.empty()) active_by_node_.erase(v.node);
    } else if (v.state == TaskState::kExited && p.state != TaskState::kExited) {
      active_by_node_[v.node].insert(it->first);
    }
    // What the UPDATE wrote; the rest (node, local_rank, device) is the placement's for good.
    v.host = p.host;
    v.state = p.state;
    v.started_ms = p.started_ms;
    v.ended_ms = p.ended_ms;
    v.exit_code = p.exit_code;
    v.signal = p.signal;
    v.error = p.error;
  });
}

std::vector<Placement> JobStore::placements(int64_t job) const {
  std::lock_guard<std::mutex> lock(view_mu_);
  std::vector<Placement> out;
  for (auto it = placements_.lower_bound({job, std::numeric_limits<int>::min(), std::numeric_limits<int>::min()});
       it != placements_.end() && std::get<0>(it->first) == job; ++it)
    out.push_back(it->second);
  return out;
}

std::vector<Placement> JobStore::placements(int64_t job, int attempt) const {
  std::lock_guard<std::mutex> lock(view_mu_);
  std::vector<Placement> out;
  for (auto it = placements_.lower_bound({job, attempt, std::numeric_limits<int>::min()});
       it != placements_.end() && std::get<0>(it->first) == job && std::get<1>(it->first) == attempt; ++it)
    out.push_back(it->second);
  return out;
}

std::vector<Placement> JobStore::active_placements() const {
  std::lock_guard<std::mutex> lock(view_mu_);
  std::set<PlacementKey> keys;  // by job, attempt, rank, whichever node
  for (const auto& [node, set] : active_by_node_) keys.insert(set.begin(), set.end());
  std::vector<Placement> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(placements_.at(k));
  return out;
}

std::vector<Placement> JobStore::active_placements_on(const std::string& node) const {
  std::lock_guard<std::mutex> lock(view_mu_);
  std::vector<Placement> out;
  auto it = active_by_node_.find(node);
  if (it == active_by_node_.end()) return out;
  for (const auto& k : it->second) out.push_back(placements_.at(k));
  return out;
}

bool JobStore::has_placements(int64_t job, int attempt) const {
  std::lock_guard<std::mutex> lock(view_mu_);
  auto it = placements_.lower_bound({job, attempt, std::numeric_limits<int>::min()});
  return it != placements_.end() && std::get<0>(it->first) == job && std::get<1>(it->first) == attempt;
}

std::optional<Placement> JobStore::placement(int64_t job, int attempt, int rank) const {
  std::lock_guard<std::mutex> lock(view_mu_);
  auto it = placements_.find({job, attempt, rank});
  if (it == placements_.end()) return std::nullopt;
  return it->second;
}

int JobStore::append_log(int64_t job, int attempt, int rank, const std::string& host, const std::string& stream,
                         int64_t offset, const std::string& data, bool eof) {
  std::lock_guard<std::mutex> lock(mu_);
  return guarded("append log", [&] {
    SQLite::Transaction tx(*db_, SQLite::TransactionBehavior::IMMEDIATE);
    int64_t end = 0;
    std::string partial;
    {
      SQLite::Statement q(*db_,
                          "SELECT end_offset, partial FROM log_streams WHERE job = ? AND attempt = ? AND rank = ?"
                          " AND stream = ?");
      sql::bind(q, job, attempt, rank, stream);
      if (q.executeStep()) {
        end = q.getColumn(0).getInt64();
        partial = sql::blob(q.getColumn(1));
      }
    }
    // Only the bytes past what we hold count: a resend of a chunk (or of its head) adds nothing.
    // A gap (offset past the end: bytes the agent could not read) is taken as it comes.
    std::string fresh;
    if (offset + static_cast<int64_t>(data.size()) > end) {
      const int64_t skip = std::max<int64_t>(0, end - offset);
      fresh = data.substr(static_cast<size_t>(skip));
      end = offset + static_cast<int64_t>(data.size());
    }
    partial += fresh;
    int added = 0;
    size_t start = 0;
    for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1) {
      insert_line(*db_, job, rank, host, stream, partial.substr(start, nl - start));
      ++added;
    }
    partial.erase(0, start);
    if (eof && !partial.empty()) {
      insert_line(*db_, job, rank, host, stream, partial);
      partial.clear();
      ++added;
    }
    sql::exec(*db_,
              "INSERT INTO log_streams (job, attempt, rank, stream, host, end_offset, partial)"
              " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(job, attempt, rank, stream) DO UPDATE SET"
              " host = excluded.host, end_offset = excluded.end_offset, partial = excluded.partial",
              job, attempt, rank, stream, host, end, sql::Blob{partial});
    tx.commit();
    return added;
  });
}

void JobStore::flush_partials(int64_t job) {
  std::lock_guard<std::mutex> lock(mu_);
  guarded("flush logs", [&] {
    SQLite::Transaction tx(*db_, SQLite::TransactionBehavior::IMMEDIATE);
    {
      SQLite::Statement q(*db_,
                          "SELECT rank, stream, host, partial FROM log_streams WHERE job = ? AND length(partial) > 0"
                          " ORDER BY rank, stream");
      sql::bind(q, job);
      while (q.executeStep())
        insert_line(*db_, job, q.getColumn(0).getInt(), q.getColumn(2).getString(), q.getColumn(1).getString(),
                    sql::blob(q.getColumn(3)));
    }
    sql::exec(*db_, "UPDATE log_streams SET partial = '' WHERE job = ?", job);
    tx.commit();
  });
}

std::vector<LogLine> JobStore::log_lines(int64_t job, int rank, int64_t after, int limit) const {
  std::lock_guard<std::mutex> lock(mu_);
  return guarded("log lines", [&] {
    return sql::select(*db_,
                       "SELECT seq, rank, host, stream, text FROM log_lines WHERE job = ? AND seq > ?"
                       " AND (? < 0 OR rank = ?) ORDER BY seq LIMIT ?",
                       line_row, job, after, rank, rank, limit);
  });
}

int64_t JobStore::last_seq(int64_t job) const {
  std::lock_guard<std::mutex> lock(mu_);
  return guarded("log tail", [&] {
    SQLite::Statement q(*db_, "SELECT COALESCE(MAX(seq), 0) FROM log_lines WHERE job = ?");
    sql::bind(q, job);
    q.executeStep();
    return q.getColumn(0).getInt64();
  });
}

std::vector<LogLine> JobStore::tail_lines(int64_t job, int rank, int n) const {
  std::lock_guard<std::mutex> lock(mu_);
  return guarded("log tail", [&] {
    std::vector<LogLine> out = sql::select(*db_,
                                           "SELECT seq, rank, host, stream, text FROM log_lines WHERE job = ? AND (? < 0 OR rank = ?)"
                                           " ORDER BY seq DESC LIMIT ?",
                                           line_row, job, rank, rank, n);
    std::reverse(out.begin(), out.end());
    return out;
  });
}

void JobStore::put_metrics(int64_t job, const Json& rows, int64_t now_ms) {
  if (!rows.is_array()) return;
  std::lock_guard<std::mutex> lock(mu_);
  guarded("put metrics", [&] {
    SQLite::Transaction tx(*db_, SQLite::TransactionBehavior::IMMEDIATE);
    for (const auto& r : rows) {
      if (!r.is_object() || !r.contains("step") || !r["step"].is_number_integer()) continue;
      sql::exec(*db_, "INSERT OR REPLACE INTO job_metrics (job, step, row, received_ms) VALUES (?, ?, ?, ?)", job,
                r["step"].get<int64_t>(), r, now_ms);
    }
    tx.commit();
    ++version_;  // a summary shows the latest step
  });
}

Json JobStore::metrics(int64_t job, int64_t after_step) const {
  std::lock_guard<std::mutex> lock(mu_);
  return guarded("metrics", [&] {
    Json out = Json::array();
    SQLite::Statement q(*db_, "SELECT row, received_ms FROM job_metrics WHERE job = ? AND step > ? ORDER BY step");
    sql::bind(q, job, after_step);
    while (q.executeStep()) out.push_back(metric_row(q));
    return out;
  });
}

Json JobStore::latest_metrics(int64_t job, int n) const {
  std::lock_guard<std::mutex> lock(mu_);
  return guarded("metrics", [&] {
    Json out = Json::array();
    SQLite::Statement q(*db_, "SELECT row, received_ms FROM job_metrics WHERE job = ? ORDER BY step DESC LIMIT ?");
    sql::bind(q, job, n);
    while (q.executeStep()) out.insert(out.begin(), metric_row(q));
    return out;
  });
}

void JobStore::put_working_dir(int64_t job, const std::string& tar) {
  std::lock_guard<std::mutex> lock(mu_);
  guarded("put working dir", [&] {
    sql::exec(*db_, "INSERT OR REPLACE INTO job_working_dirs (job, tar) VALUES (?, ?)", job, sql::Blob{tar});
  });
}

std::string JobStore::working_dir(int64_t job) const {
  std::lock_guard<std::mutex> lock(mu_);
  return guarded("working dir", [&] {
    SQLite::Statement q(*db_, "SELECT tar FROM job_working_dirs WHERE job = ?");
    sql::bind(q, job);
    if (!q.executeStep()) return std::string();
    return sql::blob(q.getColumn(0));
  });
}

void JobStore::put_result(int64_t job, int rank, const Json& result) {
  std::lock_guard<std::mutex> lock(mu_);
  guarded("put result", [&] {
    sql::exec(*db_, "INSERT OR REPLACE INTO job_results (job, rank, result) VALUES (?, ?, ?)", job, rank, result);
  });
}

Json JobStore::results(int64_t job) const {
  std::lock_guard<std::mutex> lock(mu_);
  return guarded("results", [&] {
    Json out = Json::object();
    SQLite::Statement q(*db_, "SELECT rank, result FROM job_results WHERE job = ? ORDER BY rank");
    sql::bind(q, job);
    while (q.executeStep()) out[std::to_string(q.getColumn(0).getInt())] = Json::parse(q.getColumn(1).getString());
    return out;
  });
}

}  // namespace verl::launcher

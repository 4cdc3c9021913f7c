#include "launcher/node_registry.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include <cstdio>

#include "common/error.h"
#include "common/log.h"
#include "common/strings.h"
#include "launcher/sql.h"

namespace verl::launcher {
namespace {


constexpr const char* kColumns =
    "id, name, host, pid, resources, registered_ms, last_heartbeat_ms, heartbeats, state, lost_ms, reason";

NodeRecord row(SQLite::Statement& q) {
  NodeRecord n;
  nlohmann::ordered_json resources;
  sql::read(q, n.id, n.name, n.host, n.pid, resources, n.registered_ms, n.last_heartbeat_ms, n.heartbeats, n.state,
            n.lost_ms, n.reason);
  n.resources = resources_from_json(resources);
  return n;
}

// SQLite's errors become verl::Error here, at the module boundary.
template <typename F>
auto guarded(const char* what, F&& f) -> decltype(f()) {
  return sql::guarded("node registry", what, std::forward<F>(f));
}

}  // namespace


wire::NodeView node_view(const NodeRecord& n, int64_t now_ms) {
  wire::NodeView v;
  v.id = n.id;
  v.name = n.name;
  v.host = n.host;
  v.pid = n.pid;
  v.state = n.state;
  v.resources = n.resources;
  v.registered_ms = n.registered_ms;
  v.last_heartbeat_ms = n.last_heartbeat_ms;
  v.heartbeat_age_s = static_cast<double>(now_ms - n.last_heartbeat_ms) / 1000.0;
  v.heartbeats = n.heartbeats;
  if (n.state != NodeState::kAlive) v.lost_ms = n.lost_ms;
  v.reason = n.reason;
  return v;
}

NodeRegistry::NodeRegistry(const std::string& path) {
  try {
    db_ = std::make_unique<SQLite::Database>(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db_->setBusyTimeout(5000);
    if (path != ":memory:") db_->exec("PRAGMA journal_mode=WAL");
    db_->exec(
        "CREATE TABLE IF NOT EXISTS nodes ("
        " id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " name TEXT NOT NULL UNIQUE,"
        " host TEXT NOT NULL,"
        " pid INTEGER NOT NULL,"
        " resources TEXT NOT NULL,"
        " registered_ms INTEGER NOT NULL,"
        " last_heartbeat_ms INTEGER NOT NULL,"
        " heartbeats INTEGER NOT NULL DEFAULT 0,"
        " state TEXT NOT NULL,"
        " lost_ms INTEGER NOT NULL DEFAULT 0,"
        " reason TEXT NOT NULL DEFAULT '')");
    SQLite::Statement q(*db_, std::string("SELECT ") + kColumns + " FROM nodes ORDER BY id");
    while (q.executeStep()) {
      NodeRecord n = row(q);
      names_.insert(n.name);
      nodes_[n.id] = n;
    }
  } catch (const SQLite::Exception& e) {
    throw Error(ExitCode::kFailure, "cannot open the node registry " + path + ": " + e.what(),
                "check that the state directory is writable");
  }
}

NodeRegistry::~NodeRegistry() {
  try {
    flush();
  } catch (const std::exception& e) {  // a full disk at exit: the heartbeat counts are not worth a crash
    log::Warn() << "node registry: the last heartbeat counts were not saved: " << e.what();
  }
}

void NodeRegistry::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  guarded("clear", [&] { db_->exec("DELETE FROM nodes"); });
  nodes_.clear();
  names_.clear();
  dirty_.clear();
}

NodeRecord NodeRegistry::register_node(const std::string& name, const std::string& host, int64_t pid,
                                       const Resources& resources, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  return guarded("register", [&] {
    sql::exec(*db_,
              "INSERT INTO nodes (name, host, pid, resources, registered_ms, last_heartbeat_ms, heartbeats,"
              " state, lost_ms, reason) VALUES (?, ?, ?, ?, ?, ?, 0, 'alive', 0, '')"
              " ON CONFLICT(name) DO UPDATE SET host = excluded.host, pid = excluded.pid,"
              " resources = excluded.resources, registered_ms = excluded.registered_ms,"
              " last_heartbeat_ms = excluded.last_heartbeat_ms, heartbeats = 0, state = 'alive',"
              " lost_ms = 0, reason = ''",
              name, host, pid, to_json(resources), now_ms, now_ms);
    SQLite::Statement id(*db_, std::string("SELECT ") + kColumns + " FROM nodes WHERE name = ?");
    sql::bind(id, name);
    id.executeStep();
    NodeRecord n = row(id);
    dirty_.erase(n.id);
    nodes_[n.id] = n;
    names_.insert(n.name);
    return n;
  });
}

std::optional<NodeRecord> NodeRegistry::heartbeat(int64_t id, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return std::nullopt;
  NodeRecord& n = it->second;
  n.last_heartbeat_ms = now_ms;
  ++n.heartbeats;
  if (n.state == NodeState::kLost) {  // heard from again: a state change, written now
    n.state = NodeState::kAlive;
    n.lost_ms = 0;
    n.reason.clear();
    guarded("heartbeat", [&] { write_state(n); });
    dirty_.erase(id);
  } else {
    dirty_.insert(id);
  }
  return n;
}

bool NodeRegistry::leave(int64_t id, const std::string& reason, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return false;
  NodeRecord& n = it->second;
  n.state = NodeState::kLeft;
  n.lost_ms = now_ms;
  n.reason = reason;
  guarded("leave", [&] { write_state(n); });
  dirty_.erase(id);
  return true;
}

std::vector<NodeRecord> NodeRegistry::mark_lost(int64_t now_ms, int64_t timeout_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<NodeRecord> lost;
  for (auto& [id, n] : nodes_) {
    if (n.state != NodeState::kAlive || n.last_heartbeat_ms >= now_ms - timeout_ms) continue;
    const std::string reason = "no heartbeat for " + format_seconds((now_ms - n.last_heartbeat_ms) / 1000.0, 1) +
                               " (timeout " + format_seconds(timeout_ms / 1000.0, 1) + ")";
    n.state = NodeState::kLost;
    n.lost_ms = now_ms;
    n.reason = reason;
    dirty_.insert(id);
    lost.push_back(n);
  }
  if (dirty_.empty()) return lost;
  guarded("mark lost", [&] {
    SQLite::Transaction tx(*db_, SQLite::TransactionBehavior::IMMEDIATE);
    flush_locked();
    tx.commit();
  });
  return lost;
}

void NodeRegistry::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (dirty_.empty()) return;
  guarded("flush", [&] {
    SQLite::Transaction tx(*db_, SQLite::TransactionBehavior::IMMEDIATE);
    flush_locked();
    tx.commit();
  });
}

void NodeRegistry::flush_locked() {
  for (int64_t id : dirty_) {
    auto it = nodes_.find(id);
    if (it != nodes_.end()) write_state(it->second);
  }
  dirty_.clear();
}

void NodeRegistry::write_state(const NodeRecord& n) {
  sql::exec(*db_, "UPDATE nodes SET last_heartbeat_ms = ?, heartbeats = ?, state = ?, lost_ms = ?, reason = ? WHERE id = ?",
            n.last_heartbeat_ms, n.heartbeats, n.state, n.lost_ms, n.reason, n.id);
}

std::vector<NodeRecord> NodeRegistry::nodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<NodeRecord> out;
  out.reserve(nodes_.size());
  for (const auto& [id, n] : nodes_) out.push_back(n);
  return out;
}

std::vector<NodeRecord> NodeRegistry::not_alive() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<NodeRecord> out;
  for (const auto& [id, n] : nodes_)
    if (n.state != NodeState::kAlive) out.push_back(n);
  return out;
}

bool NodeRegistry::has_node(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return names_.count(name) > 0;
}

std::optional<NodeRecord> NodeRegistry::node(int64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return std::nullopt;
  return it->second;
}

}  // namespace verl::launcher

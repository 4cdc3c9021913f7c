// The head's node registry: which agents registered, what they have, and whether they are still
// heard from. Backed by SQLite (the head's state.db, WAL) so that the jobs that come later can
// join against it and so that it survives a look with the sqlite3 shell; the head clears it at
// start because agents re-register with a head they do not know.
//
// Reads are served from memory (a copy of every row, loaded at open and kept current by the
// writers): the head asks for the node list several times a second and for a node on every
// heartbeat, which at 1,000 nodes was thousands of SELECTs (each parsing a resources JSON) a
// second (issue 18). A heartbeat changes memory only; its last_heartbeat_ms and count reach the
// table at the next mark_lost() or flush() (the sweeper's pass, every 200 ms), all in one
// transaction, so the table lags by one sweep. State changes (register, lost, alive again, left)
// are written at once.
//
// Time is passed in (milliseconds since the epoch) rather than read, so that heartbeat loss is
// tested without sleeping. Thread-safe: every call takes one mutex.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "launcher/resources.h"
#include "launcher/states.h"
#include "launcher/wire.h"

namespace SQLite {
class Database;
}

namespace verl::launcher {


struct NodeRecord {
  int64_t id = 0;
  std::string name;  // node-0, or the host for remote backends
  std::string host;  // what the agent's gethostname() says
  int64_t pid = 0;   // the agent's pid on its host
  Resources resources;
  int64_t registered_ms = 0;
  int64_t last_heartbeat_ms = 0;
  int64_t heartbeats = 0;
  NodeState state = NodeState::kAlive;
  int64_t lost_ms = 0;      // when it was marked lost or left; 0 while alive
  std::string reason;       // why (lost: "no heartbeat for 10.2 s", left: "agent stopped: ...")
};

// The node as the API shows it; heartbeat_age_s is measured at now_ms.
wire::NodeView node_view(const NodeRecord& node, int64_t now_ms);

class NodeRegistry {
 public:
  // Opens (creating) the database at path; ":memory:" for an in-memory one. Throws verl::Error
  // naming the path when SQLite cannot open it.
  explicit NodeRegistry(const std::string& path);
  ~NodeRegistry();

  void clear();
  // Registers a node by name; a name seen before is the same node again (same id), alive.
  NodeRecord register_node(const std::string& name, const std::string& host, int64_t pid,
                           const Resources& resources, int64_t now_ms);
  // nullopt: no node with that id (the caller answers 404, the agent re-registers). A lost node
  // that heartbeats again is alive again.
  std::optional<NodeRecord> heartbeat(int64_t id, int64_t now_ms);
  // The agent says it is leaving. false: no such node.
  bool leave(int64_t id, const std::string& reason, int64_t now_ms);
  // Marks every alive node whose last heartbeat is older than timeout_ms as lost, with the time
  // and the reason; returns the nodes it marked.
  std::vector<NodeRecord> mark_lost(int64_t now_ms, int64_t timeout_ms);

  // Writes the heartbeats held in memory only (see above); the destructor does too.
  void flush();

  std::vector<NodeRecord> nodes() const;  // by id
  std::vector<NodeRecord> not_alive() const;  // lost or left, by id
  bool has_node(const std::string& name) const;
  std::optional<NodeRecord> node(int64_t id) const;

 private:
  void flush_locked();   // in the caller's transaction, if any
  void write_state(const NodeRecord& n);
  mutable std::mutex mu_;
  std::unique_ptr<SQLite::Database> db_;
  std::map<int64_t, NodeRecord> nodes_;  // the table's rows, current
  std::set<int64_t> dirty_;              // heartbeats not yet in the table
  std::set<std::string> names_;          // of nodes_
};

}  // namespace verl::launcher

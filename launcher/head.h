// The head: the cluster's HTTP API (cpp-httplib) and its node registry. Every request must carry
// "Authorization: Bearer <token>"; one without it, or with another token, is answered 401 before
// any handler runs.
//
//   POST /api/nodes/register        {name, host, pid, resources} -> {id, heartbeat_interval_s}
//   POST /api/nodes/<id>/heartbeat  {} -> {shutdown: bool}; 404 when the head does not know <id>
//   POST /api/nodes/<id>/leave      {reason} -> {}
//   GET  /api/nodes                 {nodes: [...]}  (resources, state, heartbeat age)
//   GET  /api/cluster               {name, backend, state, head, expected_nodes, counts}
//   POST /api/shutdown              {} -> {agents}: agents learn it from their next heartbeat
//
// A sweeper thread marks nodes lost when their heartbeats stop for heartbeat_timeout. After a
// shutdown request the head waits until no node is alive any more (each agent says it leaves)
// or shutdown_grace has passed, then wait() returns.
//
// Thread-safe; start() once, stop() (or the destructor) ends the server and the sweeper.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "launcher/node_registry.h"

namespace verl::launcher {

int64_t now_ms();  // wall clock, milliseconds since the epoch

struct HeadOptions {
  std::string cluster_name = "local";
  std::string backend = "local";
  std::string bind_host = "127.0.0.1";
  int port = 0;                           // 0: any free port (tests); port() says which
  std::string token;                      // required, non-empty
  std::string db_path = ":memory:";
  std::vector<std::string> expected_nodes;
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{10000};
  std::chrono::milliseconds sweep_interval{200};
  std::chrono::milliseconds shutdown_grace{5000};
};

class Head {
 public:
  explicit Head(HeadOptions options);
  ~Head();
  Head(const Head&) = delete;
  Head& operator=(const Head&) = delete;

  // Binds and starts serving. Throws verl::Error naming host:port when it cannot bind.
  void start();
  int port() const { return port_; }
  // Blocks until a shutdown request has drained (see above) or *stop becomes true; polls *stop.
  void wait(const std::atomic<bool>* stop = nullptr);
  void stop();

  // One sweep now (the sweeper thread calls it too).
  void sweep();
  bool shutting_down() const { return shutting_down_; }
  NodeRegistry& registry() { return registry_; }

 private:
  struct Server;
  void install_routes();
  void sweeper();
  HeadOptions options_;
  NodeRegistry registry_;
  std::unique_ptr<Server> server_;
  int port_ = 0;
  int64_t started_ms_ = 0;
  std::atomic<bool> shutting_down_{false};
  std::atomic<int64_t> shutdown_ms_{0};
  std::atomic<bool> drained_{false};
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread listen_thread_, sweep_thread_;
};

}  // namespace verl::launcher

// The head's HTTP server: cpp-httplib's Server with the bounds a server on a shared network
// needs and httplib 0.11 lacks (issue 16):
//
//  - a deadline per request: from a new connection's accept, or from the first byte of a later
//    request on a kept-alive connection, the request line, headers and body must have arrived
//    within request_timeout, or the connection is dropped. httplib's read timeout is per read,
//    so a client sending one byte every few seconds (slowloris) held a worker thread for good;
//  - a cap on slow clients: a request still arriving after slow_after is slow; at most
//    max_slow of them are waited for at once, a further one is dropped at that mark. The worker
//    pool is one thread per connection, so without the cap a handful of slowloris connections
//    (8 held every worker of a head without agents) left none for the agents' heartbeats;
//  - a listen backlog set by listen_backlog() after the bind (httplib's is 5, compiled into
//    Debian's libcpp-httplib: agents that all connect at once, after a head restart, lost SYNs
//    and waited a second for the retransmit).
//
// Each drop is logged with the client's address and why. Configure (the bounds, then httplib's
// own setters) before listen_after_bind(); the server's threads read the bounds, never write them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>

#include <httplib.h>

namespace verl::launcher {

struct HttpBounds {
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds slow_after{1000};
  size_t max_slow = 4;
};

class GuardedHttpServer : public httplib::Server {
 public:
  explicit GuardedHttpServer(HttpBounds bounds);
  ~GuardedHttpServer() override;

  // After bind_to_port / bind_to_any_port: listen() again with this backlog (Linux takes a
  // second listen() on a listening socket as a new backlog). Returns false when not bound.
  bool listen_backlog(int backlog);

  // Stops the server and wakes every kept-alive connection waiting for its next request at
  // once (they wait in poll() on the socket and this server's wake fd, not in 100 ms slices:
  // 1,000 idle agents' connections were 10,000 wake-ups a second; issue 18).
  void shutdown();

  // How many connections were dropped for each bound since the start (tests, logs).
  size_t dropped_late() const { return dropped_late_; }
  size_t dropped_slow() const { return dropped_slow_; }

 private:
  class Connection;
  bool process_and_close_socket(socket_t sock) override;

  const HttpBounds bounds_;
  const int wake_fd_;  // an eventfd, readable once shutdown() ran
  std::atomic<size_t> slow_{0};  // requests past slow_after that are still arriving
  std::atomic<size_t> dropped_late_{0}, dropped_slow_{0};
};

}  // namespace verl::launcher

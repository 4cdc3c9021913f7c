// The sockets the network probes (ports, tcp, clock) and their servers share: an owning fd,
// connect with a timeout that says why it failed (refused, timed out, no such host), blocking
// whole-buffer send/recv, and LoopServer, a one-thread accept loop that serves one connection at
// a time until stop(). Everything throws verl::Error naming host:port.
#pragma once

#include <atomic>
#include <mutex>
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "probes/probe.h"

namespace verl::probes {

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  ~Socket();
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// nullopt with *why ("127.0.0.1:6379 refused", "... timed out after 2000 ms") when it fails.
std::optional<Socket> try_connect(const Endpoint& to, std::chrono::milliseconds timeout, std::string* why);
// try_connect() that throws verl::Error(unreachable) with the reason.
Socket connect_to(const Endpoint& to, std::chrono::milliseconds timeout);

void set_nodelay(int fd);
// SO_RCVTIMEO and SO_SNDTIMEO: a peer that stops answering fails a probe instead of hanging it.
void set_io_timeout(int fd, std::chrono::milliseconds timeout);
constexpr std::chrono::milliseconds kIoTimeout{10000};
// Whole buffers; throw verl::Error(failure) when the peer closes or the socket fails.
void send_all(int fd, const void* data, size_t size);
void recv_all(int fd, void* data, size_t size);
// recv_all that returns false on a clean close before the first byte.
bool recv_or_eof(int fd, void* data, size_t size);

// Network byte order for the 8-byte fields of the probes' protocols.
uint64_t to_wire(uint64_t v);
uint64_t from_wire(uint64_t v);

// A listening socket on host:port (port 0: any free one); *bound gets the port it took.
// Throws verl::Error(failure) naming host:port.
Socket listen_on(const std::string& host, int port, Endpoint* bound);
// The next connection within timeout, or nullopt.
std::optional<Socket> accept_within(const Socket& listener, std::chrono::milliseconds timeout);

// Listens on host:port (port 0: any free one), serves connections one at a time on its thread.
class LoopServer {
 public:
  using Handler = std::function<void(int fd)>;  // returns when the connection is done
  LoopServer(const std::string& host, int port, Handler handler);
  ~LoopServer();  // stop()
  LoopServer(const LoopServer&) = delete;
  LoopServer& operator=(const LoopServer&) = delete;
  Endpoint endpoint() const { return endpoint_; }
  void stop();

 private:
  void loop();
  Endpoint endpoint_;
  Handler handler_;
  Socket listen_;
  std::atomic<bool> stop_{false};
  std::mutex conn_mu_;
  int conn_ = -1;  // the connection being served, under conn_mu_
  std::thread thread_;
};

}  // namespace verl::probes

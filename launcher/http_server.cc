#include "launcher/http_server.h"

#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace verl::launcher {
namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds to_ms(time_t sec, time_t usec) {
  return std::chrono::milliseconds(static_cast<int64_t>(sec) * 1000 + static_cast<int64_t>(usec) / 1000);
}

// The numeric address of a socket's peer (remote) or own end (local).
void address_of(int fd, bool remote, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  const int rc = remote ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                        : ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  if (rc != 0) return;
  char host[NI_MAXHOST] = {0}, serv[NI_MAXSERV] = {0};
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return;
  ip = host;
  port = std::atoi(serv);
}

}  // namespace

// One accepted connection as httplib's Stream: reads through a buffer (httplib reads the
// request line and headers a byte at a time), each read and write waits at most httplib's
// read/write timeout, and while a request is arriving, never past its deadline nor, once it is
// slow, past the cap on slow requests.
class GuardedHttpServer::Connection : public httplib::Stream {
 public:
  Connection(GuardedHttpServer& server, int fd) : server_(server), fd_(fd) { address_of(fd, true, ip_, port_); }
  ~Connection() override { end_request(); }

  // A request starts arriving at `start` (the accept, or its first byte on a kept-alive connection).
  void begin_request(Clock::time_point start) {
    end_request();
    start_ = start;
    reading_ = true;
  }
  // The request has been answered (or dropped).
  void end_request() {
    if (slow_) --server_.slow_;
    slow_ = false;
    reading_ = false;
  }

  // Between requests on a kept-alive connection: waits up to `idle` for the next request's first
  // byte; false when none came or the server stops.
  bool idle_until_request(std::chrono::milliseconds idle) {
    if (off_ < len_) return true;
    const auto until = Clock::now() + idle;
    while (server_.svr_sock_ != INVALID_SOCKET) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      if (left.count() <= 0) return false;
      pollfd p[2] = {{fd_, POLLIN, 0}, {server_.wake_fd_, POLLIN, 0}};
      const int rc = ::poll(p, server_.wake_fd_ >= 0 ? 2 : 1, static_cast<int>(std::min<int64_t>(left.count(), 60000)));
      if (rc > 0 && (p[1].revents & POLLIN)) return false;  // shutdown()
      if (rc > 0) return true;
      if (rc < 0 && errno != EINTR) return false;
    }
    return false;
  }

  bool is_readable() const override { return off_ < len_ || const_cast<Connection*>(this)->await(POLLIN); }
  bool is_writable() const override { return const_cast<Connection*>(this)->await(POLLOUT); }

  ssize_t read(char* ptr, size_t size) override {
    if (dropped_) return -1;
    if (off_ >= len_) {
      if (!await(POLLIN)) return -1;
      off_ = len_ = 0;
      if (size >= sizeof buf_) return recv_some(ptr, size);
      const ssize_t n = recv_some(buf_, sizeof buf_);
      if (n <= 0) return n;
      len_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, len_ - off_);
    std::memcpy(ptr, buf_ + off_, n);
    off_ += n;
    return static_cast<ssize_t>(n);
  }

  // A write does not end the request: httplib answers "Expect: 100-continue" before the body.
  ssize_t write(const char* ptr, size_t size) override {
    if (!await(POLLOUT)) return -1;
    for (;;) {
      const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
      if (n >= 0 || errno != EINTR) return n;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = ip_;
    port = port_;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }
  bool dropped() const { return dropped_; }

 private:
  ssize_t recv_some(char* p, size_t n) {
    for (;;) {
      const ssize_t got = ::recv(fd_, p, n, 0);
      if (got >= 0 || errno != EINTR) return got;
    }
  }

  // Ends the connection: httplib answers a request it could not read with 400 and would keep the
  // connection alive, so every later read and write fails, and the socket is shut down now.
  void drop() {
    dropped_ = true;
    ::shutdown(fd_, SHUT_RDWR);
  }

  // Whether the request may go on arriving at `now`; false (and the drop logged) when not.
  bool within_bounds(Clock::time_point now) {
    const HttpBounds& b = server_.bounds_;
    if (now - start_ >= b.request_timeout) {
      drop();
      ++server_.dropped_late_;
      log::Warn() << "head: dropped the connection from " << ip_ << ":" << port_ << ": its request did not arrive within "
                  << b.request_timeout.count() << " ms";
      return false;
    }
    if (!slow_ && now - start_ >= b.slow_after) {
      if (server_.slow_.fetch_add(1) >= b.max_slow) {
        --server_.slow_;
        drop();
        ++server_.dropped_slow_;
        log::Warn() << "head: dropped the connection from " << ip_ << ":" << port_ << ": its request is still arriving after "
                    << b.slow_after.count() << " ms while " << b.max_slow << " slow ones are waited for";
        return false;
      }
      slow_ = true;
    }
    return true;
  }

  // Waits until the socket is ready for `events`, up to httplib's timeout for one read or
  // write; while a request is arriving, a read also stops at the request's bounds.
  bool await(short events) {
    if (dropped_) return false;
    const bool reading = events == POLLIN && reading_;
    const auto per_call = events == POLLIN ? to_ms(server_.read_timeout_sec_, server_.read_timeout_usec_)
                                           : to_ms(server_.write_timeout_sec_, server_.write_timeout_usec_);
    const auto limit = Clock::now() + per_call;
    for (;;) {
      const auto now = Clock::now();
      if (reading && !within_bounds(now)) return false;
      auto until = limit;
      if (reading) until = std::min(until, start_ + (slow_ ? server_.bounds_.request_timeout : server_.bounds_.slow_after));
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
      pollfd p{fd_, events, 0};
      const int rc = ::poll(&p, 1, static_cast<int>(std::clamp<int64_t>(wait, 0, 60000)));
      if (rc > 0) return true;
      if (rc < 0 && errno != EINTR) return false;
      if (rc == 0 && Clock::now() >= limit) return false;
    }
  }

  GuardedHttpServer& server_;
  const int fd_;
  std::string ip_;
  int port_ = 0;
  char buf_[4096];
  size_t off_ = 0, len_ = 0;
  Clock::time_point start_ = Clock::now();
  bool reading_ = false;
  bool slow_ = false;  // counted in server_.slow_
  bool dropped_ = false;
};

GuardedHttpServer::GuardedHttpServer(HttpBounds bounds)
    : bounds_(bounds), wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

GuardedHttpServer::~GuardedHttpServer() {
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void GuardedHttpServer::shutdown() {
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
  }
  stop();
}

bool GuardedHttpServer::listen_backlog(int backlog) {
  const socket_t s = svr_sock_;
  return s != INVALID_SOCKET && ::listen(s, backlog) == 0;
}

// httplib's own loop, with our Connection as the stream: up to keep_alive_max_count requests,
// each after at most keep_alive_timeout of idleness.
bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  bool ret = false;
  {
    Connection c(*this, sock);
    auto start = Clock::now();  // a new connection's first request: its time runs from the accept
    for (size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
      if (left != keep_alive_max_count_) {
        if (!c.idle_until_request(std::chrono::seconds(keep_alive_timeout_sec_))) break;
        start = Clock::now();
      }
      c.begin_request(start);
      bool closed = false;
      ret = process_request(c, /*close_connection=*/left == 1, closed, nullptr);
      c.end_request();
      if (!ret || closed || c.dropped()) break;
    }
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

}  // namespace verl::launcher

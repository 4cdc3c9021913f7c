#include "probes/net.h"

#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/log.h"

namespace verl::probes {

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Socket::~Socket() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

std::string reason(int err) {
  if (err == ECONNREFUSED) return "refused";
  if (err == ETIMEDOUT) return "timed out";
  return std::strerror(err);
}

}  // namespace

std::optional<Socket> try_connect(const Endpoint& to, std::chrono::milliseconds timeout, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(to.port);
  if (int rc = ::getaddrinfo(to.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    *why = to.str() + ": " + gai_strerror(rc);
    return std::nullopt;
  }
  std::string last = to.str() + ": no address";
  for (addrinfo* a = found; a; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!s.valid()) {
      last = to.str() + ": socket: " + std::strerror(errno);
      continue;
    }
    int err = 0;
    if (::connect(s.fd(), a->ai_addr, a->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{s.fd(), POLLOUT, 0};
        const int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
        if (n == 0) {
          last = to.str() + " timed out after " + std::to_string(timeout.count()) + " ms";
          continue;
        }
        socklen_t len = sizeof err;
        ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err != 0) {
      last = to.str() + " " + reason(err);
      continue;
    }
    const int flags = ::fcntl(s.fd(), F_GETFL);
    ::fcntl(s.fd(), F_SETFL, flags & ~O_NONBLOCK);
    ::freeaddrinfo(found);
    return s;
  }
  ::freeaddrinfo(found);
  *why = last;
  return std::nullopt;
}

Socket connect_to(const Endpoint& to, std::chrono::milliseconds timeout) {
  std::string why;
  auto s = try_connect(to, timeout, &why);
  if (!s) throw Error(ExitCode::kUnreachable, why, "is the server running on " + to.str() + "?");
  return std::move(*s);
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void set_io_timeout(int fd, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>(timeout.count() % 1000 * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void send_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(ExitCode::kFailure, std::string("send: ") + std::strerror(errno));
    p += n;
    size -= static_cast<size_t>(n);
  }
}

bool recv_or_eof(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  const size_t want = size;
  while (size > 0) {
    const ssize_t n = ::recv(fd, p, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 && size == want) return false;
    if (n <= 0)
      throw Error(ExitCode::kFailure, n == 0 ? std::string("recv: the peer closed the connection")
                                             : std::string("recv: ") + std::strerror(errno));
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void recv_all(int fd, void* data, size_t size) {
  if (!recv_or_eof(fd, data, size)) throw Error(ExitCode::kFailure, "recv: the peer closed the connection");
}

uint64_t to_wire(uint64_t v) { return htobe64(v); }
uint64_t from_wire(uint64_t v) { return be64toh(v); }

Socket listen_on(const std::string& host, int port, Endpoint* bound) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string p = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), p.c_str(), &hints, &found); rc != 0)
    throw Error(ExitCode::kFailure, "probe server " + host + ":" + p + ": " + gai_strerror(rc));
  Socket s(::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (!s.valid() || ::bind(s.fd(), found->ai_addr, found->ai_addrlen) != 0 || ::listen(s.fd(), 64) != 0) {
    const int err = errno;
    ::freeaddrinfo(found);
    throw Error(ExitCode::kFailure, "probe server cannot listen on " + host + ":" + p + ": " + std::strerror(err),
                "pick another port");
  }
  ::freeaddrinfo(found);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len);
  if (bound) {
    bound->host = host;
    bound->port = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                                   : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  }
  return s;
}

std::optional<Socket> accept_within(const Socket& listener, std::chrono::milliseconds timeout) {
  pollfd p{listener.fd(), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
  Socket conn(::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!conn.valid()) return std::nullopt;
  return conn;
}

LoopServer::LoopServer(const std::string& host, int port, Handler handler) : handler_(std::move(handler)) {
  listen_ = listen_on(host, port, &endpoint_);
  thread_ = std::thread([this] { loop(); });
}

LoopServer::~LoopServer() { stop(); }

void LoopServer::stop() {
  stop_ = true;
  // Wakes a handler blocked in recv on the connection it serves.
  {
    std::lock_guard<std::mutex> lock(conn_mu_);
    if (conn_ >= 0) ::shutdown(conn_, SHUT_RDWR);
  }
  if (thread_.joinable()) thread_.join();
}

void LoopServer::loop() {
  while (!stop_) {
    pollfd p{listen_.fd(), POLLIN, 0};
    if (::poll(&p, 1, /*timeout_ms=*/100) <= 0) continue;
    Socket conn(::accept4(listen_.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn.valid()) continue;
    set_io_timeout(conn.fd(), kIoTimeout);  // a client that stalls does not hold the server
    if (stop_) break;
    {
      std::lock_guard<std::mutex> lock(conn_mu_);
      conn_ = conn.fd();
    }
    try {
      handler_(conn.fd());
    } catch (const std::exception& e) {
      log::Debug() << "probe server " << endpoint_.str() << ": " << e.what();
    }
    std::lock_guard<std::mutex> lock(conn_mu_);
    conn_ = -1;  // before conn closes, so that stop() never shuts down a reused fd
  }
  std::lock_guard<std::mutex> lock(conn_mu_);
  conn_ = -1;
}

}  // namespace verl::probes

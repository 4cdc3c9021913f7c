// tcp: bandwidth and round-trip time to the head over TCP, the path the rendezvous store, the
// agents' HTTP and NCCL's socket transport (NCCL_IB_DISABLE=1) take.
#include "probes/tcp_probe.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <vector>

#include "probes/net.h"
#include "probes/probes.h"

namespace verl::probes {

namespace {

// Bytes per send/recv call: iperf3's default TCP block (128 KiB), so that the two are compared
// with the same system-call pattern; on loopback the calls, not the wire, set the rate.
constexpr size_t kChunk = 128 << 10;
constexpr uint64_t kMiB = 1 << 20;

using Clock = std::chrono::steady_clock;

void serve(int fd) {
  std::vector<char> buf(kChunk);
  char op = 0;
  while (recv_or_eof(fd, &op, 1)) {
    uint64_t n = 0;
    recv_all(fd, &n, sizeof n);
    n = from_wire(n);
    if (op == 'B') {
      while (n > 0) {
        const size_t want = static_cast<size_t>(std::min<uint64_t>(n, buf.size()));
        const ssize_t got = ::recv(fd, buf.data(), want, 0);
        if (got <= 0) return;
        n -= static_cast<uint64_t>(got);
      }
      send_all(fd, "K", 1);
    } else if (op == 'P') {
      set_nodelay(fd);
      char b = 0;
      for (uint64_t i = 0; i < n; ++i) {
        recv_all(fd, &b, 1);
        send_all(fd, &b, 1);
      }
    } else {
      return;  // not our protocol
    }
  }
}

void request(int fd, char op, uint64_t n) {
  char head[1 + sizeof(uint64_t)];
  head[0] = op;
  const uint64_t w = to_wire(n);
  std::memcpy(head + 1, &w, sizeof w);
  send_all(fd, head, sizeof head);
}

}  // namespace

TcpServer::TcpServer(const std::string& host, int port) : server_(std::make_unique<LoopServer>(host, port, serve)) {}
TcpServer::~TcpServer() = default;
Endpoint TcpServer::endpoint() const { return server_->endpoint(); }

TcpResult measure_tcp(const Endpoint& server, uint64_t bytes, int pings, std::chrono::milliseconds timeout) {
  Socket s = connect_to(server, timeout);
  set_io_timeout(s.fd(), kIoTimeout);
  TcpResult r;
  r.bytes = bytes;
  r.pings = pings;

  std::vector<char> buf(kChunk, 'x');
  const auto start = Clock::now();
  request(s.fd(), 'B', bytes);
  for (uint64_t left = bytes; left > 0;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
    send_all(s.fd(), buf.data(), n);
    left -= n;
  }
  char ack = 0;
  recv_all(s.fd(), &ack, 1);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.gbit_per_s = static_cast<double>(bytes) * 8 / seconds / 1e9;

  if (pings > 0) {
    set_nodelay(s.fd());
    request(s.fd(), 'P', static_cast<uint64_t>(pings));
    std::vector<double> us(static_cast<size_t>(pings));
    char b = 'p';
    for (int i = 0; i < pings; ++i) {
      const auto t0 = Clock::now();
      send_all(s.fd(), &b, 1);
      recv_all(s.fd(), &b, 1);
      us[static_cast<size_t>(i)] = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    }
    std::sort(us.begin(), us.end());
    r.rtt_us = us[us.size() / 2];
    r.rtt_min_us = us.front();
  }
  return r;
}

Probe tcp_probe() {
  Probe p;
  p.descriptor = {"tcp", "TCP to the head: stream N MiB one way (bandwidth), 1-byte ping-pongs (median RTT)",
                  {{"bandwidth", "Gbit/s", Bound::kAtLeast, "min_tcp_gbps"}, {"rtt", "us", Bound::kNone, ""}}};
  p.run = [](const Context& ctx) {
    if (!ctx.tcp_server)
      return std::vector<Measurement>{{"bandwidth", std::nullopt, "no head: skipped", Status::kSkipped},
                                      {"rtt", std::nullopt, "no head: skipped", Status::kSkipped}};
    const uint64_t bytes = static_cast<uint64_t>(std::max(ctx.tcp_mib, 1)) * kMiB;
    const TcpResult r = measure_tcp(*ctx.tcp_server, bytes, ctx.tcp_pings, ctx.connect_timeout);
    char bw[128], rtt[128];
    std::snprintf(bw, sizeof bw, "%s, %d MiB one stream", ctx.tcp_server->str().c_str(), ctx.tcp_mib);
    std::snprintf(rtt, sizeof rtt, "%s, median of %d, min %.1f us", ctx.tcp_server->str().c_str(), r.pings,
                  r.rtt_min_us);
    return std::vector<Measurement>{{"bandwidth", r.gbit_per_s, bw, {}}, {"rtt", r.rtt_us, rtt, {}}};
  };
  return p;
}

}  // namespace verl::probes

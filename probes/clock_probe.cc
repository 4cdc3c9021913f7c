// clock: the offset of this machine's clock against the head's. Ranks compare timestamps in
// logs and metrics, and rendezvous timeouts assume clocks roughly agree.
#include "probes/clock_probe.h"

#include <time.h>

#include <cstdio>
#include <limits>

#include "probes/net.h"
#include "probes/probes.h"

namespace verl::probes {

int64_t realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

namespace {
constexpr char kAsk = 'T';
}

TimeServer::TimeServer(const std::string& host, int port, WallClock clock)
    : server_(std::make_unique<LoopServer>(host, port, [clock](int fd) {
        set_nodelay(fd);
        char ask = 0;
        while (recv_or_eof(fd, &ask, 1)) {
          const int64_t t2 = clock();
          uint64_t answer[2];
          answer[0] = to_wire(static_cast<uint64_t>(t2));
          answer[1] = to_wire(static_cast<uint64_t>(clock()));  // t3, as late as possible
          send_all(fd, answer, sizeof answer);
        }
      })) {}

TimeServer::~TimeServer() = default;

Endpoint TimeServer::endpoint() const { return server_->endpoint(); }

ClockOffset measure_clock_offset(const Endpoint& server, int exchanges, std::chrono::milliseconds timeout,
                                 const WallClock& clock) {
  Socket s = connect_to(server, timeout);
  set_io_timeout(s.fd(), kIoTimeout);
  set_nodelay(s.fd());
  ClockOffset best;
  best.delay_ms = std::numeric_limits<double>::infinity();
  for (int i = 0; i < exchanges; ++i) {
    const int64_t t1 = clock();
    send_all(s.fd(), &kAsk, 1);
    uint64_t answer[2];
    recv_all(s.fd(), answer, sizeof answer);
    const int64_t t4 = clock();
    const auto t2 = static_cast<int64_t>(from_wire(answer[0]));
    const auto t3 = static_cast<int64_t>(from_wire(answer[1]));
    const double delay_ms = static_cast<double>((t4 - t1) - (t3 - t2)) / 1e6;
    if (delay_ms < best.delay_ms) {
      best.delay_ms = delay_ms;
      best.offset_ms = static_cast<double>((t2 - t1) + (t3 - t4)) / 2 / 1e6;
    }
  }
  best.exchanges = exchanges;
  return best;
}

Probe clock_probe() {
  Probe p;
  p.descriptor = {"clock", "clock offset against the head: NTP-style 4-timestamp exchange over TCP, least delay of 16",
                  {{"offset", "ms", Bound::kAtMost, "max_clock_offset_ms"}}};
  p.run = [](const Context& ctx) {
    if (!ctx.time_server) return std::vector<Measurement>{{"offset", 0.0, "no head: skipped", Status::kSkipped}};
    const ClockOffset o = measure_clock_offset(*ctx.time_server, /*exchanges=*/16, ctx.connect_timeout);
    char detail[160];
    std::snprintf(detail, sizeof detail, "%s, delay %.3f ms, %d exchanges",
                  ctx.time_peer.empty() ? ctx.time_server->str().c_str() : ctx.time_peer.c_str(), o.delay_ms,
                  o.exchanges);
    return std::vector<Measurement>{{"offset", o.offset_ms, detail, {}}};
  };
  return p;
}

}  // namespace verl::probes

// The clock probe's NTP-style exchange and the tiny time server it runs against.
//
// One exchange: the client notes t1 and sends a byte; the server notes t2 when it arrives and t3
// just before it answers with both; the client notes t4 when the answer arrives. With symmetric
// paths, offset = ((t2 - t1) + (t3 - t4)) / 2 (server clock minus client clock) and
// delay = (t4 - t1) - (t3 - t2). As NTP's clock filter does, the exchange with the least delay
// of several is kept: its offset has the smallest error bound (delay / 2).
//
// Timestamps are nanoseconds of a WallClock (CLOCK_REALTIME by default; tests give the server a
// skewed one). The server serves one connection at a time on its own thread (LoopServer).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "probes/probe.h"

namespace verl::probes {

using WallClock = std::function<int64_t()>;  // nanoseconds since the epoch
int64_t realtime_ns();

class LoopServer;

class TimeServer {
 public:
  // Listens on host:port (0: any free port).
  explicit TimeServer(const std::string& host = "127.0.0.1", int port = 0, WallClock clock = realtime_ns);
  ~TimeServer();
  Endpoint endpoint() const;

 private:
  std::unique_ptr<LoopServer> server_;
};

struct ClockOffset {
  double offset_ms = 0;  // the server's clock minus ours
  double delay_ms = 0;   // round trip less the server's time, of the exchange kept
  int exchanges = 0;
};

// Throws verl::Error (unreachable) naming the server when it cannot be reached.
ClockOffset measure_clock_offset(const Endpoint& server, int exchanges = 16,
                                 std::chrono::milliseconds timeout = std::chrono::milliseconds(2000),
                                 const WallClock& clock = realtime_ns);

}  // namespace verl::probes

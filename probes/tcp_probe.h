// The tcp probe's server/client pair: bandwidth by streaming N MiB one way, round-trip latency by
// many 1-byte ping-pongs with Nagle off.
//
// Protocol (one connection, any number of requests):
//   'B' + u64 n   the client streams n bytes; the server answers one byte 'K' when all have arrived
//   'P' + u64 n   n times: the client sends one byte, the server echoes it
// Bandwidth is n * 8 bits over the time from the first byte sent to the 'K' received, so it
// counts every byte the server really read (the one-byte answer costs one RTT, < 0.1% of a
// 1 GiB transfer on loopback). RTT is the median of the ping-pongs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "probes/probe.h"

namespace verl::probes {

class LoopServer;

class TcpServer {
 public:
  explicit TcpServer(const std::string& host = "127.0.0.1", int port = 0);
  ~TcpServer();
  Endpoint endpoint() const;

 private:
  std::unique_ptr<LoopServer> server_;
};

struct TcpResult {
  double gbit_per_s = 0;  // 1 Gbit = 1e9 bits
  double rtt_us = 0;      // median round trip
  double rtt_min_us = 0;
  uint64_t bytes = 0;
  int pings = 0;
};

// Throws verl::Error (unreachable) naming the server when it cannot be reached.
TcpResult measure_tcp(const Endpoint& server, uint64_t bytes, int pings,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

}  // namespace verl::probes

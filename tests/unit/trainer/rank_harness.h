// Multi-rank tests in one process, the gloo / c10d way: one thread per rank, each with its own
// Distributed, meeting on a TCPStore on a free loopback port.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "common/ports.h"
#include "trainer/distributed.h"

namespace verl::trainer::testing {

struct RanksOptions {
  int port = 0;                 // 0: a free port
  bool store_is_external = false;
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

// Runs fn(dist) on `world` ranks (threads) on CPU; rethrows the first failing rank's exception
// after every thread has ended.
inline void run_ranks(int world, const std::function<void(Distributed&)>& fn, RanksOptions options = {}) {
  const int port = options.port ? options.port : free_tcp_port();
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        DistributedOptions o;
        o.rank = r;
        o.world_size = world;
        o.master_addr = "127.0.0.1";
        o.master_port = port;
        o.store_is_external = options.store_is_external;
        o.timeout = options.timeout;
        Distributed d(o, torch::kCPU);
        fn(d);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace verl::trainer::testing

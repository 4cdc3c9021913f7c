// Multi-rank tests in one process, the gloo / c10d way: one thread per rank, each with its own
// Distributed, meeting on a TCPStore on a free loopback port.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "common/ports.h"
#include "trainer/distributed.h"

namespace verl::trainer::testing {

struct RanksOptions {
  int port = 0;                 // 0: a free port
  bool store_is_external = false;
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

// Runs fn(dist) on `world` ranks (threads) on CPU; rethrows the first failing rank's exception
// after every thread has ended. Without a port the harness hosts the store itself on a port the
// OS picks while it binds (no window in which another test could take a port found free), and
// every rank is its client.
inline void run_ranks(int world, const std::function<void(Distributed&)>& fn, RanksOptions options = {}) {
  c10::intrusive_ptr<c10d::TCPStore> store;
  if (options.port == 0 && !options.store_is_external) {
    c10d::TCPStoreOptions so;
    so.port = 0;
    so.isServer = true;
    so.waitWorkers = false;
    so.timeout = options.timeout;
    store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
    options.store_is_external = true;
  }
  const int port = store ? store->getPort() : options.port ? options.port : free_tcp_port();
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

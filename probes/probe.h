// What a probe is and what it reports, in the manner of nccl-tests: each probe fills one
// Descriptor (its name, what it measures, and per metric the unit and the probes.* threshold that
// judges it) and a run function; one harness (probes/harness.h) runs them all, judges every
// measurement against the cluster spec's thresholds and prints one report.
//
// A probe measures and never judges a threshold itself: it returns Measurements, and the harness
// turns each into a Row with pass|warn|fail. A probe does decide what no threshold can (a port
// that refuses is a fail, a machine without a GPU is skipped) by setting Measurement::verdict.
// A probe that throws becomes one failed row naming the error.
//
// Everything a probe reads from outside comes through Context, so that tests can point a probe at
// a temp dir, a loopback server or a fake GPU source. Probes are run one after another; a run
// function must be safe to call from any one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace verl::probes {

using Json = nlohmann::ordered_json;

enum class Status { kPass, kWarn, kFail, kSkipped };
const char* status_name(Status s);  // pass | warn | fail | skipped

// Which side of its threshold a value must stay on.
enum class Bound {
  kNone,      // informational: no threshold
  kAtLeast,   // value >= threshold (bandwidth, free space)
  kAtMost,    // |value| <= threshold (clock offset)
};

struct Metric {
  std::string name;           // "bandwidth"
  std::string unit;           // "Gbit/s"; empty for text-only rows (versions)
  Bound bound = Bound::kNone;
  std::string threshold_key;  // key under probes.* in the cluster spec: "min_tcp_gbps"
};

struct Descriptor {
  std::string name;      // "tcp"
  std::string measures;  // one line: what and how
  std::vector<Metric> metrics;
  const Metric* metric(const std::string& name) const;  // nullptr when the probe has no such metric
};

// One value a probe measured, before the harness judges it.
struct Measurement {
  std::string metric;             // one of the descriptor's metrics
  std::optional<double> value;    // in the metric's unit; nullopt: nothing to show
  std::string detail;             // where and how: the path, the peer, the model
  std::optional<Status> verdict;  // set only when the probe decides itself (refused, skipped)
  Json data = nullptr;            // optional structured detail for -o json (the nccl sweep)
};

// One line of the report.
struct Row {
  std::string node;
  std::string probe;
  std::string metric;
  std::optional<double> value;
  std::string unit;
  Bound bound = Bound::kNone;
  std::string threshold_key;
  std::optional<double> threshold;
  Status status = Status::kPass;
  std::string detail;
  Json data = nullptr;  // the measurement's data, when it has any
};

struct Endpoint {
  std::string host;
  int port = 0;
  std::string str() const;  // host:port, [v6]:port
};

// An InfiniBand/RoCE port as sysfs describes it (the CLI reads them with the launcher's one
// reader, launcher::read_hca_ports, so that probes and `verlctl env` never disagree).
struct IbPort {
  std::string name;        // mlx5_0:1
  std::string state;       // "4: ACTIVE"
  std::string link_layer;  // InfiniBand | Ethernet
  std::string rate;        // "200 Gb/sec (4X HDR)"
};

class GpuSource;  // probes/gpu_probe.h

// A process's place in a job launched through the cluster, as torchrun-style launchers and the
// head (for train and probe jobs alike) hand it over (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT): the nccl_inter probe's rendezvous.
struct World {
  int rank = 0;
  int size = 1;
  Endpoint master;  // rank 0 listens on master.port
};

// Everything probes read from outside this library.
struct Context {
  Json spec;                             // the resolved cluster spec: probes.*, nodes, slurm, head
  std::string node;                      // what the rows' node column says (this machine's name)
  std::optional<Endpoint> dashboard;     // the head's ports when a head runs; nullopt: none
  std::optional<Endpoint> store;
  std::optional<Endpoint> time_server;   // clock: the peer's time server; nullopt: no head
  std::string time_peer;                 // what the clock detail calls that peer ("head 127.0.0.1")
  std::optional<Endpoint> tcp_server;    // tcp: the peer's bandwidth server; nullopt: skipped
  std::string checkpoint_dir;            // disk: where checkpoints go (need not exist yet)
  std::string shm_path = "/dev/shm";
  std::string sysfs_root = "/sys";       // versions: <root>/module/nvidia/version
  int tcp_mib = 1024;                    // tcp: MiB streamed for the bandwidth
  int tcp_pings = 2000;                  // tcp: 1-byte round trips for the latency
  std::vector<IbPort> ib_ports;
  const GpuSource* gpus = nullptr;       // nullptr: the real one (dlopen)
  // h2d, d2h, d2d: bytes per copy, each size best of copy_reps (probes/gpu_bench.h).
  std::vector<uint64_t> copy_sizes{1ull << 20, 16ull << 20, 256ull << 20};
  int copy_reps = 20;
  int matmul_n = 8192;                   // matmul: an n^3 bf16 product, best of matmul_reps
  int matmul_reps = 10;
  // nccl_intra, nccl_inter (probes/nccl_probe.h): the swept sizes and the loop counts per size.
  std::vector<uint64_t> nccl_sizes;      // empty: nccl_default_sizes()
  int nccl_warmup = 5;
  int nccl_iters = 20;
  bool nccl_ring = false;                // NCCL_ALGO=Ring: the ring's links, not NVLS/trees
  std::optional<World> world;            // nccl_inter: this process's place among the job's ranks
                                         // (nullopt: not launched as ranks, skipped)
  std::chrono::milliseconds rendezvous_timeout{120000};
  std::chrono::milliseconds connect_timeout{2000};
};

struct Probe {
  Descriptor descriptor;
  std::function<std::vector<Measurement>(const Context&)> run;
};

}  // namespace verl::probes

// The NCCL collective probes, in the manner of nccl-tests: each collective fills one descriptor
// (its name and its bus-bandwidth factor), one sweep runs them all over the sizes, times them,
// checks the data and reports algbw and busbw. The formulas, written down once (nccl-tests'
// PERFORMANCE.md):
//
//   size     all_reduce: the buffer each rank reduces (count * 4 B);
//            all_gather: the gathered buffer (n * per-rank count * 4 B);
//            reduce_scatter: the buffer each rank sends (n * per-rank count * 4 B)
//   algbw    = size / time                                                  [GB/s, 1e9]
//   busbw    = algbw * 2(n-1)/n   (all_reduce)
//            = algbw * (n-1)/n    (all_gather, reduce_scatter)
//
// so busbw is what each link carried, comparable across n and with the hardware's peak; with
// n = 1 no byte crosses a link and busbw is 0 by definition (reported, never judged).
//
// Data check: rank r's send buffer holds fill(r, i) = (r + 1) * (i % 5 + 1), small integers whose
// float32 sums are exact for n < 2500 ranks; every result element is compared on the host after the
// timed loop (out of place, so every iteration writes the same result). A wrong element is a fail.
//
// Time: wall clock around `iters` back-to-back launches (one ncclGroup over the local GPUs each)
// after `warmup`, ended by synchronising every local stream; per-iteration time = total / iters.
//
// Two scopes, reported apart: nccl_intra (this process over all its GPUs, ncclCommInitAll) and
// nccl_inter (every rank of a job launched through the cluster: RANK/WORLD_SIZE/MASTER_ADDR/
// MASTER_PORT, one process per node driving all its GPUs, as the cluster probe job starts it;
// rank 0 hands out the ncclUniqueId over TCP with rendezvous() below).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "probes/cuda_api.h"
#include "probes/probe.h"

namespace verl::probes {

enum class Collective { kAllReduce, kAllGather, kReduceScatter };

struct CollectiveDesc {
  Collective op;
  const char* name;    // "all_reduce"
  const char* factor;  // "2(n-1)/n", as the detail shows it
  double (*bus_factor)(int n);
};
const std::vector<CollectiveDesc>& collectives();  // in report order
const CollectiveDesc& collective(Collective op);

// 8 B, 64 B, ... 1 GiB (x8).
std::vector<uint64_t> nccl_default_sizes();
// "1G" -> 2^30; suffixes K, M, G (binary), optional trailing B/iB. Throws verl::Error(usage).
uint64_t parse_bytes(const std::string& text);
// "MIN:MAX[:FACTOR]" (e.g. "8:1G:2") or a comma list ("1M,64M,1G"). Throws verl::Error(usage).
std::vector<uint64_t> parse_size_sweep(const std::string& text);

float nccl_fill(int rank, uint64_t i);
// What element i of rank r's result must be, for n ranks of `count` elements per rank.
float nccl_expected(Collective op, int n, int rank, uint64_t count, uint64_t i);

// Elements per rank for a sweep size (0: too small for n ranks, skipped), and the size the
// figures use (rounded down to what was really moved).
uint64_t nccl_count(Collective op, uint64_t bytes, int n);
uint64_t nccl_bytes(Collective op, uint64_t count, int n);

double algbw_gbps(uint64_t bytes, double seconds);
double busbw_gbps(Collective op, uint64_t bytes, double seconds, int n);

// One process of nccl_inter's rendezvous, as it introduces itself to rank 0.
struct RendezvousMember {
  int rank = 0;
  std::string node;  // the cluster's name for the node (VERLCTL_NODE), else the hostname
  std::string host;  // gethostname(): processes on one host are one node for the scope
  int gpus = 0;      // its NCCL ranks (0: joins without a GPU)
};

// One process's part in nccl_inter's rendezvous over TCP. Every process sends rank 0 its
// RendezvousMember, whether it is ready, and why not; rank 0 answers each with the overall go
// (every process ready), its first NCCL rank (processes in RANK order, GPUs in index order), the
// number of NCCL ranks and of distinct hosts, every member, and the ncclUniqueId (make_id is
// called once on rank 0, only when there is a go and a GPU). Rank 0 listens on
// 0.0.0.0:master.port (a connection that is not a rank, such as the ports probe's, is dropped
// without holding the others up); the others retry connecting until the timeout. Throws
// verl::Error: timed out naming the ranks that never came (rank 0) or the rank 0 that never
// answered (the others); failure when rank 0 cannot listen on the port.
struct RendezvousResult {
  bool go = false;
  std::string why_not;  // when !go: which rank on which host is not ready, and why
  int first_rank = 0;
  int nranks = 0;
  int nprocs = 0;
  int nnodes = 0;
  std::vector<RendezvousMember> members;  // every process, in RANK order
  NcclUniqueId id{};
};
RendezvousResult rendezvous(const World& world, const RendezvousMember& me, bool ready, const std::string& why_not_ready,
                            const std::function<NcclUniqueId()>& make_id, std::chrono::milliseconds timeout);

// One line for a report: "rank 1 of 4 met rank 0 at 10.0.0.1:6379: 4 processes on 2 hosts, 8 GPUs
// (node-0, node-1, node-2, node-3)"; at most 8 members are named.
std::string describe_rendezvous(const World& world, const RendezvousResult& r);
// The same for -o json: {rank, world_size, master, nodes, gpus, members: [{rank, node, host, gpus}]}.
Json rendezvous_json(const World& world, const RendezvousResult& r);

// One size of a sweep.
struct SweepPoint {
  uint64_t bytes = 0;
  uint64_t count = 0;  // elements per rank
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
  bool ok = true;
  std::string wrong;  // the first wrong element, when !ok
};

}  // namespace verl::probes

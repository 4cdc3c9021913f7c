// Data-parallel plumbing for trainer ranks: rendezvous, gradient averaging, metric averaging,
// parameter broadcast, barrier.
//
// A rank learns who it is from the environment exactly as torchrun hands it over: RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT. With none of them set (or WORLD_SIZE=1)
// there is a single rank and no process group: every collective is a no-op, so the PPO loop
// calls them unconditionally.
// Rendezvous: a c10d TCPStore at MASTER_ADDR:MASTER_PORT. Rank 0 hosts it, unless
// VERL_STORE_IS_EXTERNAL=1 (the launcher's head already runs one): then every rank, rank 0
// included, connects as a client. The process group is Gloo on CPU, NCCL when the device is
// CUDA and this build defines USE_C10D_NCCL (CMake must add it for a CUDA libtorch: TorchConfig
// does not export it); a CUDA device without it falls back to Gloo (which handles CUDA tensors,
// slowly) with a warning. A build whose libtorch ships no gloo headers (the pip wheel) has no
// CPU group: a multi-rank CPU run throws verl::Error kNotCompiledIn.
// Failures to meet (no store, missing peers) throw verl::Error kUnreachable / kTimedOut naming
// the rank and MASTER_ADDR:MASTER_PORT.
// Threading: one Distributed per rank; its collectives must be called in the same order on
// every rank, from one thread at a time. Several ranks may live in one process (tests: one
// thread per rank, each with its own Distributed).
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

namespace verl::trainer {

struct DistributedOptions {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // true: connect to an existing store (VERL_STORE_IS_EXTERNAL=1) instead of rank 0 hosting it.
  bool store_is_external = false;
  // How long to wait for the store and for all peers; also the collectives' timeout.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // Namespaces the keys in the store, so that several groups (tests, reruns) can share one.
  std::string store_prefix = "verl";
};

class Distributed {
 public:
  // Gradient buckets of about this many bytes (as torch DDP's default bucket_cap_mb=25).
  static constexpr std::size_t kDefaultBucketBytes = std::size_t{25} << 20;

  // Reads RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT/VERL_STORE_IS_EXTERNAL and
  // VERL_DIST_TIMEOUT_S (seconds, default 60). Throws verl::Error (kInvalidConfig) for a
  // malformed or inconsistent value (rank >= world size, port out of range), naming the
  // variable.
  static DistributedOptions options_from_env();

  // world_size == 1: no store, no group. Otherwise rendezvous now (blocks until all ranks
  // joined or options.timeout passed).
  Distributed(const DistributedOptions& options, const torch::Device& device);
  // From the environment (options_from_env()).
  explicit Distributed(const torch::Device& device);
  ~Distributed();
  Distributed(const Distributed&) = delete;
  Distributed& operator=(const Distributed&) = delete;

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  int local_rank() const { return options_.local_rank; }
  bool is_distributed() const { return options_.world_size > 1; }
  bool is_rank0() const { return options_.rank == 0; }
  // A process group over `ranks` (global ranks of this group, in the new group's rank order;
  // c10d's new_group), for the device mesh: tensor-parallel groups, hybrid-shard groups. Only the
  // members call it, each with the same ranks and name; they meet through this group's store
  // under a prefix of their own, so groups of the same name over different ranks never mix.
  // Returns null when this rank is not in `ranks`. A group of one rank has no process group (its
  // collectives are no-ops). Throws verl::Error kInvalidConfig for a rank outside the world or
  // repeated. Blocks until every member joined (options().timeout). Calling it again with the
  // same ranks and name makes a new group (a recreated engine's): each member's n-th call meets
  // the others' n-th call. The group's time in collectives counts in this one's comm_seconds too.
  // `device`: where the group's tensors live, when not the world's (the rollout's GPU for its
  // tensor-parallel group when role placement puts the rollout on another GPU than the actor).
  std::unique_ptr<Distributed> subgroup(const std::vector<int>& ranks, const std::string& name,
                                        const std::optional<torch::Device>& device = std::nullopt) const;

  // "none" (one rank), "gloo" or "nccl".
  const std::string& backend_name() const { return backend_name_; }
  const DistributedOptions& options() const { return options_; }

  // Averages the .grad of every parameter that has one across ranks: gradients are flattened
  // into buckets of ~bucket_bytes (per dtype and device), each bucket all-reduced (sum), divided
  // by the world size and copied back. Parameters without a gradient on this rank are skipped,
  // so every rank must have gradients on the same set (true for the PPO loop).
  void all_reduce_gradients(const std::vector<torch::Tensor>& params,
                            std::size_t bucket_bytes = kDefaultBucketBytes);

  // Mean across ranks of every value, in one all-reduce; a key ending in "_max" (or "/max")
  // gets the max across ranks and one ending in "_min" (or "/min") the min. Every rank must hold
  // the same keys; throws verl::Error (kFailure) naming the first difference otherwise.
  void all_reduce_metrics(std::map<std::string, double>& metrics);

  // Sums a tensor across ranks in place (for global counts: tokens, samples).
  void all_reduce_sum(torch::Tensor& tensor);

  // FSDP's two collectives over flat 1-D tensors (full.numel() == shard.numel() * world_size):
  // every rank's shard, in rank order, into full; and full summed over ranks, of which this
  // rank keeps its slice [rank * n, (rank + 1) * n) in shard. NCCL runs them natively; Gloo
  // gathers through its list all-gather and reduce-scatters as an all-reduce of full (2x the
  // traffic, same sums). Both tensors on the group's device (CPU for Gloo).
  void all_gather_flat(torch::Tensor& full, const torch::Tensor& shard);
  void reduce_scatter_sum(torch::Tensor& shard, torch::Tensor& full);

  // Overwrites every parameter (and buffer, if passed) with root's values.
  void broadcast_parameters(const std::vector<torch::Tensor>& params, int root = 0);

  void barrier();

  // Seconds this rank has spent in collectives since it joined (gradient all-reduce, metric and
  // count reductions, broadcasts, barriers; its subgroups' too): the time waiting for the slowest
  // peer and moving the data. On CUDA the device is synchronised around each collective to measure it. 0 with
  // one rank. The PPO loop takes the step's difference as timing_s/comm.
  double comm_seconds() const;

 private:
  struct Impl;
  DistributedOptions options_;
  mutable std::map<std::string, int> subgroup_calls_;  // per subgroup key (name and ranks): calls so far
  std::string backend_name_ = "none";
  std::unique_ptr<Impl> impl_;
};

// masked_whiten with the mean and the unbiased variance taken over the mask of ALL ranks, so
// that a data-parallel run whitens (GAE, REINFORCE++) like one rank holding the whole batch
// (verl computes advantages on the driver over the full batch). One rank: same as
// algos::masked_whiten.
torch::Tensor global_masked_whiten(const torch::Tensor& values, const torch::Tensor& mask,
                                   Distributed& dist, bool shift_mean = true);

}  // namespace verl::trainer

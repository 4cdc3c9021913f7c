// ParallelStrategy is where the trainer's device mesh lives: which share of a global batch this
// rank works on, how gradients are made equal across ranks before the optimizer step, and how
// metrics and counts are combined. The workers and the loop ask it instead of reading the
// world size, so "world size = data-parallel degree" is written in one place.
//
// Today's one implementation, DataParallel, replicates every module on every rank (verl's DDP
// baseline): the DP degree is the world size, gradients are averaged (bucketed all-reduce), and
// a rank's shard is the r-th contiguous slice. FSDP sharding, offload and tensor-parallel
// rollout are further implementations behind the same calls (issue: parallelism).
// Not thread-safe: one strategy per rank, its collectives called in the same order everywhere.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "trainer/distributed.h"
#include "trainer/metrics.h"

namespace verl::trainer {

class ParallelStrategy {
 public:
  virtual ~ParallelStrategy() = default;

  virtual int64_t dp_rank() const = 0;
  virtual int64_t dp_size() const = 0;
  bool is_rank0() const { return dp_rank() == 0; }

  // [begin, end) of this rank's contiguous share of `global` items; global % dp_size() must be 0.
  std::pair<int64_t, int64_t> shard(int64_t global) const {
    const int64_t per = global / dp_size();
    return {dp_rank() * per, (dp_rank() + 1) * per};
  }

  // Makes the gradients of `params` the average over the data-parallel group.
  virtual void sync_gradients(const std::vector<torch::Tensor>& params) = 0;
  // Averages metrics over the group (min/max for keys so named: Distributed::all_reduce_metrics).
  virtual void reduce_metrics(MetricMap& metrics) = 0;
  // Sums a tensor over the group, in place.
  virtual void all_reduce_sum(torch::Tensor& tensor) = 0;
  // masked_whiten over the tokens of the whole group (algos::masked_whiten on one rank).
  virtual torch::Tensor masked_whiten(const torch::Tensor& values, const torch::Tensor& mask) = 0;

  // The process group; null on a single rank.
  virtual Distributed* distributed() const = 0;
};

// dist may be null: one rank, every collective a no-op.
std::unique_ptr<ParallelStrategy> make_data_parallel(Distributed* dist);

}  // namespace verl::trainer

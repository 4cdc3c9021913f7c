#include "trainer/parallel_strategy.h"

#include "trainer/core_algos.h"

namespace verl::trainer {
namespace {

class DataParallel final : public ParallelStrategy {
 public:
  // Distributed's collectives are no-ops on one rank; a null dist is one rank too.
  explicit DataParallel(Distributed* dist) : dist_(dist) {}

  int64_t dp_rank() const override { return dist_ ? dist_->rank() : 0; }
  int64_t dp_size() const override { return dist_ ? dist_->world_size() : 1; }

  void sync_gradients(const std::vector<torch::Tensor>& params) override {
    if (dist_) dist_->all_reduce_gradients(params);
  }
  void reduce_metrics(MetricMap& metrics) override {
    if (dist_) dist_->all_reduce_metrics(metrics);
  }
  void all_reduce_sum(torch::Tensor& tensor) override {
    if (dist_) dist_->all_reduce_sum(tensor);
  }
  torch::Tensor masked_whiten(const torch::Tensor& values, const torch::Tensor& mask) override {
    return dist_ ? global_masked_whiten(values, mask, *dist_) : algos::masked_whiten(values, mask);
  }
  Distributed* distributed() const override { return dist_; }

 private:
  Distributed* dist_;
};

}  // namespace

std::unique_ptr<ParallelStrategy> make_data_parallel(Distributed* dist) { return std::make_unique<DataParallel>(dist); }

}  // namespace verl::trainer

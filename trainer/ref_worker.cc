#include "trainer/ref_worker.h"

#include "trainer/log_probs.h"

namespace verl::trainer {

RefWorker::RefWorker(const JobConfig& config, const CausalLm& policy, const torch::Device& device)
    : config_(config), device_(device), module_(make_reference(policy, device)) {}

torch::Tensor RefWorker::compute_ref_log_prob(const RolloutBatch& batch) {
  RolloutBatch on_ref = batch;
  on_ref.input_ids = batch.input_ids.to(device_);
  on_ref.attention_mask = batch.attention_mask.to(device_);
  on_ref.position_ids = batch.position_ids.to(device_);
  on_ref.responses = batch.responses.to(device_);
  const double t = config_.rollout.sampling.temperature;
  return compute_log_probs(module_, on_ref, config_.ref.log_prob_micro_batch_size_per_gpu, t > 0 ? t : 1.0).log_probs;
}

}  // namespace verl::trainer

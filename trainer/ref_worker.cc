#include "trainer/ref_worker.h"

#include "trainer/log_probs.h"

namespace verl::trainer {

ForwardPlan reference_log_prob_plan(const JobConfig& config) {
  const auto& ref = config.ref;
  // The reference is the actor's model: actor_rollout_ref.model decides its forward, as in verl.
  return forward_plan(ref.log_prob_micro_batch_size_per_gpu, ref.log_prob_use_dynamic_bsz,
                      ref.log_prob_max_token_len_per_gpu, "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu",
                      config.model.use_remove_padding ? SequenceLayout::kRemovePadding : SequenceLayout::kPadded);
}

RefWorker::RefWorker(const JobConfig& config, const CausalLm& policy, const torch::Device& device,
                     ParallelStrategy& strategy)
    : config_(config), device_(device), module_(make_reference(policy, device)) {
  engine_ = make_module_engine(*module_, strategy, device_, {"actor_rollout_ref.ref", false, config_.ref.fsdp});
}

void RefWorker::add_to(CheckpointParts& parts) {
  if (engine_->sharded()) {
    parts.sharded.push_back({"ref", [this](const std::string& dir) { engine_->save_shards(dir, nullptr); },
                             [this](const std::string& dir) { engine_->load_shards(dir, nullptr); }});
    return;
  }
  parts.ref = module_.ptr().get();
}

torch::Tensor RefWorker::compute_ref_log_prob(const RolloutBatch& batch) {
  RolloutBatch on_ref = batch;
  on_ref.input_ids = batch.input_ids.to(device_);
  on_ref.attention_mask = batch.attention_mask.to(device_);
  on_ref.position_ids = batch.position_ids.to(device_);
  on_ref.responses = batch.responses.to(device_);
  const double t = config_.rollout.sampling.temperature;
  ComputeScope scope(*engine_);
  return compute_log_probs(module_, on_ref, reference_log_prob_plan(config_), t > 0 ? t : 1.0).log_probs;
}

}  // namespace verl::trainer

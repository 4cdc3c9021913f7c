// NativeRollout: batched autoregressive sampling with a KV cache on the engine's own copy of
// the policy (a CausalLm in the rollout's device and compute dtype), refreshed by load_weights
// after each actor update.
//
// Sampling runs on the device: each row's max_response_length uniforms are drawn up front from
// its own CPU generator seeded with row_seeds[r] (a few bytes per row, copied once), and each
// step samples by inverse CDF over the filtered float64 softmax on the device; only the [B]
// sampled ids come back to the host per step, for the stop checks. So sampling never touches
// torch's default generator, the same seeds give the same tokens on any batch composition, and
// a data-parallel run (each rank a shard of rows) samples exactly what one rank holding every
// row would. Greedy (do_sample false or temperature 0) draws nothing. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "trainer/model.h"
#include "trainer/rollout_engine.h"
#include "trainer/tensor_parallel.h"

namespace verl::trainer {

class NativeRollout final : public RolloutEngine {
 public:
  // The engine's model: built for `config` on `device` (weights come from load_weights). With
  // `tp` (rollout.tensor_model_parallel_size > 1) the model is this rank's shard
  // (trainer/tensor_parallel.h): load_weights takes the full weights and keeps this rank's piece,
  // and generate is collective over the TP group (every member calls it with the same prompts
  // and seeds, and gets the same batch).
  NativeRollout(const ModelConfig& config, const torch::Device& device, std::unique_ptr<TensorParallel> tp = nullptr);
  ~NativeRollout() override;

  RolloutBatch generate(const std::vector<std::vector<int64_t>>& prompts, const GenerateOptions& options,
                        const std::vector<uint64_t>& row_seeds) override;
  void load_weights(const NamedTensors& weights) override;
  torch::Device device() const override { return device_; }

  CausalLm& model() { return model_; }

 private:
  torch::Device device_;
  ModelConfig full_config_;
  std::unique_ptr<TensorParallel> tp_;
  CausalLm model_{nullptr};
};

// The sampling loop itself, on any CausalLm (validation and tests use it directly). Runs under
// NoGradGuard and eval mode (restores the module's training flag).
RolloutBatch generate(CausalLm& model, const std::vector<std::vector<int64_t>>& prompts,
                      const GenerateOptions& options, const std::vector<uint64_t>& row_seeds,
                      const torch::Device& device);

// Masks logits [N, V] outside top-k (k <= 0: off) and outside the top-p nucleus (p >= 1: off)
// with -inf; the most likely token always survives.
torch::Tensor filter_logits(const torch::Tensor& logits, int64_t top_k, double top_p);

}  // namespace verl::trainer

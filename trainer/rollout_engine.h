// RolloutEngine is the seam between the PPO loop and whatever generates responses (verl's
// rollout worker: vLLM / SGLang there). The loop hands it prompts, sampling options and one
// seed per response row, and after every actor update it hands it the policy's weights by
// name (verl's hybrid-engine sync). Implementations: NativeRollout (trainer/native_rollout.h), the reference
// loop, and SlotRollout (trainer/slot_rollout.h), the serving-style engine for GPUs.
//
// Determinism contract (docs/ARCHITECTURE.md, "Determinism"): every response row samples from
// its own seed (row_seed), never from a generator shared by the batch, so the same seeds give
// the same tokens whatever the batch composition; on the CPU that is bit-exact, on a GPU it
// holds up to kernels' reduction order. An engine is used from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "trainer/batch.h"
#include "trainer/job_config.h"

namespace verl::trainer {

struct GenerateOptions {
  SamplingConfig sampling;                 // n is ignored: the caller repeats prompts
  int64_t max_response_length = 12;
  std::vector<int64_t> stop_token_ids;     // EOS at least
  int64_t pad_token_id = 0;
  bool ignore_eos = false;   // rollout.ignore_eos: stop only at max_response_length
};

// One seed per response row from (base seed, step, global row index): a splitmix64 mix.
uint64_t row_seed(uint64_t base, uint64_t step, uint64_t row);

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// This rank's piece of a full tensor by name (a tensor-parallel rollout's TpLayout::shard).
using WeightPiece = std::function<torch::Tensor(const std::string& name, const torch::Tensor& full)>;

// Copies `weights` into `model`'s parameters of the same names, in place (captured CUDA graphs
// keep pointing at them), each first cut by `piece` when given; throws verl::Error naming the
// tensor when a name is unknown or a shape differs. Both engines' load_weights.
void load_named_weights(torch::nn::Module& model, const NamedTensors& weights, const WeightPiece& piece = {});

class RolloutEngine {
 public:
  virtual ~RolloutEngine() = default;

  // Responses for `prompts` (token ids, each non-empty), in verl's layout on device().
  // row_seeds: one per prompt when sampling (ignored when greedy).
  virtual RolloutBatch generate(const std::vector<std::vector<int64_t>>& prompts, const GenerateOptions& options,
                                const std::vector<uint64_t>& row_seeds) = 0;

  // Replaces the engine's weights with the policy's (HF parameter names). Throws verl::Error
  // naming the tensor when a name is unknown or a shape differs.
  virtual void load_weights(const NamedTensors& weights) = 0;

  virtual torch::Device device() const = 0;
};

}  // namespace verl::trainer

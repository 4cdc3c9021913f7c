// The native rollout: batched autoregressive sampling from a CausalLm with its KV cache.
//
// Layout (verl's): prompts are left-padded to the longest prompt of the batch, responses
// right-padded with PAD to max_response_length; input_ids = [prompts | responses] and
// attention_mask/position_ids cover both. A response ends with EOS (kept, and counted in
// response_mask) or at max_response_length (clipped); everything after is PAD with mask 0.
//
// Randomness: every response row r draws its max_response_length uniforms from its own CPU
// generator seeded with row_seeds[r], before decoding starts, and samples by inverse CDF.
// So sampling never touches torch's default generator (the model's RNG), the same seeds give
// the same tokens on any device and batch composition, and a data-parallel run (each rank a
// shard of rows) samples exactly what one rank holding every row would.
// Greedy (do_sample false or temperature 0) draws nothing. Not thread-safe (uses the model).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "trainer/job_config.h"
#include "trainer/model.h"

namespace verl::trainer {

struct RolloutBatch {
  torch::Tensor prompts;         // [B, P] int64, left-padded
  torch::Tensor responses;       // [B, R] int64, right-padded with PAD
  torch::Tensor input_ids;       // [B, P+R]
  torch::Tensor attention_mask;  // [B, P+R] int64
  torch::Tensor position_ids;    // [B, P+R] int64
  torch::Tensor response_mask;   // [B, R] float32: 1 for generated tokens (EOS included)
  std::vector<int64_t> prompt_lengths;    // real prompt tokens per row
  std::vector<int64_t> response_lengths;  // generated tokens per row (EOS included)
  std::vector<bool> finished;             // ended with a stop token (not clipped)

  int64_t batch_size() const { return responses.size(0); }
  int64_t response_width() const { return responses.size(1); }
};

struct GenerateOptions {
  SamplingConfig sampling;                 // n is ignored: the caller repeats prompts
  int64_t max_response_length = 12;
  std::vector<int64_t> stop_token_ids;     // EOS at least
  int64_t pad_token_id = 0;
};

// One seed per response row from (base seed, step, global row index): a splitmix64 mix.
uint64_t row_seed(uint64_t base, uint64_t step, uint64_t row);

// Samples responses for `prompts` (token ids, each non-empty) on `device`. row_seeds must have
// one seed per prompt when sampling (ignored when greedy). Runs under NoGradGuard and eval mode
// (restores the module's training flag).
RolloutBatch generate(CausalLm& model, const std::vector<std::vector<int64_t>>& prompts,
                      const GenerateOptions& options, const std::vector<uint64_t>& row_seeds,
                      const torch::Device& device);

// Masks logits [N, V] outside top-k (k <= 0: off) and outside the top-p nucleus (p >= 1: off)
// with -inf; the most likely token always survives.
torch::Tensor filter_logits(const torch::Tensor& logits, int64_t top_k, double top_p);

// Logits of the response positions: logits[:, P-1+j] predicts response token j. [B, R, V].
torch::Tensor response_logits(CausalLm& model, const torch::Tensor& input_ids,
                              const torch::Tensor& attention_mask,
                              const torch::Tensor& position_ids, int64_t response_width);

// log softmax(logits / temperature) gathered at labels: [B, R, V] x [B, R] -> [B, R].
torch::Tensor log_probs_from_logits(const torch::Tensor& logits, const torch::Tensor& labels,
                                    double temperature = 1.0);

// Per-token log-probs of the responses under `model`, in micro-batches, without a graph.
torch::Tensor compute_log_probs(CausalLm& model, const RolloutBatch& batch, int64_t micro_batch,
                                double temperature);

}  // namespace verl::trainer

namespace verl::trainer {

// A batch in the rollout's layout from given responses (teacher forcing: SFT targets, tests).
// Each response is cut to response_width; response_mask covers its tokens.
RolloutBatch make_batch(const std::vector<std::vector<int64_t>>& prompts,
                        const std::vector<std::vector<int64_t>>& responses, int64_t response_width,
                        int64_t pad_token_id, const torch::Device& device);

}  // namespace verl::trainer

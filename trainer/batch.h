// RolloutBatch is the trainer's batch in verl's layout, shared by the rollout engines, the
// workers and the loop: prompts left-padded to the longest prompt of the batch, responses
// right-padded with PAD to the response width; input_ids = [prompts | responses], and
// attention_mask / position_ids cover both. A response ends with a stop token (kept, and
// counted in response_mask) or at the width (clipped); everything after is PAD with mask 0.
// Plain data; tensors live on whatever device the producer put them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

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
  // [B, R] float32: the engine's log-prob of each sampled token, from the distribution it sampled
  // from (vLLM's processed_logprobs, verl's rollout_log_probs): log_softmax of the logits after
  // temperature, top-k and top-p; 0 on padding. Undefined when the engine does not report them.
  torch::Tensor rollout_log_probs;

  int64_t batch_size() const { return responses.size(0); }
  int64_t response_width() const { return responses.size(1); }
};

// Rows [begin, begin + count) of a batch, as if generated alone: the prompt columns that are
// padding in every one of those rows are dropped (a tensor-parallel group generates its members'
// rows together; each keeps its own).
RolloutBatch slice_rows(const RolloutBatch& batch, int64_t begin, int64_t count);

// Left-pads prompts into [B, P] ids and mask (on the CPU); P is the longest prompt.
struct PaddedPrompts {
  torch::Tensor ids;   // [B, P] int64
  torch::Tensor mask;  // [B, P] int64
  std::vector<int64_t> lengths;
};
PaddedPrompts left_pad(const std::vector<std::vector<int64_t>>& prompts, int64_t pad_token_id);

// A batch in the rollout's layout from given responses (teacher forcing: SFT targets, tests).
// Each response is cut to response_width; response_mask covers its tokens.
RolloutBatch make_batch(const std::vector<std::vector<int64_t>>& prompts,
                        const std::vector<std::vector<int64_t>>& responses, int64_t response_width,
                        int64_t pad_token_id, const torch::Device& device);

// Named tensors of a batch, as the update loops slice them into mini- and micro-batches.
using TensorMap = std::map<std::string, torch::Tensor>;

// The rows `rows` of every defined tensor (index_select on dim 0).
TensorMap select_rows(const TensorMap& batch, const torch::Tensor& rows);

}  // namespace verl::trainer

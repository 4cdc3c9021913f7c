// Per-token log-probabilities and entropies of responses under a policy: what the actor, the
// reference and the rollout's consumers compute from a RolloutBatch. logits[:, P-1+j] predicts
// response token j.
//
// Memory: with a real vocabulary (V = 151,936) a [B, R, V] float tensor is gigabytes, so the
// no-grad path (compute_log_probs) never builds one: the LM head, the log-softmax and the
// entropy run over chunks of at most chunk_tokens response positions, keeping [chunk, V] alive
// at a time; and the LM head never runs on prompt positions. The training path (with a graph,
// head_log_probs) does the same and recomputes each chunk in the backward pass, as activation
// checkpointing does, so that autograd keeps the hidden states and not [B, R, V] logits.
// Determinism: the log-softmax of a row does not depend on the chunk it is computed in, so the
// chunk size never changes a result on the CPU.
//
// Micro-batches are a fixed number of rows, or (verl's log_prob_use_dynamic_bsz) formed by a
// token budget with balanced workloads (trainer/seqlen_balancing.h); either way the results
// come back in the batch's row order. With SequenceLayout::kRemovePadding the backbone runs on
// the packed real tokens only (model.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "trainer/batch.h"
#include "trainer/model.h"

namespace verl::trainer {

// The backbone's hidden states at the positions that predict the response tokens, [B, R, H].
torch::Tensor response_hidden(CausalLm& model, const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                              const torch::Tensor& position_ids, int64_t response_width,
                              SequenceLayout layout = SequenceLayout::kPadded);

// Logits of the response positions, [B, R, V] float32, with a graph when grad mode is on (the
// LM head runs on the response positions only).
torch::Tensor response_logits(CausalLm& model, const torch::Tensor& input_ids,
                              const torch::Tensor& attention_mask,
                              const torch::Tensor& position_ids, int64_t response_width,
                              SequenceLayout layout = SequenceLayout::kPadded);

// How a forward pass over a batch is cut into micro-batches and which forward it runs.
struct ForwardPlan {
  int64_t micro_batch = 1;    // rows per micro-batch, when max_token_len is 0
  int64_t max_token_len = 0;  // > 0 (use_dynamic_bsz): micro-batches by this budget of real tokens
  std::string budget_key;     // the key max_token_len came from, named by the too-long-row error
  SequenceLayout layout = SequenceLayout::kPadded;
};

// The plan a config section's keys ask for: micro_batch rows, or with use_dynamic_bsz a budget
// of max_token_len real tokens (budget_key: the key it came from).
ForwardPlan forward_plan(int64_t micro_batch, bool dynamic, int64_t max_token_len, const std::string& budget_key,
                         SequenceLayout layout);

// The rows of each micro-batch of `plan` over a batch with this attention_mask [B, T]:
// consecutive runs of micro_batch rows, or rearrange_micro_batches over the rows' real token
// counts (at least min_micro_batches of them). Throws verl::Error naming plan.budget_key when
// a row alone exceeds the budget.
std::vector<std::vector<int64_t>> plan_micro_batches(const ForwardPlan& plan, const torch::Tensor& attention_mask,
                                                     int64_t min_micro_batches = 0);

// log softmax(logits / temperature) gathered at labels: [B, R, V] x [B, R] -> [B, R], computed
// over chunks of chunk_rows rows of B*R.
torch::Tensor log_probs_from_logits(const torch::Tensor& logits, const torch::Tensor& labels,
                                    double temperature = 1.0, int64_t chunk_rows = 8192);

// Entropy of softmax(logits) per position, [B, R, V] -> [B, R], over chunks of rows.
torch::Tensor entropy_from_logits_chunked(const torch::Tensor& logits, int64_t chunk_rows = 8192);

struct ResponseLogProbs {
  torch::Tensor log_probs;  // [B, R] float32
  torch::Tensor entropy;    // [B, R] float32, when asked for
  torch::Tensor argmax;     // [B, R] int64: the most likely token (head_log_probs with_argmax only)
};

// Per-token log-probs (and entropies when with_entropy) of batch.responses under `model`, in
// micro-batches of micro_batch rows, the LM head over chunk_tokens positions at a time, without
// a graph, in eval mode (restores the training flag). Logits are divided by temperature first
// (verl's rollout temperature).
inline constexpr int64_t kDefaultLogProbChunkTokens = 512;
ResponseLogProbs compute_log_probs(CausalLm& model, const RolloutBatch& batch, int64_t micro_batch,
                                   double temperature, bool with_entropy = false,
                                   int64_t chunk_tokens = kDefaultLogProbChunkTokens);
// The same with micro-batches and the forward chosen by `plan`; rows come back in batch order.
ResponseLogProbs compute_log_probs(CausalLm& model, const RolloutBatch& batch, const ForwardPlan& plan,
                                   double temperature, bool with_entropy = false,
                                   int64_t chunk_tokens = kDefaultLogProbChunkTokens);

// Log-probs of labels [B, R] (and entropies when with_entropy) under softmax(LM head(hidden) /
// temperature), hidden [B, R, H] from response_hidden, with a graph to hidden and the LM head's
// weight: the same values and gradients as response_logits + log_probs_from_logits +
// entropy_from_logits (up to summation order), without [B, R, V] ever existing: forward and
// backward run the head over chunk_tokens positions at a time, the backward recomputing them.
// An entropy left out of the loss costs no backward work. with_argmax: also the most likely
// token (the SFT step's accuracy; one more pass over each chunk's logits). Not for a
// tensor-parallel model.
ResponseLogProbs head_log_probs(CausalLm& model, const torch::Tensor& hidden, const torch::Tensor& labels,
                                double temperature, bool with_entropy, bool with_argmax = false,
                                int64_t chunk_tokens = kDefaultLogProbChunkTokens);

// Restores a module's train/eval flag when a scope ends.
class EvalScope {
 public:
  explicit EvalScope(torch::nn::Module& m) : m_(m), was_training_(m.is_training()) { m_.eval(); }
  ~EvalScope() { m_.train(was_training_); }
  EvalScope(const EvalScope&) = delete;
  EvalScope& operator=(const EvalScope&) = delete;

 private:
  torch::nn::Module& m_;
  bool was_training_;
};

}  // namespace verl::trainer

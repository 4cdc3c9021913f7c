// Tensor parallelism for the rollout (verl's actor_rollout_ref.rollout.tensor_model_parallel_size,
// vLLM's / Megatron's layout): the rollout's model is cut over the TP group's ranks, each holding
// 1/tp of the weights, and every forward runs on all of them together.
//
//   q_proj, k_proj, v_proj, gate_proj, up_proj   column-parallel: rank r holds its heads' rows
//                                                 (q heads [r*H/tp, (r+1)*H/tp)) / its slice of
//                                                 the intermediate rows, biases likewise;
//   o_proj, down_proj                             row-parallel: the matching input columns; the
//                                                 partial outputs are summed over the group
//                                                 (all-reduce); the bias sits on rank 0 only, so
//                                                 the sum adds it once;
//   embed_tokens, lm_head                         vocab-parallel: rows [r*Vl, (r+1)*Vl) with
//                                                 Vl = ceil(V/tp) (the last rank's tail is zero
//                                                 padding); an id outside a rank's rows looks up
//                                                 zeros and the all-reduce completes the lookup;
//                                                 the logits' slices are all-gathered, so sampling
//                                                 sees the whole vocabulary on every rank;
//   norms (and Qwen3's q_norm / k_norm)           replicated.
// GQA with fewer KV heads than ranks (Qwen2.5-0.5B: 2 KV heads) replicates them as vLLM does: rank
// r holds KV head r*KV/tp, the one its query heads read. Every rank computes the same numbers
// (the collectives give every member the same bits), so every rank samples the same tokens.
//
// The model code itself is unchanged: the layers read their (local) sizes from the shard's
// ModelConfig and call the TensorParallel the modules are given (set_tensor_parallel) after a
// row-parallel projection, the embedding and the LM head.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <torch/torch.h>

#include "trainer/distributed.h"
#include "trainer/model.h"

namespace verl::trainer {

// The key every tensor-parallel error names.
inline constexpr const char* kTpKey = "actor_rollout_ref.rollout.tensor_model_parallel_size";

// How the full model is cut over `size` ranks: the local sizes of rank `rank`.
struct TpLayout {
  int64_t size = 1, rank = 0;
  int64_t heads = 0;          // query heads per rank
  int64_t kv_heads = 0;       // KV heads per rank (1 when replicated)
  int64_t kv_begin = 0;       // first KV head this rank holds
  int64_t intermediate = 0;   // MLP rows per rank
  int64_t vocab = 0;          // vocabulary rows per rank (ceil(V / size))
  int64_t vocab_begin = 0;    // rank * vocab
  int64_t full_vocab = 0;

  // Throws verl::Error kInvalidConfig naming kTpKey when `full` cannot be cut over `size` ranks
  // (heads, KV heads or the intermediate size not divisible).
  static TpLayout of(const ModelConfig& full, int64_t size, int64_t rank);
  // The config of one rank's shard (local heads, intermediate, vocab; head_dim kept).
  ModelConfig shard_config(const ModelConfig& full) const;
  // This rank's piece of the full tensor `name` (an HF parameter name of the model): rows or
  // columns as the header says, a row-parallel bias on rank 0 and zeros elsewhere, the
  // vocabulary rows zero-padded to `vocab`; replicated tensors as they are. Throws verl::Error
  // naming the tensor when its shape is not the full model's.
  torch::Tensor shard(const std::string& name, const torch::Tensor& full, const ModelConfig& full_config) const;
};

// A rank's view of its TP group: the collectives the layers call. A group of one rank does
// nothing (no communication).
class TensorParallel {
 public:
  TensorParallel(std::unique_ptr<Distributed> group, const TpLayout& layout);
  ~TensorParallel();
  const TpLayout& layout() const { return layout_; }
  int64_t size() const { return layout_.size; }

  // Sums partial results over the group, in place (a row-parallel output, the embedding).
  void all_reduce(torch::Tensor& x);
  // The vocabulary-parallel logits [..., Vl] of every rank, joined into [..., V].
  torch::Tensor gather_vocab(const torch::Tensor& local);
  // An embedding lookup in this rank's rows: zeros for ids outside them; then summed.
  torch::Tensor embed(const torch::Tensor& weight, const torch::Tensor& ids);

 private:
  std::unique_ptr<Distributed> group_;
  TpLayout layout_;
};

// Gives the modules of `model` (built from layout.shard_config) the group's collectives: the
// embedding, each attention's o_proj, each MLP's down_proj and the LM head. `tp` must outlive
// the model; null removes it.
void set_tensor_parallel(CausalLmImpl& model, TensorParallel* tp);

}  // namespace verl::trainer

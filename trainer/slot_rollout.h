// SlotRollout: the rollout engine for GPUs (actor_rollout_ref.rollout.name vllm or sglang, the
// engines verl would use), built the way serving engines are:
// - a paged KV cache (trainer/paged_kv.h): each layer's keys and values live in one pool of
//   blocks of 16 positions, allocated once per shape, as many as rollout.gpu_memory_utilization
//   leaves room for (at most what every slot at max_model_len would take), in the weights'
//   dtype. A sequence holds the blocks its length needs: the prompt's at admission, more as it
//   grows (checked every few steps, ahead of the steps to come); the rollout.n samples of a
//   prompt admitted together share the blocks their prompt fills. When the pool runs dry the
//   youngest sequence is preempted: its blocks are freed and it starts again later (its tokens
//   are drawn from its own uniforms, so it samples the same ones again);
// - S slots (rollout.max_num_seqs, at most the number of sequences) and continuous batching:
//   a sequence that stops leaves its slot at the next host check and a waiting one is prefilled
//   into it, while the pool has blocks for it, until all data.train_batch_size * rollout.n
//   sequences are done; identical prompts in one admission are prefilled once and their
//   keys/values written to each sequence's blocks; prefill runs in chunks of at most
//   rollout.max_num_batched_tokens prompt tokens;
// - the decode step (embedding, every layer, LM head, sampling, stop checks, the slot
//   bookkeeping) touches only device tensors at fixed addresses (the cache, the block table, the
//   slot state), so on CUDA it is captured once per batch-size bucket as a CUDA graph and
//   replayed (rollout.enforce_eager=true turns graphs off; rollout.cudagraph_capture_sizes picks
//   the buckets, else powers of two up to S); its attention reads each sequence's blocks up to
//   its length (one CUDA kernel for bf16/fp16); the host looks at the slots only every few steps;
// - when the waiting queue is empty and half a bucket has finished, the live slots are moved to
//   the front (their block-table rows move, not their keys) and the next smaller bucket runs;
// - rollout.free_cache_engine=true releases the cache (and the graphs that point into it) after
//   each generate, so that training gets the memory back.
//
// Numbers: the same layers as CausalLm (trainer/model.h), in the compute dtype, with the
// residual stream, norms, softmax and RoPE in fp32. Fewer kernels per layer than the module's
// forward: q/k/v and gate/up are one matmul each (the module's parameters become views into the
// fused matrices, so load_weights fills them), the norm weights are kept in fp32, q and k are
// rotated together from a cos/sin table, and on CUDA with libtorch >= 2.5 RMSNorm and attention
// are the fused kernels (at::rms_norm, scaled_dot_product_attention). Sampling is NativeRollout's: each sequence
// owns max_response_length uniforms drawn from its own seed, and token i of a sequence uses
// uniform i whatever slot, bucket or step it is computed in, so the tokens do not depend on the
// batch composition or on max_num_seqs. On the CPU sampling runs in float64 (as NativeRollout's,
// whose tokens it then reproduces up to the matmuls' summation order); on CUDA in float32.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <torch/torch.h>

#include "trainer/model.h"
#include "trainer/paged_kv.h"
#include "trainer/rollout_engine.h"
#include "trainer/tensor_parallel.h"

namespace verl::trainer {

struct SlotRolloutOptions {
  double gpu_memory_utilization = 0.5;  // share of the device's memory the engine may bring the process to
  int64_t max_num_seqs = 256;           // slots at most
  int64_t max_num_batched_tokens = 8192;  // prompt tokens per prefill forward (at least one prompt)
  bool enforce_eager = false;           // no CUDA graphs
  bool free_cache_engine = true;        // release the KV cache after each generate
  std::vector<int64_t> cudagraph_capture_sizes;  // empty: 1, 2, 4, ... up to the slot count
  int64_t steps_per_check = 8;          // decode steps between looks at the slots from the host
  int64_t block_size = 16;              // positions per KV-cache block
  int64_t kv_blocks_override = 0;       // > 0: the pool's block count (tests), instead of from memory
  bool fused_decode = true;             // the decode step's fused kernels where they run (bench/ compares)

  static SlotRolloutOptions from(const RolloutConfig& rollout);
};

// What the last generate did (bench/ and tests read it; the trainer logs it).
struct SlotRolloutStats {
  int64_t slots = 0;
  int64_t max_model_len = 0;
  int64_t prefill_forwards = 0;
  int64_t prefill_tokens = 0;      // prompt tokens run through the layers (shared prompts once)
  int64_t decode_steps = 0;        // bucket-wide decode steps
  int64_t decode_row_steps = 0;    // sum over those steps of the bucket size
  int64_t host_checks = 0;
  int64_t graph_captures = 0;
  double capture_s = 0;
  double kv_cache_gb = 0;
  int64_t kv_blocks = 0;           // blocks in the pool (block 0 reserved)
  int64_t peak_kv_blocks = 0;      // most blocks held at once
  int64_t shared_kv_blocks = 0;    // block references that a sample took from its prompt's twin
  int64_t preemptions = 0;         // sequences sent back to the queue for want of blocks
};

// The inverse-CDF draw of NativeRollout (the first token whose cumulative probability reaches
// u * total) for logits z [b, V] and uniforms u [b], in two levels: block sums of exp(z - max)
// over blocks of 1024, their cumsum to find each row's block, then one block's cumsum. One pass
// over [b, V] instead of softmax + cumsum + compare (on the H200 at b = 256, V = 151,936 this
// matters: docs/BENCHMARKS.md). The same token as the flat form up to summation order.
// Returns the token ids [b] and their log-probs [b] under softmax(z).
std::pair<torch::Tensor, torch::Tensor> sample_inverse_cdf_blocked(const torch::Tensor& z, const torch::Tensor& u);

class SlotRollout final : public RolloutEngine {
 public:
  // The engine's model: built for `config` on `device` with parameters in the compute dtype
  // (weights come from load_weights). With `tp` (rollout.tensor_model_parallel_size > 1) the
  // model is this rank's shard (trainer/tensor_parallel.h), load_weights keeps this rank's piece
  // of the full weights, and generate is collective over the group (every member calls it with
  // the same prompts and seeds and gets the same batch); the decode step then runs eagerly (no
  // CUDA graphs around the group's collectives).
  SlotRollout(const ModelConfig& config, const torch::Device& device, SlotRolloutOptions options,
              std::unique_ptr<TensorParallel> tp = nullptr);
  ~SlotRollout() override;

  RolloutBatch generate(const std::vector<std::vector<int64_t>>& prompts, const GenerateOptions& options,
                        const std::vector<uint64_t>& row_seeds) override;
  void load_weights(const NamedTensors& weights) override;
  torch::Device device() const override { return device_; }

  CausalLm& model() { return model_; }
  const SlotRolloutStats& last_stats() const { return stats_; }
  // Drops the KV cache, the slot state and the captured graphs.
  void release_cache();

 private:
  // A layer's parameters as the engine uses them: q/k/v and gate/up each one matrix (the
  // module's parameters are views into it, so load_weights fills it), the norms in fp32.
  struct Layer {
    torch::Tensor in_norm, post_norm, q_norm, k_norm;
    torch::Tensor qkv_w, qkv_b, o_w, o_b;
    torch::Tensor gate_up_w, gate_up_b, down_w, down_b;
  };
  struct Sampler {
    bool greedy = true;
    double temperature = 1.0;
    int64_t top_k = -1;
    double top_p = 1.0;
    bool ignore_eos = false;
    bool operator<(const Sampler& o) const {
      return std::tie(greedy, temperature, top_k, top_p, ignore_eos) <
             std::tie(o.greedy, o.temperature, o.top_k, o.top_p, o.ignore_eos);
    }
  };
  class Graphs;  // CUDA graphs by (bucket, sampler); empty in builds without CUDA

  // The host's view of a slot: the sequence it holds (-1: free), the decode steps it may still
  // need, its length (the position its next key goes to), when it was admitted, its blocks.
  struct SlotState {
    int64_t seq = -1, left = 0, len = 0, admitted = 0;
    std::vector<int64_t> blocks;
  };

  void ensure_cache(int64_t slots, int64_t max_len, int64_t resp_len, int64_t stop_count, int64_t blocks);
  // The pool's block count for `slots` sequences of at most max_len positions: all they could
  // need, or what rollout.gpu_memory_utilization leaves room for on CUDA.
  int64_t kv_blocks_for(int64_t slots, int64_t max_len) const;
  double kv_block_bytes() const;  // one block's keys and values over every layer
  // Gives slot i (free) the blocks of `seq`'s first `positions` positions, the first `shared` of
  // them taken from slot `twin` (same prompt); false when the pool lacks them.
  bool assign_blocks(int64_t i, int64_t seq, int64_t positions, int64_t twin, int64_t shared);
  void free_slot(int64_t i);
  void write_table_row(int64_t i);
  void upload_table();
  std::vector<int64_t> buckets() const;
  int64_t bucket_for(int64_t live) const;

  torch::Tensor rms(const torch::Tensor& x, const torch::Tensor& w) const;
  torch::Tensor lin(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const;
  std::pair<torch::Tensor, torch::Tensor> rope(const torch::Tensor& positions) const;  // cos, sin [..., D]
  // q [.., h, d] and k [.., kvh, d] from one qkv row block, normed (Qwen3) and rotated, fp32.
  std::pair<torch::Tensor, torch::Tensor> rotated_qk(const Layer& l, const torch::Tensor& qkv,
                                                     const torch::Tensor& cos, const torch::Tensor& sin) const;
  torch::Tensor mlp(const Layer& l, const torch::Tensor& x) const;
  // Next token and its log-prob under the sampled distribution, for logits [b, V] and uniforms [b].
  std::pair<torch::Tensor, torch::Tensor> sample(const torch::Tensor& logits, const torch::Tensor& u,
                                                 const Sampler& s) const;
  // One decode step over slots [0, b): reads and advances the slot state in place.
  void decode_step(int64_t b, const Sampler& s);
  // decode_step through the bucket's CUDA graph (captured on first use), or eagerly.
  void run_step(int64_t b, const Sampler& s);
  // Prefills `seqs` into `slots` (same length) and samples each one's first token.
  void admit(const std::vector<int64_t>& slots, const std::vector<int64_t>& seqs,
             const std::vector<std::vector<int64_t>>& prompts, const Sampler& s);
  void prefill_chunk(const std::vector<std::vector<int64_t>>& unique_prompts,
                     const std::vector<int64_t>& slot_unique, const std::vector<int64_t>& slots,
                     const std::vector<int64_t>& seqs, const Sampler& s);
  // Copies finished slots' responses into the per-sequence outputs.
  void harvest(const std::vector<int64_t>& slots, const std::vector<int64_t>& seqs);
  // Moves the slots `live` (ascending) to [0, live.size()).
  void compact(const std::vector<int64_t>& live);

  // The layers' outputs summed over the TP group (row-parallel o_proj / down_proj), in fp32.
  torch::Tensor row_out(const torch::Tensor& y) const;
  torch::Tensor embed(const torch::Tensor& ids) const;
  torch::Tensor logits_of(const torch::Tensor& hidden) const;  // [.., V] over the whole vocabulary

  ModelConfig full_config_;
  std::unique_ptr<TensorParallel> tp_;
  ModelConfig config_;  // this rank's shard's (the full model's without tp)
  torch::Device device_;
  SlotRolloutOptions options_;
  torch::Dtype dt_;             // compute dtype = parameter and cache dtype
  torch::Dtype sample_dtype_;   // float64 on the CPU, float32 on CUDA
  CausalLm model_{nullptr};
  std::vector<Layer> layers_;
  std::map<std::string, torch::Tensor> fp32_norms_;  // by parameter name
  torch::Tensor embed_, final_norm_, lm_w_, inv_freq_;

  // The cache and the slot state: fixed addresses while a graph may point at them.
  int64_t slots_ = 0, max_len_ = 0, resp_len_ = 0, stop_count_ = -1, kv_blocks_ = 0;
  std::vector<torch::Tensor> kc_, vc_;  // per layer [blocks, block_size, kvh, d]
  torch::Tensor block_table_;           // [S, blocks per max_model_len] int64, on the device
  torch::Tensor table_host_;            // its host copy, uploaded when changed
  bool table_dirty_ = false;
  KvBlockPool pool_;
  std::vector<SlotState> host_;         // by slot
  torch::Tensor tok_, len_, rpos_, active_;  // [S]: input token, its position, tokens generated, live
  torch::Tensor unif_;                       // [S, R] the slot's sequence's uniforms
  torch::Tensor resp_, logp_;                // [S, R+1]; column R takes the writes of finished slots
  torch::Tensor positions_;                  // [L] 0..L-1
  torch::Tensor rope_cos_, rope_sin_;        // [L, d] fp32 at positions 0..L-1
  torch::Tensor stops_;                      // [n] stop ids
  // Per generate call.
  torch::Tensor all_unif_, out_resp_, out_len_, out_logp_;
  std::unique_ptr<Graphs> graphs_;
  SlotRolloutStats stats_;
  bool warned_preemption_ = false;
};

}  // namespace verl::trainer

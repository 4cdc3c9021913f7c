// The decoder-only transformer of the Llama / Qwen2 / Qwen3 / Mistral family: token embedding,
// N blocks of (RMSNorm -> grouped-query self-attention with rotary embeddings -> residual,
// RMSNorm -> SwiGLU MLP -> residual), a final RMSNorm, and an LM head (optionally tied to the
// embedding). The variants differ only in switches of ModelConfig: biases on q/k/v (Qwen2) or on
// all projections (Llama/Qwen3 attention_bias, Llama mlp_bias), an RMSNorm over each head of q
// and k before RoPE (Qwen3 q_norm/k_norm), an explicit head_dim (Qwen3, Mistral), llama3 / linear
// RoPE scaling (Llama 3.1+) and a sliding attention window (Mistral).
// Parameter names match Hugging Face's (model.embed_tokens.weight,
// model.layers.0.self_attn.q_proj.weight, ..., lm_head.weight) so HF checkpoints map 1:1
// (trainer/hf_model.h loads and exports them).
//
// Construction allocates parameters uninitialised (torch::empty) directly on the requested device
// and dtype: no init runs, so building a 7B model to load it costs nothing but the allocation.
// Call init_weights (or make_causal_lm / make_critic, which do) or load weights before use.
//
// Sequences are left-padded prompts followed by right-padded responses; attention_mask marks
// real tokens (1) and padding (0), position_ids count real tokens only. Attention is written
// out (matmul + masked softmax) rather than through scaled_dot_product_attention, whose C++
// API differs between libtorch 1.13 and 2.x. Masked scores use a large finite negative so an
// all-padding query row yields uniform weights, never NaN.
//
// Two ways to run the backbone over a training batch (verl's actor_rollout_ref.model keys):
// - use_remove_padding (forward_unpadded): the rows' real tokens are packed into one [1, N]
//   sequence with per-token position ids, and attention runs per sequence (causal inside each,
//   nothing across), so no projection, MLP or attention score is computed for padding. The
//   results at real positions equal the padded forward's up to summation order (fp32: ~1e-6).
//   On CUDA with a bf16/fp16 compute dtype (libtorch >= 2.6) the packed attention is
//   FlashAttention-2's variable-length kernel, one launch per layer (its softmax is not the
//   written-out one's, so results agree to bf16 rounding, not to 1e-6).
// - enable_gradient_checkpointing: each decoder layer keeps only its input for the backward
//   pass and recomputes its activations there (HF's gradient checkpointing, which verl turns
//   on). Only under grad mode and without a KV cache. No layer draws random numbers (no
//   dropout), so the recomputation is the same computation and the gradients are bitwise equal.
//   The layer's compute-dtype weights (ComputeWeights) are cast before the checkpointed segment
//   and are its inputs, so the recompute reuses them: with bf16 compute they stay alive from
//   the forward to the backward (2 bytes per layer parameter), instead of a second cast.
//
// Parameters are float32 by default (the master copy the optimizer updates); with compute dtype
// bfloat16 the matmuls run in bf16 and norms/softmax/RoPE/logits in fp32 (what autocast would
// do). Parameters may also be built in bf16 (inference copies). The weights a matmul reads are
// cast to the compute dtype once per forward, not at each use (ComputeWeights below).
// Not thread-safe: one module per thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "trainer/job_config.h"

namespace verl::trainer {

class TensorParallel;  // trainer/tensor_parallel.h: the rollout's tensor-parallel collectives

// How RoPE's inverse frequencies are rescaled for long contexts (HF's rope_scaling /
// rope_parameters). Only the kinds HF computes once at load time are supported; yarn,
// dynamic NTK and longrope are refused by the HF loader.
enum class RopeScalingType {
  kNone,    // "default"
  kLinear,  // inv_freq / factor
  kLlama3,  // Llama 3.1: low frequencies / factor, high kept, a smooth ramp between
};

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;                     // llama3
  double high_freq_factor = 4.0;                    // llama3
  int64_t original_max_position_embeddings = 8192;  // llama3
};

// How a forward gets its weights into the compute dtype when the parameters are in another.
enum class WeightCast {
  // Each weight cast once per forward (ComputeWeights): FSDP's MixedPrecision(param_dtype).
  kOncePerForward,
  // Cast at every use, as before issue #14 (the checkpoint recompute and each LM head chunk
  // cast again): kept so that tests and benchmarks can compare the two in one binary.
  kPerUse,
};

struct ModelConfig {
  int64_t vocab_size = 100;
  int64_t hidden_size = 64;
  int64_t intermediate_size = 176;
  int64_t num_hidden_layers = 2;
  int64_t num_attention_heads = 4;
  int64_t num_key_value_heads = 2;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = true;
  bool attention_bias = false;
  int64_t max_position_embeddings = 64;
  torch::Dtype compute_dtype = torch::kFloat32;
  WeightCast weight_cast = WeightCast::kOncePerForward;
  double initializer_range = 0.02;  // HF's default
  // The additions for real HF models; their defaults are the toy model's (Qwen2-like without bias).
  int64_t explicit_head_dim = 0;     // 0: hidden_size / num_attention_heads (Qwen3/Mistral set it)
  bool attention_out_bias = false;   // o_proj bias (Llama/Qwen3 attention_bias; never Qwen2's)
  bool mlp_bias = false;             // gate/up/down biases (Llama mlp_bias)
  bool qk_norm = false;              // Qwen3: RMSNorm over each head of q and k before RoPE
  RopeScaling rope_scaling;
  int64_t sliding_window = 0;        // 0: full causal attention; else keys within this many positions
  // Where it came from, kept so an export writes the same architecture and the keys verlctl
  // does not model (token ids, ...): HF's architectures[0] ("" for a from-scratch model) and
  // the config.json text it was read from ("" likewise).
  std::string hf_architecture;
  std::string hf_config_json;

  int64_t head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : hidden_size / num_attention_heads; }
  static ModelConfig from_job(const ModelArchConfig& arch, int64_t vocab_size);
};

// Keys and values of every layer so far, [B, kv_heads, T_past, head_dim]; grown by each
// forward call that is given the cache. The attention mask over the cached keys is the
// caller's (it passes the mask of all T_past + t keys).
struct KvCache {
  std::vector<torch::Tensor> keys, values;
  int64_t length() const { return keys.empty() || !keys[0].defined() ? 0 : keys[0].size(2); }
  void clear() { keys.clear(); values.clear(); }
  // Keeps only the given batch rows (e.g. after finished sequences are dropped).
  void select_rows(const torch::Tensor& rows);
};

// One forward's copies of some parameters in the compute dtype: mixed precision as FSDP's
// MixedPrecision(param_dtype=bf16, reduce_dtype=fp32) does it. The parameters stay the fp32
// master copy; each one a forward computes with in another dtype is cast once, before its first
// use, and every use (the checkpoint recompute's too) reads the copy. Under grad mode the cast is
// recorded, so a copy's gradient (summed over the forward's uses in the compute dtype) reaches
// its parameter through one cast back to fp32. Parameters already in the compute dtype have no
// copy and are used as they are: with fp32 compute nothing is copied and nothing changes.
// A decoder layer makes its own (DecoderLayerImpl::cast_weights) right before it runs, outside
// any checkpointed segment, or after FSDP gathers it (one cast per gather); the LM head's is
// CausalLmImpl::head_weight. Holds tensor handles (the copies) and the parameters' addresses:
// cheap to move; valid while the parameters live.
class ComputeWeights {
 public:
  ComputeWeights() = default;  // no copies: every parameter used as it is
  // Casts each of `params` whose dtype is not `dtype` (undefined ones are skipped).
  static ComputeWeights cast(const std::vector<torch::Tensor>& params, torch::Dtype dtype);
  // The parameters cast(params, dtype) would cast, standing for `copies` (theirs, in order)
  // instead: the checkpoint recompute binds the forward's copies this way. Throws when the
  // counts differ.
  static ComputeWeights bind(const std::vector<torch::Tensor>& params, torch::Dtype dtype,
                             std::vector<torch::Tensor> copies);
  // What to compute with in place of `param`: its copy, else `param` itself.
  const torch::Tensor& operator[](const torch::Tensor& param) const;
  const std::vector<torch::Tensor>& copies() const { return copies_; }

 private:
  // By the parameter's TensorImpl (FSDP's set_data keeps it); a layer has at most 28, so a
  // linear search.
  std::vector<const c10::TensorImpl*> keys_;
  std::vector<torch::Tensor> copies_;
};

// x @ weight^T + bias with parameters named as torch::nn::Linear's ("weight" [out, in], "bias"
// [out]), allocated uninitialised on options' device and dtype.
// With a LoRA adapter (add_lora), the layer computes x W^T + b + (x A^T) B^T * alpha / r, A and B
// registered as PEFT names them (lora_A.weight [r, in], lora_B.weight [out, r]).
class DenseImpl : public torch::nn::Module {
 public:
  DenseImpl(int64_t in, int64_t out, bool bias, const torch::TensorOptions& options = {});
  torch::Tensor weight, bias;  // bias undefined when absent
  torch::Tensor lora_a, lora_b;  // undefined without an adapter
  double lora_scaling = 0;
  bool lora_enabled = true;      // false: the base layer alone (the reference policy)
  // The tensors the forward computes with: weight, bias and (when enabled) the adapters.
  void append_used(std::vector<torch::Tensor>& out) const;
};
TORCH_MODULE(Dense);

// A lookup table named as torch::nn::Embedding's ("weight" [vocab, hidden]), uninitialised.
class TokenEmbeddingImpl : public torch::nn::Module {
 public:
  TokenEmbeddingImpl(int64_t vocab, int64_t dim, const torch::TensorOptions& options = {});
  torch::Tensor forward(const torch::Tensor& ids);
  torch::Tensor weight;
  TensorParallel* tp = nullptr;  // vocab-parallel rows (trainer/tensor_parallel.h); not owned
};
TORCH_MODULE(TokenEmbedding);

class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t dim, double eps, const torch::TensorOptions& options = {});
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RmsNorm);

// Where the sequences of a packed [1, N] row begin and end: sequence i is [cu_seqlens[i],
// cu_seqlens[i+1]) (flash-attention's varlen convention).
using CuSeqlens = std::vector<int64_t>;

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const ModelConfig& config, const torch::TensorOptions& options = {});
  // x [B,t,H]; cos/sin [B,t,D]; mask [B,1,t,T] additive (0 or large negative). The
  // projections read their weights through w (the layer's ComputeWeights).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& mask, torch::Tensor* cache_k, torch::Tensor* cache_v,
                        const ComputeWeights& w);
  // x [1,N,H] packed sequences; cos/sin [1,1,N,D]; each sequence attends causally to itself only.
  torch::Tensor forward_packed(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                               const CuSeqlens& cu_seqlens, const ComputeWeights& w);
  Dense q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  RmsNorm q_norm{nullptr}, k_norm{nullptr};  // null unless config.qk_norm
  TensorParallel* tp = nullptr;  // o_proj's partial outputs summed over the group; not owned

 private:
  torch::Tensor flash_varlen(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const CuSeqlens& cu_seqlens) const;
  // o_proj's output in fp32, summed over the tensor-parallel group when there is one.
  torch::Tensor row_parallel_out(const torch::Tensor& y) const;
  ModelConfig config_;
};
TORCH_MODULE(Attention);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const ModelConfig& config, const torch::TensorOptions& options = {});
  torch::Tensor forward(const torch::Tensor& x, const ComputeWeights& w);
  Dense gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
  TensorParallel* tp = nullptr;  // down_proj's partial outputs summed over the group; not owned

 private:
  torch::Dtype dtype_;
};
TORCH_MODULE(Mlp);

class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const ModelConfig& config, const torch::TensorOptions& options = {});
  // w: this forward's copies of the layer's weights, from cast_weights (or bind_weights).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& mask, torch::Tensor* cache_k, torch::Tensor* cache_v,
                        const ComputeWeights& w);
  // Packed sequences (see AttentionImpl::forward_packed).
  torch::Tensor forward_packed(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                               const CuSeqlens& cu_seqlens, const ComputeWeights& w);
  // Either of the above without a cache: cu_seqlens empty -> padded with mask, else packed.
  torch::Tensor forward_any(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                            const torch::Tensor& mask, const CuSeqlens& cu_seqlens, const ComputeWeights& w);
  // The projections' weights (and enabled adapters) cast to the compute dtype, once, for one
  // forward (none with WeightCast::kPerUse). The parameters must hold their values (FSDP:
  // gathered) when it is called.
  ComputeWeights cast_weights() const;
  // The copies of an earlier cast_weights() (its copies(), in order) bound to the same
  // parameters: what the checkpoint recompute computes with.
  ComputeWeights bind_weights(std::vector<torch::Tensor> copies) const;
  RmsNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  Attention self_attn{nullptr};
  Mlp mlp{nullptr};

 private:
  std::vector<torch::Tensor> projection_parameters() const;
  torch::Dtype compute_dtype_;
  WeightCast weight_cast_;
};
TORCH_MODULE(DecoderLayer);

// Runs one decoder layer of a forward without a KV cache when the layers' parameters are held
// by something other than the module (FSDP's shards, trainer/fsdp.h), which must gather them
// around the call and cast them (layer.cast_weights()) after each gather, as FSDP's mixed
// precision casts at each all-gather. `checkpoint`: enable_gradient_checkpointing is on and grad
// mode is enabled.
class LayerRunner {
 public:
  virtual ~LayerRunner() = default;
  virtual torch::Tensor run(size_t index, DecoderLayerImpl& layer, const torch::Tensor& x, const torch::Tensor& cos,
                            const torch::Tensor& sin, const torch::Tensor& mask, const CuSeqlens& cu_seqlens,
                            bool checkpoint) = 0;
};

// HF's LlamaModel: the backbone without a head, shared by the policy and the critic.
class BackboneImpl : public torch::nn::Module {
 public:
  explicit BackboneImpl(const ModelConfig& config, const torch::TensorOptions& options = {});
  // input_ids/position_ids [B,t]; attention_mask [B, T_past + t]. Returns hidden [B,t,H] fp32.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                        const torch::Tensor& position_ids, KvCache* cache = nullptr);
  // use_remove_padding: the same [B,t,H] hidden states, computed on the real tokens only
  // (packed into one sequence); padding positions come back as zeros. attention_mask [B,t].
  torch::Tensor forward_unpadded(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                 const torch::Tensor& position_ids);
  // Packed input: input_ids/position_ids [1,N] holding the sequences cu_seqlens delimits.
  // Returns hidden [1,N,H] fp32.
  torch::Tensor forward_packed(const torch::Tensor& input_ids, const torch::Tensor& position_ids,
                               const CuSeqlens& cu_seqlens);
  // enable_gradient_checkpointing: recompute each layer in backward (no effect without grad).
  void set_gradient_checkpointing(bool on) { gradient_checkpointing_ = on; }
  bool gradient_checkpointing() const { return gradient_checkpointing_; }
  // Not owned; null (the default) runs the layers directly. A forward with a KV cache (the
  // rollout's) always runs them directly: its caller has gathered the parameters.
  void set_layer_runner(LayerRunner* runner) { layer_runner_ = runner; }
  const ModelConfig& config() const { return config_; }
  TokenEmbedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RmsNorm norm{nullptr};

 private:
  // cos/sin [B,1,t,D] of RoPE at position_ids [B,t].
  std::pair<torch::Tensor, torch::Tensor> rope(const torch::Tensor& position_ids);
  torch::Tensor run_layers(torch::Tensor h, const torch::Tensor& cos, const torch::Tensor& sin,
                           const torch::Tensor& mask, const CuSeqlens& cu_seqlens, KvCache* cache);

  ModelConfig config_;
  torch::Tensor inv_freq_;  // [head_dim/2] fp32 on the input's device, from rope_inv_freq
  bool gradient_checkpointing_ = false;
  LayerRunner* layer_runner_ = nullptr;
};

TORCH_MODULE(Backbone);

// Which forward a worker runs over a padded [B, T] batch (actor_rollout_ref.model /
// critic.model use_remove_padding).
enum class SequenceLayout { kPadded, kRemovePadding };

// The backbone's hidden states [B,t,H] of a padded batch, through forward or forward_unpadded.
torch::Tensor backbone_hidden(Backbone& backbone, const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                              const torch::Tensor& position_ids, SequenceLayout layout);

// HF's LlamaForCausalLM: the policy (actor) and the reference.
class CausalLmImpl : public torch::nn::Module {
 public:
  // Parameters uninitialised on options' device/dtype (CPU float32 by default).
  explicit CausalLmImpl(const ModelConfig& config, const torch::TensorOptions& options = {});
  // Logits [B,t,V], float32.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                        const torch::Tensor& position_ids, KvCache* cache = nullptr);
  // Logits [..., V] float32 from the backbone's hidden states [..., H]: the LM head alone, so
  // that callers can project only the positions they need (the rollout's last position, the
  // log-prob chunks) instead of every position of a real vocabulary. head_weight: from
  // head_weight(), so that a caller running the head over many chunks casts it once.
  torch::Tensor logits(const torch::Tensor& hidden, const torch::Tensor& head_weight) const;
  torch::Tensor logits(const torch::Tensor& hidden) const { return logits(hidden, head_weight()); }
  // output_embedding() in the compute dtype for one forward: cast once (recorded under grad
  // mode; see ComputeWeights), or itself when already in it or with WeightCast::kPerUse.
  torch::Tensor head_weight() const;
  // The matrix the logits are computed with: embed_tokens.weight itself when tied.
  torch::Tensor output_embedding() const;
  const ModelConfig& config() const { return config_; }
  Backbone model{nullptr};
  Dense lm_head{nullptr};  // null when tied
  TensorParallel* tp = nullptr;  // vocab-parallel logits gathered over the group; not owned

 private:
  ModelConfig config_;
};
TORCH_MODULE(CausalLm);

// The critic: the same backbone and a scalar value head per token (HF's
// AutoModelForTokenClassification(num_labels=1), head named "score", as verl's critic).
// verl's critic (HF's score Linear) has a bias; ours has none unless asked for (kLearned), so that
// from-scratch critics keep the parameters, and the numbers, they always had. A saved critic that
// carries score.bias is loaded with one (trainer/hf_model.h).
enum class ValueHeadBias { kNone, kLearned };

class CriticModelImpl : public torch::nn::Module {
 public:
  explicit CriticModelImpl(const ModelConfig& config, const torch::TensorOptions& options = {},
                           ValueHeadBias bias = ValueHeadBias::kNone);
  // Values [B,t], float32 (0 at padding with kRemovePadding).
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                        const torch::Tensor& position_ids, SequenceLayout layout = SequenceLayout::kPadded);
  const ModelConfig& config() const { return model->config(); }
  Backbone model{nullptr};
  Dense score{nullptr};
};
TORCH_MODULE(CriticModel);

// x @ w^T (+ b) in `dtype` (the layers' projections): a plain linear on CUDA or in bf16, a 1x1
// convolution on the CPU in fp32 (Debian's reference BLAS is much slower; model.cc says by how much).
torch::Tensor project(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, torch::Dtype dtype);

// Normal(0, initializer_range) for Linear/Embedding weights, zeros for biases, ones for norms,
// drawn from a CPU generator seeded with `seed` so the same seed gives the same weights on any
// device and never touches torch's global RNG. Each tensor is drawn in fp32 on the CPU (in
// named_parameters order) and copied to the parameter's device and dtype, so a model on CUDA or
// in bf16 holds the same values (rounded) as the CPU fp32 one.
void init_weights(torch::nn::Module& module, double std, uint64_t seed);

// A policy / critic built and initialised from `seed` alone, on the CPU in fp32 or on `device`
// with parameters of `param_dtype`. Construction draws nothing, so torch's default RNG stream
// is untouched, and the weights are those of init_weights(seed) whatever the device.
CausalLm make_causal_lm(const ModelConfig& config, uint64_t seed);
CausalLm make_causal_lm(const ModelConfig& config, uint64_t seed, const torch::Device& device,
                        torch::Dtype param_dtype = torch::kFloat32);
CriticModel make_critic(const ModelConfig& config, uint64_t seed);
CriticModel make_critic(const ModelConfig& config, uint64_t seed, const torch::Device& device,
                        torch::Dtype param_dtype = torch::kFloat32);

// RoPE's inverse frequencies [head_dim/2], float32 on the CPU: theta^(-2i/d) computed in fp64
// and rounded once, then the rope_scaling rule (HF's _compute_llama3_parameters /
// _compute_linear_scaling_rope_parameters, also in fp64). HF computes the same in fp32, so the
// two may differ in the last bit.
torch::Tensor rope_inv_freq(const ModelConfig& config);

// RoPE's rotate-half: (x1, x2) -> (-x2, x1) over the last dimension's halves (HF's rotate_half).
torch::Tensor rotate_half(const torch::Tensor& x);

// Copies parameters by name from `src` into `dst` for every name they share (same shape);
// returns how many were copied. Used to start the critic's backbone from the actor's.
int64_t copy_shared_parameters(const torch::nn::Module& src, torch::nn::Module& dst,
                               const std::string& src_prefix = "", const std::string& dst_prefix = "");

// A frozen deep copy (requires_grad false, eval mode) of a policy, on `device`, with parameters
// of the policy's dtype (or param_dtype when given).
CausalLm make_reference(const CausalLm& policy, const torch::Device& device);
CausalLm make_reference(const CausalLm& policy, const torch::Device& device, torch::Dtype param_dtype);

// position ids = number of real tokens before each position (0 for padding).
torch::Tensor position_ids_from_mask(const torch::Tensor& attention_mask);

// "auto" -> cuda if available else cpu; "cpu", "cuda", "cuda:N". Throws verl::Error naming key.
torch::Device parse_device(const std::string& spec, const std::string& key);

// Caps the CUDA caching allocator of device at fraction (0, 1] of its memory, so that a rank
// fails with an out-of-memory error instead of starving a neighbour sharing the GPU. A no-op
// for CPU devices and for builds without CUDA.
void limit_device_memory(const torch::Device& device, double fraction);

int64_t count_parameters(const torch::nn::Module& module);
// Those with requires_grad (under LoRA: the adapters).
int64_t count_trainable(const torch::nn::Module& module);

// LoRA as verl configures it (actor_rollout_ref.model.lora_rank, lora_alpha, target_modules,
// exclude_modules) and PEFT builds it: every Dense of the decoder layers whose own name (q_proj,
// k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj) is in target_modules ("all-linear": all
// of them; PEFT's all-linear leaves out the output head, so do we) and not in exclude_modules gets
// A [r, in] ~ PEFT's kaiming-uniform (U(-1/sqrt(in), 1/sqrt(in))) from a CPU generator seeded with
// `seed`, and B [out, r] = 0, so the adapted model starts equal to the base. Every other
// parameter is frozen (requires_grad false). Returns the number of adapted layers; throws
// verl::Error kInvalidConfig naming the key when a target matches nothing.
int64_t add_lora(torch::nn::Module& model, const LoraSpec& spec, uint64_t seed);
// Adapters on (the policy) or off (the base model: verl's reference policy under LoRA).
void set_lora_enabled(torch::nn::Module& model, bool enabled);
// The model's parameters by name with each adapted weight replaced by W + B A * alpha / r (and
// without the adapters' own tensors): what the rollout and the HF export take.
// With `keep`, only the parameters whose names it accepts (the others are not read).
std::vector<std::pair<std::string, torch::Tensor>> merged_lora_parameters(
    const torch::nn::Module& model, const std::function<bool(const std::string& name)>& keep = {});

}  // namespace verl::trainer

// The decoder-only transformer of the Llama/Qwen2 family: token embedding, N blocks of
// (RMSNorm -> grouped-query self-attention with rotary embeddings -> residual, RMSNorm ->
// SwiGLU MLP -> residual), a final RMSNorm, and an LM head (optionally tied to the embedding).
// Parameter names match Hugging Face's (model.embed_tokens.weight,
// model.layers.0.self_attn.q_proj.weight, ..., lm_head.weight) so HF checkpoints map 1:1.
//
// Sequences are left-padded prompts followed by right-padded responses; attention_mask marks
// real tokens (1) and padding (0), position_ids count real tokens only. Attention is written
// out (matmul + masked softmax) rather than through scaled_dot_product_attention, whose C++
// API differs between libtorch 1.13 and 2.x. Masked scores use a large finite negative so an
// all-padding query row yields uniform weights, never NaN.
//
// Parameters stay float32 (the master copy the optimizer updates); with compute dtype
// bfloat16 the matmuls run in bf16 and norms/softmax/logits in fp32 (what autocast would do).
// Not thread-safe: one module per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "trainer/job_config.h"

namespace verl::trainer {

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
  double initializer_range = 0.02;  // HF's default

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
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

class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RmsNorm);

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const ModelConfig& config);
  // x [B,t,H]; cos/sin [B,t,D]; mask [B,1,t,T] additive (0 or large negative).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& mask, torch::Tensor* cache_k, torch::Tensor* cache_v);
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};

 private:
  ModelConfig config_;
};
TORCH_MODULE(Attention);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};

 private:
  torch::Dtype dtype_;
};
TORCH_MODULE(Mlp);

class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& mask, torch::Tensor* cache_k, torch::Tensor* cache_v);
  RmsNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  Attention self_attn{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(DecoderLayer);

// HF's LlamaModel: the backbone without a head, shared by the policy and the critic.
class BackboneImpl : public torch::nn::Module {
 public:
  explicit BackboneImpl(const ModelConfig& config);
  // input_ids/position_ids [B,t]; attention_mask [B, T_past + t]. Returns hidden [B,t,H] fp32.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                        const torch::Tensor& position_ids, KvCache* cache = nullptr);
  const ModelConfig& config() const { return config_; }
  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RmsNorm norm{nullptr};

 private:
  ModelConfig config_;
  torch::Tensor inv_freq_;  // buffer, [head_dim/2]
};
TORCH_MODULE(Backbone);

// HF's LlamaForCausalLM: the policy (actor) and the reference.
class CausalLmImpl : public torch::nn::Module {
 public:
  explicit CausalLmImpl(const ModelConfig& config);
  // Logits [B,t,V], float32.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                        const torch::Tensor& position_ids, KvCache* cache = nullptr);
  // Logits [..., V] float32 from the backbone's hidden states [..., H]: the LM head alone, so
  // that callers can project only the positions they need (the rollout's last position, the
  // log-prob chunks) instead of every position of a real vocabulary.
  torch::Tensor logits(const torch::Tensor& hidden) const;
  // The matrix the logits are computed with: embed_tokens.weight itself when tied.
  torch::Tensor output_embedding() const;
  const ModelConfig& config() const { return config_; }
  Backbone model{nullptr};
  torch::nn::Linear lm_head{nullptr};  // null when tied

 private:
  ModelConfig config_;
};
TORCH_MODULE(CausalLm);

// The critic: the same backbone and a scalar value head per token (HF's
// AutoModelForTokenClassification(num_labels=1), head named "score", as verl's critic).
class CriticModelImpl : public torch::nn::Module {
 public:
  explicit CriticModelImpl(const ModelConfig& config);
  // Values [B,t], float32.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                        const torch::Tensor& position_ids);
  Backbone model{nullptr};
  torch::nn::Linear score{nullptr};
};
TORCH_MODULE(CriticModel);

// Normal(0, initializer_range) for Linear/Embedding weights, zeros for biases, ones for norms,
// drawn from a CPU generator seeded with `seed` so the same seed gives the same weights on any
// device and never touches torch's global RNG.
void init_weights(torch::nn::Module& module, double std, uint64_t seed);

// A policy / critic built and initialised from `seed` alone. libtorch's module constructors
// draw their default init from the global generator; its state is restored afterwards, so
// building a model never shifts torch's default RNG stream.
CausalLm make_causal_lm(const ModelConfig& config, uint64_t seed);
CriticModel make_critic(const ModelConfig& config, uint64_t seed);

// Copies parameters by name from `src` into `dst` for every name they share (same shape);
// returns how many were copied. Used to start the critic's backbone from the actor's.
int64_t copy_shared_parameters(const torch::nn::Module& src, torch::nn::Module& dst,
                               const std::string& src_prefix = "", const std::string& dst_prefix = "");

// A frozen deep copy (requires_grad false, eval mode) of a policy, on `device`.
CausalLm make_reference(const CausalLm& policy, const torch::Device& device);

// position ids = number of real tokens before each position (0 for padding).
torch::Tensor position_ids_from_mask(const torch::Tensor& attention_mask);

// "auto" -> cuda if available else cpu; "cpu", "cuda", "cuda:N". Throws verl::Error naming key.
torch::Device parse_device(const std::string& spec, const std::string& key);

// Caps the CUDA caching allocator of device at fraction (0, 1] of its memory, so that a rank
// fails with an out-of-memory error instead of starving a neighbour sharing the GPU. A no-op
// for CPU devices and for builds without CUDA.
void limit_device_memory(const torch::Device& device, double fraction);

int64_t count_parameters(const torch::nn::Module& module);

}  // namespace verl::trainer

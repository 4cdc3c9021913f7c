#if VERL_TORCH_HAS_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif
#include "trainer/model.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>

#include "common/error.h"
#include "trainer/tensor_parallel.h"

namespace verl::trainer {

// x @ w^T (+ b) in the compute dtype. On CPU in fp32 it runs as a 1x1 convolution: Debian's
// libtorch links the reference (netlib) BLAS, whose sgemm is ~12x slower forward+backward
// than oneDNN's convolution at our shapes (measured: [4608,64]x[64,176] fwd+bwd 50 ms vs 4 ms);
// the math is the same up to summation order. Elsewhere (CUDA, bf16) it is a plain linear.
torch::Tensor project(const torch::Tensor& x, const torch::Tensor& w_in, const torch::Tensor& b_in,
                      torch::Dtype dtype) {
  if (dtype != torch::kFloat32) {
    return torch::linear(x.to(dtype), w_in.to(dtype), b_in.defined() ? b_in.to(dtype) : torch::Tensor());
  }
  // Parameters kept in another dtype (a bf16 inference copy) are cast per call; fp32 ones as is.
  const torch::Tensor w = w_in.scalar_type() == dtype ? w_in : w_in.to(dtype);
  const torch::Tensor b = !b_in.defined() || b_in.scalar_type() == dtype ? b_in : b_in.to(dtype);
  const torch::Tensor xd = x.scalar_type() == dtype ? x : x.to(dtype);
  if (!x.device().is_cpu()) return torch::linear(xd, w, b);
  auto out_shape = x.sizes().vec();
  out_shape.back() = w.size(0);
  const int64_t rows = x.numel() / x.size(-1);
  const auto x4 = xd.reshape({rows, x.size(-1), 1, 1});
  // A real vocabulary's LM head (151,936 outputs) as one convolution is slower than in blocks
  // of output channels that stay in cache (docs/BENCHMARKS.md, "LM head in blocks"). Each
  // output is the same dot product either way.
  constexpr int64_t kOutBlock = 4096;
  if (w.size(0) > 4 * kOutBlock) {
    // split, not narrow: split's backward is one concatenation of the blocks' gradients.
    const auto ws = w.split(kOutBlock, 0);
    std::vector<torch::Tensor> bs;
    if (b.defined()) bs = b.split(kOutBlock, 0);
    std::vector<torch::Tensor> parts;
    for (size_t i = 0; i < ws.size(); ++i) {
      const int64_t k = ws[i].size(0);
      parts.push_back(torch::conv2d(x4, ws[i].view({k, w.size(1), 1, 1}), b.defined() ? bs[i] : torch::Tensor())
                          .view({rows, k}));
    }
    return torch::cat(parts, 1).view(out_shape);
  }
  auto y = torch::conv2d(x4, w.view({w.size(0), w.size(1), 1, 1}), b.defined() ? b : torch::Tensor());
  return y.view(out_shape);
}

namespace {

// Large enough to zero a softmax weight in fp32, finite so fully masked rows stay finite.
constexpr double kMaskValue = -1e9;

// The layer's projection with its weights read through w (the forward's copies, or the
// parameters themselves, which project and the .to calls then cast per use).
torch::Tensor linear_in(const torch::Tensor& x, const Dense& layer, const ComputeWeights& w, torch::Dtype dtype) {
  auto y = project(x, w[layer->weight], w[layer->bias], dtype);
  if (layer->lora_a.defined() && layer->lora_enabled) {
    const auto xa = torch::linear(x.to(dtype), w[layer->lora_a].to(dtype));
    y = y + torch::linear(xa, w[layer->lora_b].to(dtype)).mul(layer->lora_scaling).to(y.scalar_type());
  }
  return y;
}


// softmax(q k^T / sqrt(d) + mask) v for q [B,h,t,d] and k, v [B,kvh,T,d] (fp32; the matmuls in
// the compute dtype); mask broadcasts to [B,h,t,T]. Returns [B,h,t,d] fp32.
torch::Tensor attend(const torch::Tensor& q, torch::Tensor k, torch::Tensor v, const torch::Tensor& mask,
                     torch::Dtype dt) {
  const int64_t b = q.size(0), h = q.size(1), d = q.size(3);
  const int64_t kvh = k.size(1), total = k.size(2);
  if (kvh != h) {  // grouped-query attention: each kv head serves h/kvh query heads (HF repeat_kv)
    k = k.unsqueeze(2).expand({b, kvh, h / kvh, total, d}).reshape({b, h, total, d});
    v = v.unsqueeze(2).expand({b, kvh, h / kvh, total, d}).reshape({b, h, total, d});
  }
  auto scores = torch::matmul(q.to(dt), k.transpose(2, 3).to(dt)).to(torch::kFloat32) /
                std::sqrt(static_cast<double>(d));
  auto probs = torch::softmax(scores + mask, -1);
  return torch::matmul(probs.to(dt), v.to(dt)).to(torch::kFloat32);
}

// The additive causal mask [len, len] of one sequence (with Mistral's sliding window).
torch::Tensor causal_mask(int64_t len, int64_t sliding_window, const torch::Device& device) {
  auto pos = torch::arange(len, torch::TensorOptions().dtype(torch::kLong).device(device));
  auto allowed = pos.unsqueeze(0) <= pos.unsqueeze(1);
  if (sliding_window > 0) allowed = allowed & (pos.unsqueeze(1) - pos.unsqueeze(0) < sliding_window);
  return torch::zeros({len, len}, torch::TensorOptions().dtype(torch::kFloat32).device(device))
      .masked_fill(allowed.logical_not(), kMaskValue);
}


}  // namespace

torch::Tensor rotate_half(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half);
  auto x2 = x.narrow(-1, half, half);
  return torch::cat({-x2, x1}, -1);
}

ModelConfig ModelConfig::from_job(const ModelArchConfig& a, int64_t vocab_size) {
  ModelConfig c;
  c.vocab_size = vocab_size;
  c.hidden_size = a.hidden_size;
  c.intermediate_size = a.intermediate_size;
  c.num_hidden_layers = a.num_hidden_layers;
  c.num_attention_heads = a.num_attention_heads;
  c.num_key_value_heads = a.num_key_value_heads;
  c.rope_theta = a.rope_theta;
  c.rms_norm_eps = a.rms_norm_eps;
  c.tie_word_embeddings = a.tie_word_embeddings;
  c.attention_bias = a.attention_bias;
  c.max_position_embeddings = a.max_position_embeddings;
  if (a.dtype == "bfloat16" || a.dtype == "bf16") {
    c.compute_dtype = torch::kBFloat16;
  } else if (a.dtype == "float32" || a.dtype == "fp32") {
    c.compute_dtype = torch::kFloat32;
  } else {
    throw Error{ExitCode::kInvalidConfig,
                "job config: key 'actor_rollout_ref.model.dtype' is '" + a.dtype + "'",
                "choose float32 or bfloat16"};
  }
  return c;
}

ComputeWeights ComputeWeights::cast(const std::vector<torch::Tensor>& params, torch::Dtype dtype) {
  ComputeWeights w;
  for (const auto& p : params) {
    if (!p.defined() || p.scalar_type() == dtype) continue;
    w.keys_.push_back(p.unsafeGetTensorImpl());
    w.copies_.push_back(p.to(dtype));  // under grad mode: one ToCopyBackward0 to p
  }
  return w;
}

ComputeWeights ComputeWeights::bind(const std::vector<torch::Tensor>& params, torch::Dtype dtype,
                                    std::vector<torch::Tensor> copies) {
  ComputeWeights w;
  for (const auto& p : params) {
    if (p.defined() && p.scalar_type() != dtype) w.keys_.push_back(p.unsafeGetTensorImpl());
  }
  TORCH_CHECK(w.keys_.size() == copies.size(), "ComputeWeights::bind: ", copies.size(), " copies for ",
              w.keys_.size(), " parameters to cast (did the parameters' dtypes or the LoRA switch change "
              "between the forward and its recompute?)");
  w.copies_ = std::move(copies);
  return w;
}

const torch::Tensor& ComputeWeights::operator[](const torch::Tensor& param) const {
  const auto* key = param.unsafeGetTensorImpl();
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] == key) return copies_[i];
  }
  return param;
}

void KvCache::select_rows(const torch::Tensor& rows) {
  for (auto& k : keys) k = k.index_select(0, rows);
  for (auto& v : values) v = v.index_select(0, rows);
}

DenseImpl::DenseImpl(int64_t in, int64_t out, bool has_bias, const torch::TensorOptions& options) {
  weight = register_parameter("weight", torch::empty({out, in}, options));
  if (has_bias) bias = register_parameter("bias", torch::empty({out}, options));
}

void DenseImpl::append_used(std::vector<torch::Tensor>& out) const {
  out.push_back(weight);
  if (bias.defined()) out.push_back(bias);
  if (lora_a.defined() && lora_enabled) {
    out.push_back(lora_a);
    out.push_back(lora_b);
  }
}

TokenEmbeddingImpl::TokenEmbeddingImpl(int64_t vocab, int64_t dim, const torch::TensorOptions& options) {
  weight = register_parameter("weight", torch::empty({vocab, dim}, options));
}

torch::Tensor TokenEmbeddingImpl::forward(const torch::Tensor& ids) {
  return tp != nullptr ? tp->embed(weight, ids) : torch::embedding(weight, ids);
}

RmsNormImpl::RmsNormImpl(int64_t dim, double eps, const torch::TensorOptions& options) : eps_(eps) {
  weight = register_parameter("weight", torch::empty({dim}, options));
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) {
  auto xf = x.to(torch::kFloat32);
  auto var = xf.pow(2).mean(-1, /*keepdim=*/true);
  return weight * (xf * torch::rsqrt(var + eps_));
}

// Registration order is the order init_weights draws in: q, k, v, o (then the norms, which draw
// nothing), as when these were torch::nn::Linear, so seeded weights stay what they were.
AttentionImpl::AttentionImpl(const ModelConfig& c, const torch::TensorOptions& o) : config_(c) {
  const int64_t d = c.head_dim();
  TORCH_CHECK(c.num_attention_heads % c.num_key_value_heads == 0, "num_attention_heads ", c.num_attention_heads,
              " is not a multiple of num_key_value_heads ", c.num_key_value_heads);
  q_proj = register_module("q_proj", Dense(c.hidden_size, c.num_attention_heads * d, c.attention_bias, o));
  k_proj = register_module("k_proj", Dense(c.hidden_size, c.num_key_value_heads * d, c.attention_bias, o));
  v_proj = register_module("v_proj", Dense(c.hidden_size, c.num_key_value_heads * d, c.attention_bias, o));
  o_proj = register_module("o_proj", Dense(c.num_attention_heads * d, c.hidden_size, c.attention_out_bias, o));
  if (c.qk_norm) {
    q_norm = register_module("q_norm", RmsNorm(d, c.rms_norm_eps, o));
    k_norm = register_module("k_norm", RmsNorm(d, c.rms_norm_eps, o));
  }
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                     const torch::Tensor& sin, const torch::Tensor& mask,
                                     torch::Tensor* cache_k, torch::Tensor* cache_v, const ComputeWeights& w) {
  const auto dt = config_.compute_dtype;
  const int64_t b = x.size(0), t = x.size(1), d = config_.head_dim();
  const int64_t h = config_.num_attention_heads, kvh = config_.num_key_value_heads;
  auto q = linear_in(x, q_proj, w, dt).view({b, t, h, d});
  auto k = linear_in(x, k_proj, w, dt).view({b, t, kvh, d});
  if (q_norm) {  // Qwen3: per head, before RoPE (fp32, as every norm here)
    q = q_norm->forward(q);
    k = k_norm->forward(k);
  }
  q = q.transpose(1, 2).to(torch::kFloat32);
  k = k.transpose(1, 2).to(torch::kFloat32);
  auto v = linear_in(x, v_proj, w, dt).view({b, t, kvh, d}).transpose(1, 2).to(torch::kFloat32);
  q = q * cos + rotate_half(q) * sin;
  k = k * cos + rotate_half(k) * sin;
  if (cache_k != nullptr) {
    if (cache_k->defined()) {
      k = torch::cat({*cache_k, k}, 2);
      v = torch::cat({*cache_v, v}, 2);
    }
    *cache_k = k;
    *cache_v = v;
  }
  auto out = attend(q, k, v, mask, dt).transpose(1, 2).reshape({b, t, h * d});
  return row_parallel_out(linear_in(out, o_proj, w, dt));
}

torch::Tensor AttentionImpl::forward_packed(const torch::Tensor& x, const torch::Tensor& cos,
                                            const torch::Tensor& sin, const CuSeqlens& cu_seqlens,
                                            const ComputeWeights& w) {
  const auto dt = config_.compute_dtype;
  const int64_t n = x.size(1), d = config_.head_dim();
  const int64_t h = config_.num_attention_heads, kvh = config_.num_key_value_heads;
  auto q = linear_in(x, q_proj, w, dt).view({1, n, h, d});
  auto k = linear_in(x, k_proj, w, dt).view({1, n, kvh, d});
  if (q_norm) {
    q = q_norm->forward(q);
    k = k_norm->forward(k);
  }
  q = q.transpose(1, 2).to(torch::kFloat32);
  k = k.transpose(1, 2).to(torch::kFloat32);
  auto v = linear_in(x, v_proj, w, dt).view({1, n, kvh, d}).transpose(1, 2).to(torch::kFloat32);
  q = q * cos + rotate_half(q) * sin;
  k = k * cos + rotate_half(k) * sin;
  if (auto out = flash_varlen(q, k, v, cu_seqlens); out.defined())
    return row_parallel_out(linear_in(out.reshape({1, n, h * d}), o_proj, w, dt));
  // One attention per sequence: the scores of a batch of B sequences of lengths L_i cost
  // sum L_i^2 instead of the padded B * T^2 (or the N^2 of one block-diagonal mask). Written
  // out like the padded path (no scaled_dot_product_attention: see the header) so both agree.
  std::map<int64_t, torch::Tensor> masks;  // by length: most batches repeat a few
  std::vector<torch::Tensor> outs;
  outs.reserve(cu_seqlens.size());
  for (size_t i = 0; i + 1 < cu_seqlens.size(); ++i) {
    const int64_t s = cu_seqlens[i], len = cu_seqlens[i + 1] - s;
    if (len <= 0) continue;
    auto& mask = masks[len];
    if (!mask.defined()) mask = causal_mask(len, config_.sliding_window, x.device());
    outs.push_back(attend(q.narrow(2, s, len), k.narrow(2, s, len), v.narrow(2, s, len), mask, dt));
  }
  auto out = torch::cat(outs, 2).transpose(1, 2).reshape({1, n, h * d});
  return row_parallel_out(linear_in(out, o_proj, w, dt));
}

torch::Tensor AttentionImpl::row_parallel_out(const torch::Tensor& y) const {
  auto out = y.to(torch::kFloat32);
  if (tp != nullptr) tp->all_reduce(out);
  return out;
}

// FlashAttention-2's variable-length kernel (at::_flash_attention_forward, with its backward) on
// the packed rows: one launch per layer for the whole batch, GQA without repeating k/v, causal
// inside each sequence and nothing across. Taken on CUDA with a half-precision compute dtype and
// libtorch >= 2.6 (the signature with window sizes); elsewhere undefined, and the caller runs
// the per-sequence loop. q [1,H,N,D], k/v [1,KVH,N,D] (fp32, rotated); returns [1,N,H,D] fp32.
torch::Tensor AttentionImpl::flash_varlen(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                          const CuSeqlens& cu_seqlens) const {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 6)
  const auto dt = config_.compute_dtype;
  const int64_t d = q.size(3);
  if (!q.is_cuda() || (dt != torch::kBFloat16 && dt != torch::kHalf) || d % 8 != 0 || d > 256 ||
      cu_seqlens.size() < 2)
    return {};
  int64_t max_len = 0;
  for (size_t i = 0; i + 1 < cu_seqlens.size(); ++i) max_len = std::max(max_len, cu_seqlens[i + 1] - cu_seqlens[i]);
  const auto cu = torch::tensor(cu_seqlens, torch::kLong).to(torch::kInt32).to(q.device(), /*non_blocking=*/true);
  auto rows = [dt](const torch::Tensor& t) { return t.squeeze(0).transpose(0, 1).to(dt).contiguous(); };  // [N,H,D]
  const auto sw = config_.sliding_window;
  auto res = at::_flash_attention_forward(rows(q), rows(k), rows(v), cu, cu, max_len, max_len, /*dropout_p=*/0.0,
                                          /*is_causal=*/true, /*return_debug_mask=*/false,
                                          1.0 / std::sqrt(static_cast<double>(d)),
                                          sw > 0 ? std::optional<int64_t>(sw - 1) : std::nullopt,
                                          sw > 0 ? std::optional<int64_t>(0) : std::nullopt);
  return std::get<0>(res).to(torch::kFloat32).unsqueeze(0);
#else
  (void)q, (void)k, (void)v, (void)cu_seqlens;
  return {};
#endif
}

MlpImpl::MlpImpl(const ModelConfig& c, const torch::TensorOptions& o) : dtype_(c.compute_dtype) {
  gate_proj = register_module("gate_proj", Dense(c.hidden_size, c.intermediate_size, c.mlp_bias, o));
  up_proj = register_module("up_proj", Dense(c.hidden_size, c.intermediate_size, c.mlp_bias, o));
  down_proj = register_module("down_proj", Dense(c.intermediate_size, c.hidden_size, c.mlp_bias, o));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x, const ComputeWeights& w) {
  auto g = linear_in(x, gate_proj, w, dtype_);
  auto u = linear_in(x, up_proj, w, dtype_);
  auto out = linear_in(torch::silu(g) * u, down_proj, w, dtype_).to(torch::kFloat32);
  if (tp != nullptr) tp->all_reduce(out);
  return out;
}

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& c, const torch::TensorOptions& o)
    : compute_dtype_(c.compute_dtype), weight_cast_(c.weight_cast) {
  self_attn = register_module("self_attn", Attention(c, o));
  mlp = register_module("mlp", Mlp(c, o));
  input_layernorm = register_module("input_layernorm", RmsNorm(c.hidden_size, c.rms_norm_eps, o));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RmsNorm(c.hidden_size, c.rms_norm_eps, o));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                        const torch::Tensor& sin, const torch::Tensor& mask,
                                        torch::Tensor* cache_k, torch::Tensor* cache_v, const ComputeWeights& w) {
  auto h = x + self_attn->forward(input_layernorm->forward(x), cos, sin, mask, cache_k, cache_v, w);
  return h + mlp->forward(post_attention_layernorm->forward(h), w);
}

torch::Tensor DecoderLayerImpl::forward_packed(const torch::Tensor& x, const torch::Tensor& cos,
                                               const torch::Tensor& sin, const CuSeqlens& cu_seqlens,
                                               const ComputeWeights& w) {
  auto h = x + self_attn->forward_packed(input_layernorm->forward(x), cos, sin, cu_seqlens, w);
  return h + mlp->forward(post_attention_layernorm->forward(h), w);
}

torch::Tensor DecoderLayerImpl::forward_any(const torch::Tensor& x, const torch::Tensor& cos,
                                            const torch::Tensor& sin, const torch::Tensor& mask,
                                            const CuSeqlens& cu_seqlens, const ComputeWeights& w) {
  if (cu_seqlens.empty()) return forward(x, cos, sin, mask, nullptr, nullptr, w);
  return forward_packed(x, cos, sin, cu_seqlens, w);
}

// The tensors the projections compute with in the compute dtype. The norms are not among them:
// they compute in fp32 and read their (fp32) parameters directly.
std::vector<torch::Tensor> DecoderLayerImpl::projection_parameters() const {
  std::vector<torch::Tensor> out;
  for (const Dense* d : {&self_attn->q_proj, &self_attn->k_proj, &self_attn->v_proj, &self_attn->o_proj,
                         &mlp->gate_proj, &mlp->up_proj, &mlp->down_proj}) {
    (*d)->append_used(out);
  }
  return out;
}

ComputeWeights DecoderLayerImpl::cast_weights() const {
  if (weight_cast_ == WeightCast::kPerUse) return {};
  return ComputeWeights::cast(projection_parameters(), compute_dtype_);
}

ComputeWeights DecoderLayerImpl::bind_weights(std::vector<torch::Tensor> copies) const {
  if (weight_cast_ == WeightCast::kPerUse) return {};
  return ComputeWeights::bind(projection_parameters(), compute_dtype_, std::move(copies));
}

namespace {

// enable_gradient_checkpointing for one decoder layer: libtorch C++ has no
// torch.utils.checkpoint, so this is its reentrant variant. Forward runs the layer without a
// graph and keeps only its inputs; backward runs it again with a graph from the saved input
// and backpropagates through that, which accumulates the parameters' gradients and yields the
// input's. The layer is deterministic (no dropout, no RNG), so the recomputation is the same.
// `copies`: the forward's compute-dtype weights (ComputeWeights), cast outside this segment and
// inputs of it, so that the recompute reads them instead of casting again and their gradients
// go back through the forward's one cast per parameter. Parameters without a copy (norms, fp32
// compute) accumulate their gradients in the recompute's backward, as before.
struct CheckpointedLayer : public torch::autograd::Function<CheckpointedLayer> {
  static constexpr size_t kCopiesAt = 4;  // x, cos, sin, mask, then the copies

  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& cos, const torch::Tensor& sin, const torch::Tensor& mask,
                               at::TensorList copies, DecoderLayerImpl* layer, const CuSeqlens& cu_seqlens) {
    std::vector<torch::Tensor> saved{x, cos, sin, mask};
    saved.insert(saved.end(), copies.begin(), copies.end());
    ctx->save_for_backward(saved);
    // saved_data holds IValues only; the layer outlives the graph (the module owns it), so
    // its address is kept as an integer.
    ctx->saved_data["layer"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(layer));
    ctx->saved_data["cu_seqlens"] = c10::IValue(cu_seqlens);
    torch::NoGradGuard no_grad;
    return layer->forward_any(x, cos, sin, mask, cu_seqlens, layer->bind_weights(copies.vec()));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    auto* layer = reinterpret_cast<DecoderLayerImpl*>(static_cast<intptr_t>(ctx->saved_data["layer"].toInt()));
    const CuSeqlens cu_seqlens = ctx->saved_data["cu_seqlens"].toIntVector();
    auto x = saved[0].detach().requires_grad_(true);
    // The copies as leaves of the recompute: their gradients are this node's outputs.
    std::vector<torch::Tensor> copies;
    for (size_t i = kCopiesAt; i < saved.size(); ++i)
      copies.push_back(saved[i].detach().requires_grad_(ctx->needs_input_grad(i)));
    torch::Tensor y;
    {
      torch::AutoGradMode grad(true);
      y = layer->forward_any(x, saved[1], saved[2], saved[3], cu_seqlens, layer->bind_weights(copies));
    }
    torch::autograd::backward({y}, {grad_out[0]});
    // One gradient per argument of forward: x's and the copies'.
    torch::autograd::variable_list grads{x.grad(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    for (const auto& c : copies) grads.push_back(c.grad());
    grads.resize(grads.size() + 2);  // layer, cu_seqlens
    return grads;
  }
};

}  // namespace

BackboneImpl::BackboneImpl(const ModelConfig& c, const torch::TensorOptions& o) : config_(c) {
  embed_tokens = register_module("embed_tokens", TokenEmbedding(c.vocab_size, c.hidden_size, o));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(DecoderLayer(c, o));
  norm = register_module("norm", RmsNorm(c.hidden_size, c.rms_norm_eps, o));
}

std::pair<torch::Tensor, torch::Tensor> BackboneImpl::rope(const torch::Tensor& position_ids) {
  const auto device = position_ids.device();
  if (!inv_freq_.defined() || inv_freq_.device() != device) inv_freq_ = rope_inv_freq(config_).to(device);
  auto freqs = position_ids.to(torch::kFloat32).unsqueeze(-1) * inv_freq_;  // [B,t,D/2]
  auto emb = torch::cat({freqs, freqs}, -1).unsqueeze(1);                    // [B,1,t,D]
  return {emb.cos(), emb.sin()};
}

torch::Tensor BackboneImpl::run_layers(torch::Tensor h, const torch::Tensor& cos, const torch::Tensor& sin,
                                       const torch::Tensor& mask, const CuSeqlens& cu_seqlens, KvCache* cache) {
  const bool checkpoint = gradient_checkpointing_ && cache == nullptr && torch::GradMode::is_enabled();
  // A custom Function records each tensor argument's device, so an undefined one (the packed
  // path has no mask) is passed as an empty tensor; forward_any ignores it there.
  const torch::Tensor mask_arg = mask.defined() ? mask : torch::empty({0}, cos.options());
  for (size_t i = 0; i < layers->size(); ++i) {
    auto& layer = layers->at<DecoderLayerImpl>(i);
    if (layer_runner_ != nullptr && cache == nullptr) {
      h = layer_runner_->run(i, layer, h, cos, sin, mask_arg, cu_seqlens, checkpoint);  // it casts per gather
      continue;
    }
    // This forward's copies of the layer's weights, cast here, outside the checkpointed
    // segment, so that its recompute reads them too (one cast per parameter per forward).
    const ComputeWeights w = layer.cast_weights();
    if (checkpoint) {
      // A frozen embedding (LoRA) gives an input without a gradient; a checkpointed layer whose
      // inputs need none would get no backward, and its adapters no gradient (HF's
      // enable_input_require_grads does the same).
      if (!h.requires_grad()) h = h.detach().requires_grad_(true);
      h = CheckpointedLayer::apply(h, cos, sin, mask_arg, at::TensorList(w.copies()), &layer, cu_seqlens);
    } else if (!cu_seqlens.empty()) {
      h = layer.forward_packed(h, cos, sin, cu_seqlens, w);
    } else {
      h = layer.forward(h, cos, sin, mask, cache ? &cache->keys[i] : nullptr, cache ? &cache->values[i] : nullptr, w);
    }
  }
  return norm->forward(h);
}

torch::Tensor BackboneImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                    const torch::Tensor& position_ids, KvCache* cache) {
  const auto device = input_ids.device();
  const int64_t b = input_ids.size(0), t = input_ids.size(1);
  const int64_t past = cache ? cache->length() : 0;
  const int64_t total = past + t;
  TORCH_CHECK(attention_mask.size(1) == total, "attention_mask covers ", attention_mask.size(1),
              " keys, expected ", total);
  auto [cos, sin] = rope(position_ids);

  // Query j sits at absolute position past + j and may see key i <= past + j that is real.
  auto q_pos = torch::arange(past, total, torch::TensorOptions().dtype(torch::kLong).device(device));
  auto k_pos = torch::arange(0, total, torch::TensorOptions().dtype(torch::kLong).device(device));
  auto causal = k_pos.unsqueeze(0) <= q_pos.unsqueeze(1);                           // [t,T]
  if (config_.sliding_window > 0) {  // Mistral: keys more than window-1 slots back are out of sight
    causal = causal & (q_pos.unsqueeze(1) - k_pos.unsqueeze(0) < config_.sliding_window);
  }
  auto allowed = causal.unsqueeze(0) & attention_mask.to(torch::kBool).unsqueeze(1);  // [B,t,T]
  auto mask = torch::zeros({b, 1, t, total}, torch::TensorOptions().dtype(torch::kFloat32).device(device))
                  .masked_fill(allowed.logical_not().unsqueeze(1), kMaskValue);

  auto h = embed_tokens->forward(input_ids);
  if (cache != nullptr && cache->keys.size() != layers->size()) {
    cache->keys.assign(layers->size(), torch::Tensor());
    cache->values.assign(layers->size(), torch::Tensor());
  }
  return run_layers(h, cos, sin, mask, CuSeqlens{}, cache);
}

torch::Tensor BackboneImpl::forward_packed(const torch::Tensor& input_ids, const torch::Tensor& position_ids,
                                           const CuSeqlens& cu_seqlens) {
  TORCH_CHECK(input_ids.size(0) == 1 && !cu_seqlens.empty() && cu_seqlens.back() == input_ids.size(1),
              "packed input [1, N] with cu_seqlens ending at N expected");
  auto [cos, sin] = rope(position_ids);
  return run_layers(embed_tokens->forward(input_ids), cos, sin, torch::Tensor(), cu_seqlens, nullptr);
}

torch::Tensor BackboneImpl::forward_unpadded(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                             const torch::Tensor& position_ids) {
  const int64_t b = input_ids.size(0), t = input_ids.size(1);
  // verl's unpad_input / pad_input: the real tokens in row order, then back to [B,t] slots.
  const auto indices = attention_mask.reshape({-1}).to(torch::kBool).nonzero().squeeze(-1);
  const auto lengths = attention_mask.to(torch::kLong).sum(1).to(torch::kCPU).contiguous();
  const int64_t* len = lengths.data_ptr<int64_t>();
  CuSeqlens cu_seqlens(static_cast<size_t>(b) + 1, 0);
  for (int64_t i = 0; i < b; ++i) cu_seqlens[i + 1] = cu_seqlens[i] + len[i];
  auto ids = input_ids.reshape({-1}).index_select(0, indices).unsqueeze(0);
  auto pos = position_ids.reshape({-1}).index_select(0, indices).unsqueeze(0);
  auto hidden = forward_packed(ids, pos, cu_seqlens).squeeze(0);  // [N,H]
  return torch::zeros({b * t, hidden.size(-1)}, hidden.options()).index_copy(0, indices, hidden).view({b, t, -1});
}

torch::Tensor backbone_hidden(Backbone& backbone, const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                              const torch::Tensor& position_ids, SequenceLayout layout) {
  if (layout == SequenceLayout::kRemovePadding) return backbone->forward_unpadded(input_ids, attention_mask, position_ids);
  return backbone->forward(input_ids, attention_mask, position_ids);
}

CausalLmImpl::CausalLmImpl(const ModelConfig& c, const torch::TensorOptions& o) : config_(c) {
  model = register_module("model", Backbone(c, o));
  if (!c.tie_word_embeddings) {
    lm_head = register_module("lm_head", Dense(c.hidden_size, c.vocab_size, /*bias=*/false, o));
  }
}

torch::Tensor CausalLmImpl::output_embedding() const {
  return config_.tie_word_embeddings ? model->embed_tokens->weight : lm_head->weight;
}

torch::Tensor CausalLmImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                    const torch::Tensor& position_ids, KvCache* cache) {
  return logits(model->forward(input_ids, attention_mask, position_ids, cache));
}

torch::Tensor CausalLmImpl::head_weight() const {
  const auto w = output_embedding();
  if (config_.weight_cast == WeightCast::kPerUse) return w;
  const auto cast = ComputeWeights::cast({w}, config_.compute_dtype);
  return cast[w];
}

torch::Tensor CausalLmImpl::logits(const torch::Tensor& hidden, const torch::Tensor& head_weight) const {
  auto z = project(hidden, head_weight, torch::Tensor(), config_.compute_dtype).to(torch::kFloat32);
  return tp != nullptr ? tp->gather_vocab(z) : z;
}

CriticModelImpl::CriticModelImpl(const ModelConfig& c, const torch::TensorOptions& o, ValueHeadBias bias) {
  model = register_module("model", Backbone(c, o));
  score = register_module("score", Dense(c.hidden_size, 1, bias == ValueHeadBias::kLearned, o));
}

torch::Tensor CriticModelImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                       const torch::Tensor& position_ids, SequenceLayout layout) {
  // The value head stays fp32 (torch::linear, as the nn::Linear it replaced): values feed the
  // GAE in fp32 whatever the compute dtype.
  auto h = backbone_hidden(model, input_ids, attention_mask, position_ids, layout);
  const auto w = score->weight.to(torch::kFloat32);
  const auto b = score->bias.defined() ? score->bias.to(torch::kFloat32) : torch::Tensor();
  return torch::linear(h, w, b).squeeze(-1);
}

void init_weights(torch::nn::Module& module, double std, uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (auto& item : module.named_parameters(/*recurse=*/true)) {
    auto& p = item.value();
    const std::string& name = item.key();
    torch::Tensor v;
    if (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0) {
      v = torch::zeros(p.sizes());
    } else if (p.dim() == 1) {  // RMSNorm weights
      v = torch::ones(p.sizes());
    } else {
      v = torch::empty(p.sizes()).normal_(0.0, std, gen);
    }
    p.copy_(v.to(p.device()));
  }
}

namespace {

torch::TensorOptions param_options(const torch::Device& device, torch::Dtype dtype) {
  return torch::TensorOptions().device(device).dtype(dtype);
}

}  // namespace

CausalLm make_causal_lm(const ModelConfig& config, uint64_t seed) {
  return make_causal_lm(config, seed, torch::kCPU, torch::kFloat32);
}

CausalLm make_causal_lm(const ModelConfig& config, uint64_t seed, const torch::Device& device,
                        torch::Dtype param_dtype) {
  CausalLm m(config, param_options(device, param_dtype));
  init_weights(*m, config.initializer_range, seed);
  return m;
}

CriticModel make_critic(const ModelConfig& config, uint64_t seed) {
  return make_critic(config, seed, torch::kCPU, torch::kFloat32);
}

CriticModel make_critic(const ModelConfig& config, uint64_t seed, const torch::Device& device,
                        torch::Dtype param_dtype) {
  CriticModel m(config, param_options(device, param_dtype));
  init_weights(*m, config.initializer_range, seed);
  return m;
}

torch::Tensor rope_inv_freq(const ModelConfig& c) {
  const int64_t d = c.head_dim();
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  auto idx = torch::arange(0, d, 2, f64) / static_cast<double>(d);
  auto inv_freq = torch::pow(c.rope_theta, -idx);
  const RopeScaling& r = c.rope_scaling;
  switch (r.type) {
    case RopeScalingType::kNone:
      break;
    case RopeScalingType::kLinear:
      inv_freq = inv_freq / r.factor;
      break;
    case RopeScalingType::kLlama3: {
      // HF's _compute_llama3_parameters: wavelengths longer than the original context / low
      // factor are slowed by `factor`, shorter than original / high factor kept, and those in
      // between interpolated by where the original context falls in them.
      const double old_len = static_cast<double>(r.original_max_position_embeddings);
      const double low_freq_wavelen = old_len / r.low_freq_factor;
      const double high_freq_wavelen = old_len / r.high_freq_factor;
      auto wavelen = 2 * M_PI / inv_freq;
      auto scaled = torch::where(wavelen > low_freq_wavelen, inv_freq / r.factor, inv_freq);
      auto smooth = (old_len / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
      auto smoothed = (1 - smooth) * scaled / r.factor + smooth * scaled;
      auto medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen);
      inv_freq = torch::where(medium, smoothed, scaled);
      break;
    }
  }
  return inv_freq.to(torch::kFloat32);
}

int64_t copy_shared_parameters(const torch::nn::Module& src, torch::nn::Module& dst,
                               const std::string& src_prefix, const std::string& dst_prefix) {
  torch::NoGradGuard no_grad;
  auto src_params = src.named_parameters(true);
  int64_t copied = 0;
  for (auto& item : dst.named_parameters(true)) {
    const std::string& name = item.key();
    if (name.compare(0, dst_prefix.size(), dst_prefix) != 0) continue;
    const std::string src_name = src_prefix + name.substr(dst_prefix.size());
    const torch::Tensor* s = src_params.find(src_name);
    if (s == nullptr || !s->sizes().equals(item.value().sizes())) continue;
    item.value().copy_(*s);  // converts device and dtype in one step
    ++copied;
  }
  return copied;
}

CausalLm make_reference(const CausalLm& policy, const torch::Device& device) {
  return make_reference(policy, device, policy->parameters().front().scalar_type());
}

CausalLm make_reference(const CausalLm& policy, const torch::Device& device, torch::Dtype param_dtype) {
  CausalLm ref(policy->config(), param_options(device, param_dtype));
  copy_shared_parameters(*policy, *ref);
  for (auto& p : ref->parameters()) p.set_requires_grad(false);
  ref->eval();
  return ref;
}

torch::Tensor position_ids_from_mask(const torch::Tensor& attention_mask) {
  return (attention_mask.to(torch::kLong).cumsum(1) - 1).clamp_min(0);
}

void limit_device_memory(const torch::Device& device, double fraction) {
#if VERL_TORCH_HAS_CUDA
  if (device.is_cuda()) {
    // The caching allocator sets a device up on its first allocation there; a limit set before
    // that throws "Allocator not initialized for device" (libtorch 2.x, seen on the H200).
    (void)torch::empty({1}, torch::TensorOptions().device(device));
    const int index = device.has_index() ? device.index() : static_cast<int>(c10::cuda::current_device());
    c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, index);
  }
#else
  (void)device;
  (void)fraction;
#endif
}

torch::Device parse_device(const std::string& spec, const std::string& key) {
  if (spec == "auto") return torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  if (spec == "cpu") return torch::Device(torch::kCPU);
  if (spec.rfind("cuda", 0) == 0) {
    if (!torch::cuda::is_available()) {
#if VERL_TORCH_HAS_CUDA
      throw Error{ExitCode::kFailure, "job config: key '" + key + "' is '" + spec +
                                          "' but this machine shows no CUDA device",
                  "check nvidia-smi and CUDA_VISIBLE_DEVICES, or use " + key + "=auto or cpu"};
#else
      throw Error{ExitCode::kNotCompiledIn, "job config: key '" + key + "' is '" + spec +
                                                "' but CUDA is not compiled into this build's libtorch",
                  "use " + key + "=auto or cpu, or build against a CUDA libtorch"};
#endif
    }
    int64_t index = 0;
    if (spec.size() > 5 && spec[4] == ':') index = std::stoll(spec.substr(5));
    if (index < 0 || index >= static_cast<int64_t>(torch::cuda::device_count())) {
      throw Error{ExitCode::kInvalidConfig, "job config: key '" + key + "': no device " + spec, ""};
    }
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  throw Error{ExitCode::kInvalidConfig, "job config: key '" + key + "' is '" + spec + "'",
              "choose auto, cpu, cuda or cuda:N"};
}

namespace {

// The projections add_lora considers, by their own names, and whether a layer's is a target.
const std::vector<std::string>& lora_candidates() {
  static const std::vector<std::string> names = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  return names;
}

bool lora_selected(const std::string& name, const LoraSpec& spec) {
  auto in = [&](const std::vector<std::string>& list) { return std::find(list.begin(), list.end(), name) != list.end(); };
  const bool all = std::find(spec.target_modules.begin(), spec.target_modules.end(), "all-linear") != spec.target_modules.end();
  return (all || in(spec.target_modules)) && !in(spec.exclude_modules);
}

}  // namespace

int64_t add_lora(torch::nn::Module& model, const LoraSpec& spec, uint64_t seed) {
  for (const auto& t : spec.target_modules) {
    const auto& c = lora_candidates();
    if (t != "all-linear" && std::find(c.begin(), c.end(), t) == c.end()) {
      throw Error{ExitCode::kInvalidConfig,
                  "actor_rollout_ref.model.target_modules: '" + t + "' is not a projection of the decoder layers",
                  "use all-linear or names among q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj"};
    }
  }
  auto gen = at::detail::createCPUGenerator(seed);
  torch::NoGradGuard no_grad;
  for (auto& p : model.parameters()) p.set_requires_grad(false);
  int64_t adapted = 0;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    auto* dense = dynamic_cast<DenseImpl*>(item.value().get());
    if (dense == nullptr) continue;
    const std::string& path = item.key();
    if (path.find(".layers.") == std::string::npos) continue;  // not the heads
    const std::string own = path.substr(path.rfind('.') + 1);
    if (!lora_selected(own, spec)) continue;
    const int64_t out = dense->weight.size(0), in = dense->weight.size(1);
    const auto opts = dense->weight.options();
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    auto a = torch::empty({spec.rank, in}, torch::kFloat32).uniform_(-bound, bound, gen);
    auto lora_a = std::make_shared<torch::nn::Module>();
    auto lora_b = std::make_shared<torch::nn::Module>();
    dense->lora_a = lora_a->register_parameter("weight", a.to(opts));
    dense->lora_b = lora_b->register_parameter("weight", torch::zeros({out, spec.rank}, opts));
    dense->register_module("lora_A", lora_a);
    dense->register_module("lora_B", lora_b);
    dense->lora_scaling = spec.alpha / static_cast<double>(spec.rank);
    ++adapted;
  }
  if (adapted == 0) {
    throw Error{ExitCode::kInvalidConfig,
                "actor_rollout_ref.model.target_modules: no layer of the model is selected (after exclude_modules)",
                "use all-linear, or name projections the model has"};
  }
  return adapted;
}

void set_lora_enabled(torch::nn::Module& model, bool enabled) {
  for (const auto& m : model.modules(/*include_self=*/false)) {
    if (auto* dense = dynamic_cast<DenseImpl*>(m.get())) dense->lora_enabled = enabled;
  }
}

std::vector<std::pair<std::string, torch::Tensor>> merged_lora_parameters(
    const torch::nn::Module& model, const std::function<bool(const std::string& name)>& keep) {
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> merged;  // weight name -> W + B A s
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    const auto* dense = dynamic_cast<const DenseImpl*>(item.value().get());
    if (dense == nullptr || !dense->lora_a.defined()) continue;
    if (keep && !keep(item.key() + ".weight")) continue;
    const auto w = dense->weight.detach();
    merged[item.key() + ".weight"] =
        (w.to(torch::kFloat32) + torch::matmul(dense->lora_b.to(torch::kFloat32), dense->lora_a.to(torch::kFloat32)) *
                                     dense->lora_scaling)
            .to(w.scalar_type());
  }
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : model.named_parameters(/*recurse=*/true)) {
    const std::string& name = p.key();
    if (name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos) continue;
    if (keep && !keep(name)) continue;
    const auto it = merged.find(name);
    out.emplace_back(name, it != merged.end() ? it->second : p.value());
  }
  return out;
}

int64_t count_trainable(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.requires_grad() ? p.numel() : 0;
  return n;
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace verl::trainer

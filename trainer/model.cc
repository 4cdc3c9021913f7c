#if VERL_TORCH_HAS_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif
#include "trainer/model.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <mutex>
#include <optional>

#include "common/error.h"

namespace verl::trainer {
namespace {

// Large enough to zero a softmax weight in fp32, finite so fully masked rows stay finite.
constexpr double kMaskValue = -1e9;

// x @ w^T (+ b) in the compute dtype. On CPU in fp32 it runs as a 1x1 convolution: Debian's
// libtorch links the reference (netlib) BLAS, whose sgemm is ~12x slower forward+backward
// than oneDNN's convolution at our shapes (measured: [4608,64]x[64,176] fwd+bwd 50 ms vs 4 ms);
// the math is the same up to summation order. Elsewhere (CUDA, bf16) it is a plain linear.
torch::Tensor project(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                      torch::Dtype dtype) {
  if (dtype != torch::kFloat32) {
    return torch::linear(x.to(dtype), w.to(dtype), b.defined() ? b.to(dtype) : torch::Tensor());
  }
  if (!x.device().is_cpu()) return torch::linear(x, w, b);
  auto out_shape = x.sizes().vec();
  out_shape.back() = w.size(0);
  const int64_t rows = x.numel() / x.size(-1);
  auto y = torch::conv2d(x.reshape({rows, x.size(-1), 1, 1}), w.view({w.size(0), w.size(1), 1, 1}),
                         b.defined() ? b : torch::Tensor());
  return y.view(out_shape);
}

torch::Tensor linear_in(const torch::Tensor& x, torch::nn::Linear layer, torch::Dtype dtype) {
  return project(x, layer->weight, layer->bias, dtype);
}

torch::Tensor rotate_half(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half);
  auto x2 = x.narrow(-1, half, half);
  return torch::cat({-x2, x1}, -1);
}

torch::nn::Linear make_linear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

}  // namespace

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

void KvCache::select_rows(const torch::Tensor& rows) {
  for (auto& k : keys) k = k.index_select(0, rows);
  for (auto& v : values) v = v.index_select(0, rows);
}

RmsNormImpl::RmsNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) {
  auto xf = x.to(torch::kFloat32);
  auto var = xf.pow(2).mean(-1, /*keepdim=*/true);
  return weight * (xf * torch::rsqrt(var + eps_));
}

AttentionImpl::AttentionImpl(const ModelConfig& c) : config_(c) {
  const int64_t d = c.head_dim();
  q_proj = register_module("q_proj", make_linear(c.hidden_size, c.num_attention_heads * d, c.attention_bias));
  k_proj = register_module("k_proj", make_linear(c.hidden_size, c.num_key_value_heads * d, c.attention_bias));
  v_proj = register_module("v_proj", make_linear(c.hidden_size, c.num_key_value_heads * d, c.attention_bias));
  o_proj = register_module("o_proj", make_linear(c.num_attention_heads * d, c.hidden_size, false));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                     const torch::Tensor& sin, const torch::Tensor& mask,
                                     torch::Tensor* cache_k, torch::Tensor* cache_v) {
  const auto dt = config_.compute_dtype;
  const int64_t b = x.size(0), t = x.size(1), d = config_.head_dim();
  const int64_t h = config_.num_attention_heads, kvh = config_.num_key_value_heads;
  auto q = linear_in(x, q_proj, dt).view({b, t, h, d}).transpose(1, 2).to(torch::kFloat32);
  auto k = linear_in(x, k_proj, dt).view({b, t, kvh, d}).transpose(1, 2).to(torch::kFloat32);
  auto v = linear_in(x, v_proj, dt).view({b, t, kvh, d}).transpose(1, 2).to(torch::kFloat32);
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
  const int64_t total = k.size(2);
  if (kvh != h) {  // grouped-query attention: each kv head serves h/kvh query heads (HF repeat_kv)
    k = k.unsqueeze(2).expand({b, kvh, h / kvh, total, d}).reshape({b, h, total, d});
    v = v.unsqueeze(2).expand({b, kvh, h / kvh, total, d}).reshape({b, h, total, d});
  }
  auto scores = torch::matmul(q.to(dt), k.transpose(2, 3).to(dt)).to(torch::kFloat32) /
                std::sqrt(static_cast<double>(d));
  auto probs = torch::softmax(scores + mask, -1);
  auto out = torch::matmul(probs.to(dt), v.to(dt)).to(torch::kFloat32);
  out = out.transpose(1, 2).reshape({b, t, h * d});
  return linear_in(out, o_proj, dt).to(torch::kFloat32);
}

MlpImpl::MlpImpl(const ModelConfig& c) : dtype_(c.compute_dtype) {
  gate_proj = register_module("gate_proj", make_linear(c.hidden_size, c.intermediate_size, false));
  up_proj = register_module("up_proj", make_linear(c.hidden_size, c.intermediate_size, false));
  down_proj = register_module("down_proj", make_linear(c.intermediate_size, c.hidden_size, false));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  auto g = linear_in(x, gate_proj, dtype_);
  auto u = linear_in(x, up_proj, dtype_);
  return linear_in(torch::silu(g) * u, down_proj, dtype_).to(torch::kFloat32);
}

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& c) {
  self_attn = register_module("self_attn", Attention(c));
  mlp = register_module("mlp", Mlp(c));
  input_layernorm = register_module("input_layernorm", RmsNorm(c.hidden_size, c.rms_norm_eps));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RmsNorm(c.hidden_size, c.rms_norm_eps));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                        const torch::Tensor& sin, const torch::Tensor& mask,
                                        torch::Tensor* cache_k, torch::Tensor* cache_v) {
  auto h = x + self_attn->forward(input_layernorm->forward(x), cos, sin, mask, cache_k, cache_v);
  return h + mlp->forward(post_attention_layernorm->forward(h));
}

BackboneImpl::BackboneImpl(const ModelConfig& c) : config_(c) {
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(c.vocab_size, c.hidden_size));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(DecoderLayer(c));
  norm = register_module("norm", RmsNorm(c.hidden_size, c.rms_norm_eps));
}

torch::Tensor BackboneImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                    const torch::Tensor& position_ids, KvCache* cache) {
  const auto device = input_ids.device();
  const int64_t b = input_ids.size(0), t = input_ids.size(1);
  const int64_t past = cache ? cache->length() : 0;
  const int64_t total = past + t;
  TORCH_CHECK(attention_mask.size(1) == total, "attention_mask covers ", attention_mask.size(1),
              " keys, expected ", total);
  const int64_t d = config_.head_dim();
  if (!inv_freq_.defined() || inv_freq_.device() != device) {
    auto idx = torch::arange(0, d, 2, torch::TensorOptions().dtype(torch::kFloat64)) / static_cast<double>(d);
    inv_freq_ = torch::pow(config_.rope_theta, -idx).to(torch::kFloat32).to(device);
  }
  auto freqs = position_ids.to(torch::kFloat32).unsqueeze(-1) * inv_freq_;  // [B,t,D/2]
  auto emb = torch::cat({freqs, freqs}, -1).unsqueeze(1);                    // [B,1,t,D]
  auto cos = emb.cos(), sin = emb.sin();

  // Query j sits at absolute position past + j and may see key i <= past + j that is real.
  auto q_pos = torch::arange(past, total, torch::TensorOptions().dtype(torch::kLong).device(device));
  auto k_pos = torch::arange(0, total, torch::TensorOptions().dtype(torch::kLong).device(device));
  auto causal = k_pos.unsqueeze(0) <= q_pos.unsqueeze(1);                           // [t,T]
  auto allowed = causal.unsqueeze(0) & attention_mask.to(torch::kBool).unsqueeze(1);  // [B,t,T]
  auto mask = torch::zeros({b, 1, t, total}, torch::TensorOptions().dtype(torch::kFloat32).device(device))
                  .masked_fill(allowed.logical_not().unsqueeze(1), kMaskValue);

  auto h = embed_tokens->forward(input_ids);
  if (cache != nullptr && cache->keys.size() != layers->size()) {
    cache->keys.assign(layers->size(), torch::Tensor());
    cache->values.assign(layers->size(), torch::Tensor());
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    h = layers->at<DecoderLayerImpl>(i).forward(h, cos, sin, mask,
                                                cache ? &cache->keys[i] : nullptr,
                                                cache ? &cache->values[i] : nullptr);
  }
  return norm->forward(h);
}

CausalLmImpl::CausalLmImpl(const ModelConfig& c) : config_(c) {
  model = register_module("model", Backbone(c));
  if (!c.tie_word_embeddings) {
    lm_head = register_module("lm_head", make_linear(c.hidden_size, c.vocab_size, false));
  }
}

torch::Tensor CausalLmImpl::output_embedding() const {
  return config_.tie_word_embeddings ? model->embed_tokens->weight : lm_head->weight;
}

torch::Tensor CausalLmImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                    const torch::Tensor& position_ids, KvCache* cache) {
  return logits(model->forward(input_ids, attention_mask, position_ids, cache));
}

torch::Tensor CausalLmImpl::logits(const torch::Tensor& hidden) const {
  return project(hidden, output_embedding(), torch::Tensor(), config_.compute_dtype).to(torch::kFloat32);
}

CriticModelImpl::CriticModelImpl(const ModelConfig& c) {
  model = register_module("model", Backbone(c));
  score = register_module("score", make_linear(c.hidden_size, 1, false));
}

torch::Tensor CriticModelImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                       const torch::Tensor& position_ids) {
  return score->forward(model->forward(input_ids, attention_mask, position_ids)).squeeze(-1);
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

// Saves the default CPU generator's state and puts it back when the scope ends.
class DefaultRngRestore {
 public:
  DefaultRngRestore() : gen_(at::detail::getDefaultCPUGenerator()) {
    std::lock_guard<std::mutex> lock(gen_.mutex());
    state_ = gen_.get_state();
  }
  ~DefaultRngRestore() {
    std::lock_guard<std::mutex> lock(gen_.mutex());
    gen_.set_state(state_);
  }

 private:
  at::Generator gen_;
  torch::Tensor state_;
};

}  // namespace

CausalLm make_causal_lm(const ModelConfig& config, uint64_t seed) {
  std::optional<CausalLm> m;
  {
    DefaultRngRestore restore;
    m.emplace(config);
  }
  init_weights(**m, config.initializer_range, seed);
  return *m;
}

CriticModel make_critic(const ModelConfig& config, uint64_t seed) {
  std::optional<CriticModel> m;
  {
    DefaultRngRestore restore;
    m.emplace(config);
  }
  init_weights(**m, config.initializer_range, seed);
  return *m;
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
    item.value().copy_(s->to(item.value().device()));
    ++copied;
  }
  return copied;
}

CausalLm make_reference(const CausalLm& policy, const torch::Device& device) {
  std::optional<CausalLm> made;
  {
    DefaultRngRestore restore;
    made.emplace(policy->config());
  }
  CausalLm ref = *made;
  ref->to(device);
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

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace verl::trainer

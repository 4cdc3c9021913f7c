#include <torch/version.h>
#if VERL_TORCH_HAS_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif
#include "trainer/slot_rollout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "common/error.h"
#include "common/log.h"
#include "trainer/decode_ops.h"
#include "trainer/log_probs.h"
#include "trainer/native_rollout.h"

namespace verl::trainer {
namespace {

constexpr double kMaskValue = -1e9;  // as model.cc: zeroes a softmax weight, keeps rows finite

torch::Tensor long_tensor(const std::vector<int64_t>& v, const torch::Device& device) {
  return torch::tensor(v, torch::kLong).to(device);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// libtorch >= 2.5 on CUDA: the fused RMSNorm and scaled_dot_product_attention kernels (one
// launch each instead of half a dozen); elsewhere the written-out forms, as model.cc.
#if VERL_TORCH_HAS_CUDA && (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5))
#define VERL_SLOT_FUSED_KERNELS 1
constexpr bool kFusedKernels = true;
#else
#define VERL_SLOT_FUSED_KERNELS 0
constexpr bool kFusedKernels = false;
#endif

// Re-homes `parts` (parameters [r_i, ...] with equal trailing shapes) into one tensor [sum r_i,
// ...], each part becoming a view of its rows: one matmul then computes all of them, and copying
// into a part (load_weights) fills the fused tensor. Undefined parts (absent biases): undefined.
torch::Tensor fuse_rows(std::vector<torch::Tensor> parts) {
  if (!parts[0].defined()) return {};
  int64_t rows = 0;
  for (const auto& p : parts) rows += p.size(0);
  auto shape = parts[0].sizes().vec();
  shape[0] = rows;
  auto fused = torch::empty(shape, parts[0].options());
  int64_t off = 0;
  for (auto& p : parts) {
    auto view = fused.narrow(0, off, p.size(0));
    view.copy_(p);
    p.set_(view);
    off += view.size(0);
  }
  return fused;
}


}  // namespace

SlotRolloutOptions SlotRolloutOptions::from(const RolloutConfig& r) {
  SlotRolloutOptions o;
  o.gpu_memory_utilization = r.gpu_memory_utilization;
  o.max_num_seqs = r.max_num_seqs;
  o.max_num_batched_tokens = r.max_num_batched_tokens;
  o.enforce_eager = r.enforce_eager;
  o.free_cache_engine = r.free_cache_engine;
  o.cudagraph_capture_sizes = r.cudagraph_capture_sizes;
  return o;
}

// CUDA graphs of decode_step, one per (bucket, sampler), sharing one memory pool: they are never
// replayed concurrently, and everything a step leaves behind is in the slot state, allocated
// outside the graphs.
class SlotRollout::Graphs {
 public:
#if VERL_TORCH_HAS_CUDA
  std::map<std::pair<int64_t, Sampler>, std::unique_ptr<at::cuda::CUDAGraph>> graphs;
  at::cuda::MempoolId_t pool = at::cuda::graph_pool_handle();
#endif
};

SlotRollout::SlotRollout(const ModelConfig& config, const torch::Device& device, SlotRolloutOptions options,
                         std::unique_ptr<TensorParallel> tp)
    : full_config_(config),
      tp_(std::move(tp)),
      config_(tp_ ? tp_->layout().shard_config(config) : config),
      device_(device),
      options_(std::move(options)),
      dt_(config.compute_dtype),
      sample_dtype_(device.is_cuda() ? torch::kFloat32 : torch::kFloat64),
      model_(CausalLm(config_, torch::TensorOptions().device(device).dtype(config.compute_dtype))),
      graphs_(std::make_unique<Graphs>()) {
  if (tp_) options_.enforce_eager = true;  // the group's collectives stay outside CUDA graphs
  if (options_.max_num_seqs < 1 || options_.max_num_batched_tokens < 1 || options_.steps_per_check < 1)
    throw Error{ExitCode::kInvalidConfig, "rollout: max_num_seqs and max_num_batched_tokens must be positive", ""};
  for (auto& p : model_->parameters()) p.set_requires_grad(false);
  model_->eval();
  auto& bb = *model_->model;
  embed_ = bb.embed_tokens->weight;
  final_norm_ = bb.norm->weight;
  lm_w_ = model_->output_embedding();
  inv_freq_ = rope_inv_freq(config_).to(device_);
  torch::NoGradGuard no_grad;
  // Norm weights in fp32 (the trainer's norms are fp32 master weights, and the fused RMSNorm
  // wants the input's dtype): the parameter itself when the compute dtype is fp32, else a copy
  // that load_weights fills from the source tensor, unrounded.
  for (const auto& p : model_->named_parameters()) {
    const auto& name = p.key();
    if (name.size() >= 11 && name.compare(name.size() - 11, 11, "norm.weight") == 0)
      fp32_norms_.emplace(name, dt_ == torch::kFloat32 ? p.value() : p.value().to(torch::kFloat32));
  }
  auto as_fp32 = [&](const std::string& name) { return fp32_norms_.at(name); };
  final_norm_ = as_fp32("model.norm.weight");
  for (size_t i = 0; i < bb.layers->size(); ++i) {
    auto layer = bb.layers[i]->as<DecoderLayerImpl>();
    const std::string prefix = "model.layers." + std::to_string(i) + ".";
    Layer l;
    l.in_norm = as_fp32(prefix + "input_layernorm.weight");
    l.post_norm = as_fp32(prefix + "post_attention_layernorm.weight");
    auto& a = *layer->self_attn;
    if (a.q_norm) {
      l.q_norm = as_fp32(prefix + "self_attn.q_norm.weight");
      l.k_norm = as_fp32(prefix + "self_attn.k_norm.weight");
    }
    l.qkv_w = fuse_rows({a.q_proj->weight, a.k_proj->weight, a.v_proj->weight});
    l.qkv_b = fuse_rows({a.q_proj->bias, a.k_proj->bias, a.v_proj->bias});
    l.o_w = a.o_proj->weight, l.o_b = a.o_proj->bias;
    auto& m = *layer->mlp;
    l.gate_up_w = fuse_rows({m.gate_proj->weight, m.up_proj->weight});
    l.gate_up_b = fuse_rows({m.gate_proj->bias, m.up_proj->bias});
    l.down_w = m.down_proj->weight, l.down_b = m.down_proj->bias;
    layers_.push_back(l);
  }
}

SlotRollout::~SlotRollout() = default;

void SlotRollout::load_weights(const NamedTensors& weights) {
  if (tp_) {
    const TpLayout& layout = tp_->layout();
    load_named_weights(*model_, weights, [&](const std::string& name, const torch::Tensor& full) {
      return layout.shard(name, full, full_config_);
    });
  } else {
    load_named_weights(*model_, weights);
  }
  // The fp32 norm copies (when the parameters are bf16) from the unrounded source.
  torch::NoGradGuard no_grad;
  const auto params = model_->named_parameters();
  for (const auto& [name, src] : weights)
    if (auto it = fp32_norms_.find(name); it != fp32_norms_.end() && !it->second.is_same(params[name]))
      it->second.copy_(src);
}

// ---- the layers ------------------------------------------------------------------------------

torch::Tensor SlotRollout::rms(const torch::Tensor& x, const torch::Tensor& w) const {
  auto xf = x.to(torch::kFloat32);
#if VERL_SLOT_FUSED_KERNELS
  if (xf.is_cuda()) return at::rms_norm(xf, {xf.size(-1)}, w, config_.rms_norm_eps);
#endif
  return w * (xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + config_.rms_norm_eps));
}

torch::Tensor SlotRollout::lin(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const {
  return project(x, w, b, dt_);
}

torch::Tensor SlotRollout::row_out(const torch::Tensor& y) const {
  auto out = y.to(torch::kFloat32);
  if (tp_) tp_->all_reduce(out);
  return out;
}

torch::Tensor SlotRollout::embed(const torch::Tensor& ids) const {
  return (tp_ ? tp_->embed(embed_, ids) : torch::embedding(embed_, ids)).to(torch::kFloat32);
}

torch::Tensor SlotRollout::logits_of(const torch::Tensor& hidden) const {
  auto z = lin(hidden, lm_w_, torch::Tensor()).to(torch::kFloat32);
  return tp_ ? tp_->gather_vocab(z) : z;
}

std::pair<torch::Tensor, torch::Tensor> SlotRollout::rope(const torch::Tensor& positions) const {
  auto freqs = positions.to(torch::kFloat32).unsqueeze(-1) * inv_freq_;
  auto emb = torch::cat({freqs, freqs}, -1);
  return {emb.cos(), emb.sin()};
}

torch::Tensor SlotRollout::mlp(const Layer& l, const torch::Tensor& x) const {
  auto gu = lin(x, l.gate_up_w, l.gate_up_b);
  const int64_t inter = config_.intermediate_size;
  return row_out(lin(torch::silu(gu.narrow(-1, 0, inter)) * gu.narrow(-1, inter, inter), l.down_w, l.down_b));
}

std::pair<torch::Tensor, torch::Tensor> SlotRollout::rotated_qk(const Layer& l, const torch::Tensor& qkv,
                                                                const torch::Tensor& cos,
                                                                const torch::Tensor& sin) const {
  const int64_t h = config_.num_attention_heads, kvh = config_.num_key_value_heads, d = config_.head_dim();
  auto lead = qkv.sizes().vec();
  lead.pop_back();
  auto heads = [&](int64_t n) {
    auto s = lead;
    s.push_back(n);
    s.push_back(d);
    return s;
  };
  const int64_t axis = static_cast<int64_t>(lead.size());  // the heads axis
  if (l.q_norm.defined()) {  // Qwen3: each head of q and k normed before RoPE, with its own weight
    auto q = rms(qkv.narrow(-1, 0, h * d).reshape(heads(h)), l.q_norm);
    auto k = rms(qkv.narrow(-1, h * d, kvh * d).reshape(heads(kvh)), l.k_norm);
    auto qk = torch::cat({q, k}, axis);
    qk = qk * cos + rotate_half(qk) * sin;
    return {qk.narrow(axis, 0, h), qk.narrow(axis, h, kvh)};
  }
  // q and k rotated together: one set of kernels for both.
  auto qk = qkv.narrow(-1, 0, (h + kvh) * d).reshape(heads(h + kvh)).to(torch::kFloat32);
  qk = qk * cos + rotate_half(qk) * sin;
  return {qk.narrow(axis, 0, h), qk.narrow(axis, h, kvh)};
}

std::pair<torch::Tensor, torch::Tensor> sample_inverse_cdf_blocked(const torch::Tensor& z, const torch::Tensor& u) {
  constexpr int64_t kBlock = 1024;
  const int64_t b = z.size(0), v = z.size(1), nb = (v + kBlock - 1) / kBlock;
  auto m = std::get<0>(z.max(-1, /*keepdim=*/true));
  auto e = (z - m).exp();
  if (nb * kBlock != v) e = torch::constant_pad_nd(e, {0, nb * kBlock - v}, 0);
  auto blocks = e.view({b, nb, kBlock});
  auto cb = blocks.sum(-1).cumsum(-1);                            // [b, nb]
  auto total = cb.narrow(1, nb - 1, 1);                           // [b, 1]
  auto target = u.unsqueeze(1).to(z.scalar_type()) * total;
  auto blk = (cb < target).sum(-1, /*keepdim=*/true).clamp_max(nb - 1);  // [b, 1]
  auto before = cb.gather(1, (blk - 1).clamp_min(0)).masked_fill(blk == 0, 0);
  auto inside = blocks.gather(1, blk.unsqueeze(2).expand({b, 1, kBlock})).squeeze(1).cumsum(-1);  // [b, kBlock]
  auto idx = (before + inside < target).sum(-1, /*keepdim=*/true).clamp_max(kBlock - 1);
  auto next = (blk * kBlock + idx).clamp_max(v - 1);              // [b, 1]
  auto lp = z.gather(1, next) - m - total.log();
  return {next.squeeze(1), lp.squeeze(1).to(torch::kFloat32)};
}

std::pair<torch::Tensor, torch::Tensor> SlotRollout::sample(const torch::Tensor& logits, const torch::Tensor& u,
                                                            const Sampler& s) const {
  if (s.greedy) {  // the log-prob under logits / temperature, as the native loop reports it
    auto next = logits.argmax(-1);
    const double t = s.temperature > 0 ? s.temperature : 1.0;
    return {next, torch::log_softmax(logits / t, -1).gather(1, next.unsqueeze(1)).squeeze(1).to(torch::kFloat32)};
  }
  auto z = filter_logits(logits.to(sample_dtype_) / s.temperature, s.top_k, s.top_p);
  if (logits.is_cuda()) return sample_inverse_cdf_blocked(z, u);
  // NativeRollout's inverse-CDF draw over the filtered, tempered distribution, as it writes it.
  auto cdf = z.softmax(-1).cumsum(-1);
  auto next = (cdf < u.unsqueeze(1) * cdf.narrow(1, cdf.size(1) - 1, 1)).sum(-1).clamp_max(logits.size(1) - 1);
  // verl's logprobs_mode processed_logprobs: the log-prob under the distribution sampled from.
  auto lp = torch::log_softmax(z, -1).gather(1, next.unsqueeze(1)).squeeze(1).to(torch::kFloat32);
  return {next, lp};
}

void SlotRollout::decode_step(int64_t b, const Sampler& s) {
  const int64_t h = config_.num_attention_heads, kvh = config_.num_key_value_heads, d = config_.head_dim();
  const int64_t R = resp_len_, bs = options_.block_size;
  auto tok = tok_.narrow(0, 0, b), len = len_.narrow(0, 0, b), rpos = rpos_.narrow(0, 0, b);
  auto active = active_.narrow(0, 0, b);
  auto table = block_table_.narrow(0, 0, b);

  // On CUDA in bf16/fp16 (no TP group) the fused decode ops: each branch's output is added to
  // the residual stream by the norm that follows it, RoPE and the cache writes are one kernel,
  // and so is SwiGLU's product (trainer/decode_ops.h). Elsewhere the torch forms.
  const bool fused = options_.fused_decode && decode_kernels_for(device_, dt_) && !tp_;
  torch::Tensor pending;  // the last branch's output, not yet in x
  auto x = embed(tok);    // [b, H] fp32
  auto norm = [&](const torch::Tensor& w) {
    if (fused) return add_rms_norm(x, pending, w, config_.rms_norm_eps, dt_);
    if (pending.defined()) x = x + row_out(pending);
    return rms(x, w);
  };
  torch::Tensor cos, sin;  // [b, 1, d]: the torch form's RoPE at each slot's position
  // Where this step's key and value go: position len of the slot's blocks (free slots' rows
  // point at the reserved block 0), as a row of the cache viewed [blocks * block_size, kvh, d].
  auto write_row = table.gather(1, len.div(bs, "floor").unsqueeze(1)).squeeze(1) * bs + len.remainder(bs);
  auto lengths = len + 1;  // the keys so far and this one
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (size_t i = 0; i < layers_.size(); ++i) {
    const auto& l = layers_[i];
    auto qkv = lin(norm(l.in_norm), l.qkv_w, l.qkv_b);  // [b, (h + 2 kvh) d]
    torch::Tensor q;
    if (fused && !l.q_norm.defined()) {
      q = rope_qkv_to_cache(qkv, rope_cos_, rope_sin_, len, write_row, kc_[i], vc_[i], h, kvh, d);
    } else {
      if (!cos.defined()) cos = rope_cos_.index_select(0, len).unsqueeze(1), sin = rope_sin_.index_select(0, len).unsqueeze(1);
      auto [qr, k] = rotated_qk(l, qkv, cos, sin);  // [b, h, d], [b, kvh, d] fp32
      auto v = qkv.narrow(-1, (h + kvh) * d, kvh * d).reshape({b, kvh, d});
      kc_[i].view({-1, kvh, d}).index_copy_(0, write_row, k.to(dt_));
      vc_[i].view({-1, kvh, d}).index_copy_(0, write_row, v.to(dt_));
      q = qr.to(dt_);
    }
    auto o = paged_decode_attention(q, kc_[i], vc_[i], table, lengths, config_.sliding_window, scale);
    pending = lin(o.reshape({b, h * d}), l.o_w, l.o_b);
    auto gu = lin(norm(l.post_norm), l.gate_up_w, l.gate_up_b);
    const int64_t inter = config_.intermediate_size;
    auto act = fused ? silu_and_mul(gu) : torch::silu(gu.narrow(-1, 0, inter)) * gu.narrow(-1, inter, inter);
    pending = lin(act, l.down_w, l.down_b);
  }
  auto logits = logits_of(norm(final_norm_));  // [b, V]

  auto u = unif_.narrow(0, 0, b).gather(1, rpos.clamp_max(R - 1).unsqueeze(1)).squeeze(1);
  auto [next, lp] = sample(logits, u, s);
  auto col = rpos.masked_fill(active.logical_not(), R).unsqueeze(1);  // finished slots write to column R
  resp_.narrow(0, 0, b).scatter_(1, col, next.unsqueeze(1));
  logp_.narrow(0, 0, b).scatter_(1, col, lp.unsqueeze(1));
  auto advance = active.to(torch::kLong);
  len.add_(advance);
  rpos.add_(advance);
  tok.copy_(torch::where(active, next, tok));
  auto go_on = rpos < R;
  if (!s.ignore_eos) go_on = go_on.logical_and((next.unsqueeze(1) == stops_.unsqueeze(0)).any(1).logical_not());
  active.logical_and_(go_on);
}

// ---- cache and slots ------------------------------------------------------------------------

double SlotRollout::kv_block_bytes() const {
  return 2.0 * static_cast<double>(config_.num_hidden_layers * config_.num_key_value_heads * options_.block_size *
                                   config_.head_dim()) *
         static_cast<double>(torch::elementSize(dt_));
}

int64_t SlotRollout::kv_blocks_for(int64_t slots, int64_t max_len) const {
  const int64_t per_seq = blocks_for(max_len, options_.block_size);
  const int64_t all = slots * per_seq + 1;  // + the reserved block
  if (options_.kv_blocks_override > 0) {
    if (options_.kv_blocks_override < per_seq + 1)
      throw Error{ExitCode::kInvalidConfig,
                  "rollout: " + std::to_string(options_.kv_blocks_override) + " KV-cache blocks cannot hold one sequence of " +
                      std::to_string(max_len) + " positions (" + std::to_string(per_seq) + " blocks + 1 reserved)",
                  "give the engine more blocks"};
    return options_.kv_blocks_override;
  }
#if VERL_TORCH_HAS_CUDA
  if (device_.is_cuda()) {
    c10::cuda::CUDAGuard guard(device_);
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) throw Error{ExitCode::kFailure, "rollout: cudaMemGetInfo failed", ""};
    const double per_block = kv_block_bytes();
    // Per slot, the step's [V] logits in fp32 about six times over (logits, tempered, softmax,
    // cumsum, the comparison, log-softmax).
    const double per_slot = 24.0 * static_cast<double>(config_.vocab_size);
    // This engine's own cache (free_cache_engine=false keeps it between calls) is not "in use"
    // by others: it is what the new one replaces.
    const double own = static_cast<double>(kv_blocks_) * per_block;
    const double in_use = static_cast<double>(total_b - free_b) - own;
    const double budget = options_.gpu_memory_utilization * static_cast<double>(total_b) - in_use -
                          static_cast<double>(slots) * per_slot;
    const int64_t fit = budget > 0 ? static_cast<int64_t>(budget / per_block) : 0;
    if (fit < per_seq + 1) {
      auto gb = [](double b) { return std::to_string(static_cast<int64_t>(b / 1e8) / 10.0).substr(0, 5) + " GB"; };
      throw Error{ExitCode::kFailure,
                  "rollout: actor_rollout_ref.rollout.gpu_memory_utilization=" +
                      std::to_string(options_.gpu_memory_utilization) + " of " + gb(static_cast<double>(total_b)) +
                      " on " + device_.str() + " leaves no room for one sequence's KV cache (" +
                      gb(static_cast<double>(per_seq + 1) * per_block) + " at max_model_len " + std::to_string(max_len) +
                      "): " + gb(in_use) + " are in use already",
                  "raise actor_rollout_ref.rollout.gpu_memory_utilization, or shorten data.max_prompt_length / "
                  "data.max_response_length"};
    }
    return std::min(all, fit);
  }
#endif
  return all;
}

void SlotRollout::ensure_cache(int64_t slots, int64_t max_len, int64_t resp_len, int64_t stop_count, int64_t blocks) {
  if (slots == slots_ && max_len == max_len_ && resp_len == resp_len_ && stop_count == stop_count_ &&
      blocks == kv_blocks_ && !kc_.empty())
    return;
  release_cache();
  const auto opts = torch::TensorOptions().device(device_);
  const int64_t kvh = config_.num_key_value_heads, d = config_.head_dim(), bs = options_.block_size;
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    kc_.push_back(torch::zeros({blocks, bs, kvh, d}, opts.dtype(dt_)));
    vc_.push_back(torch::zeros({blocks, bs, kvh, d}, opts.dtype(dt_)));
  }
  table_host_ = torch::zeros({slots, blocks_for(max_len, bs)}, torch::kLong);
  block_table_ = table_host_.to(device_);
  tok_ = torch::zeros({slots}, opts.dtype(torch::kLong));
  len_ = torch::zeros({slots}, opts.dtype(torch::kLong));
  rpos_ = torch::zeros({slots}, opts.dtype(torch::kLong));
  active_ = torch::zeros({slots}, opts.dtype(torch::kBool));
  unif_ = torch::zeros({slots, resp_len}, opts.dtype(sample_dtype_));
  resp_ = torch::zeros({slots, resp_len + 1}, opts.dtype(torch::kLong));
  logp_ = torch::zeros({slots, resp_len + 1}, opts.dtype(torch::kFloat32));
  positions_ = torch::arange(max_len, opts.dtype(torch::kLong));
  std::tie(rope_cos_, rope_sin_) = rope(positions_);
  stops_ = torch::zeros({stop_count}, opts.dtype(torch::kLong));
  slots_ = slots, max_len_ = max_len, resp_len_ = resp_len, stop_count_ = stop_count, kv_blocks_ = blocks;
}

void SlotRollout::release_cache() {
#if VERL_TORCH_HAS_CUDA
  graphs_->graphs.clear();
  // The allocator retires a graph pool once no graph uses it: the next captures need a new one.
  graphs_->pool = at::cuda::graph_pool_handle();
#endif
  kc_.clear();
  vc_.clear();
  tok_ = len_ = rpos_ = active_ = unif_ = resp_ = logp_ = positions_ = rope_cos_ = rope_sin_ = stops_ = torch::Tensor();
  block_table_ = table_host_ = torch::Tensor();
  host_.clear();
  pool_ = KvBlockPool();
  slots_ = max_len_ = resp_len_ = kv_blocks_ = 0;
  stop_count_ = -1;
}

bool SlotRollout::assign_blocks(int64_t i, int64_t seq, int64_t positions, int64_t twin, int64_t shared) {
  const int64_t need = blocks_for(positions, options_.block_size);
  auto fresh = pool_.allocate(need - shared);
  if (need - shared > 0 && fresh.empty()) return false;
  auto& st = host_[static_cast<size_t>(i)];
  st = SlotState{};
  st.seq = seq;
  for (int64_t j = 0; j < shared; ++j) {
    const int64_t blk = host_[static_cast<size_t>(twin)].blocks[static_cast<size_t>(j)];
    pool_.share(blk);
    st.blocks.push_back(blk);
  }
  st.blocks.insert(st.blocks.end(), fresh.begin(), fresh.end());
  stats_.shared_kv_blocks += shared;
  write_table_row(i);
  return true;
}

void SlotRollout::free_slot(int64_t i) {
  auto& st = host_[static_cast<size_t>(i)];
  pool_.release(st.blocks);
  st = SlotState{};
  write_table_row(i);
}

void SlotRollout::write_table_row(int64_t i) {
  auto row = table_host_[i];
  row.zero_();
  const auto& blocks = host_[static_cast<size_t>(i)].blocks;
  auto* p = row.data_ptr<int64_t>();
  for (size_t j = 0; j < blocks.size(); ++j) p[j] = blocks[j];
  table_dirty_ = true;
}

void SlotRollout::upload_table() {
  if (!table_dirty_) return;
  block_table_.copy_(table_host_);
  table_dirty_ = false;
}

std::vector<int64_t> SlotRollout::buckets() const {
  std::vector<int64_t> out;
  const bool graphs = device_.is_cuda() && !options_.enforce_eager;
  if (!graphs) {  // eager: every size is a bucket (the compute follows the live count)
    out.resize(static_cast<size_t>(slots_));
    std::iota(out.begin(), out.end(), 1);
    return out;
  }
  if (!options_.cudagraph_capture_sizes.empty()) {
    for (auto s : options_.cudagraph_capture_sizes)
      if (s < slots_) out.push_back(s);
  } else {
    for (int64_t s = 1; s < slots_; s *= 2) out.push_back(s);
  }
  out.push_back(slots_);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int64_t SlotRollout::bucket_for(int64_t live) const {
  for (auto b : buckets())
    if (b >= live) return b;
  return slots_;
}

void SlotRollout::admit(const std::vector<int64_t>& slots, const std::vector<int64_t>& seqs,
                        const std::vector<std::vector<int64_t>>& prompts, const Sampler& s) {
  // Chunks of whole prompts: identical prompts (rollout.n) become one row of the prefill.
  size_t i = 0;
  while (i < slots.size()) {
    std::vector<std::vector<int64_t>> unique;
    std::map<std::vector<int64_t>, int64_t> index;
    std::vector<int64_t> slot_unique, chunk_slots, chunk_seqs;
    int64_t longest = 0;
    for (; i < slots.size(); ++i) {
      const auto& p = prompts[static_cast<size_t>(seqs[i])];
      auto it = index.find(p);
      if (it == index.end()) {
        const int64_t new_longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
        if (!unique.empty() && new_longest * static_cast<int64_t>(unique.size() + 1) > options_.max_num_batched_tokens)
          break;
        longest = new_longest;
        it = index.emplace(p, static_cast<int64_t>(unique.size())).first;
        unique.push_back(p);
      }
      slot_unique.push_back(it->second);
      chunk_slots.push_back(slots[i]);
      chunk_seqs.push_back(seqs[i]);
    }
    prefill_chunk(unique, slot_unique, chunk_slots, chunk_seqs, s);
  }
}

void SlotRollout::prefill_chunk(const std::vector<std::vector<int64_t>>& unique, const std::vector<int64_t>& slot_unique,
                                const std::vector<int64_t>& slots, const std::vector<int64_t>& seqs, const Sampler& s) {
  const int64_t u = static_cast<int64_t>(unique.size());
  int64_t tp = 0;
  for (const auto& p : unique) tp = std::max<int64_t>(tp, static_cast<int64_t>(p.size()));
  const int64_t h = config_.num_attention_heads, kvh = config_.num_key_value_heads, d = config_.head_dim();
  // Right-padded: a prompt's tokens sit at cache positions 0..len-1, which are their RoPE
  // positions too; the padding after them is never attended to by a real token (causal) and is
  // overwritten by the decode steps before any query sees it.
  auto ids_cpu = torch::zeros({u, tp}, torch::kLong);
  std::vector<int64_t> plen(static_cast<size_t>(u));
  for (int64_t r = 0; r < u; ++r) {
    const auto& p = unique[static_cast<size_t>(r)];
    plen[static_cast<size_t>(r)] = static_cast<int64_t>(p.size());
    std::copy(p.begin(), p.end(), ids_cpu[r].data_ptr<int64_t>());
  }
  auto ids = ids_cpu.to(device_);
  const bool fused = kFusedKernels && device_.is_cuda();
  auto cos = rope_cos_.narrow(0, 0, tp).unsqueeze(1), sin = rope_sin_.narrow(0, 0, tp).unsqueeze(1);  // [tp,1,d]
  auto pos = positions_.narrow(0, 0, tp);
  auto allowed = pos.unsqueeze(0) <= pos.unsqueeze(1);
  if (config_.sliding_window > 0) allowed = allowed.logical_and(pos.unsqueeze(1) - pos.unsqueeze(0) < config_.sliding_window);
  torch::Tensor mask;
  if (!fused)
    mask = torch::zeros({tp, tp}, torch::TensorOptions().dtype(torch::kFloat32).device(device_))
               .masked_fill(allowed.logical_not(), kMaskValue);
  const auto slot_t = long_tensor(slots, device_);
  const auto slot_unique_t = long_tensor(slot_unique, device_);
  // Each slot's prompt keys/values go to its blocks: row (prompt r, position t) of this chunk's
  // [u * tp] keys to row block * block_size + t % block_size of the cache. Blocks that samples
  // of one prompt share are written once.
  std::vector<int64_t> src, dst;
  {
    const int64_t bs = options_.block_size;
    std::vector<bool> seen;
    for (size_t j = 0; j < slots.size(); ++j) {
      const int64_t r = slot_unique[j];
      const auto& blocks = host_[static_cast<size_t>(slots[j])].blocks;
      for (int64_t t = 0; t < plen[static_cast<size_t>(r)]; ++t) {
        const int64_t row = blocks[static_cast<size_t>(t / bs)] * bs + t % bs;
        if (static_cast<size_t>(row) >= seen.size()) seen.resize(static_cast<size_t>(row) + 1, false);
        if (seen[static_cast<size_t>(row)]) continue;
        seen[static_cast<size_t>(row)] = true;
        src.push_back(r * tp + t);
        dst.push_back(row);
      }
    }
  }
  const auto src_rows = long_tensor(src, device_), dst_rows = long_tensor(dst, device_);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));

  auto x = embed(ids);  // [u, tp, H]
  for (size_t i = 0; i < layers_.size(); ++i) {
    const auto& l = layers_[i];
    auto qkv = lin(rms(x, l.in_norm), l.qkv_w, l.qkv_b);  // [u, tp, (h + 2 kvh) d]
    auto qk = rotated_qk(l, qkv, cos, sin);
    auto q = qk.first.transpose(1, 2);                     // [u, h, tp, d] fp32
    auto k = qk.second.transpose(1, 2).to(dt_);            // [u, kvh, tp, d]
    auto v = qkv.narrow(-1, (h + kvh) * d, kvh * d).reshape({u, tp, kvh, d}).transpose(1, 2).to(dt_);
    kc_[i].view({-1, kvh, d}).index_copy_(0, dst_rows, k.transpose(1, 2).reshape({u * tp, kvh, d}).index_select(0, src_rows));
    vc_[i].view({-1, kvh, d}).index_copy_(0, dst_rows, v.transpose(1, 2).reshape({u * tp, kvh, d}).index_select(0, src_rows));
    torch::Tensor o;  // [u, tp, h * d]
    if (fused) {
#if VERL_SLOT_FUSED_KERNELS
      const bool window = config_.sliding_window > 0;
      o = at::scaled_dot_product_attention(q.to(dt_), k, v, window ? std::optional<torch::Tensor>(allowed) : std::nullopt,
                                           0.0, /*is_causal=*/!window, scale, /*enable_gqa=*/true)
              .transpose(1, 2)
              .reshape({u, tp, h * d});
#endif
    } else {
      auto qg = q.reshape({u, kvh, h / kvh, tp, d}).to(dt_);
      auto scores = torch::matmul(qg, k.unsqueeze(2).transpose(3, 4)).to(torch::kFloat32) * scale;  // [u,kvh,g,tp,tp]
      o = torch::matmul(torch::softmax(scores + mask, -1).to(dt_), v.unsqueeze(2));  // [u,kvh,g,tp,d]
      o = o.reshape({u, h, tp, d}).transpose(1, 2).reshape({u, tp, h * d});
    }
    x = x + row_out(lin(o, l.o_w, l.o_b));
    x = x + mlp(l, rms(x, l.post_norm));
  }
  auto last_idx = (long_tensor(plen, device_) - 1).view({u, 1, 1}).expand({u, 1, x.size(2)});
  auto last = x.gather(1, last_idx).squeeze(1);  // [u, H]
  auto logits = logits_of(rms(last, final_norm_)).index_select(0, slot_unique_t);
  stats_.prefill_forwards += 1;
  stats_.prefill_tokens += u * tp;

  // The slots' state: the first response token is sampled here with the sequence's uniform 0.
  const auto seq_t = long_tensor(seqs, device_);
  const int64_t n = static_cast<int64_t>(slots.size());
  if (all_unif_.defined()) unif_.index_copy_(0, slot_t, all_unif_.index_select(0, seq_t));
  auto u0 = unif_.index_select(0, slot_t).select(1, 0);
  auto [next, lp] = sample(logits, u0, s);
  std::vector<int64_t> slot_plen(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) slot_plen[static_cast<size_t>(j)] = plen[static_cast<size_t>(slot_unique[static_cast<size_t>(j)])];
  tok_.index_copy_(0, slot_t, next);
  len_.index_copy_(0, slot_t, long_tensor(slot_plen, device_));
  rpos_.index_fill_(0, slot_t, 1);
  auto first = torch::zeros({n, resp_len_ + 1}, resp_.options());
  first.select(1, 0).copy_(next);
  resp_.index_copy_(0, slot_t, first);
  auto first_lp = torch::zeros({n, resp_len_ + 1}, logp_.options());
  first_lp.select(1, 0).copy_(lp);
  logp_.index_copy_(0, slot_t, first_lp);
  auto live = torch::full({n}, resp_len_ > 1, torch::TensorOptions().dtype(torch::kBool).device(device_));
  if (!s.ignore_eos) live = live.logical_and((next.unsqueeze(1) == stops_.unsqueeze(0)).any(1).logical_not());
  active_.index_copy_(0, slot_t, live);
}

void SlotRollout::harvest(const std::vector<int64_t>& slots, const std::vector<int64_t>& seqs) {
  if (slots.empty()) return;
  const auto slot_t = long_tensor(slots, device_), seq_t = long_tensor(seqs, device_);
  out_resp_.index_copy_(0, seq_t, resp_.index_select(0, slot_t).narrow(1, 0, resp_len_));
  out_len_.index_copy_(0, seq_t, rpos_.index_select(0, slot_t));
  out_logp_.index_copy_(0, seq_t, logp_.index_select(0, slot_t).narrow(1, 0, resp_len_));
}

void SlotRollout::compact(const std::vector<int64_t>& live) {
  const int64_t n = static_cast<int64_t>(live.size());
  const auto src = long_tensor(live, device_);
  auto move = [&](torch::Tensor& t) { t.narrow(0, 0, n).copy_(t.index_select(0, src)); };
  for (auto* t : {&tok_, &len_, &rpos_, &active_, &unif_, &resp_, &logp_}) move(*t);
  active_.narrow(0, n, slots_ - n).fill_(false);
  // The sequences keep their blocks: only their table rows move.
  std::vector<SlotState> moved(static_cast<size_t>(slots_));
  for (int64_t j = 0; j < n; ++j) moved[static_cast<size_t>(j)] = std::move(host_[static_cast<size_t>(live[static_cast<size_t>(j)])]);
  host_.swap(moved);
  for (int64_t i = 0; i < slots_; ++i) write_table_row(i);
}

// ---- generate --------------------------------------------------------------------------------

RolloutBatch SlotRollout::generate(const std::vector<std::vector<int64_t>>& prompts, const GenerateOptions& options,
                                   const std::vector<uint64_t>& row_seeds) {
  torch::NoGradGuard no_grad;
  stats_ = SlotRolloutStats{};
  const int64_t n = static_cast<int64_t>(prompts.size());
  const int64_t r = options.max_response_length;
  const auto& so = options.sampling;
  Sampler s;
  s.greedy = !so.do_sample || so.temperature <= 0.0;
  s.temperature = so.temperature;
  s.top_k = so.top_k;
  s.top_p = so.top_p;
  s.ignore_eos = options.ignore_eos;
  TORCH_CHECK(s.greedy || static_cast<int64_t>(row_seeds.size()) == n,
              "generate: one row seed per prompt is needed when sampling");
  TORCH_CHECK(r >= 1, "generate: max_response_length must be positive");
  auto padded = left_pad(prompts, options.pad_token_id);
  const int64_t p = padded.ids.size(1);
  for (const auto& q : prompts) TORCH_CHECK(!q.empty(), "generate: an empty prompt");

  const int64_t max_len = p + r;
  const int64_t slots = std::max<int64_t>(1, std::min(options_.max_num_seqs, n));
  ensure_cache(slots, max_len, r, static_cast<int64_t>(options.stop_token_ids.size()), kv_blocks_for(slots, max_len));
  pool_ = KvBlockPool(kv_blocks_);
  host_.assign(static_cast<size_t>(slots_), SlotState{});
  table_host_.zero_();
  table_dirty_ = true;
  stats_.slots = slots_;
  stats_.max_model_len = max_len;
  stats_.kv_blocks = kv_blocks_;
  stats_.kv_cache_gb = static_cast<double>(kv_blocks_) * kv_block_bytes() / 1e9;
  if (!options.stop_token_ids.empty()) stops_.copy_(torch::tensor(options.stop_token_ids, torch::kLong));
  const auto dev = torch::TensorOptions().device(device_);
  all_unif_ = torch::Tensor();
  if (!s.greedy) {
    auto u = torch::empty({n, r}, torch::kFloat64);
    for (int64_t i = 0; i < n; ++i) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(row_seeds[static_cast<size_t>(i)]);
      u[i].copy_(torch::rand({r}, gen, torch::TensorOptions().dtype(torch::kFloat64)));
    }
    all_unif_ = u.to(dev.dtype(sample_dtype_));
  }
  out_resp_ = torch::full({n, r}, options.pad_token_id, dev.dtype(torch::kLong));
  out_len_ = torch::zeros({n}, dev.dtype(torch::kLong));
  out_logp_ = torch::zeros({n, r}, dev.dtype(torch::kFloat32));
  active_.fill_(false);

  const int64_t bs = options_.block_size, lookahead = options_.steps_per_check;
  // As vLLM's: when the pool cannot hold every slot at max_model_len, admission leaves a little
  // room for the live sequences to grow.
  const int64_t watermark = kv_blocks_ > slots_ * blocks_for(max_len, bs) ? 0 : std::max<int64_t>(1, kv_blocks_ / 100);
  std::deque<int64_t> waiting(static_cast<size_t>(n));
  std::iota(waiting.begin(), waiting.end(), 0);
  int64_t admissions = 0;
  auto occupied = [&](int64_t i) { return host_[static_cast<size_t>(i)].seq >= 0; };
  auto live_count = [&] {
    int64_t c = 0;
    for (int64_t i = 0; i < slots_; ++i) c += occupied(i);
    return c;
  };
  // Waiting sequences into free slots (lowest first), while the pool has their prompt's blocks
  // and the next steps' (less what a sample shares with its prompt's twin just admitted).
  auto admit_waiting = [&] {
    std::vector<int64_t> slots, seqs;
    const bool others = live_count() > 0;
    for (int64_t i = 0; i < slots_ && !waiting.empty(); ++i) {
      if (occupied(i)) continue;
      const int64_t seq = waiting.front();
      const auto& prompt = prompts[static_cast<size_t>(seq)];
      const int64_t plen = static_cast<int64_t>(prompt.size());
      const int64_t positions = std::min(plen + lookahead, max_len);
      const bool twin = !seqs.empty() && prompts[static_cast<size_t>(seqs.back())] == prompt;
      const int64_t shared = twin ? plen / bs : 0;
      const int64_t fresh = blocks_for(positions, bs) - shared;
      if (pool_.free_blocks() - fresh < ((others || !slots.empty()) ? watermark : 0)) break;
      if (!assign_blocks(i, seq, positions, twin ? slots.back() : -1, shared)) break;
      auto& st = host_[static_cast<size_t>(i)];
      st.left = r - 1;
      st.len = plen;
      st.admitted = admissions++;
      waiting.pop_front();
      slots.push_back(i);
      seqs.push_back(seq);
    }
    if (slots.empty()) return;
    upload_table();
    admit(slots, seqs, prompts, s);
  };
  // Slot i's sequence back to the front of the queue: it starts again when blocks free up.
  auto preempt = [&](int64_t i) {
    waiting.push_front(host_[static_cast<size_t>(i)].seq);
    free_slot(i);
    active_.narrow(0, i, 1).fill_(false);
    stats_.preemptions += 1;
  };
  // Blocks for the next `steps` positions of every live slot, oldest first; when the pool is
  // dry, the youngest sequences are preempted (vLLM's recompute preemption).
  auto grow = [&](int64_t bucket, int64_t steps) {
    std::vector<int64_t> order;
    for (int64_t i = 0; i < bucket; ++i)
      if (occupied(i)) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return host_[static_cast<size_t>(a)].admitted < host_[static_cast<size_t>(b)].admitted;
    });
    for (size_t k = 0; k < order.size(); ++k) {
      const int64_t i = order[k];
      if (!occupied(i)) continue;
      auto& st = host_[static_cast<size_t>(i)];
      const int64_t need = blocks_for(std::min(st.len + steps, max_len), bs);
      while (static_cast<int64_t>(st.blocks.size()) < need) {
        auto got = pool_.allocate(1);
        if (!got.empty()) {
          st.blocks.push_back(got[0]);
          write_table_row(i);
          continue;
        }
        int64_t victim = i;  // the youngest live one
        for (size_t j = k + 1; j < order.size(); ++j)
          if (occupied(order[j])) victim = order[j];
        preempt(victim);
        if (victim == i) break;
      }
    }
  };

  int64_t bucket = 0;
  while (true) {
    if (!waiting.empty()) {
      admit_waiting();
      int64_t top = 0;  // the bucket covers the highest occupied slot
      for (int64_t i = 0; i < slots_; ++i)
        if (occupied(i)) top = i + 1;
      if (top == 0)  // nothing live: every block is free, so the first waiting sequence must fit
        throw Error{ExitCode::kFailure,
                    "rollout: no sequence could be admitted with " + std::to_string(pool_.free_blocks()) +
                        " free KV-cache blocks (internal error)",
                    "report it with the model's shape and data.max_prompt_length / max_response_length"};
      bucket = bucket_for(top);
    }
    int64_t live_max_left = 0;
    for (int64_t i = 0; i < bucket; ++i)
      if (occupied(i)) live_max_left = std::max(live_max_left, host_[static_cast<size_t>(i)].left);
    const int64_t steps = std::min(options_.steps_per_check, live_max_left);
    grow(bucket, steps);
    upload_table();
    for (int64_t k = 0; k < steps; ++k) run_step(bucket, s);
    stats_.decode_steps += steps;
    stats_.decode_row_steps += steps * bucket;
    // The one host sync per check: which slots are still live, and their lengths.
    auto state = torch::stack({active_.narrow(0, 0, bucket).to(torch::kLong), len_.narrow(0, 0, bucket)}).to(torch::kCPU);
    stats_.host_checks += 1;
    const auto sa = state.accessor<int64_t, 2>();
    std::vector<int64_t> done_slots, done_seqs, live;
    for (int64_t i = 0; i < bucket; ++i) {
      if (!occupied(i)) continue;
      auto& st = host_[static_cast<size_t>(i)];
      st.left = std::max<int64_t>(0, st.left - steps);
      st.len = sa[1][i];
      if (sa[0][i] != 0) {
        live.push_back(i);
      } else {
        done_slots.push_back(i);
        done_seqs.push_back(st.seq);
      }
    }
    harvest(done_slots, done_seqs);
    for (auto i : done_slots) free_slot(i);
    if (!waiting.empty()) continue;
    if (live.empty()) break;
    const int64_t smaller = bucket_for(static_cast<int64_t>(live.size()));
    if (smaller < bucket) {
      compact(live);
      bucket = smaller;
    }
  }
  stats_.peak_kv_blocks = pool_.peak_used();
  if (stats_.preemptions > 0 && !warned_preemption_) {
    warned_preemption_ = true;  // once per engine: it says what to change, not how often
    log::Warn() << "rollout: the KV cache's " << kv_blocks_ - 1 << " blocks of " << options_.block_size
                << " positions ran out on " << device_.str() << ": " << stats_.preemptions
                << " preemptions: sequences dropped and generated again (" << n << " in this batch, up to " << max_len
                << " positions each); raise actor_rollout_ref.rollout.gpu_memory_utilization or lower "
                   "actor_rollout_ref.rollout.max_num_seqs";
  }

  // verl's layout, as NativeRollout returns it.
  RolloutBatch out;
  out.prompt_lengths = padded.lengths;
  auto lengths_cpu = out_len_.to(torch::kCPU);
  auto resp_cpu = out_resp_.to(torch::kCPU);
  const int64_t* la = lengths_cpu.data_ptr<int64_t>();
  auto ra = resp_cpu.accessor<int64_t, 2>();
  auto resp_mask = torch::zeros({n, r}, torch::kFloat32);
  out.response_lengths.assign(static_cast<size_t>(n), 0);
  out.finished.assign(static_cast<size_t>(n), false);
  const auto& stops = options.stop_token_ids;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = la[i];
    out.response_lengths[static_cast<size_t>(i)] = len;
    resp_mask[i].narrow(0, 0, len).fill_(1.0f);
    for (int64_t j = len; j < r; ++j) ra[i][j] = options.pad_token_id;
    out.finished[static_cast<size_t>(i)] =
        !options.ignore_eos && len > 0 && std::find(stops.begin(), stops.end(), ra[i][len - 1]) != stops.end();
  }
  out.prompts = padded.ids.to(device_);
  out.responses = resp_cpu.to(device_);
  out.response_mask = resp_mask.to(device_);
  out.rollout_log_probs = out_logp_ * out.response_mask;
  out.input_ids = torch::cat({out.prompts, out.responses}, 1);
  out.attention_mask = torch::cat({padded.mask.to(device_), resp_mask.to(torch::kLong).to(device_)}, 1);
  out.position_ids = position_ids_from_mask(out.attention_mask);
  all_unif_ = out_resp_ = out_len_ = out_logp_ = torch::Tensor();
  if (options_.free_cache_engine) release_cache();
  return out;
}

void SlotRollout::run_step(int64_t b, const Sampler& s) {
#if VERL_TORCH_HAS_CUDA
  if (device_.is_cuda() && !options_.enforce_eager) {
    auto key = std::make_pair(b, s);
    auto it = graphs_->graphs.find(key);
    if (it == graphs_->graphs.end()) {
      const auto t0 = std::chrono::steady_clock::now();
      c10::cuda::CUDAGuard guard(device_);
      // Warm up outside the capture (cuBLAS sets up its handles and workspaces on first use),
      // on a side stream as capture requires, then put the slot state back: the warm-up's
      // writes into the cache and the responses are the same ones the real step makes.
      std::vector<torch::Tensor> saved;
      for (auto* t : {&tok_, &len_, &rpos_, &active_}) saved.push_back(t->clone());
      torch::cuda::synchronize(device_.index());
      auto graph = std::make_unique<at::cuda::CUDAGraph>();
      {
        auto side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index());
        c10::cuda::CUDAStreamGuard stream_guard(side);
        decode_step(b, s);
        size_t j = 0;
        for (auto* t : {&tok_, &len_, &rpos_, &active_}) t->copy_(saved[j++]);
        side.synchronize();
        graph->capture_begin(graphs_->pool);
        decode_step(b, s);
        graph->capture_end();
      }
      torch::cuda::synchronize(device_.index());
      it = graphs_->graphs.emplace(key, std::move(graph)).first;
      stats_.graph_captures += 1;
      stats_.capture_s += seconds_since(t0);
    }
    it->second->replay();
    return;
  }
#endif
  decode_step(b, s);
}

}  // namespace verl::trainer

#include "trainer/tensor_parallel.h"

#include "common/error.h"

namespace verl::trainer {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Error cannot_cut(const std::string& what, int64_t n, int64_t size) {
  return Error{ExitCode::kInvalidConfig,
               std::string(kTpKey) + "=" + std::to_string(size) + ": the model's " + what + " (" + std::to_string(n) +
                   ") cannot be split over " + std::to_string(size) + " ranks",
               "choose a tensor_model_parallel_size that divides the attention heads and the intermediate size "
               "(and divides, or is a multiple of, the KV heads)"};
}

}  // namespace

TpLayout TpLayout::of(const ModelConfig& c, int64_t size, int64_t rank) {
  if (size < 1 || rank < 0 || rank >= size)
    throw Error{ExitCode::kInvalidConfig, std::string(kTpKey) + "=" + std::to_string(size) + " is not a group size",
                "a positive integer"};
  if (c.num_attention_heads % size != 0) throw cannot_cut("num_attention_heads", c.num_attention_heads, size);
  if (c.intermediate_size % size != 0) throw cannot_cut("intermediate_size", c.intermediate_size, size);
  const int64_t kv = c.num_key_value_heads;
  if (kv >= size ? kv % size != 0 : size % kv != 0) throw cannot_cut("num_key_value_heads", kv, size);
  TpLayout l;
  l.size = size;
  l.rank = rank;
  l.heads = c.num_attention_heads / size;
  l.kv_heads = kv >= size ? kv / size : 1;
  l.kv_begin = kv >= size ? rank * l.kv_heads : rank * kv / size;
  l.intermediate = c.intermediate_size / size;
  l.full_vocab = c.vocab_size;
  l.vocab = (c.vocab_size + size - 1) / size;
  l.vocab_begin = rank * l.vocab;
  return l;
}

ModelConfig TpLayout::shard_config(const ModelConfig& full) const {
  ModelConfig c = full;
  c.explicit_head_dim = full.head_dim();
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.intermediate_size = intermediate;
  c.vocab_size = vocab;
  return c;
}

torch::Tensor TpLayout::shard(const std::string& name, const torch::Tensor& full, const ModelConfig& fc) const {
  if (size == 1) return full;
  const int64_t d = fc.head_dim();
  auto expect = [&](std::vector<int64_t> shape) {
    if (full.sizes() != c10::IntArrayRef(shape))
      throw Error{ExitCode::kFailure,
                  "tensor-parallel resharding: tensor " + name + " has shape " + c10::str(full.sizes()) +
                      ", the full model's is " + c10::str(c10::IntArrayRef(shape)),
                  "the actor and the rollout must be built from the same model config"};
  };
  const bool is_bias = ends_with(name, ".bias");
  auto rows = [&](int64_t begin, int64_t n) { return full.narrow(0, begin, n).contiguous(); };
  auto cols = [&](int64_t begin, int64_t n) { return full.narrow(1, begin, n).contiguous(); };
  // A row-parallel layer's bias: added once, by rank 0, after the sum over the group.
  auto once = [&] { return rank == 0 ? full.clone() : torch::zeros_like(full); };
  const int64_t h = fc.hidden_size;
  if (ends_with(name, "embed_tokens.weight") || ends_with(name, "lm_head.weight")) {
    expect({fc.vocab_size, h});
    const int64_t n = std::max<int64_t>(0, std::min(vocab, fc.vocab_size - vocab_begin));
    auto out = torch::zeros({vocab, h}, full.options());
    if (n > 0) out.narrow(0, 0, n).copy_(full.narrow(0, vocab_begin, n));
    return out;
  }
  if (ends_with(name, "self_attn.q_proj.weight") || ends_with(name, "self_attn.q_proj.bias")) {
    is_bias ? expect({fc.num_attention_heads * d}) : expect({fc.num_attention_heads * d, h});
    return rows(rank * heads * d, heads * d);
  }
  if (ends_with(name, "self_attn.k_proj.weight") || ends_with(name, "self_attn.k_proj.bias") ||
      ends_with(name, "self_attn.v_proj.weight") || ends_with(name, "self_attn.v_proj.bias")) {
    is_bias ? expect({fc.num_key_value_heads * d}) : expect({fc.num_key_value_heads * d, h});
    return rows(kv_begin * d, kv_heads * d);
  }
  if (ends_with(name, "self_attn.o_proj.weight")) {
    expect({h, fc.num_attention_heads * d});
    return cols(rank * heads * d, heads * d);
  }
  if (ends_with(name, "mlp.gate_proj.weight") || ends_with(name, "mlp.gate_proj.bias") ||
      ends_with(name, "mlp.up_proj.weight") || ends_with(name, "mlp.up_proj.bias")) {
    is_bias ? expect({fc.intermediate_size}) : expect({fc.intermediate_size, h});
    return rows(rank * intermediate, intermediate);
  }
  if (ends_with(name, "mlp.down_proj.weight")) {
    expect({h, fc.intermediate_size});
    return cols(rank * intermediate, intermediate);
  }
  if (ends_with(name, "self_attn.o_proj.bias") || ends_with(name, "mlp.down_proj.bias")) {
    expect({h});
    return once();
  }
  return full;  // norms: replicated
}

TensorParallel::TensorParallel(std::unique_ptr<Distributed> group, const TpLayout& layout)
    : group_(std::move(group)), layout_(layout) {
  const int64_t n = group_ ? group_->world_size() : 1;
  if (n != layout_.size)
    throw Error{ExitCode::kFailure, "tensor-parallel group of " + std::to_string(n) + " ranks for a layout of " +
                                        std::to_string(layout_.size)};
}

TensorParallel::~TensorParallel() = default;

void TensorParallel::all_reduce(torch::Tensor& x) {
  if (layout_.size > 1) group_->all_reduce_sum(x);
}

torch::Tensor TensorParallel::gather_vocab(const torch::Tensor& local) {
  if (layout_.size == 1) return local;
  const auto shape = local.sizes().vec();
  auto full = torch::empty({layout_.size * local.numel()}, local.options());
  group_->all_gather_flat(full, local.contiguous().view({-1}));
  // [tp, ..., Vl] -> [..., tp, Vl] -> [..., tp * Vl], cut to the real vocabulary.
  std::vector<int64_t> stacked{layout_.size};
  stacked.insert(stacked.end(), shape.begin(), shape.end());
  auto joined = full.view(stacked).movedim(0, -2);
  auto out_shape = shape;
  out_shape.back() = layout_.size * layout_.vocab;
  return joined.reshape(out_shape).narrow(-1, 0, layout_.full_vocab);
}

torch::Tensor TensorParallel::embed(const torch::Tensor& weight, const torch::Tensor& ids) {
  if (layout_.size == 1) return torch::embedding(weight, ids);
  const auto local = ids - layout_.vocab_begin;
  const auto mine = (local >= 0).logical_and(local < layout_.vocab);
  auto out = torch::embedding(weight, local.clamp(0, layout_.vocab - 1)) * mine.unsqueeze(-1).to(weight.scalar_type());
  group_->all_reduce_sum(out);
  return out;
}

void set_tensor_parallel(CausalLmImpl& model, TensorParallel* tp) {
  model.tp = tp;
  model.model->embed_tokens->tp = tp;
  for (const auto& m : *model.model->layers) {
    auto* layer = m->as<DecoderLayerImpl>();
    layer->self_attn->tp = tp;
    layer->mlp->tp = tp;
  }
}

}  // namespace verl::trainer

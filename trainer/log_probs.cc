#include "trainer/log_probs.h"

#include <algorithm>
#include <vector>

#include "trainer/core_algos.h"
#include "trainer/seqlen_balancing.h"

namespace verl::trainer {

torch::Tensor response_hidden(CausalLm& model, const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                              const torch::Tensor& position_ids, int64_t response_width, SequenceLayout layout) {
  const int64_t total = input_ids.size(1);
  const int64_t p = total - response_width;
  // The last position predicts nothing we keep: run the backbone on all but it, and keep the
  // positions that predict response tokens (the LM head never sees the prompt's positions).
  auto hidden = backbone_hidden(model->model, input_ids.narrow(1, 0, total - 1), attention_mask.narrow(1, 0, total - 1),
                                position_ids.narrow(1, 0, total - 1), layout);
  return hidden.narrow(1, p - 1, response_width);
}

torch::Tensor response_logits(CausalLm& model, const torch::Tensor& input_ids,
                              const torch::Tensor& attention_mask,
                              const torch::Tensor& position_ids, int64_t response_width, SequenceLayout layout) {
  return model->logits(response_hidden(model, input_ids, attention_mask, position_ids, response_width, layout));
}

std::vector<std::vector<int64_t>> plan_micro_batches(const ForwardPlan& plan, const torch::Tensor& attention_mask,
                                                     int64_t min_micro_batches) {
  const int64_t b = attention_mask.size(0);
  if (plan.max_token_len <= 0) {
    const int64_t micro = std::max<int64_t>(1, plan.micro_batch);
    std::vector<std::vector<int64_t>> out;
    for (int64_t s = 0; s < b; s += micro) {
      out.emplace_back();
      for (int64_t i = s; i < std::min(b, s + micro); ++i) out.back().push_back(i);
    }
    return out;
  }
  const auto lens = attention_mask.to(torch::kLong).sum(1).to(torch::kCPU).contiguous();
  const std::vector<int64_t> seq_lens(lens.data_ptr<int64_t>(), lens.data_ptr<int64_t>() + b);
  return rearrange_micro_batches(seq_lens, plan.max_token_len, plan.budget_key, min_micro_batches);
}

namespace {

// Applies f to [rows, V] chunks of logits viewed as [B*R, V]; f returns [rows]. Result [B, R].
template <typename F>
torch::Tensor per_row_chunks(const torch::Tensor& logits, int64_t chunk_rows, F f) {
  const auto b = logits.size(0), r = logits.size(1), v = logits.size(2);
  auto flat = logits.reshape({b * r, v});
  const int64_t n = b * r;
  if (chunk_rows <= 0 || n <= chunk_rows) return f(flat, 0, n).reshape({b, r});
  std::vector<torch::Tensor> parts;
  for (int64_t s = 0; s < n; s += chunk_rows) {
    const int64_t k = std::min(chunk_rows, n - s);
    parts.push_back(f(flat.narrow(0, s, k), s, k));
  }
  return torch::cat(parts, 0).reshape({b, r});
}

}  // namespace

torch::Tensor log_probs_from_logits(const torch::Tensor& logits, const torch::Tensor& labels,
                                    double temperature, int64_t chunk_rows) {
  const bool scale = temperature != 1.0 && temperature > 0.0;
  auto flat_labels = labels.reshape({-1});
  return per_row_chunks(logits, chunk_rows, [&](const torch::Tensor& x, int64_t s, int64_t k) {
    auto lp = (scale ? x / temperature : x).log_softmax(-1);
    return lp.gather(-1, flat_labels.narrow(0, s, k).unsqueeze(-1)).squeeze(-1);
  });
}

torch::Tensor entropy_from_logits_chunked(const torch::Tensor& logits, int64_t chunk_rows) {
  return per_row_chunks(logits, chunk_rows,
                        [](const torch::Tensor& x, int64_t, int64_t) { return algos::entropy_from_logits(x); });
}

ForwardPlan forward_plan(int64_t micro_batch, bool dynamic, int64_t max_token_len, const std::string& budget_key,
                         SequenceLayout layout) {
  ForwardPlan plan;
  plan.micro_batch = micro_batch;
  if (dynamic) {
    plan.max_token_len = max_token_len;
    plan.budget_key = budget_key;
  }
  plan.layout = layout;
  return plan;
}

ResponseLogProbs compute_log_probs(CausalLm& model, const RolloutBatch& batch, int64_t micro_batch,
                                   double temperature, bool with_entropy, int64_t chunk_tokens) {
  ForwardPlan plan;
  plan.micro_batch = micro_batch;
  return compute_log_probs(model, batch, plan, temperature, with_entropy, chunk_tokens);
}

namespace {

// One chunk of positions: the LM head (its weight from model->head_weight(), cast once for all
// chunks), / temperature, log-softmax at the labels, and the entropy (and the most likely token
// into *argmax when asked).
std::pair<torch::Tensor, torch::Tensor> head_chunk(CausalLm& model, const torch::Tensor& hidden,
                                                   const torch::Tensor& weight, const torch::Tensor& labels,
                                                   double temperature, bool with_entropy,
                                                   torch::Tensor* argmax = nullptr) {
  auto logits = model->logits(hidden, weight);
  if (argmax != nullptr) *argmax = logits.argmax(-1);
  if (temperature != 1.0 && temperature > 0.0) logits = logits / temperature;
  auto lp = logits.log_softmax(-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1);
  return {lp, with_entropy ? algos::entropy_from_logits(logits) : torch::Tensor()};
}

// head_log_probs' autograd node: inputs hidden [N, H] and the LM head's weight in the compute
// dtype (model->head_weight(): the one cast of this forward, so that the gradient reaches the
// parameter through it); outputs log-probs and entropies [N]. The weight's gradient is summed
// over the chunks in fp32 and rounded to its dtype once, as one unchunked matmul would.
struct ChunkedHead : public torch::autograd::Function<ChunkedHead> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden,
                                                const torch::Tensor& weight, const torch::Tensor& labels,
                                                CausalLm* model, double temperature, bool with_entropy,
                                                bool with_argmax, int64_t chunk) {
    ctx->save_for_backward({hidden, labels, weight});
    ctx->saved_data["model"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(model));
    ctx->saved_data["temperature"] = temperature;
    ctx->saved_data["with_entropy"] = with_entropy;
    ctx->saved_data["chunk"] = chunk;
    ctx->set_materialize_grads(false);  // an output outside the loss comes back undefined
    const int64_t n = hidden.size(0);
    std::vector<torch::Tensor> lps, ents, tops;
    for (int64_t s = 0; s < n; s += chunk) {
      const int64_t k = std::min(chunk, n - s);
      torch::Tensor top;
      auto [lp, ent] = head_chunk(*model, hidden.narrow(0, s, k), weight, labels.narrow(0, s, k), temperature,
                                  with_entropy, with_argmax ? &top : nullptr);
      lps.push_back(lp);
      if (with_argmax) tops.push_back(top);
      if (with_entropy) ents.push_back(ent);
    }
    auto lp = n > 0 ? torch::cat(lps, 0) : torch::zeros({0}, hidden.options().dtype(torch::kFloat32));
    auto ent = with_entropy && n > 0 ? torch::cat(ents, 0) : torch::zeros_like(lp);
    auto top = with_argmax && n > 0 ? torch::cat(tops, 0) : torch::zeros({0}, hidden.options().dtype(torch::kLong));
    ctx->mark_non_differentiable({top});
    return {lp, ent, top};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& hidden = saved[0];
    const torch::Tensor& labels = saved[1];
    const torch::Tensor& weight = saved[2];
    auto* model = reinterpret_cast<CausalLm*>(static_cast<intptr_t>(ctx->saved_data["model"].toInt()));
    const double temperature = ctx->saved_data["temperature"].toDouble();
    const int64_t chunk = ctx->saved_data["chunk"].toInt();
    const torch::Tensor& g_lp = grad_out[0];
    const torch::Tensor& g_ent = grad_out[1];
    const bool entropy = ctx->saved_data["with_entropy"].toBool() && g_ent.defined();
    const bool want_h = ctx->needs_input_grad(0), want_w = ctx->needs_input_grad(1) && weight.requires_grad();
    torch::Tensor gh = want_h ? torch::zeros_like(hidden) : torch::Tensor();
    torch::Tensor gw;
    if (!g_lp.defined() && !entropy) return {gh, gw, {}, {}, {}, {}, {}, {}};
    // The recompute's leaf for the weight: its gradient is this node's, not the parameter's.
    const auto wc = weight.detach().requires_grad_(want_w);
    const int64_t n = hidden.size(0);
    for (int64_t s = 0; s < n; s += chunk) {
      const int64_t k = std::min(chunk, n - s);
      torch::AutoGradMode grad_mode(true);
      auto hc = hidden.narrow(0, s, k).detach().requires_grad_(want_h);
      auto [lp, ent] = head_chunk(*model, hc, wc, labels.narrow(0, s, k), temperature, entropy);
      std::vector<torch::Tensor> outs, grads;
      if (g_lp.defined()) {
        outs.push_back(lp);
        grads.push_back(g_lp.narrow(0, s, k));
      }
      if (entropy) {
        outs.push_back(ent);
        grads.push_back(g_ent.narrow(0, s, k));
      }
      std::vector<torch::Tensor> inputs;
      if (want_h) inputs.push_back(hc);
      if (want_w) inputs.push_back(wc);
      if (inputs.empty()) break;
      const auto g = torch::autograd::grad(outs, inputs, grads, /*retain_graph=*/false, /*create_graph=*/false,
                                           /*allow_unused=*/true);
      size_t i = 0;
      if (want_h) {
        if (g[i].defined()) gh.narrow(0, s, k).copy_(g[i]);
        ++i;
      }
      if (want_w && g[i].defined()) gw = gw.defined() ? gw.add_(g[i]) : g[i].to(torch::kFloat32);
    }
    if (gw.defined()) gw = gw.to(weight.scalar_type());
    return {gh, gw, {}, {}, {}, {}, {}, {}};
  }
};

}  // namespace

ResponseLogProbs head_log_probs(CausalLm& model, const torch::Tensor& hidden, const torch::Tensor& labels,
                                double temperature, bool with_entropy, bool with_argmax, int64_t chunk_tokens) {
  const int64_t b = hidden.size(0), r = hidden.size(1);
  auto out = ChunkedHead::apply(hidden.reshape({b * r, hidden.size(-1)}), model->head_weight(),
                                labels.reshape({b * r}), &model, temperature, with_entropy, with_argmax,
                                std::max<int64_t>(1, chunk_tokens));
  ResponseLogProbs res;
  res.log_probs = out[0].reshape({b, r});
  if (with_entropy) res.entropy = out[1].reshape({b, r});
  if (with_argmax) res.argmax = out[2].reshape({b, r});
  return res;
}

ResponseLogProbs compute_log_probs(CausalLm& model, const RolloutBatch& batch, const ForwardPlan& plan,
                                   double temperature, bool with_entropy, int64_t chunk_tokens) {
  torch::NoGradGuard no_grad;
  EvalScope eval(*model);
  const int64_t b = batch.batch_size(), r = batch.response_width();
  const int64_t chunk = std::max<int64_t>(1, chunk_tokens);
  const auto parts = plan_micro_batches(plan, batch.attention_mask);
  const auto device = batch.input_ids.device();
  const auto head_weight = model->head_weight();  // cast once for every micro-batch and chunk
  std::vector<torch::Tensor> lps, ents;
  for (const auto& part : parts) {
    const int64_t n = static_cast<int64_t>(part.size());
    const auto rows = torch::tensor(part, torch::kLong).to(device);
    auto hidden = response_hidden(model, batch.input_ids.index_select(0, rows), batch.attention_mask.index_select(0, rows),
                                  batch.position_ids.index_select(0, rows), r, plan.layout);
    auto flat = hidden.reshape({n * r, hidden.size(-1)});
    auto labels = batch.responses.index_select(0, rows).reshape({n * r});
    // [chunk, V] logits at a time: the full [n, R, V] never exists.
    for (int64_t s = 0; s < n * r; s += chunk) {
      const int64_t k = std::min(chunk, n * r - s);
      auto [lp, ent] =
          head_chunk(model, flat.narrow(0, s, k), head_weight, labels.narrow(0, s, k), temperature, with_entropy);
      lps.push_back(lp);
      if (with_entropy) ents.push_back(ent);
    }
  }
  // Rows were computed in the micro-batches' order; put them back in the batch's.
  const auto order = torch::tensor(restore_order(parts), torch::kLong).to(device);
  ResponseLogProbs out;
  out.log_probs = torch::cat(lps, 0).reshape({b, r}).index_select(0, order);
  if (with_entropy) out.entropy = torch::cat(ents, 0).reshape({b, r}).index_select(0, order);
  return out;
}

}  // namespace verl::trainer

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

ResponseLogProbs compute_log_probs(CausalLm& model, const RolloutBatch& batch, const ForwardPlan& plan,
                                   double temperature, bool with_entropy, int64_t chunk_tokens) {
  torch::NoGradGuard no_grad;
  EvalScope eval(*model);
  const int64_t b = batch.batch_size(), r = batch.response_width();
  const bool scale = temperature != 1.0 && temperature > 0.0;
  const int64_t chunk = std::max<int64_t>(1, chunk_tokens);
  const auto parts = plan_micro_batches(plan, batch.attention_mask);
  const auto device = batch.input_ids.device();
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
      auto logits = model->logits(flat.narrow(0, s, k));
      if (scale) logits = logits / temperature;
      lps.push_back(logits.log_softmax(-1).gather(-1, labels.narrow(0, s, k).unsqueeze(-1)).squeeze(-1));
      if (with_entropy) ents.push_back(algos::entropy_from_logits(logits));
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

#include "trainer/rollout.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <limits>

namespace verl::trainer {
namespace {

// Restores a module's train/eval flag when a scope ends.
class EvalScope {
 public:
  explicit EvalScope(torch::nn::Module& m) : m_(m), was_training_(m.is_training()) { m_.eval(); }
  ~EvalScope() { m_.train(was_training_); }

 private:
  torch::nn::Module& m_;
  bool was_training_;
};

}  // namespace

uint64_t row_seed(uint64_t base, uint64_t step, uint64_t row) {
  auto mix = [](uint64_t z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  return mix(mix(mix(base) ^ step) ^ row);
}

torch::Tensor filter_logits(const torch::Tensor& logits, int64_t top_k, double top_p) {
  auto out = logits;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  const int64_t vocab = logits.size(-1);
  if (top_k > 0 && top_k < vocab) {
    auto kth = std::get<0>(out.topk(top_k, -1)).narrow(-1, top_k - 1, 1);
    out = out.masked_fill(out < kth, neg_inf);
  }
  if (top_p < 1.0) {
    auto sorted = out.sort(-1, /*descending=*/true);
    auto sorted_logits = std::get<0>(sorted);
    auto sorted_idx = std::get<1>(sorted);
    auto cum = sorted_logits.softmax(-1).cumsum(-1);
    // Drop a token when the tokens before it already reach top_p (so the first always stays).
    auto remove_sorted = (cum - sorted_logits.softmax(-1)) >= top_p;
    auto remove = torch::zeros_like(remove_sorted).scatter(-1, sorted_idx, remove_sorted);
    out = out.masked_fill(remove, neg_inf);
  }
  return out;
}

RolloutBatch generate(CausalLm& model, const std::vector<std::vector<int64_t>>& prompts,
                      const GenerateOptions& options, const std::vector<uint64_t>& row_seeds,
                      const torch::Device& device) {
  torch::NoGradGuard no_grad;
  EvalScope eval(*model);
  const int64_t b = static_cast<int64_t>(prompts.size());
  const int64_t r = options.max_response_length;
  const auto& s = options.sampling;
  const bool greedy = !s.do_sample || s.temperature <= 0.0;
  TORCH_CHECK(greedy || static_cast<int64_t>(row_seeds.size()) == b,
              "generate: one row seed per prompt is needed when sampling");

  RolloutBatch out;
  int64_t p = 0;
  for (const auto& ids : prompts) p = std::max<int64_t>(p, static_cast<int64_t>(ids.size()));
  auto prompt_cpu = torch::full({b, p}, options.pad_token_id, torch::kLong);
  auto prompt_mask_cpu = torch::zeros({b, p}, torch::kLong);
  auto pa = prompt_cpu.accessor<int64_t, 2>();
  auto ma = prompt_mask_cpu.accessor<int64_t, 2>();
  for (int64_t i = 0; i < b; ++i) {
    const auto& ids = prompts[static_cast<size_t>(i)];
    const int64_t off = p - static_cast<int64_t>(ids.size());
    for (size_t j = 0; j < ids.size(); ++j) {
      pa[i][off + static_cast<int64_t>(j)] = ids[j];
      ma[i][off + static_cast<int64_t>(j)] = 1;
    }
    out.prompt_lengths.push_back(static_cast<int64_t>(ids.size()));
  }

  torch::Tensor uniforms;  // [B, R], CPU
  if (!greedy) {
    std::vector<torch::Tensor> rows;
    rows.reserve(static_cast<size_t>(b));
    for (int64_t i = 0; i < b; ++i) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(row_seeds[static_cast<size_t>(i)]);
      rows.push_back(torch::rand({r}, gen, torch::TensorOptions().dtype(torch::kFloat64)));
    }
    uniforms = torch::stack(rows);
  }

  auto prompt_ids = prompt_cpu.to(device);
  auto mask = prompt_mask_cpu.to(device);
  auto lengths = prompt_mask_cpu.sum(1);  // CPU, next position per row
  KvCache cache;
  auto logits = model->forward(prompt_ids, mask, position_ids_from_mask(mask), &cache);

  auto responses = torch::full({b, r}, options.pad_token_id, torch::kLong);
  auto resp_mask = torch::zeros({b, r}, torch::kFloat32);
  std::vector<bool> done(static_cast<size_t>(b), false);
  out.response_lengths.assign(static_cast<size_t>(b), 0);
  out.finished.assign(static_cast<size_t>(b), false);
  auto ra = responses.accessor<int64_t, 2>();
  auto rma = resp_mask.accessor<float, 2>();

  for (int64_t step = 0; step < r; ++step) {
    auto last = logits.select(1, logits.size(1) - 1).to(torch::kCPU).to(torch::kFloat64);  // [B,V]
    torch::Tensor next;
    if (greedy) {
      next = last.argmax(-1);
    } else {
      auto filtered = filter_logits(last / s.temperature, s.top_k, s.top_p);
      auto probs = filtered.softmax(-1);
      auto cdf = probs.cumsum(-1);
      auto u = uniforms.select(1, step).unsqueeze(1) * cdf.select(1, cdf.size(1) - 1).unsqueeze(1);
      next = (cdf < u).sum(-1).clamp_max(last.size(1) - 1);
    }
    auto na = next.accessor<int64_t, 1>();
    auto step_tokens = torch::full({b, 1}, options.pad_token_id, torch::kLong);
    auto step_mask = torch::zeros({b, 1}, torch::kLong);
    auto sa = step_tokens.accessor<int64_t, 2>();
    auto sma = step_mask.accessor<int64_t, 2>();
    bool all_done = true;
    for (int64_t i = 0; i < b; ++i) {
      if (done[static_cast<size_t>(i)]) continue;
      const int64_t tok = na[i];
      ra[i][step] = tok;
      rma[i][step] = 1.0f;
      sa[i][0] = tok;
      sma[i][0] = 1;
      ++out.response_lengths[static_cast<size_t>(i)];
      if (std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), tok) !=
          options.stop_token_ids.end()) {
        done[static_cast<size_t>(i)] = true;
        out.finished[static_cast<size_t>(i)] = true;
      } else {
        all_done = false;
      }
    }
    if (all_done || step + 1 == r) break;
    auto pos = (lengths + step).unsqueeze(1);  // prompt_len + step for every row
    mask = torch::cat({mask, step_mask.to(device)}, 1);
    logits = model->forward(step_tokens.to(device), mask, pos.to(device), &cache);
  }

  out.prompts = prompt_ids;
  out.responses = responses.to(device);
  out.response_mask = resp_mask.to(device);
  out.input_ids = torch::cat({out.prompts, out.responses}, 1);
  out.attention_mask = torch::cat({prompt_mask_cpu.to(device), resp_mask.to(torch::kLong).to(device)}, 1);
  out.position_ids = position_ids_from_mask(out.attention_mask);
  return out;
}

torch::Tensor response_logits(CausalLm& model, const torch::Tensor& input_ids,
                              const torch::Tensor& attention_mask,
                              const torch::Tensor& position_ids, int64_t response_width) {
  const int64_t total = input_ids.size(1);
  const int64_t p = total - response_width;
  // The last position predicts nothing we keep: run the model on all but it.
  auto logits = model->forward(input_ids.narrow(1, 0, total - 1), attention_mask.narrow(1, 0, total - 1),
                               position_ids.narrow(1, 0, total - 1));
  return logits.narrow(1, p - 1, response_width);
}

torch::Tensor log_probs_from_logits(const torch::Tensor& logits, const torch::Tensor& labels,
                                    double temperature) {
  auto lp = (temperature != 1.0 && temperature > 0.0 ? logits / temperature : logits).log_softmax(-1);
  return lp.gather(-1, labels.unsqueeze(-1)).squeeze(-1);
}

torch::Tensor compute_log_probs(CausalLm& model, const RolloutBatch& batch, int64_t micro_batch,
                                double temperature) {
  torch::NoGradGuard no_grad;
  EvalScope eval(*model);
  const int64_t b = batch.batch_size();
  std::vector<torch::Tensor> parts;
  for (int64_t start = 0; start < b; start += micro_batch) {
    const int64_t n = std::min(micro_batch, b - start);
    auto logits = response_logits(model, batch.input_ids.narrow(0, start, n),
                                  batch.attention_mask.narrow(0, start, n),
                                  batch.position_ids.narrow(0, start, n), batch.response_width());
    parts.push_back(log_probs_from_logits(logits, batch.responses.narrow(0, start, n), temperature));
  }
  return torch::cat(parts, 0);
}

}  // namespace verl::trainer

namespace verl::trainer {

RolloutBatch make_batch(const std::vector<std::vector<int64_t>>& prompts,
                        const std::vector<std::vector<int64_t>>& responses, int64_t response_width,
                        int64_t pad_token_id, const torch::Device& device) {
  TORCH_CHECK(prompts.size() == responses.size(), "make_batch: one response per prompt");
  const int64_t b = static_cast<int64_t>(prompts.size());
  int64_t p = 0;
  for (const auto& ids : prompts) p = std::max<int64_t>(p, static_cast<int64_t>(ids.size()));
  auto prompt = torch::full({b, p}, pad_token_id, torch::kLong);
  auto pmask = torch::zeros({b, p}, torch::kLong);
  auto resp = torch::full({b, response_width}, pad_token_id, torch::kLong);
  auto rmask = torch::zeros({b, response_width}, torch::kFloat32);
  auto pa = prompt.accessor<int64_t, 2>();
  auto pma = pmask.accessor<int64_t, 2>();
  auto ra = resp.accessor<int64_t, 2>();
  auto rma = rmask.accessor<float, 2>();
  RolloutBatch out;
  for (int64_t i = 0; i < b; ++i) {
    const auto& ids = prompts[static_cast<size_t>(i)];
    const int64_t off = p - static_cast<int64_t>(ids.size());
    for (size_t j = 0; j < ids.size(); ++j) {
      pa[i][off + static_cast<int64_t>(j)] = ids[j];
      pma[i][off + static_cast<int64_t>(j)] = 1;
    }
    const auto& rs = responses[static_cast<size_t>(i)];
    const int64_t n = std::min<int64_t>(response_width, static_cast<int64_t>(rs.size()));
    for (int64_t j = 0; j < n; ++j) {
      ra[i][j] = rs[static_cast<size_t>(j)];
      rma[i][j] = 1.0f;
    }
    out.prompt_lengths.push_back(static_cast<int64_t>(ids.size()));
    out.response_lengths.push_back(n);
    out.finished.push_back(n < static_cast<int64_t>(rs.size()) ? false : true);
  }
  out.prompts = prompt.to(device);
  out.responses = resp.to(device);
  out.response_mask = rmask.to(device);
  out.input_ids = torch::cat({out.prompts, out.responses}, 1);
  out.attention_mask = torch::cat({pmask, rmask.to(torch::kLong)}, 1).to(device);
  out.position_ids = position_ids_from_mask(out.attention_mask);
  return out;
}

}  // namespace verl::trainer

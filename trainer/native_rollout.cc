#include "trainer/native_rollout.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <limits>
#include <map>

#include "common/error.h"
#include "trainer/log_probs.h"
#include "trainer/tensor_parallel.h"

namespace verl::trainer {

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
  auto padded = left_pad(prompts, options.pad_token_id);
  out.prompt_lengths = padded.lengths;

  torch::Tensor uniforms;  // [B, R] float64 on the device
  if (!greedy) {
    std::vector<torch::Tensor> rows;
    rows.reserve(static_cast<size_t>(b));
    for (int64_t i = 0; i < b; ++i) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(row_seeds[static_cast<size_t>(i)]);
      rows.push_back(torch::rand({r}, gen, torch::TensorOptions().dtype(torch::kFloat64)));
    }
    uniforms = torch::stack(rows).to(device);
  }

  auto prompt_ids = padded.ids.to(device);
  auto mask = padded.mask.to(device);
  auto lengths = padded.mask.sum(1);  // CPU, next position per row
  KvCache cache;
  // Prefill: only the last position's logits are needed ([B, V], not [B, P, V]).
  auto hidden = model->model->forward(prompt_ids, mask, position_ids_from_mask(mask), &cache);
  auto last_logits = model->logits(hidden.select(1, hidden.size(1) - 1));  // [B, V]

  auto responses = torch::full({b, r}, options.pad_token_id, torch::kLong);
  auto resp_mask = torch::zeros({b, r}, torch::kFloat32);
  auto resp_logp = torch::zeros({b, r}, torch::kFloat32);
  std::vector<bool> done(static_cast<size_t>(b), false);
  out.response_lengths.assign(static_cast<size_t>(b), 0);
  out.finished.assign(static_cast<size_t>(b), false);
  auto ra = responses.accessor<int64_t, 2>();
  auto rma = resp_mask.accessor<float, 2>();
  auto rla = resp_logp.accessor<float, 2>();
  const double temperature = s.temperature > 0 ? s.temperature : 1.0;
  const auto& stops = options.stop_token_ids;

  for (int64_t step = 0; step < r; ++step) {
    auto last = last_logits.to(torch::kFloat64);  // [B, V] on the device
    torch::Tensor next, dist;  // dist: the logits the token is drawn from
    if (greedy) {
      dist = last / temperature;
      next = last.argmax(-1);
    } else {
      dist = filter_logits(last / s.temperature, s.top_k, s.top_p);
      auto cdf = dist.softmax(-1).cumsum(-1);
      auto u = uniforms.select(1, step).unsqueeze(1) * cdf.select(1, cdf.size(1) - 1).unsqueeze(1);
      next = (cdf < u).sum(-1).clamp_max(last.size(1) - 1);
    }
    auto logp = dist.log_softmax(-1).gather(1, next.unsqueeze(1)).squeeze(1).to(torch::kCPU, torch::kFloat32);
    next = next.to(torch::kCPU);  // [B]: the per-step copies to the host
    auto na = next.accessor<int64_t, 1>();
    auto la = logp.accessor<float, 1>();
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
      rla[i][step] = la[i];
      sa[i][0] = tok;
      sma[i][0] = 1;
      ++out.response_lengths[static_cast<size_t>(i)];
      if (!options.ignore_eos && std::find(stops.begin(), stops.end(), tok) != stops.end()) {
        done[static_cast<size_t>(i)] = true;
        out.finished[static_cast<size_t>(i)] = true;
      } else {
        all_done = false;
      }
    }
    if (all_done || step + 1 == r) break;
    auto pos = (lengths + step).unsqueeze(1);  // prompt_len + step for every row
    mask = torch::cat({mask, step_mask.to(device)}, 1);
    last_logits = model->forward(step_tokens.to(device), mask, pos.to(device), &cache).select(1, 0);
  }

  out.prompts = prompt_ids;
  out.responses = responses.to(device);
  out.response_mask = resp_mask.to(device);
  out.rollout_log_probs = resp_logp.to(device);
  out.input_ids = torch::cat({out.prompts, out.responses}, 1);
  out.attention_mask = torch::cat({padded.mask.to(device), resp_mask.to(torch::kLong).to(device)}, 1);
  out.position_ids = position_ids_from_mask(out.attention_mask);
  return out;
}

NativeRollout::NativeRollout(const ModelConfig& config, const torch::Device& device, std::unique_ptr<TensorParallel> tp)
    : device_(device), full_config_(config), tp_(std::move(tp)) {
  // No init: the weights come from load_weights before the first generate.
  model_ = CausalLm(tp_ ? tp_->layout().shard_config(config) : config, torch::TensorOptions().device(device));
  if (tp_) set_tensor_parallel(*model_, tp_.get());
  for (auto& p : model_->parameters()) p.set_requires_grad(false);
  model_->eval();
}

NativeRollout::~NativeRollout() = default;

RolloutBatch NativeRollout::generate(const std::vector<std::vector<int64_t>>& prompts, const GenerateOptions& options,
                                     const std::vector<uint64_t>& row_seeds) {
  return trainer::generate(model_, prompts, options, row_seeds, device_);
}

void NativeRollout::load_weights(const NamedTensors& weights) {
  if (!tp_) return load_named_weights(*model_, weights);
  const TpLayout& layout = tp_->layout();
  load_named_weights(*model_, weights, [&](const std::string& name, const torch::Tensor& full) {
    return layout.shard(name, full, full_config_);
  });
}

void load_named_weights(torch::nn::Module& model, const NamedTensors& weights, const WeightPiece& piece) {
  torch::NoGradGuard no_grad;
  auto params = model.named_parameters(/*recurse=*/true);
  for (const auto& [name, full] : weights) {
    auto* dst = params.find(name);
    if (!dst) {
      throw Error{ExitCode::kFailure, "rollout: load_weights got tensor " + name + ", which the rollout model does not have",
                  "the actor and the rollout must be built from the same model config"};
    }
    const torch::Tensor src = piece ? piece(name, full) : full;
    if (dst->sizes() != src.sizes()) {
      throw Error{ExitCode::kFailure,
                  "rollout: load_weights: tensor " + name + " has shape " + c10::str(src.sizes()) +
                      ", the rollout model's is " + c10::str(dst->sizes()),
                  "the actor and the rollout must be built from the same model config"};
    }
    dst->copy_(src);
  }
}

}  // namespace verl::trainer

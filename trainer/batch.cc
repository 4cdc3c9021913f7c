#include "trainer/batch.h"

#include <algorithm>
#include <type_traits>

#include "trainer/model.h"

namespace verl::trainer {

PaddedPrompts left_pad(const std::vector<std::vector<int64_t>>& prompts, int64_t pad_token_id) {
  const int64_t b = static_cast<int64_t>(prompts.size());
  int64_t p = 0;
  for (const auto& ids : prompts) p = std::max<int64_t>(p, static_cast<int64_t>(ids.size()));
  PaddedPrompts out;
  out.ids = torch::full({b, p}, pad_token_id, torch::kLong);
  out.mask = torch::zeros({b, p}, torch::kLong);
  auto pa = out.ids.accessor<int64_t, 2>();
  auto ma = out.mask.accessor<int64_t, 2>();
  for (int64_t i = 0; i < b; ++i) {
    const auto& ids = prompts[static_cast<size_t>(i)];
    const int64_t off = p - static_cast<int64_t>(ids.size());
    for (size_t j = 0; j < ids.size(); ++j) {
      pa[i][off + static_cast<int64_t>(j)] = ids[j];
      ma[i][off + static_cast<int64_t>(j)] = 1;
    }
    out.lengths.push_back(static_cast<int64_t>(ids.size()));
  }
  return out;
}

RolloutBatch slice_rows(const RolloutBatch& b, int64_t begin, int64_t count) {
  TORCH_CHECK(begin >= 0 && count >= 0 && begin + count <= b.batch_size(), "slice_rows: rows [", begin, ", ",
              begin + count, ") outside a batch of ", b.batch_size());
  auto sub = [&](const auto& v) { return std::decay_t<decltype(v)>(v.begin() + begin, v.begin() + begin + count); };
  RolloutBatch o;
  o.prompt_lengths = sub(b.prompt_lengths);
  o.response_lengths = sub(b.response_lengths);
  o.finished = sub(b.finished);
  int64_t longest = 0;
  for (int64_t len : o.prompt_lengths) longest = std::max(longest, len);
  const int64_t cut = b.prompts.size(1) - longest, width = longest + b.response_width();
  auto rows = [&](const torch::Tensor& t) { return t.narrow(0, begin, count).contiguous(); };
  auto rows_from = [&](const torch::Tensor& t) { return t.narrow(0, begin, count).narrow(1, cut, t.size(1) - cut).contiguous(); };
  o.prompts = rows_from(b.prompts);
  o.responses = rows(b.responses);
  o.input_ids = rows_from(b.input_ids);
  o.attention_mask = rows_from(b.attention_mask);
  o.position_ids = rows_from(b.position_ids);  // positions count real tokens: padding columns do not shift them
  TORCH_CHECK(o.input_ids.size(1) == width, "slice_rows: inconsistent prompt width");
  o.response_mask = rows(b.response_mask);
  if (b.rollout_log_probs.defined()) o.rollout_log_probs = rows(b.rollout_log_probs);
  return o;
}

RolloutBatch make_batch(const std::vector<std::vector<int64_t>>& prompts,
                        const std::vector<std::vector<int64_t>>& responses, int64_t response_width,
                        int64_t pad_token_id, const torch::Device& device) {
  TORCH_CHECK(prompts.size() == responses.size(), "make_batch: one response per prompt");
  const int64_t b = static_cast<int64_t>(prompts.size());
  auto padded = left_pad(prompts, pad_token_id);
  auto resp = torch::full({b, response_width}, pad_token_id, torch::kLong);
  auto rmask = torch::zeros({b, response_width}, torch::kFloat32);
  auto ra = resp.accessor<int64_t, 2>();
  auto rma = rmask.accessor<float, 2>();
  RolloutBatch out;
  out.prompt_lengths = padded.lengths;
  for (int64_t i = 0; i < b; ++i) {
    const auto& rs = responses[static_cast<size_t>(i)];
    const int64_t n = std::min<int64_t>(response_width, static_cast<int64_t>(rs.size()));
    for (int64_t j = 0; j < n; ++j) {
      ra[i][j] = rs[static_cast<size_t>(j)];
      rma[i][j] = 1.0f;
    }
    out.response_lengths.push_back(n);
    out.finished.push_back(n >= static_cast<int64_t>(rs.size()));
  }
  out.prompts = padded.ids.to(device);
  out.responses = resp.to(device);
  out.response_mask = rmask.to(device);
  out.input_ids = torch::cat({out.prompts, out.responses}, 1);
  out.attention_mask = torch::cat({padded.mask, rmask.to(torch::kLong)}, 1).to(device);
  out.position_ids = position_ids_from_mask(out.attention_mask);
  return out;
}

TensorMap select_rows(const TensorMap& batch, const torch::Tensor& rows) {
  TensorMap out;
  for (const auto& [k, v] : batch) {
    if (v.defined()) out[k] = v.index_select(0, rows.to(v.device()));
  }
  return out;
}

}  // namespace verl::trainer

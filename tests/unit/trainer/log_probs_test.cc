// lm_head_log_probs, the training path's log-probs: the same values, entropies and gradients
// (to hidden states and to the LM head's weight) as projecting the whole [B, R, V] and taking
// log_softmax, for chunk sizes that do and do not divide the rows, with a temperature, in fp32
// and bf16 compute.
#include <gtest/gtest.h>

#include "trainer/core_algos.h"
#include "trainer/log_probs.h"
#include "trainer/model.h"

namespace verl::trainer {
namespace {

struct Result {
  torch::Tensor lp, ent, g_hidden, g_weight;
};

// loss = sum(a * log_probs) + sum(c * entropy), a and c fixed random weights.
Result run(bool fused, torch::Dtype dt, int64_t chunk, double temp, bool with_entropy) {
  torch::manual_seed(7);
  const int64_t b = 3, r = 5, h = 16, v = 97;
  auto hidden = torch::randn({b, r, h}).requires_grad_(true);
  auto weight = (0.3 * torch::randn({v, h})).requires_grad_(true);
  auto labels = torch::randint(v, {b, r}, torch::kLong);
  auto a = torch::randn({b, r});
  auto c = torch::randn({b, r});
  torch::Tensor lp, ent;
  if (fused) {
    auto out = lm_head_log_probs(hidden, weight, labels, dt, temp, with_entropy, chunk);
    lp = out.log_probs;
    ent = out.entropy;
    EXPECT_EQ(out.argmax_hit.sum().item<int64_t>(),
              (lm_head_logits(hidden, weight, dt).argmax(-1) == labels).sum().item<int64_t>());
  } else {
    auto logits = lm_head_logits(hidden, weight, dt) / temp;
    lp = log_probs_from_logits(logits, labels);
    if (with_entropy) ent = algos::entropy_from_logits(logits);
  }
  auto loss = (a * lp).sum();
  if (with_entropy) loss = loss + (c * ent).sum();
  loss.backward();
  return {lp.detach(), with_entropy ? ent.detach() : torch::Tensor(), hidden.grad(), weight.grad()};
}

double max_rel(const torch::Tensor& x, const torch::Tensor& y) {
  return ((x - y).abs().max() / y.abs().max().clamp_min(1e-12)).item<double>();
}

TEST(LmHeadLogProbs, ValuesEntropiesAndGradientsEqualTheWholeLogitsPath) {
  for (auto dt : {torch::kFloat32, torch::kBFloat16}) {
    const double tol = dt == torch::kFloat32 ? 1e-5 : 2e-2;
    for (int64_t chunk : {0, 4, 15}) {
      for (double temp : {1.0, 0.7}) {
        for (bool with_entropy : {false, true}) {
          const auto ref = run(false, dt, chunk, temp, with_entropy);
          const auto got = run(true, dt, chunk, temp, with_entropy);
          const auto what = ::testing::Message() << "dtype " << dt << " chunk " << chunk << " temperature " << temp
                                                 << " entropy " << with_entropy;
          EXPECT_LT(max_rel(got.lp, ref.lp), tol) << what;
          if (with_entropy) EXPECT_LT(max_rel(got.ent, ref.ent), tol) << what;
          EXPECT_LT(max_rel(got.g_hidden, ref.g_hidden), tol) << what;
          EXPECT_LT(max_rel(got.g_weight, ref.g_weight), tol) << what;
        }
      }
    }
  }
}

}  // namespace
}  // namespace verl::trainer

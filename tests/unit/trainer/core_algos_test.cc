// Expected numbers below are derived by hand from the formulas (the derivation is in the
// comments), not by running verl: a test that copied the implementation's output could not fail.
#include "trainer/core_algos.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/error.h"

namespace verl::trainer::algos {
namespace {

constexpr double kTol = 1e-5;

torch::Tensor t2(std::vector<std::vector<double>> rows) {
  std::vector<torch::Tensor> r;
  for (auto& row : rows) r.push_back(torch::tensor(row, torch::kFloat64));
  return torch::stack(r);
}

void expect_near(const torch::Tensor& actual, const std::vector<std::vector<double>>& expected,
                 double tol = kTol) {
  auto a = actual.to(torch::kFloat64).contiguous();
  ASSERT_EQ(a.dim(), 2);
  ASSERT_EQ(a.size(0), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(a.size(1), static_cast<int64_t>(expected[i].size()));
    for (size_t j = 0; j < expected[i].size(); ++j) {
      EXPECT_NEAR(a[i][j].item<double>(), expected[i][j], tol) << "at [" << i << "][" << j << "]";
    }
  }
}

double item(const torch::Tensor& t) { return t.item<double>(); }

TEST(CoreAlgos, MaskedMeanIgnoresMaskedPositionsEvenNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto v = t2({{1, 2, nan}, {4, 5, 6}});
  auto m = t2({{1, 1, 0}, {1, 0, 0}});
  // (1 + 2 + 4) / 3
  EXPECT_NEAR(item(masked_mean(v, m)), 7.0 / 3.0, kTol);
  // per row: (1+2)/2, 4/1
  auto per_row = masked_mean(v, m, /*dim=*/-1);
  EXPECT_NEAR(per_row[0].item<double>(), 1.5, kTol);
  EXPECT_NEAR(per_row[1].item<double>(), 4.0, kTol);
}

TEST(CoreAlgos, MaskedVarIsUnbiasedOverMaskOnly) {
  auto v = t2({{1, 2, 3, 4, 100}});
  auto m = t2({{1, 1, 1, 1, 0}});
  // mean 2.5; squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5; biased 5/4, unbiased 5/3.
  EXPECT_NEAR(item(masked_var(v, m, /*unbiased=*/false)), 1.25, kTol);
  EXPECT_NEAR(item(masked_var(v, m)), 5.0 / 3.0, kTol);
}

TEST(CoreAlgos, MaskedVarRefusesOneElement) {
  auto v = t2({{1, 2}});
  auto m = t2({{1, 0}});
  EXPECT_THROW(masked_var(v, m), verl::Error);
}

TEST(CoreAlgos, MaskedWhitenUsesUnbiasedStd) {
  auto v = t2({{1, 2, 3, 4}});
  auto m = torch::ones_like(v);
  // (v - 2.5) / sqrt(5/3): 1.5/1.290994 = 1.161895, 0.5/1.290994 = 0.387298
  expect_near(masked_whiten(v, m), {{-1.161895, -0.387298, 0.387298, 1.161895}});
  // shift_mean=false adds the mean back.
  expect_near(masked_whiten(v, m, /*shift_mean=*/false),
              {{2.5 - 1.161895, 2.5 - 0.387298, 2.5 + 0.387298, 2.5 + 1.161895}});
}

// gamma 0.9, lam 0.8 (gamma*lam = 0.72).
// row 0: r [0,1,0], V [0.2,0.4,0.6], mask [1,1,0]
//   t2 masked: nextvalue stays 0, A stays 0 -> A2 = 0
//   t1: delta = 1 + 0.9*0 - 0.4 = 0.6; A1 = 0.6
//   t0: delta = 0 + 0.9*0.4 - 0.2 = 0.16; A0 = 0.16 + 0.72*0.6 = 0.592
// row 1: r [0,0,2], V [1,1,1], mask [1,1,1]
//   t2: delta = 2 - 1 = 1; A2 = 1
//   t1: delta = 0.9 - 1 = -0.1; A1 = -0.1 + 0.72 = 0.62
//   t0: delta = -0.1; A0 = -0.1 + 0.72*0.62 = 0.3464
// returns = A + V; whitening over the 5 masked values {0.592, 0.6, 0.3464, 0.62, 1}:
//   mean 0.63168, unbiased var 0.219758848/4 = 0.054939712, std 0.2343922
TEST(CoreAlgos, GaeReverseScanSkipsMaskedTokensAndWhitens) {
  auto r = t2({{0, 1, 0}, {0, 0, 2}});
  auto v = t2({{0.2, 0.4, 0.6}, {1, 1, 1}});
  auto m = t2({{1, 1, 0}, {1, 1, 1}});
  auto out = compute_gae_advantage_return(r, v, m, /*gamma=*/0.9, /*lam=*/0.8);
  expect_near(out.returns, {{0.792, 1.0, 0.6}, {1.3464, 1.62, 2.0}});
  expect_near(out.advantages, {{-0.169289, -0.135158, -2.694970},
                               {-1.217105, -0.049831, 1.571383}});
}

TEST(CoreAlgos, GaeWithGammaLamOneIsRewardToGoMinusValue) {
  // gamma = lam = 1: A_t = sum_{s>=t} r_s - V_t, returns = reward-to-go.
  auto r = t2({{0, 0, 1}, {0, 1, 0}});
  auto v = t2({{0.5, 0.25, 0.0}, {0.0, 0.0, 0.0}});
  auto m = torch::ones_like(r);
  auto out = compute_gae_advantage_return(r, v, m, 1.0, 1.0);
  expect_near(out.returns, {{1, 1, 1}, {1, 1, 0}});
}

// groups: {0: scores 1, 0, 2}, {1: 3, 1}, {2: 5}; reward on the last token, T = 2.
//   group 0: mean 1, unbiased std sqrt((0 + 1 + 1)/2) = 1 -> (0, -1, 1)/(1 + eps)
//   group 1: mean 2, std sqrt((1 + 1)/1) = sqrt(2) -> (+-1/sqrt 2) = +-0.707106
//   group 2 (one member): verl keeps the score: 5/(1 + eps); kZero: 0
TEST(CoreAlgos, GrpoNormalisesWithinGroupsByStd) {
  auto r = t2({{0, 1}, {0, 0}, {0, 2}, {0, 3}, {0, 1}, {0, 5}});
  auto m = t2({{1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 0}, {1, 1}});
  auto idx = torch::tensor({7, 7, 7, 3, 3, 9}, torch::kInt64);
  auto out = compute_grpo_outcome_advantage(r, m, idx, /*norm_adv_by_std=*/true);
  expect_near(out.advantages, {{0, 0}, {-1, -1}, {1, 1}, {0.707106, 0.707106},
                               {-0.707106, 0}, {5, 5}});
  EXPECT_TRUE(torch::equal(out.advantages, out.returns));
  auto zero = compute_grpo_outcome_advantage(r, m, idx, true, 1e-6, SingletonGroup::kZero);
  expect_near(zero.advantages.slice(0, 5, 6), {{0, 0}});
}

TEST(CoreAlgos, GrpoWithoutStdOnlySubtractsGroupMean) {
  auto r = t2({{1}, {0}, {2}, {3}, {1}, {5}});
  auto m = torch::ones_like(r);
  auto idx = torch::tensor({0, 0, 0, 1, 1, 2}, torch::kInt64);
  auto out = compute_grpo_outcome_advantage(r, m, idx, /*norm_adv_by_std=*/false);
  expect_near(out.advantages, {{0}, {-1}, {1}, {1}, {-1}, {5}});
  auto zero = compute_grpo_outcome_advantage(r, m, idx, false, 1e-6, SingletonGroup::kZero);
  expect_near(zero.advantages, {{0}, {-1}, {1}, {1}, {-1}, {0}});
}

TEST(CoreAlgos, GrpoIdenticalScoresGiveZeroAdvantage) {
  // std 0: (s - mean) / (0 + eps) = 0 / eps = 0, not NaN.
  auto r = t2({{1}, {1}, {1}});
  auto out = compute_grpo_outcome_advantage(r, torch::ones_like(r),
                                            torch::zeros({3}, torch::kInt64), true);
  expect_near(out.advantages, {{0}, {0}, {0}});
}

// RLOO: A_i = s_i - mean(others) = n/(n-1) (s_i - mean).
//   group 0 (1, 0, 2): 1.5*(s - 1) = 0, -1.5, 1.5; group 1 (3, 1): 2*(s - 2) = 2, -2; single 5.
TEST(CoreAlgos, RlooSubtractsLeaveOneOutMean) {
  auto r = t2({{1}, {0}, {2}, {3}, {1}, {5}});
  auto idx = torch::tensor({0, 0, 0, 1, 1, 2}, torch::kInt64);
  auto out = compute_rloo_outcome_advantage(r, torch::ones_like(r), idx);
  expect_near(out.advantages, {{0}, {-1.5}, {1.5}, {2}, {-2}, {5}});
}

// gamma 0.5. row 0: r [0,0,1], mask [1,1,1] -> G = [0.25, 0.5, 1]
// row 1: r [0,2,5], mask [1,1,0]: G2 = 5 (returned as is), then the running return is reset
//   by mask 0 -> G1 = 2, G0 = 1 (the masked 5 does not leak into the response).
// whitening over {0.25, 0.5, 1, 1, 2}: mean 0.95, unbiased var 1.8/4 = 0.45, std 0.670820
TEST(CoreAlgos, ReinforcePlusPlusResetsReturnAfterEos) {
  auto r = t2({{0, 0, 1}, {0, 2, 5}});
  auto m = t2({{1, 1, 1}, {1, 1, 0}});
  auto out = compute_reinforce_plus_plus_outcome_advantage(r, m, /*gamma=*/0.5);
  expect_near(out.returns, {{0.25, 0.5, 1}, {1, 2, 5}});
  expect_near(out.advantages, {{-1.043498, -0.670820, 0.074536}, {0.074536, 1.565248, 0}});
}

// loss [[1,2,3],[4,5,6]], mask [[1,1,1],[1,0,0]]: row sums 6 and 4, row token counts 3 and 1.
TEST(CoreAlgos, AggLossModesFollowVerl) {
  auto l = t2({{1, 2, 3}, {4, 5, 6}});
  auto m = t2({{1, 1, 1}, {1, 0, 0}});
  EXPECT_NEAR(item(agg_loss(l, m, LossAggMode::kTokenMean)), 10.0 / 4.0, kTol);
  EXPECT_NEAR(item(agg_loss(l, m, LossAggMode::kSeqMeanTokenSum)), (6.0 + 4.0) / 2.0, kTol);
  EXPECT_NEAR(item(agg_loss(l, m, LossAggMode::kSeqMeanTokenMean)), (2.0 + 4.0) / 2.0, kTol);
  // Dr.GRPO: the sum over all tokens divided by the mask width T = 3.
  EXPECT_NEAR(item(agg_loss(l, m, LossAggMode::kSeqMeanTokenSumNorm)), 10.0 / 3.0, kTol);
}

// Row 1 has no token: verl leaves it out of the seq-mean modes (2 rows count, not 3) and divides
// each row's sum by (count + 1e-8). loss [[1,2,3],[9,9,9],[4,5,6]], mask [[1,1,1],[0,0,0],[1,0,0]].
TEST(CoreAlgos, AggLossSeqMeanModesLeaveOutRowsWithoutTokens) {
  auto l = t2({{1, 2, 3}, {9, 9, 9}, {4, 5, 6}});
  auto m = t2({{1, 1, 1}, {0, 0, 0}, {1, 0, 0}});
  EXPECT_NEAR(item(agg_loss(l, m, LossAggMode::kSeqMeanTokenSum)), (6.0 + 4.0) / 2.0, kTol);
  const double mean = item(agg_loss(l, m, LossAggMode::kSeqMeanTokenMean));
  EXPECT_FALSE(std::isnan(mean));
  EXPECT_NEAR(mean, (2.0 + 4.0) / 2.0, kTol);
  EXPECT_NEAR(item(agg_loss(l, m, LossAggMode::kTokenMean)), 10.0 / 4.0, kTol);
}

TEST(CoreAlgos, ParseRejectsUnknownNamesAsInvalidConfig) {
  EXPECT_EQ(parse_loss_agg_mode("seq-mean-token-sum-norm"), LossAggMode::kSeqMeanTokenSumNorm);
  EXPECT_EQ(parse_kl_penalty("k3"), KlPenaltyType::kLowVarKl);
  EXPECT_EQ(parse_adv_estimator("rloo"), AdvantageEstimator::kRloo);
  try {
    parse_loss_agg_mode("token_mean");
    FAIL() << "no throw";
  } catch (const verl::Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find("token_mean"), std::string::npos);
  }
  EXPECT_THROW(parse_kl_penalty("full"), verl::Error);
  EXPECT_THROW(make_kl_controller("pid", 0.1, 0.1, 10), verl::Error);
}

// clip low 0.2, high 0.28, c = 3; four tokens and one masked token with absurd values.
//   a: A=+1, ratio 1.5: l1 = -1.5, l2 = -1.28 -> max -1.28 (clipped)
//   b: A=+1, ratio 0.5: l1 = -0.5, l2 = -0.8 -> -0.5
//   c: A=-1, ratio 4:   l1 = 4, l2 = 1.28 -> 4; dual clip min(3, 4) = 3 (lower-clipped)
//   d: A=-1, ratio 0.5: l1 = 0.5, l2 = 0.8 -> 0.8 (clipped); min(3, 0.8) = 0.8
// token-mean: (-1.28 - 0.5 + 3 + 0.8)/4 = 0.505; clipfrac 2/4; lower 1/4;
// ppo_kl = -mean(log ratio) = -ln(1.5*0.5*4*0.5)/4 = -ln(1.5)/4 = -0.101366
TEST(CoreAlgos, PolicyLossClipsAndDualClips) {
  auto old_lp = t2({{-1, -1, -1, -1, -1}});
  auto lp = old_lp + t2({{std::log(1.5), std::log(0.5), std::log(4.0), std::log(0.5), 30}});
  auto adv = t2({{1, 1, -1, -1, -100}});
  auto mask = t2({{1, 1, 1, 1, 0}});
  auto out = compute_policy_loss(old_lp, lp, adv, mask, 0.2, 0.28, 3.0, LossAggMode::kTokenMean);
  EXPECT_NEAR(item(out.pg_loss), 0.505, kTol);
  EXPECT_NEAR(item(out.pg_clipfrac), 0.5, kTol);
  EXPECT_NEAR(item(out.pg_clipfrac_lower), 0.25, kTol);
  EXPECT_NEAR(item(out.ppo_kl), -0.101366, kTol);
}

TEST(CoreAlgos, DualClipBoundsNegativeAdvantageLoss) {
  // A = -2, ratio e^3 = 20.09: the unclipped loss would be 40.2; dual clip caps it at
  // -A * c = 6, and the capped loss carries no gradient.
  auto old_lp = t2({{-4}});
  auto lp = t2({{-1}}).requires_grad_(true);
  auto adv = t2({{-2}});
  auto mask = t2({{1}});
  auto out = compute_policy_loss(old_lp, lp, adv, mask, 0.2, 0.2, 3.0, LossAggMode::kTokenMean);
  EXPECT_NEAR(item(out.pg_loss), 6.0, 1e-6);
  out.pg_loss.backward();
  EXPECT_NEAR(lp.grad().item<double>(), 0.0, 1e-12);
  EXPECT_NEAR(item(out.pg_clipfrac_lower), 1.0, kTol);
  // Positive advantage, same ratio: clipped to 1.2 * A, no dual clip.
  auto lp2 = t2({{-1}}).requires_grad_(true);
  auto out2 = compute_policy_loss(old_lp, lp2, t2({{2}}), mask, 0.2, 0.2, 3.0,
                                  LossAggMode::kTokenMean);
  EXPECT_NEAR(item(out2.pg_loss), -2.4, 1e-6);
  EXPECT_NEAR(item(out2.pg_clipfrac_lower), 0.0, kTol);
}

TEST(CoreAlgos, PolicyLossUnclippedGradientIsMinusAdvantageTimesRatio) {
  // ratio 1 inside the clip range: d(-A * exp(lp - old))/d lp = -A * ratio = -0.5 (one token).
  auto old_lp = t2({{-2}});
  auto lp = t2({{-2}}).requires_grad_(true);
  auto out = compute_policy_loss(old_lp, lp, t2({{0.5}}), t2({{1}}), 0.2, 0.2, 3.0,
                                 LossAggMode::kTokenMean);
  out.pg_loss.backward();
  EXPECT_NEAR(lp.grad().item<double>(), -0.5, 1e-6);
}

TEST(CoreAlgos, PolicyLossRejectsClipRatioCNotAboveOne) {
  auto x = t2({{0}});
  EXPECT_THROW(compute_policy_loss(x, x, x, x + 1, 0.2, 0.2, 1.0, LossAggMode::kTokenMean),
               verl::Error);
}

// vpreds [1, 2], values [0.5, 2], returns [2, 1], cliprange 0.2:
//   tok 0: clip(1, 0.3, 0.7) = 0.7: (1-2)^2 = 1 vs (0.7-2)^2 = 1.69 -> 1.69 (clipped)
//   tok 1: clip(2, 1.8, 2.2) = 2: 1 vs 1 -> 1
// vf_loss = 0.5 * (1.69 + 1)/2 = 0.6725; clipfrac 1/2
TEST(CoreAlgos, ValueLossTakesMaxOfClippedAndUnclipped) {
  auto vpreds = t2({{1, 2}}).requires_grad_(true);
  auto out = compute_value_loss(vpreds, t2({{2, 1}}), t2({{0.5, 2}}), t2({{1, 1}}), 0.2,
                                LossAggMode::kTokenMean);
  EXPECT_NEAR(item(out.vf_loss), 0.6725, kTol);
  EXPECT_NEAR(item(out.vf_clipfrac), 0.5, kTol);
  out.vf_loss.backward();
  // tok 0 uses the clipped branch (constant in vpreds): no gradient; tok 1: 0.5*2*(2-1)/2 = 0.5
  EXPECT_NEAR(vpreds.grad()[0][0].item<double>(), 0.0, 1e-12);
  EXPECT_NEAR(vpreds.grad()[0][1].item<double>(), 0.5, 1e-6);
}

TEST(CoreAlgos, EntropyFromLogitsMatchesShannon) {
  // uniform over 2: ln 2; logits (0, ln 3) -> p (1/4, 3/4): -(1/4 ln 1/4 + 3/4 ln 3/4) = 0.562335
  auto logits = torch::tensor({0.0, 0.0, 0.0, std::log(3.0)}, torch::kFloat64).view({1, 2, 2});
  auto h = entropy_from_logits(logits);
  ASSERT_EQ(h.sizes(), (std::vector<int64_t>{1, 2}));
  EXPECT_NEAR(h[0][0].item<double>(), 0.693147, kTol);
  EXPECT_NEAR(h[0][1].item<double>(), 0.562335, kTol);
}

TEST(CoreAlgos, KlPenaltyEstimators) {
  auto lp = t2({{-1, -2}});
  auto ref = t2({{-1.5, -1}});
  // logp - ref = (0.5, -1)
  expect_near(kl_penalty(lp, ref, KlPenaltyType::kKl), {{0.5, -1}});
  expect_near(kl_penalty(lp, ref, KlPenaltyType::kAbs), {{0.5, 1}});
  expect_near(kl_penalty(lp, ref, KlPenaltyType::kMse), {{0.125, 0.5}});
  // k3 with x = ref - logp = (-0.5, 1): e^x - x - 1 = 0.106531, 0.718282
  expect_near(kl_penalty(lp, ref, KlPenaltyType::kLowVarKl), {{0.106531, 0.718282}});
}

TEST(CoreAlgos, LowVarKlIsClampedToTen) {
  // x = 20: e^20 - 21 is huge -> 10; x = -30 is clamped to -20 first: e^-20 + 19 ~ 19 -> 10.
  auto lp = t2({{0, 0}});
  auto ref = t2({{20, -30}});
  expect_near(kl_penalty(lp, ref, KlPenaltyType::kLowVarKl), {{10, 10}});
}

TEST(CoreAlgos, KlLossAggregatesEstimator) {
  auto lp = t2({{-1, -2, 0}});
  auto ref = t2({{-1.5, -1, 5}});
  auto mask = t2({{1, 1, 0}});
  // token-mean of (0.106531, 0.718282) = 0.412407
  EXPECT_NEAR(item(kl_loss(lp, ref, mask, KlPenaltyType::kLowVarKl, LossAggMode::kTokenMean)),
              (0.106531 + 0.718282) / 2, kTol);
}

TEST(CoreAlgos, AdaptiveKlControllerFollowsZieglerUpdate) {
  AdaptiveKlController c(/*init_kl_coef=*/0.1, /*target_kl=*/0.1, /*horizon=*/100);
  // err = clip(0.15/0.1 - 1, +-0.2) = 0.2; mult = 1 + 0.2 * 10/100 = 1.02
  c.update(/*current_kl=*/0.15, /*n_steps=*/10);
  EXPECT_NEAR(c.value(), 0.102, 1e-12);
  // err = 0.09/0.1 - 1 = -0.1; mult = 1 - 0.1 * 10/100 = 0.99
  c.update(0.09, 10);
  EXPECT_NEAR(c.value(), 0.102 * 0.99, 1e-12);
  FixedKlController f(0.3);
  f.update(100, 100);
  EXPECT_EQ(f.value(), 0.3);
  EXPECT_THROW(AdaptiveKlController(0.1, 0.1, 0), verl::Error);
}

// scores [[0,0,1],[0,1,0]], old_lp all -1, ref [[-1.5,-1,-0.5],[-2,-1,-1]],
// mask [[1,1,1],[1,1,0]], k1: kld row 0 = (0.5, 0, -0.5), row 1 = (1, 0, 0 masked)
// beta 0.1: rewards row 0 = (-0.05, 0, 1.05), row 1 = (-0.1, 1, 0)
// current_kl = mean(0/3, 1/2) = 0.25; adaptive target 0.1, horizon 10, B = 2:
// err = clip(1.5) = 0.2; value 0.1 * (1 + 0.2 * 2/10) = 0.104
TEST(CoreAlgos, ApplyKlPenaltySubtractsBetaKlAndUpdatesController) {
  auto scores = t2({{0, 0, 1}, {0, 1, 0}});
  auto old_lp = t2({{-1, -1, -1}, {-1, -1, -1}});
  auto ref = t2({{-1.5, -1, -0.5}, {-2, -1, -1}});
  auto mask = t2({{1, 1, 1}, {1, 1, 0}});
  AdaptiveKlController c(0.1, 0.1, 10);
  auto out = apply_kl_penalty(scores, old_lp, ref, mask, c, KlPenaltyType::kKl);
  expect_near(out.token_level_rewards, {{-0.05, 0, 1.05}, {-0.1, 1, 0}});
  EXPECT_NEAR(out.current_kl, 0.25, kTol);
  EXPECT_NEAR(out.beta, 0.1, 1e-12);
  EXPECT_NEAR(c.value(), 0.104, 1e-9);
}

}  // namespace
}  // namespace verl::trainer::algos

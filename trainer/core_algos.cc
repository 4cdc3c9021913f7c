#include "trainer/core_algos.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "common/error.h"

namespace verl::trainer::algos {
namespace {

// verl_F.masked_mean's denominator guard.
constexpr double kMaskedMeanEps = 1e-8;
// verl_F.masked_whiten's variance guard.
constexpr double kWhitenEps = 1e-8;
// compute_policy_loss clamps log-ratio to +-20 so exp() cannot overflow.
constexpr double kLogRatioClamp = 20.0;
// low_var_kl: inputs clamped to +-20, output to +-10 (verl, for numerical stability).
constexpr double kLowVarKlInputClamp = 20.0;
constexpr double kLowVarKlOutputClamp = 10.0;
// AdaptiveKLController's proportional error bound.
constexpr double kAdaptiveKlErrorClip = 0.2;

Error invalid(const std::string& what, const std::string& value, const std::string& choices) {
  return Error{ExitCode::kInvalidConfig, what + " '" + value + "' is not supported",
               "use one of: " + choices};
}

torch::Tensor as_float_mask(const torch::Tensor& mask, const torch::Tensor& like) {
  return mask.to(like.scalar_type());
}

// Groups responses by index: returns for each response the id of its group (0..G-1), plus
// the sizes. Group ids follow first appearance, like verl's defaultdict.
struct Groups {
  std::vector<int64_t> group_of;  // [B]
  std::vector<int64_t> size;      // [G]
};
Groups group_by(const torch::Tensor& group_index) {
  auto idx = group_index.to(torch::kCPU, torch::kInt64).contiguous();
  const int64_t* p = idx.data_ptr<int64_t>();
  Groups g;
  std::unordered_map<int64_t, int64_t> id;
  g.group_of.resize(idx.numel());
  for (int64_t i = 0; i < idx.numel(); ++i) {
    auto it = id.find(p[i]);
    if (it == id.end()) {
      it = id.emplace(p[i], static_cast<int64_t>(g.size.size())).first;
      g.size.push_back(0);
    }
    g.group_of[i] = it->second;
    ++g.size[it->second];
  }
  return g;
}

void check_same_shape(const torch::Tensor& a, const torch::Tensor& b, const char* what) {
  if (a.sizes() != b.sizes()) {
    throw Error{ExitCode::kFailure,
                std::string("core_algos: ") + what + ": shape mismatch " +
                    c10::str(a.sizes()) + " vs " + c10::str(b.sizes())};
  }
}

}  // namespace

LossAggMode parse_loss_agg_mode(const std::string& name) {
  if (name == "token-mean") return LossAggMode::kTokenMean;
  if (name == "seq-mean-token-sum") return LossAggMode::kSeqMeanTokenSum;
  if (name == "seq-mean-token-mean") return LossAggMode::kSeqMeanTokenMean;
  if (name == "seq-mean-token-sum-norm") return LossAggMode::kSeqMeanTokenSumNorm;
  throw invalid("loss_agg_mode", name,
                "token-mean, seq-mean-token-sum, seq-mean-token-mean, seq-mean-token-sum-norm");
}

std::string to_string(LossAggMode mode) {
  switch (mode) {
    case LossAggMode::kTokenMean: return "token-mean";
    case LossAggMode::kSeqMeanTokenSum: return "seq-mean-token-sum";
    case LossAggMode::kSeqMeanTokenMean: return "seq-mean-token-mean";
    case LossAggMode::kSeqMeanTokenSumNorm: return "seq-mean-token-sum-norm";
  }
  return "?";
}

KlPenaltyType parse_kl_penalty(const std::string& name) {
  if (name == "kl" || name == "k1") return KlPenaltyType::kKl;
  if (name == "abs") return KlPenaltyType::kAbs;
  if (name == "mse" || name == "k2") return KlPenaltyType::kMse;
  if (name == "low_var_kl" || name == "k3") return KlPenaltyType::kLowVarKl;
  throw invalid("kl penalty", name, "kl (k1), abs, mse (k2), low_var_kl (k3)");
}

AdvantageEstimator parse_adv_estimator(const std::string& name) {
  if (name == "gae") return AdvantageEstimator::kGae;
  if (name == "grpo") return AdvantageEstimator::kGrpo;
  if (name == "rloo") return AdvantageEstimator::kRloo;
  if (name == "reinforce_plus_plus") return AdvantageEstimator::kReinforcePlusPlus;
  throw invalid("algorithm.adv_estimator", name, "gae, grpo, rloo, reinforce_plus_plus");
}

bool needs_critic(AdvantageEstimator estimator) { return estimator == AdvantageEstimator::kGae; }

torch::Tensor masked_sum(const torch::Tensor& values, const torch::Tensor& mask) {
  auto m = as_float_mask(mask, values);
  // where() first: a NaN outside the mask would survive a plain multiply (NaN * 0 = NaN).
  auto valid = torch::where(m != 0, values, torch::zeros_like(values));
  return (valid * m).sum();
}

torch::Tensor masked_mean(const torch::Tensor& values, const torch::Tensor& mask) {
  auto m = as_float_mask(mask, values);
  return masked_sum(values, m) / (m.sum() + kMaskedMeanEps);
}

torch::Tensor masked_mean(const torch::Tensor& values, const torch::Tensor& mask, int64_t dim) {
  auto m = as_float_mask(mask, values);
  auto valid = torch::where(m != 0, values, torch::zeros_like(values));
  return (valid * m).sum(dim) / (m.sum(dim) + kMaskedMeanEps);
}

torch::Tensor masked_var(const torch::Tensor& values, const torch::Tensor& mask, bool unbiased) {
  auto m = as_float_mask(mask, values);
  auto mean = masked_mean(values, m);
  auto centered = values - mean;
  auto variance = masked_mean(centered * centered, m);
  if (unbiased) {
    const double n = m.sum().item<double>();
    if (n < 2) {
      throw Error{ExitCode::kFailure,
                  "masked_var: the mask selects " + std::to_string(static_cast<int64_t>(n)) +
                      " element(s); the unbiased variance needs at least 2",
                  "use a larger mini-batch (ppo_mini_batch_size) or longer responses"};
    }
    variance = variance * (n / (n - 1));
  }
  return variance;
}

torch::Tensor masked_whiten(const torch::Tensor& values, const torch::Tensor& mask,
                            bool shift_mean) {
  auto mean = masked_mean(values, mask);
  auto var = masked_var(values, mask, /*unbiased=*/true);
  auto whitened = (values - mean) * torch::rsqrt(var + kWhitenEps);
  if (!shift_mean) whitened = whitened + mean;
  return whitened;
}

AdvantageReturn compute_gae_advantage_return(const torch::Tensor& token_level_rewards,
                                             const torch::Tensor& values,
                                             const torch::Tensor& response_mask, double gamma,
                                             double lam) {
  torch::NoGradGuard no_grad;
  check_same_shape(token_level_rewards, values, "gae rewards/values");
  check_same_shape(token_level_rewards, response_mask, "gae rewards/mask");
  auto mask = as_float_mask(response_mask, values);
  const int64_t gen_len = token_level_rewards.size(-1);
  auto nextvalues = torch::zeros({token_level_rewards.size(0)}, values.options());
  auto lastgaelam = torch::zeros_like(nextvalues);
  std::vector<torch::Tensor> reversed;
  reversed.reserve(gen_len);
  for (int64_t t = gen_len - 1; t >= 0; --t) {
    auto r_t = token_level_rewards.select(1, t);
    auto v_t = values.select(1, t);
    auto m_t = mask.select(1, t);
    auto delta = r_t + gamma * nextvalues - v_t;
    auto gaelam = delta + gamma * lam * lastgaelam;
    // Masked positions carry the running value and advantage through unchanged.
    nextvalues = v_t * m_t + (1 - m_t) * nextvalues;
    lastgaelam = gaelam * m_t + (1 - m_t) * lastgaelam;
    reversed.push_back(lastgaelam);
  }
  std::reverse(reversed.begin(), reversed.end());
  auto advantages = torch::stack(reversed, /*dim=*/1);
  auto returns = advantages + values;
  return {masked_whiten(advantages, mask), returns};
}

AdvantageReturn compute_grpo_outcome_advantage(const torch::Tensor& token_level_rewards,
                                               const torch::Tensor& response_mask,
                                               const torch::Tensor& group_index,
                                               bool norm_adv_by_std, double eps,
                                               SingletonGroup singleton) {
  torch::NoGradGuard no_grad;
  auto scores = token_level_rewards.sum(-1).to(torch::kCPU, torch::kDouble).contiguous();
  const Groups g = group_by(group_index);
  const int64_t bsz = scores.numel();
  if (static_cast<int64_t>(g.group_of.size()) != bsz) {
    throw Error{ExitCode::kFailure, "grpo: group_index has " +
                                        std::to_string(g.group_of.size()) + " entries for " +
                                        std::to_string(bsz) + " responses"};
  }
  const double* s = scores.data_ptr<double>();
  std::vector<double> sum(g.size.size(), 0.0), sq(g.size.size(), 0.0);
  for (int64_t i = 0; i < bsz; ++i) sum[g.group_of[i]] += s[i];
  std::vector<double> mean(g.size.size()), stdev(g.size.size());
  for (size_t k = 0; k < g.size.size(); ++k) mean[k] = sum[k] / g.size[k];
  for (int64_t i = 0; i < bsz; ++i) {
    const double d = s[i] - mean[g.group_of[i]];
    sq[g.group_of[i]] += d * d;
  }
  for (size_t k = 0; k < g.size.size(); ++k) {
    // torch.std is unbiased (n - 1).
    stdev[k] = g.size[k] > 1 ? std::sqrt(sq[k] / (g.size[k] - 1)) : 1.0;
  }
  auto adv = torch::empty({bsz}, torch::kDouble);
  double* a = adv.data_ptr<double>();
  for (int64_t i = 0; i < bsz; ++i) {
    const int64_t k = g.group_of[i];
    if (g.size[k] == 1) {
      // verl: mean 0, std 1.
      a[i] = singleton == SingletonGroup::kZero
                 ? 0.0
                 : (norm_adv_by_std ? s[i] / (1.0 + eps) : s[i]);
    } else {
      a[i] = norm_adv_by_std ? (s[i] - mean[k]) / (stdev[k] + eps) : s[i] - mean[k];
    }
  }
  auto out = adv.to(token_level_rewards.options()).unsqueeze(-1) *
             as_float_mask(response_mask, token_level_rewards);
  return {out, out};
}

AdvantageReturn compute_rloo_outcome_advantage(const torch::Tensor& token_level_rewards,
                                               const torch::Tensor& response_mask,
                                               const torch::Tensor& group_index,
                                               SingletonGroup singleton) {
  torch::NoGradGuard no_grad;
  auto scores = token_level_rewards.sum(-1).to(torch::kCPU, torch::kDouble).contiguous();
  const Groups g = group_by(group_index);
  const int64_t bsz = scores.numel();
  const double* s = scores.data_ptr<double>();
  std::vector<double> sum(g.size.size(), 0.0);
  for (int64_t i = 0; i < bsz; ++i) sum[g.group_of[i]] += s[i];
  auto adv = torch::empty({bsz}, torch::kDouble);
  double* a = adv.data_ptr<double>();
  for (int64_t i = 0; i < bsz; ++i) {
    const int64_t k = g.group_of[i];
    const double n = static_cast<double>(g.size[k]);
    if (g.size[k] > 1) {
      const double mean = sum[k] / n;
      a[i] = s[i] * n / (n - 1) - mean * n / (n - 1);
    } else {
      a[i] = singleton == SingletonGroup::kZero ? 0.0 : s[i];
    }
  }
  auto out = adv.to(token_level_rewards.options()).unsqueeze(-1) *
             as_float_mask(response_mask, token_level_rewards);
  return {out, out};
}

AdvantageReturn compute_reinforce_plus_plus_outcome_advantage(
    const torch::Tensor& token_level_rewards, const torch::Tensor& response_mask, double gamma) {
  torch::NoGradGuard no_grad;
  check_same_shape(token_level_rewards, response_mask, "reinforce++ rewards/mask");
  auto mask = as_float_mask(response_mask, token_level_rewards);
  auto returns = torch::zeros_like(token_level_rewards);
  auto running = torch::zeros({token_level_rewards.size(0)}, token_level_rewards.options());
  for (int64_t t = token_level_rewards.size(1) - 1; t >= 0; --t) {
    running = token_level_rewards.select(1, t) + gamma * running;
    returns.select(1, t).copy_(running);
    running = running * mask.select(1, t);  // reset after EOS
  }
  auto advantages = masked_whiten(returns, mask) * mask;
  return {advantages, returns};
}

torch::Tensor agg_loss(const torch::Tensor& loss_mat, const torch::Tensor& loss_mask,
                       LossAggMode mode) {
  auto m = as_float_mask(loss_mask, loss_mat);
  switch (mode) {
    case LossAggMode::kTokenMean:
      return masked_mean(loss_mat, m);
    case LossAggMode::kSeqMeanTokenSum:
      return (loss_mat * m).sum(-1).mean();
    case LossAggMode::kSeqMeanTokenMean:
      return ((loss_mat * m).sum(-1) / m.sum(-1)).mean();
    case LossAggMode::kSeqMeanTokenSumNorm:
      return (loss_mat * m).sum(-1).sum() / static_cast<double>(m.size(-1));
  }
  throw Error{ExitCode::kFailure, "agg_loss: unknown mode"};
}

PolicyLoss compute_policy_loss(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                               const torch::Tensor& advantages,
                               const torch::Tensor& response_mask, double clip_ratio_low,
                               double clip_ratio_high, double clip_ratio_c, LossAggMode mode) {
  if (!(clip_ratio_c > 1.0)) {
    throw Error{ExitCode::kInvalidConfig,
                "actor_rollout_ref.actor.clip_ratio_c must be greater than 1.0 for dual-clip PPO, "
                "got " + std::to_string(clip_ratio_c),
                "the default is 3.0"};
  }
  auto mask = as_float_mask(response_mask, log_prob);
  auto negative_approx_kl =
      torch::clamp(log_prob - old_log_prob, -kLogRatioClamp, kLogRatioClamp);
  auto ratio = torch::exp(negative_approx_kl);
  auto ppo_kl = masked_mean(-negative_approx_kl, mask);

  auto pg_losses1 = -advantages * ratio;
  auto pg_losses2 = -advantages * torch::clamp(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high);
  auto clip_pg_losses1 = torch::maximum(pg_losses1, pg_losses2);
  auto pg_clipfrac = masked_mean(torch::gt(pg_losses2, pg_losses1).to(log_prob.dtype()), mask);

  auto pg_losses3 = -advantages * clip_ratio_c;
  auto clip_pg_losses2 = torch::minimum(pg_losses3, clip_pg_losses1);
  auto negative = advantages < 0;
  auto pg_clipfrac_lower = masked_mean(
      (torch::gt(clip_pg_losses1, pg_losses3) & negative).to(log_prob.dtype()), mask);

  auto pg_losses = torch::where(negative, clip_pg_losses2, clip_pg_losses1);
  auto pg_loss = agg_loss(pg_losses, mask, mode);
  return {pg_loss, pg_clipfrac.detach(), ppo_kl.detach(), pg_clipfrac_lower.detach()};
}

ValueLoss compute_value_loss(const torch::Tensor& vpreds, const torch::Tensor& returns,
                             const torch::Tensor& values, const torch::Tensor& response_mask,
                             double cliprange_value, LossAggMode mode) {
  auto mask = as_float_mask(response_mask, vpreds);
  // clip_by_value: max(min(x, hi), lo) with tensor bounds.
  auto vpredclipped =
      torch::max(torch::min(vpreds, values + cliprange_value), values - cliprange_value);
  auto vf_losses1 = (vpreds - returns).pow(2);
  auto vf_losses2 = (vpredclipped - returns).pow(2);
  auto clipped = torch::max(vf_losses1, vf_losses2);
  auto vf_loss = 0.5 * agg_loss(clipped, mask, mode);
  auto vf_clipfrac = masked_mean(torch::gt(vf_losses2, vf_losses1).to(vpreds.dtype()), mask);
  return {vf_loss, vf_clipfrac.detach()};
}

torch::Tensor entropy_from_logits(const torch::Tensor& logits) {
  auto pd = torch::softmax(logits, -1);
  return torch::logsumexp(logits, -1) - (pd * logits).sum(-1);
}

torch::Tensor kl_penalty(const torch::Tensor& logprob, const torch::Tensor& ref_logprob,
                         KlPenaltyType type) {
  switch (type) {
    case KlPenaltyType::kKl:
      return logprob - ref_logprob;
    case KlPenaltyType::kAbs:
      return (logprob - ref_logprob).abs();
    case KlPenaltyType::kMse:
      return 0.5 * (logprob - ref_logprob).pow(2);
    case KlPenaltyType::kLowVarKl: {
      auto kl = torch::clamp(ref_logprob - logprob, -kLowVarKlInputClamp, kLowVarKlInputClamp);
      auto kld = torch::exp(kl) - kl - 1;
      return torch::clamp(kld, -kLowVarKlOutputClamp, kLowVarKlOutputClamp);
    }
  }
  throw Error{ExitCode::kFailure, "kl_penalty: unknown type"};
}

torch::Tensor kl_loss(const torch::Tensor& log_prob, const torch::Tensor& ref_log_prob,
                      const torch::Tensor& response_mask, KlPenaltyType type, LossAggMode mode) {
  return agg_loss(kl_penalty(log_prob, ref_log_prob, type), response_mask, mode);
}

AdaptiveKlController::AdaptiveKlController(double init_kl_coef, double target_kl,
                                           int64_t horizon)
    : value_(init_kl_coef), target_(target_kl), horizon_(horizon) {
  if (horizon <= 0) {
    throw Error{ExitCode::kInvalidConfig,
                "algorithm.kl_ctrl.horizon must be > 0 for the adaptive controller, got " +
                    std::to_string(horizon)};
  }
  if (!(target_kl > 0)) {
    throw Error{ExitCode::kInvalidConfig,
                "algorithm.kl_ctrl.target_kl must be > 0 for the adaptive controller, got " +
                    std::to_string(target_kl)};
  }
}

void AdaptiveKlController::update(double current_kl, int64_t n_steps) {
  const double err =
      std::clamp(current_kl / target_ - 1, -kAdaptiveKlErrorClip, kAdaptiveKlErrorClip);
  value_ *= 1 + err * static_cast<double>(n_steps) / static_cast<double>(horizon_);
}

std::unique_ptr<KlController> make_kl_controller(const std::string& type, double kl_coef,
                                                 double target_kl, int64_t horizon) {
  if (type == "fixed") return std::make_unique<FixedKlController>(kl_coef);
  if (type == "adaptive") return std::make_unique<AdaptiveKlController>(kl_coef, target_kl, horizon);
  throw invalid("algorithm.kl_ctrl.type", type, "fixed, adaptive");
}

KlRewardResult apply_kl_penalty(const torch::Tensor& token_level_scores,
                                const torch::Tensor& old_log_prob,
                                const torch::Tensor& ref_log_prob,
                                const torch::Tensor& response_mask, KlController& controller,
                                KlPenaltyType type) {
  torch::NoGradGuard no_grad;
  auto mask = as_float_mask(response_mask, token_level_scores);
  auto kld = kl_penalty(old_log_prob, ref_log_prob, type) * mask;
  KlRewardResult out;
  out.beta = controller.value();
  out.token_level_rewards = token_level_scores - out.beta * kld;
  out.current_kl = masked_mean(kld, mask, /*dim=*/-1).mean().item<double>();
  controller.update(out.current_kl, token_level_scores.size(0));
  return out;
}

}  // namespace verl::trainer::algos

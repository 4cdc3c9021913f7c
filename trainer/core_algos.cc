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
  if (name == "grpo_vectorized") return AdvantageEstimator::kGrpoVectorized;
  if (name == "grpo_passk") return AdvantageEstimator::kGrpoPassk;
  if (name == "rloo") return AdvantageEstimator::kRloo;
  if (name == "rloo_vectorized") return AdvantageEstimator::kRlooVectorized;
  if (name == "reinforce_plus_plus") return AdvantageEstimator::kReinforcePlusPlus;
  if (name == "reinforce_plus_plus_baseline") return AdvantageEstimator::kReinforcePlusPlusBaseline;
  if (name == "opo") return AdvantageEstimator::kOpo;
  if (name == "gpg") return AdvantageEstimator::kGpg;
  const std::string choices =
      "gae, grpo, grpo_vectorized, grpo_passk, rloo, rloo_vectorized, reinforce_plus_plus, "
      "reinforce_plus_plus_baseline, opo, gpg";
  if (name == "remax") {
    throw Error{ExitCode::kInvalidConfig,
                "algorithm.adv_estimator 'remax' is not supported: ReMax's baseline is the reward of "
                "an extra greedy rollout per prompt, which verlctl's trainer does not generate",
                "use one of: " + choices};
  }
  if (name == "optimal_token_baseline" || name == "tir_optimal_token_baseline") {
    throw Error{ExitCode::kInvalidConfig,
                "algorithm.adv_estimator '" + name + "' is not supported: its baseline needs "
                "sum_pi_squared (the sum of squared token probabilities over the vocabulary at every "
                "response position), which verlctl's log-prob pass does not compute",
                "use one of: " + choices};
  }
  throw invalid("algorithm.adv_estimator", name, choices);
}

PolicyLossMode parse_policy_loss_mode(const std::string& name) {
  if (name == "vanilla") return PolicyLossMode::kVanilla;
  if (name == "gspo") return PolicyLossMode::kGspo;
  if (name == "sapo") return PolicyLossMode::kSapo;
  if (name == "gpg") return PolicyLossMode::kGpg;
  if (name == "clip_cov") return PolicyLossMode::kClipCov;
  if (name == "kl_cov") return PolicyLossMode::kKlCov;
  if (name == "geo_mean") return PolicyLossMode::kGeoMean;
  if (name == "cispo") return PolicyLossMode::kCispo;
  const std::string choices = "vanilla, gspo, sapo, gpg, clip_cov, kl_cov, geo_mean, cispo";
  if (name == "bypass_mode") {
    throw Error{ExitCode::kInvalidConfig,
                "actor_rollout_ref.actor.policy_loss.loss_mode 'bypass_mode' is not supported: it "
                "trains against the rollout engine's log-probs in place of recomputed old log-probs; "
                "verlctl always recomputes them (algorithm.rollout_correction.rollout_is / rollout_rs work)",
                "use one of: " + choices};
  }
  throw invalid("actor_rollout_ref.actor.policy_loss.loss_mode", name, choices);
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

namespace {

// Per-response scores (sum over T) in double on the CPU, checked against the group index.
struct GroupedScores {
  torch::Tensor scores;  // [B] double, CPU
  Groups groups;
};
GroupedScores grouped_scores(const torch::Tensor& token_level_rewards,
                             const torch::Tensor& group_index, const char* who) {
  GroupedScores out{token_level_rewards.sum(-1).to(torch::kCPU, torch::kDouble).contiguous(),
                    group_by(group_index)};
  if (static_cast<int64_t>(out.groups.group_of.size()) != out.scores.numel()) {
    throw Error{ExitCode::kFailure, std::string(who) + ": group_index has " +
                                        std::to_string(out.groups.group_of.size()) + " entries for " +
                                        std::to_string(out.scores.numel()) + " responses"};
  }
  return out;
}

// One value per response broadcast over T, times the mask; advantages == returns.
AdvantageReturn broadcast(const torch::Tensor& per_response, const torch::Tensor& token_level_rewards,
                          const torch::Tensor& response_mask) {
  auto out = per_response.to(token_level_rewards.options()).unsqueeze(-1) *
             as_float_mask(response_mask, token_level_rewards);
  return {out, out};
}

std::vector<double> group_means(const GroupedScores& gs) {
  const double* s = gs.scores.data_ptr<double>();
  std::vector<double> mean(gs.groups.size.size(), 0.0);
  for (size_t i = 0; i < gs.groups.group_of.size(); ++i) mean[gs.groups.group_of[i]] += s[i];
  for (size_t k = 0; k < mean.size(); ++k) mean[k] /= static_cast<double>(gs.groups.size[k]);
  return mean;
}

}  // namespace

AdvantageReturn compute_grpo_vectorized_outcome_advantage(const torch::Tensor& token_level_rewards,
                                                          const torch::Tensor& response_mask,
                                                          const torch::Tensor& group_index,
                                                          bool norm_adv_by_std, double eps) {
  torch::NoGradGuard no_grad;
  // verl's group_mean_std, op for op in float32: its one-pass variance loses digits to
  // cancellation (a few 1e-6 relative on real-valued scores), and this name promises its numbers.
  auto scores = token_level_rewards.sum(-1).to(torch::kCPU, torch::kFloat32).contiguous();
  const Groups g = group_by(group_index);
  if (static_cast<int64_t>(g.group_of.size()) != scores.numel()) {
    throw Error{ExitCode::kFailure, "grpo_vectorized: group_index has " + std::to_string(g.group_of.size()) +
                                        " entries for " + std::to_string(scores.numel()) + " responses"};
  }
  auto gidx = torch::tensor(g.group_of, torch::kInt64);
  const int64_t n_groups = static_cast<int64_t>(g.size.size());
  auto zeros = [&] { return torch::zeros({n_groups}, torch::kFloat32); };
  auto count = zeros().index_add_(0, gidx, torch::ones_like(scores));
  auto s1 = zeros().index_add_(0, gidx, scores);
  auto s2 = zeros().index_add_(0, gidx, scores * scores);
  auto mean = s1 / count.clamp_min(1.0);
  auto var = (s2 - (s1 * s1) / count.clamp_min(1.0)) / (count - 1.0).clamp_min(1.0);
  auto stdev = torch::sqrt(torch::clamp(var, eps));
  auto single = count <= 1.0;  // verl: a group of one has mean 0, std 1
  mean = torch::where(single, torch::zeros_like(mean), mean);
  stdev = torch::where(single, torch::ones_like(stdev), stdev);
  auto centered = scores - mean.index_select(0, gidx);
  auto adv = norm_adv_by_std ? centered / (stdev.index_select(0, gidx) + eps) : centered;
  return broadcast(adv, token_level_rewards, response_mask);
}

AdvantageReturn compute_grpo_passk_outcome_advantage(const torch::Tensor& token_level_rewards,
                                                     const torch::Tensor& response_mask,
                                                     const torch::Tensor& group_index,
                                                     bool norm_adv_by_std, double eps) {
  torch::NoGradGuard no_grad;
  // verl ranks float32 scores with torch.topk; the same call here picks the same response among
  // ties.
  auto scores = token_level_rewards.sum(-1).to(torch::kCPU).contiguous();
  const Groups g = group_by(group_index);
  std::vector<std::vector<int64_t>> members(g.size.size());
  for (size_t i = 0; i < g.group_of.size(); ++i) members[g.group_of[i]].push_back(static_cast<int64_t>(i));
  auto adv = torch::zeros({scores.numel()}, torch::kDouble);
  for (const auto& idx : members) {
    if (idx.size() < 2) {
      throw Error{ExitCode::kInvalidConfig,
                  "algorithm.adv_estimator=grpo_passk needs at least 2 responses per prompt, a group "
                  "has " + std::to_string(idx.size()),
                  "set actor_rollout_ref.rollout.n to 2 or more"};
    }
    auto rewards = scores.index_select(0, torch::tensor(idx, torch::kInt64));
    auto top = torch::topk(rewards, 2);
    const auto values = std::get<0>(top).to(torch::kDouble);
    double advantage = values[0].item<double>() - values[1].item<double>();
    if (norm_adv_by_std) advantage /= rewards.to(torch::kDouble).std().item<double>() + eps;
    adv.data_ptr<double>()[idx[std::get<1>(top)[0].item<int64_t>()]] = advantage;
  }
  return broadcast(adv, token_level_rewards, response_mask);
}

AdvantageReturn compute_reinforce_plus_plus_baseline_outcome_advantage(
    const torch::Tensor& token_level_rewards, const torch::Tensor& response_mask,
    const torch::Tensor& group_index) {
  torch::NoGradGuard no_grad;
  const auto gs = grouped_scores(token_level_rewards, group_index, "reinforce_plus_plus_baseline");
  const auto mean = group_means(gs);
  const double* s = gs.scores.data_ptr<double>();
  auto centered = torch::empty({gs.scores.numel()}, torch::kDouble);
  double* c = centered.data_ptr<double>();
  for (size_t i = 0; i < gs.groups.group_of.size(); ++i) {
    const int64_t k = gs.groups.group_of[i];
    c[i] = gs.groups.size[k] > 1 ? s[i] - mean[k] : s[i];
  }
  auto mask = as_float_mask(response_mask, token_level_rewards);
  auto scores = broadcast(centered, token_level_rewards, response_mask).advantages;
  auto out = masked_whiten(scores, mask) * mask;
  return {out, out};
}

AdvantageReturn compute_opo_outcome_advantage(const torch::Tensor& token_level_rewards,
                                              const torch::Tensor& response_mask,
                                              const torch::Tensor& group_index) {
  torch::NoGradGuard no_grad;
  const auto gs = grouped_scores(token_level_rewards, group_index, "opo");
  const auto& g = gs.groups;
  auto lengths = as_float_mask(response_mask, token_level_rewards).sum(-1).to(torch::kCPU, torch::kDouble).contiguous();
  const double* len = lengths.data_ptr<double>();
  const double* s = gs.scores.data_ptr<double>();
  std::vector<double> weighted(g.size.size(), 0.0), total(g.size.size(), 0.0);
  for (size_t i = 0; i < g.group_of.size(); ++i) {
    weighted[g.group_of[i]] += len[i] * s[i];
    total[g.group_of[i]] += len[i];
  }
  auto adv = torch::empty({gs.scores.numel()}, torch::kDouble);
  double* a = adv.data_ptr<double>();
  for (size_t i = 0; i < g.group_of.size(); ++i) {
    const int64_t k = g.group_of[i];
    a[i] = g.size[k] > 1 ? s[i] - weighted[k] / total[k] : s[i];
  }
  return broadcast(adv, token_level_rewards, response_mask);
}

double gpg_alpha(int64_t batch_size, int64_t nonzero_scores) {
  return static_cast<double>(batch_size) / static_cast<double>(std::max<int64_t>(nonzero_scores, 1));
}

AdvantageReturn compute_gpg_outcome_advantage(const torch::Tensor& token_level_rewards,
                                              const torch::Tensor& response_mask,
                                              const torch::Tensor& group_index, double alpha) {
  torch::NoGradGuard no_grad;
  const auto gs = grouped_scores(token_level_rewards, group_index, "gpg");
  const auto mean = group_means(gs);
  const double* s = gs.scores.data_ptr<double>();
  constexpr double kFNorm = 1.0;  // verl's f_norm default; no config key sets it
  auto adv = torch::empty({gs.scores.numel()}, torch::kDouble);
  double* a = adv.data_ptr<double>();
  for (size_t i = 0; i < gs.groups.group_of.size(); ++i) {
    const int64_t k = gs.groups.group_of[i];
    a[i] = alpha * (s[i] - (gs.groups.size[k] > 1 ? mean[k] : 0.0)) / kFNorm;
  }
  return broadcast(adv, token_level_rewards, response_mask);
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
                       LossAggMode mode, double loss_scale_factor) {
  auto m = as_float_mask(loss_mask, loss_mat);
  // The seq-mean modes average over the rows that hold a token (verl excludes fully masked
  // rows); with none the clamp makes the mean 0 rather than verl's 0/0.
  auto seq_mean = [&](const torch::Tensor& seq_losses) {
    auto seq_mask = (m.sum(-1) > 0).to(loss_mat.scalar_type());
    return masked_sum(seq_losses, seq_mask) / seq_mask.sum().clamp_min(1);
  };
  switch (mode) {
    case LossAggMode::kTokenMean:
      return masked_mean(loss_mat, m);
    case LossAggMode::kSeqMeanTokenSum:
      return seq_mean((loss_mat * m).sum(-1));
    case LossAggMode::kSeqMeanTokenMean:
      return seq_mean((loss_mat * m).sum(-1) / (m.sum(-1) + kMaskedMeanEps));
    case LossAggMode::kSeqMeanTokenSumNorm:
      return (loss_mat * m).sum(-1).sum() /
             (loss_scale_factor > 0 ? loss_scale_factor : static_cast<double>(m.size(-1)));
  }
  throw Error{ExitCode::kFailure, "agg_loss: unknown mode"};
}

torch::Tensor agg_loss(const torch::Tensor& loss_mat, const torch::Tensor& loss_mask,
                       LossAggMode mode, const GlobalBatchInfo& global, double loss_scale_factor) {
  auto m = as_float_mask(loss_mask, loss_mat);
  const double dp = static_cast<double>(global.dp_size);
  switch (mode) {
    case LossAggMode::kTokenMean:
      if (global.batch_num_tokens <= 0) return agg_loss(loss_mat, loss_mask, mode) * dp;
      return masked_sum(loss_mat, m) / global.batch_num_tokens * dp;
    case LossAggMode::kSeqMeanTokenSum:
    case LossAggMode::kSeqMeanTokenMean: {
      if (global.global_batch_size <= 0) return agg_loss(loss_mat, loss_mask, mode) * dp;
      auto counts = m.sum(-1);
      auto seq_losses = mode == LossAggMode::kSeqMeanTokenSum ? (loss_mat * m).sum(-1)
                                                              : (loss_mat * m).sum(-1) / (counts + kMaskedMeanEps);
      return masked_sum(seq_losses, (counts > 0).to(loss_mat.scalar_type())) / global.global_batch_size * dp;
    }
    case LossAggMode::kSeqMeanTokenSumNorm:
      return agg_loss(loss_mat, loss_mask, mode, loss_scale_factor);
  }
  throw Error{ExitCode::kFailure, "agg_loss: unknown mode"};
}

namespace {

// GSPO / SAPO clamp the sequence log-ratio at 10 (verl: "for numerical stability").
constexpr double kGspoLogRatioMax = 10.0;
// geo_mean's guard on the per-sequence token count.
constexpr double kGeoMeanEps = 1e-8;
constexpr double kGeoMeanIsEps = 1e-10;

torch::Tensor float_of(const torch::Tensor& b, const torch::Tensor& like) { return b.to(like.scalar_type()); }

// verl's loss functions pass **config.global_batch_info to agg_loss: empty in its dp_actor
// (per micro-batch), filled by its engine workers (global batch).
torch::Tensor aggregate(const torch::Tensor& loss_mat, const torch::Tensor& mask, LossAggMode mode,
                        const PolicyLossParams& p) {
  return agg_loss(loss_mat, mask, mode, p.global, p.loss_scale_factor);
}

// The rollout-correction weights multiply the per-token loss before aggregation (all modes but
// geo_mean, which takes their geometric mean per sequence).
torch::Tensor weighted(const torch::Tensor& pg_losses, const torch::Tensor& is_weights) {
  return is_weights.defined() ? pg_losses * is_weights : pg_losses;
}

PolicyLoss vanilla_loss(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                        const torch::Tensor& advantages, const torch::Tensor& mask, const PolicyLossParams& p,
                        const torch::Tensor& is_weights) {
  if (!(p.clip_ratio_c > 1.0)) {
    throw Error{ExitCode::kInvalidConfig,
                "actor_rollout_ref.actor.clip_ratio_c must be greater than 1.0 for dual-clip PPO, "
                "got " + std::to_string(p.clip_ratio_c),
                "the default is 3.0"};
  }
  auto negative_approx_kl =
      torch::clamp(log_prob - old_log_prob, -kLogRatioClamp, kLogRatioClamp);
  auto ratio = torch::exp(negative_approx_kl);
  auto ppo_kl = masked_mean(-negative_approx_kl, mask);

  auto pg_losses1 = -advantages * ratio;
  auto pg_losses2 = -advantages * torch::clamp(ratio, 1 - p.clip_ratio_low, 1 + p.clip_ratio_high);
  auto clip_pg_losses1 = torch::maximum(pg_losses1, pg_losses2);
  auto pg_clipfrac = masked_mean(torch::gt(pg_losses2, pg_losses1).to(log_prob.dtype()), mask);

  auto pg_losses3 = -advantages * p.clip_ratio_c;
  auto clip_pg_losses2 = torch::minimum(pg_losses3, clip_pg_losses1);
  auto negative = advantages < 0;
  auto pg_clipfrac_lower = masked_mean(
      (torch::gt(clip_pg_losses1, pg_losses3) & negative).to(log_prob.dtype()), mask);

  auto pg_losses = weighted(torch::where(negative, clip_pg_losses2, clip_pg_losses1), is_weights);
  auto pg_loss = aggregate(pg_losses, mask, p.agg, p);
  return {pg_loss, pg_clipfrac.detach(), ppo_kl.detach(), pg_clipfrac_lower.detach()};
}

PolicyLoss gspo_loss(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                     const torch::Tensor& advantages, const torch::Tensor& mask,
                     const PolicyLossParams& p, const torch::Tensor& is_weights) {
  auto negative_approx_kl = log_prob - old_log_prob;
  auto seq_lengths = mask.sum(-1).clamp_min(1);
  auto negative_approx_kl_seq = (negative_approx_kl * mask).sum(-1) / seq_lengths;
  // s_it = sg[s_i] * pi / sg[pi]: the sequence ratio's value, each token's own gradient.
  auto log_ratio = torch::clamp_max(
      log_prob - log_prob.detach() + negative_approx_kl_seq.detach().unsqueeze(-1), kGspoLogRatioMax);
  auto ratio = torch::exp(log_ratio);
  auto pg_losses1 = -advantages * ratio;
  auto pg_losses2 = -advantages * torch::clamp(ratio, 1 - p.clip_ratio_low, 1 + p.clip_ratio_high);
  auto pg_losses = torch::maximum(pg_losses1, pg_losses2);
  PolicyLoss out;
  out.pg_loss = aggregate(weighted(pg_losses, is_weights), mask, LossAggMode::kSeqMeanTokenMean, p);
  out.pg_clipfrac = masked_mean(float_of(torch::gt(pg_losses2, pg_losses1), log_prob), mask).detach();
  out.ppo_kl = masked_mean(-negative_approx_kl, mask).detach();
  out.pg_clipfrac_lower = torch::zeros({}, log_prob.options()).detach();
  return out;
}

PolicyLoss sapo_loss(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                     const torch::Tensor& advantages, const torch::Tensor& mask,
                     const PolicyLossParams& p, const torch::Tensor& is_weights) {
  auto negative_approx_kl = torch::clamp(log_prob - old_log_prob, -kLogRatioClamp, kLogRatioClamp);
  auto ratio = torch::exp(negative_approx_kl);
  auto taus = torch::where(advantages > 0, torch::full_like(advantages, p.tau_pos),
                           torch::full_like(advantages, p.tau_neg));
  auto gates = torch::sigmoid(taus * (ratio - 1.0)) * (4.0 / taus);
  PolicyLoss out;
  out.pg_loss = aggregate(weighted(-gates * advantages, is_weights), mask, LossAggMode::kSeqMeanTokenMean, p);
  out.pg_clipfrac = torch::zeros({}, log_prob.options());
  out.ppo_kl = masked_mean(-negative_approx_kl, mask).detach();
  out.pg_clipfrac_lower = torch::zeros({}, log_prob.options());
  return out;
}

PolicyLoss clip_cov_loss(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                         const torch::Tensor& advantages, const torch::Tensor& mask,
                         const PolicyLossParams& p, const torch::Tensor& is_weights) {
  auto negative_approx_kl = log_prob - old_log_prob;  // verl does not clamp here
  auto ratio = torch::exp(negative_approx_kl);
  auto ppo_kl = masked_mean(-negative_approx_kl, mask);
  auto pg_losses1 = -advantages * ratio;
  auto pg_losses2 = -advantages * torch::clamp(ratio, 1 - p.clip_ratio_low, 1 + p.clip_ratio_high);
  auto valid = mask > 0;
  auto clip_by_origin = torch::gt(pg_losses2, pg_losses1) & valid;
  torch::Tensor candidates;
  {
    torch::NoGradGuard no_grad;
    auto cov = (advantages - masked_mean(advantages, mask)) *
               (log_prob.detach() - masked_mean(log_prob.detach(), mask));
    candidates = (cov < p.clip_cov_ub) & (cov > p.clip_cov_lb) & valid & ~clip_by_origin;
  }
  const int64_t clip_num =
      std::max<int64_t>(static_cast<int64_t>(p.clip_cov_ratio * mask.sum().item<double>()), 1);
  auto idx = torch::nonzero(candidates);  // [K, 2]
  auto corr = torch::ones_like(advantages);
  if (idx.size(0) > 0) {
    // verl draws clip_num of the candidates with torch.randperm from torch's global generator;
    // here from the caller's seeded one (docs/ARCHITECTURE.md, Determinism), so a run repeats.
    if (idx.size(0) > clip_num) {
      auto perm = p.generator ? torch::randperm(idx.size(0), *p.generator, torch::kInt64)
                              : torch::randperm(idx.size(0), torch::kInt64);
      idx = idx.index_select(0, perm.slice(0, 0, clip_num).to(idx.device()));
    }
    corr.view({-1}).index_fill_(0, idx.select(1, 0) * corr.size(1) + idx.select(1, 1), 0);
  }
  PolicyLoss out;
  out.pg_loss = aggregate(weighted(torch::maximum(pg_losses1, pg_losses2) * corr, is_weights), mask, p.agg, p);
  out.pg_clipfrac = masked_mean(float_of(corr == 0, log_prob), mask).detach();
  out.ppo_kl = ppo_kl.detach();
  return out;
}

PolicyLoss kl_cov_loss(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                       const torch::Tensor& advantages, const torch::Tensor& mask,
                       const PolicyLossParams& p, const torch::Tensor& is_weights) {
  auto negative_approx_kl = log_prob - old_log_prob;
  auto abs_kl = negative_approx_kl.abs();
  auto ratio = torch::exp(negative_approx_kl);
  auto pg_losses1 = -advantages * ratio;
  auto pg_losses_kl = pg_losses1 + p.ppo_kl_coef * abs_kl;
  auto selected = torch::zeros_like(mask, torch::kBool);
  {
    torch::NoGradGuard no_grad;
    auto valid = (mask > 0).reshape({-1});
    auto valid_idx = torch::nonzero(valid).reshape({-1});
    const int64_t n = valid_idx.numel();
    if (n > 0) {
      auto adv = advantages.detach().reshape({-1}).index_select(0, valid_idx).to(torch::kCPU);
      auto logp = log_prob.detach().reshape({-1}).index_select(0, valid_idx).to(torch::kCPU);
      auto cov = (adv - adv.mean()) * (logp - logp.mean());
      const int64_t k = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(n) * p.kl_cov_ratio));
      auto top = std::get<1>(torch::topk(cov, k, /*dim=*/-1, /*largest=*/true));
      selected.reshape({-1}).index_fill_(0, valid_idx.index_select(0, top.to(valid_idx.device())), true);
    }
  }
  PolicyLoss out;
  out.pg_loss = aggregate(weighted(torch::where(selected, pg_losses_kl, pg_losses1), is_weights), mask, p.agg, p);
  out.ppo_kl = masked_mean(abs_kl, mask).detach();
  return out;
}

PolicyLoss geo_mean_loss(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                         const torch::Tensor& advantages, const torch::Tensor& mask,
                         const PolicyLossParams& p, const torch::Tensor& is_weights) {
  auto negative_approx_kl = log_prob - old_log_prob;  // unclamped, as verl
  auto ppo_kl = masked_mean(-negative_approx_kl, mask);
  auto sgn = torch::sign(advantages);
  auto clamped = torch::clamp(negative_approx_kl, -p.clip_ratio_low, p.clip_ratio_high);
  auto kl_min = sgn * torch::min(sgn * negative_approx_kl, sgn * clamped);
  auto mask_sum = mask.sum(-1);
  auto ratio = torch::exp((kl_min * mask).sum(-1) / (mask_sum + kGeoMeanEps));
  // Sequence-level advantage: the token mean (GMPO assumes one advantage per sequence).
  auto advantage = (advantages * mask).sum(-1) / (mask_sum + kGeoMeanEps);
  auto pg_losses = -advantage * ratio;
  if (is_weights.defined()) {
    // The token weights' geometric mean per sequence (verl: log(w + 1e-10), mean over the mask).
    pg_losses = pg_losses * torch::exp((torch::log(is_weights + kGeoMeanIsEps) * mask).sum(-1) / (mask_sum + kGeoMeanEps));
  }
  PolicyLoss out;
  out.pg_loss = pg_losses.mean();
  auto clipped = torch::ne(negative_approx_kl, clamped);
  out.pg_clipfrac = masked_mean(float_of(clipped & (advantages > 0), log_prob), mask).detach();
  out.ppo_kl = ppo_kl.detach();
  out.pg_clipfrac_lower = masked_mean(float_of(clipped & (advantages < 0), log_prob), mask).detach();
  return out;
}

PolicyLoss cispo_loss(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                      const torch::Tensor& advantages, const torch::Tensor& mask,
                      const PolicyLossParams& p, const torch::Tensor& is_weights) {
  auto negative_approx_kl = torch::clamp(log_prob - old_log_prob, -kLogRatioClamp, kLogRatioClamp);
  auto ratio = torch::exp(negative_approx_kl);
  auto clipped_ratio = torch::clamp(ratio, 1 - p.clip_ratio_low, 1 + p.clip_ratio_high);
  // The gradient flows through log_prob only: the clipped ratio is a constant weight.
  auto pg_losses = -clipped_ratio.detach() * advantages * log_prob;
  PolicyLoss out;
  out.pg_loss = aggregate(weighted(pg_losses, is_weights), mask, p.agg, p);
  out.pg_clipfrac = masked_mean(float_of(ratio != clipped_ratio, log_prob), mask).detach();
  out.ppo_kl = masked_mean(-negative_approx_kl, mask).detach();
  out.pg_clipfrac_lower = torch::zeros({}, log_prob.options());
  return out;
}

}  // namespace

PolicyLoss compute_policy_loss(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                               const torch::Tensor& advantages,
                               const torch::Tensor& response_mask, const PolicyLossParams& p,
                               const torch::Tensor& rollout_is_weights) {
  auto mask = as_float_mask(response_mask, log_prob);
  const auto& w = rollout_is_weights;
  switch (p.loss_mode) {
    case PolicyLossMode::kVanilla:
      return vanilla_loss(old_log_prob, log_prob, advantages, mask, p, w);
    case PolicyLossMode::kGspo: return gspo_loss(old_log_prob, log_prob, advantages, mask, p, w);
    case PolicyLossMode::kSapo: return sapo_loss(old_log_prob, log_prob, advantages, mask, p, w);
    case PolicyLossMode::kGpg: {
      PolicyLoss out;
      out.pg_loss = aggregate(weighted(-log_prob * advantages, w), mask, p.agg, p);
      return out;
    }
    case PolicyLossMode::kClipCov: return clip_cov_loss(old_log_prob, log_prob, advantages, mask, p, w);
    case PolicyLossMode::kKlCov: return kl_cov_loss(old_log_prob, log_prob, advantages, mask, p, w);
    case PolicyLossMode::kGeoMean: return geo_mean_loss(old_log_prob, log_prob, advantages, mask, p, w);
    case PolicyLossMode::kCispo: return cispo_loss(old_log_prob, log_prob, advantages, mask, p, w);
  }
  throw Error{ExitCode::kFailure, "compute_policy_loss: unknown loss mode"};
}

PolicyLoss compute_policy_loss(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                               const torch::Tensor& advantages,
                               const torch::Tensor& response_mask, double clip_ratio_low,
                               double clip_ratio_high, double clip_ratio_c, LossAggMode mode) {
  PolicyLossParams p;
  p.agg = mode;
  p.clip_ratio_low = clip_ratio_low;
  p.clip_ratio_high = clip_ratio_high;
  p.clip_ratio_c = clip_ratio_c;
  return compute_policy_loss(old_log_prob, log_prob, advantages, response_mask, p);
}

PolicyLoss compute_policy_loss_reinforce(const torch::Tensor& rollout_log_prob,
                                         const torch::Tensor& log_prob,
                                         const torch::Tensor& advantages,
                                         const torch::Tensor& response_mask, LossAggMode mode) {
  auto mask = as_float_mask(response_mask, log_prob);
  PolicyLoss out;
  out.pg_loss = agg_loss(-advantages * log_prob, mask, mode);
  out.ppo_kl = masked_mean(rollout_log_prob - log_prob, mask).detach();
  return out;
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

PfPpoMethod parse_pf_ppo_method(const std::string& name) {
  if (name == "pow") return PfPpoMethod::kPow;
  if (name == "max_min") return PfPpoMethod::kMaxMin;
  if (name == "max_random") return PfPpoMethod::kMaxRandom;
  throw invalid("algorithm.pf_ppo.reweight_method", name, "pow, max_min, max_random");
}

torch::Tensor pf_ppo_weights(const torch::Tensor& scores, PfPpoMethod method, double weight_pow) {
  torch::NoGradGuard no_grad;
  torch::Tensor w;
  switch (method) {
    case PfPpoMethod::kPow:
      w = torch::pow(torch::abs(scores), weight_pow);
      break;
    case PfPpoMethod::kMaxMin:
      w = ((scores == scores.max()) | (scores == scores.min())).to(scores.scalar_type());
      break;
    case PfPpoMethod::kMaxRandom:
      w = torch::where(scores == scores.max(), torch::full_like(scores, 0.4), torch::full_like(scores, 0.1));
      break;
  }
  // verl: every response keeps a sliver of probability.
  constexpr double kMinWeight = 1e-8;
  return torch::clamp(w + kMinWeight, kMinWeight);
}

torch::Tensor pf_ppo_resample_indices(const torch::Tensor& scores, PfPpoMethod method, double weight_pow,
                                      const at::Generator& generator) {
  auto w = pf_ppo_weights(scores.to(torch::kCPU), method, weight_pow);
  return torch::multinomial(w, w.size(0), /*replacement=*/true, generator);
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

// The PPO/GRPO algorithm kernels, with verl's semantics (verl/trainer/ppo/core_algos.py and
// verl/utils/torch_functional.py): masked statistics, advantage estimators, the clipped policy
// and value losses, KL estimators and controllers, and loss aggregation.
//
// Shapes: B = responses in the (micro)batch, T = response length (padded).
//   token-level tensors are [B, T] float; response_mask is [B, T] (float or bool; 1 = a real
//   response token, 0 = padding after EOS); group_index is int64 [B] (responses of one prompt
//   share an index).
// Every function is pure: no state, no randomness, same device in and out. Advantage estimators
// run under NoGradGuard (their outputs never carry a graph); the losses keep the graph of
// log_prob / vpreds so the caller can call backward(). Not thread-affine; safe to call from any
// thread on distinct tensors.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

namespace verl::trainer::algos {

// ---- names as they appear in the job config (templates/job.yaml) ----

// actor.loss_agg_mode / critic.loss_agg_mode.
enum class LossAggMode {
  kTokenMean,            // "token-mean": sum(loss*mask) / sum(mask) over the whole batch
  kSeqMeanTokenSum,      // "seq-mean-token-sum": mean over sequences of sum over tokens
  kSeqMeanTokenMean,     // "seq-mean-token-mean": mean over sequences of per-sequence token mean
  kSeqMeanTokenSumNorm,  // "seq-mean-token-sum-norm": sum(loss*mask) / T (Dr.GRPO; T = mask width)
};
// Throws verl::Error (kInvalidConfig) naming the value and the accepted ones.
LossAggMode parse_loss_agg_mode(const std::string& name);
std::string to_string(LossAggMode mode);

// algorithm.kl_penalty / actor.kl_loss_type.
enum class KlPenaltyType {
  kKl,        // "kl" or "k1": logprob - ref_logprob
  kAbs,       // "abs": |logprob - ref_logprob|
  kMse,       // "mse" or "k2": 0.5 * (logprob - ref_logprob)^2
  kLowVarKl,  // "low_var_kl" or "k3": exp(ref - logp) - (ref - logp) - 1, clamped to [-10, 10]
};
KlPenaltyType parse_kl_penalty(const std::string& name);

// algorithm.adv_estimator.
enum class AdvantageEstimator { kGae, kGrpo, kRloo, kReinforcePlusPlus };
AdvantageEstimator parse_adv_estimator(const std::string& name);
// GAE needs a critic; the outcome estimators do not.
bool needs_critic(AdvantageEstimator estimator);

// ---- masked statistics (verl_F) ----

// sum(values * mask) (NaNs outside the mask do not leak in).
torch::Tensor masked_sum(const torch::Tensor& values, const torch::Tensor& mask);
// sum(values * mask) / (sum(mask) + 1e-8), over all elements: a 0-dim tensor.
torch::Tensor masked_mean(const torch::Tensor& values, const torch::Tensor& mask);
// The same along one dimension (e.g. dim=-1: one mean per sequence).
torch::Tensor masked_mean(const torch::Tensor& values, const torch::Tensor& mask, int64_t dim);
// Masked variance; unbiased multiplies by n/(n-1). Throws verl::Error when unbiased and the
// mask holds fewer than two elements (verl raises ValueError there too).
torch::Tensor masked_var(const torch::Tensor& values, const torch::Tensor& mask,
                         bool unbiased = true);
// (values - mean) * rsqrt(var + 1e-8), mean and the unbiased var over the mask. With
// shift_mean=false the mean is added back. Elements outside the mask are transformed too
// (verl does not zero them); multiply by the mask if that matters.
torch::Tensor masked_whiten(const torch::Tensor& values, const torch::Tensor& mask,
                            bool shift_mean = true);

// ---- advantage estimators ----

struct AdvantageReturn {
  torch::Tensor advantages;  // [B, T]
  torch::Tensor returns;     // [B, T]
};

// GAE by a reverse scan over t = T-1..0: delta_t = r_t + gamma*V_{t+1} - V_t,
// A_t = delta_t + gamma*lam*A_{t+1}; at masked positions nextvalue and the running A are
// carried through unchanged (verl's "skip observation tokens"). returns = A + values (before
// whitening); advantages are then whitened over the mask.
AdvantageReturn compute_gae_advantage_return(const torch::Tensor& token_level_rewards,
                                             const torch::Tensor& values,
                                             const torch::Tensor& response_mask, double gamma,
                                             double lam);

// What an outcome estimator does with a group of one response (rollout.n == 1, or a prompt
// whose other responses were filtered out).
enum class SingletonGroup {
  kKeepScore,  // verl: mean 0 and std 1, so the advantage is the score itself (/(1+eps))
  kZero,       // no baseline, no signal: advantage 0
};

// GRPO outcome advantage: score_i = sum_t r_it; within each group, (score - mean) / (std + eps)
// with the unbiased std (torch.std), or score - mean without std normalisation (Dr.GRPO).
// advantages == returns == the per-response value broadcast over T, times the mask.
AdvantageReturn compute_grpo_outcome_advantage(
    const torch::Tensor& token_level_rewards, const torch::Tensor& response_mask,
    const torch::Tensor& group_index, bool norm_adv_by_std, double eps = 1e-6,
    SingletonGroup singleton = SingletonGroup::kKeepScore);

// RLOO: for a group of n > 1, A_i = n/(n-1) * (score_i - mean) (= score_i minus the mean of the
// others); single-member groups per `singleton`. Broadcast over T times the mask.
AdvantageReturn compute_rloo_outcome_advantage(
    const torch::Tensor& token_level_rewards, const torch::Tensor& response_mask,
    const torch::Tensor& group_index, SingletonGroup singleton = SingletonGroup::kKeepScore);

// REINFORCE++: discounted return G_t = r_t + gamma * G_{t+1} by a reverse scan, the running
// return reset to 0 after masked positions; advantages = masked_whiten(G) * mask, returns = G.
AdvantageReturn compute_reinforce_plus_plus_outcome_advantage(
    const torch::Tensor& token_level_rewards, const torch::Tensor& response_mask, double gamma);

// ---- losses ----

// Aggregates a [B, T] loss matrix into a scalar (see LossAggMode).
torch::Tensor agg_loss(const torch::Tensor& loss_mat, const torch::Tensor& loss_mask,
                       LossAggMode mode);

struct PolicyLoss {
  torch::Tensor pg_loss;            // scalar, differentiable w.r.t. log_prob
  torch::Tensor pg_clipfrac;        // scalar: fraction of tokens where the PPO clip bound
  torch::Tensor ppo_kl;             // scalar: masked mean of old_log_prob - log_prob
  torch::Tensor pg_clipfrac_lower;  // scalar: fraction where the dual clip bound (A < 0)
};
// PPO clipped surrogate with dual clip (verl's compute_policy_loss / "vanilla"):
//   ratio = exp(clamp(log_prob - old_log_prob, -20, 20))
//   l1 = -A*ratio, l2 = -A*clamp(ratio, 1-clip_ratio_low, 1+clip_ratio_high), c1 = max(l1, l2)
//   for A < 0: loss = min(-A*clip_ratio_c, c1) (bounds the loss of a huge ratio); else c1.
// clip_ratio_c must be > 1 (verl asserts; here verl::Error kInvalidConfig).
PolicyLoss compute_policy_loss(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                               const torch::Tensor& advantages,
                               const torch::Tensor& response_mask, double clip_ratio_low,
                               double clip_ratio_high, double clip_ratio_c, LossAggMode mode);

struct ValueLoss {
  torch::Tensor vf_loss;      // scalar, differentiable w.r.t. vpreds
  torch::Tensor vf_clipfrac;  // scalar: fraction of tokens where the clipped error was larger
};
// vf_loss = 0.5 * agg(max((vpreds - R)^2, (clip(vpreds, V - c, V + c) - R)^2)).
ValueLoss compute_value_loss(const torch::Tensor& vpreds, const torch::Tensor& returns,
                             const torch::Tensor& values, const torch::Tensor& response_mask,
                             double cliprange_value, LossAggMode mode);

// Categorical entropy per position: logsumexp(logits) - sum(softmax(logits) * logits) over
// the last dimension. [B, T, V] -> [B, T].
torch::Tensor entropy_from_logits(const torch::Tensor& logits);

// Per-token KL estimate (see KlPenaltyType). Differentiable w.r.t. logprob.
torch::Tensor kl_penalty(const torch::Tensor& logprob, const torch::Tensor& ref_logprob,
                         KlPenaltyType type);

// The actor's KL loss (use_kl_loss): agg_loss(kl_penalty(log_prob, ref_log_prob, type)). The
// caller adds kl_loss_coef * this to the policy loss (verl's dp_actor).
torch::Tensor kl_loss(const torch::Tensor& log_prob, const torch::Tensor& ref_log_prob,
                      const torch::Tensor& response_mask, KlPenaltyType type, LossAggMode mode);

// ---- KL controllers (algorithm.kl_ctrl) ----

class KlController {
 public:
  virtual ~KlController() = default;
  virtual double value() const = 0;
  // current_kl: the batch's mean per-sequence KL; n_steps: responses in the batch.
  virtual void update(double current_kl, int64_t n_steps) = 0;
  // For checkpoints: the coefficient is the controller's whole state.
  virtual void set_value(double value) = 0;
};

class FixedKlController : public KlController {
 public:
  explicit FixedKlController(double kl_coef) : value_(kl_coef) {}
  double value() const override { return value_; }
  void update(double /*current_kl*/, int64_t /*n_steps*/) override {}
  void set_value(double value) override { value_ = value; }

 private:
  double value_;
};

// Ziegler et al. 2019: err = clip(current_kl / target_kl - 1, -0.2, 0.2);
// value *= 1 + err * n_steps / horizon.
class AdaptiveKlController : public KlController {
 public:
  // Throws verl::Error (kInvalidConfig) when horizon <= 0 or target_kl <= 0.
  AdaptiveKlController(double init_kl_coef, double target_kl, int64_t horizon);
  double value() const override { return value_; }
  void update(double current_kl, int64_t n_steps) override;
  void set_value(double value) override { value_ = value; }

 private:
  double value_;
  double target_;
  int64_t horizon_;
};

// type: "fixed" | "adaptive" (algorithm.kl_ctrl.type); throws verl::Error for anything else.
std::unique_ptr<KlController> make_kl_controller(const std::string& type, double kl_coef,
                                                 double target_kl, int64_t horizon);

// KL in the reward (algorithm.use_kl_in_reward; verl's ray_trainer.apply_kl_penalty):
//   kld = kl_penalty(old_log_prob, ref_log_prob) * mask; rewards = scores - beta * kld,
//   current_kl = mean over sequences of the per-sequence masked mean of kld;
//   then controller.update(current_kl, B). beta is the value before the update.
struct KlRewardResult {
  torch::Tensor token_level_rewards;  // [B, T]
  double current_kl = 0;              // metric actor/reward_kl_penalty
  double beta = 0;                    // metric actor/reward_kl_penalty_coeff
};
KlRewardResult apply_kl_penalty(const torch::Tensor& token_level_scores,
                                const torch::Tensor& old_log_prob,
                                const torch::Tensor& ref_log_prob,
                                const torch::Tensor& response_mask, KlController& controller,
                                KlPenaltyType type);

}  // namespace verl::trainer::algos

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
#include <optional>
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

// algorithm.adv_estimator. Every name verl's AdvantageEstimator enum holds (at b178a3cd) is either
// here or rejected by parse_adv_estimator with the reason.
enum class AdvantageEstimator {
  kGae,
  kGrpo,
  kGrpoVectorized,             // "grpo_vectorized": verl's group_mean_std (variance floored at eps)
  kGrpoPassk,                  // "grpo_passk": only each group's best response, r_max - r_2nd
  kRloo,
  kRlooVectorized,             // "rloo_vectorized": a group of one gets advantage 0
  kReinforcePlusPlus,
  kReinforcePlusPlusBaseline,  // "reinforce_plus_plus_baseline": score - group mean, whitened
  kOpo,                        // "opo": length-weighted group baseline
  kGpg,                        // "gpg": alpha * (score - group mean), alpha = B / #nonzero scores
};
// Throws verl::Error (kInvalidConfig) for an unknown name, and for remax,
// optimal_token_baseline and tir_optimal_token_baseline with the reason they are not supported.
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

// GRPO as verl's compute_grpo_vectorized_outcome_advantage: per group mean and
// std = sqrt(max((sum(s^2) - sum(s)^2/n) / max(n-1, 1), eps)); a group of one has mean 0, std 1;
// A = (s - mean) / (std + eps) (or s - mean). In float32 with verl's operations, so that the
// numbers are verl's (its one-pass variance differs from grpo's by a few 1e-6 relative).
AdvantageReturn compute_grpo_vectorized_outcome_advantage(const torch::Tensor& token_level_rewards,
                                                          const torch::Tensor& response_mask,
                                                          const torch::Tensor& group_index,
                                                          bool norm_adv_by_std, double eps = 1e-6);

// Pass@k (arXiv 2503.19595): in each group only the best response (torch.topk's first pick) gets
// r_max - r_second_max, divided by (std + eps) with norm_adv_by_std; the rest get 0. Throws
// verl::Error when a group has fewer than two responses (verl raises ValueError).
AdvantageReturn compute_grpo_passk_outcome_advantage(const torch::Tensor& token_level_rewards,
                                                     const torch::Tensor& response_mask,
                                                     const torch::Tensor& group_index,
                                                     bool norm_adv_by_std, double eps = 1e-6);

// REINFORCE++ with a group baseline: (score - group mean) broadcast over T, times the mask, then
// masked_whiten over the mask (a group of one keeps its score). The caller may re-whiten over
// every rank's tokens, as the GAE path does.
AdvantageReturn compute_reinforce_plus_plus_baseline_outcome_advantage(
    const torch::Tensor& token_level_rewards, const torch::Tensor& response_mask,
    const torch::Tensor& group_index);

// OPO (arXiv 2505.23585): score - sum(len_i * score_i) / sum(len_i) over the group, len = the
// response's token count; a group of one keeps its score.
AdvantageReturn compute_opo_outcome_advantage(const torch::Tensor& token_level_rewards,
                                              const torch::Tensor& response_mask,
                                              const torch::Tensor& group_index);

// GPG (verl's compute_gpg_outcome_advantage): alpha * (score - group mean) / f_norm with
// alpha = B / max(#nonzero scores, 1) over the batch (gpg_alpha; the trainer counts over every
// rank) and f_norm = 1; a group of one keeps alpha * score.
double gpg_alpha(int64_t batch_size, int64_t nonzero_scores);
AdvantageReturn compute_gpg_outcome_advantage(const torch::Tensor& token_level_rewards,
                                              const torch::Tensor& response_mask,
                                              const torch::Tensor& group_index, double alpha);

// REINFORCE++: discounted return G_t = r_t + gamma * G_{t+1} by a reverse scan, the running
// return reset to 0 after masked positions; advantages = masked_whiten(G) * mask, returns = G.
AdvantageReturn compute_reinforce_plus_plus_outcome_advantage(
    const torch::Tensor& token_level_rewards, const torch::Tensor& response_mask, double gamma);

// ---- losses ----

// Aggregates a [B, T] loss matrix into a scalar (see LossAggMode). As verl's agg_loss: the
// seq-mean modes leave out rows without a token and average over the others, each row's token
// mean dividing by (count + 1e-8). Where verl gives NaN (no token at all in token-mean, no
// non-empty row in the seq-mean modes) this gives 0, so a fully masked micro-batch adds nothing.
// loss_scale_factor replaces T in seq-mean-token-sum-norm when > 0 (verl's engine path passes
// actor.loss_scale_factor there; its dp_actor, like our actor, never does).
torch::Tensor agg_loss(const torch::Tensor& loss_mat, const torch::Tensor& loss_mask,
                       LossAggMode mode, double loss_scale_factor = 0);

// Global-batch normalisation (verl's agg_loss with dp_size / batch_num_tokens /
// global_batch_size, as its engine workers pass them): the micro-batch's masked sum divided by
// the token count (token-mean) or the non-empty row count (seq-mean modes) of the whole global
// batch, over every micro-batch and DP rank, times dp_size (the gradient all-reduce averages over
// ranks). Summing the micro-batches' losses then gives the global batch's mean exactly, however
// the rows fall into micro-batches. A count <= 0 falls back to the micro-batch's own (the
// default path above). The actor uses it with trainer.use_legacy_worker_impl=disable (verl's
// engine workers); by default it normalises per micro-batch, as verl's dp_actor does.
struct GlobalBatchInfo {
  int64_t dp_size = 1;
  double batch_num_tokens = 0;   // response tokens in the global (mini-)batch
  double global_batch_size = 0;  // responses with at least one token in it
};
torch::Tensor agg_loss(const torch::Tensor& loss_mat, const torch::Tensor& loss_mask,
                       LossAggMode mode, const GlobalBatchInfo& global, double loss_scale_factor = 0);

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

// actor.policy_loss.loss_mode: verl's POLICY_LOSS_REGISTRY names (bypass_mode is rejected by
// parse_policy_loss_mode: verlctl always recomputes the old log-probs, verl's decoupled mode).
enum class PolicyLossMode { kVanilla, kGspo, kSapo, kGpg, kClipCov, kKlCov, kGeoMean, kCispo };
PolicyLossMode parse_policy_loss_mode(const std::string& name);

// Everything the policy losses read from actor_rollout_ref.actor (verl's ActorConfig names).
struct PolicyLossParams {
  PolicyLossMode loss_mode = PolicyLossMode::kVanilla;
  LossAggMode agg = LossAggMode::kTokenMean;  // loss_agg_mode (gspo and sapo force seq-mean-token-mean)
  double clip_ratio_low = 0.2;
  double clip_ratio_high = 0.2;
  double clip_ratio_c = 3.0;
  double tau_pos = 1.0;                       // sapo
  double tau_neg = 1.05;
  double clip_cov_ratio = 0.0002;             // policy_loss.* (clip_cov)
  double clip_cov_lb = 1.0;
  double clip_cov_ub = 5.0;
  double kl_cov_ratio = 0.0002;               // policy_loss.* (kl_cov)
  double ppo_kl_coef = 0.1;
  // How every mode's agg_loss normalises (verl's config.global_batch_info): the default is per
  // micro-batch (dp_actor); the trainer fills it in global-batch mode (engine workers).
  GlobalBatchInfo global;
  double loss_scale_factor = 0;               // actor.loss_scale_factor; 0: the response width
  // clip_cov's draw of the tokens whose gradient is cut; nullopt: torch's global generator.
  std::optional<at::Generator> generator;
};

// Dispatches on params.loss_mode, with verl's formulas (verl/trainer/ppo/core_algos.py):
//   vanilla   compute_policy_loss above
//   gspo      sequence ratio exp(mean_t(logp - old)) with a per-token straight-through gradient,
//             log-ratio clamped at 10, clipped like PPO (no dual clip), seq-mean-token-mean
//   sapo      -sigmoid(tau*(r - 1)) * 4/tau * A, tau = tau_pos where A > 0 else tau_neg,
//             seq-mean-token-mean
//   gpg       -logp * A
//   clip_cov  PPO clip, plus: among tokens not clipped whose covariance (A - mean A)(logp -
//             mean logp) lies in (lb, ub), max(clip_cov_ratio * #tokens, 1) chosen at random get
//             no gradient (weight 0); pg_clipfrac = their share
//   kl_cov    -A * r, plus ppo_kl_coef * |logp - old| on the max(1, kl_cov_ratio * #tokens)
//             tokens of largest covariance; ppo_kl = masked mean of |logp - old|
//   geo_mean  GMPO: exp(mean_t of the sign-aware clipped log-ratio) times the sequence's mean
//             advantage, averaged over sequences (loss_agg_mode unused)
//   cispo     -sg(clip(r, 1 - low, 1 + high)) * A * logp
// Metrics a mode does not compute are undefined tensors (verl leaves them out).
// rollout_is_weights ([B, T], trainer/rollout_correction.h; undefined: none) multiply the
// per-token loss before aggregation, as verl's loss functions do; geo_mean takes their geometric
// mean per sequence.
PolicyLoss compute_policy_loss(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                               const torch::Tensor& advantages,
                               const torch::Tensor& response_mask, const PolicyLossParams& params,
                               const torch::Tensor& rollout_is_weights = {});

// verl's compute_policy_loss_reinforce without IS weights: agg(-A * logp); ppo_kl is the masked
// mean of rollout_log_prob - log_prob. (verl reaches it only through loss_mode=bypass_mode.)
PolicyLoss compute_policy_loss_reinforce(const torch::Tensor& rollout_log_prob,
                                         const torch::Tensor& log_prob,
                                         const torch::Tensor& advantages,
                                         const torch::Tensor& response_mask, LossAggMode mode);

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

// ---- PF-PPO (algorithm.use_pf_ppo, algorithm.pf_ppo.*) ----

// algorithm.pf_ppo.reweight_method.
enum class PfPpoMethod {
  kPow,        // "pow": |score|^weight_pow
  kMaxMin,     // "max_min": 1 for the batch's highest and lowest scores, else 0
  kMaxRandom,  // "max_random": 0.4 for the highest score, else 0.1
};
PfPpoMethod parse_pf_ppo_method(const std::string& name);

// verl's compute_pf_ppo_reweight_data: per-response weights from the scores (above), then
// clamp(w + 1e-8, min 1e-8), and B draws with replacement by torch.multinomial from `generator`.
// Returns the [B] int64 row indices (CPU) of the resampled batch. scores: [B], one per response.
torch::Tensor pf_ppo_weights(const torch::Tensor& scores, PfPpoMethod method, double weight_pow);
torch::Tensor pf_ppo_resample_indices(const torch::Tensor& scores, PfPpoMethod method, double weight_pow,
                                      const at::Generator& generator);

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

// Rollout correction (algorithm.rollout_correction.*), as verl's
// verl/trainer/ppo/rollout_corr_helper.py at b178a3cd: importance-sampling weights and rejection
// masks between the policy that sampled the responses (the rollout engine's log-probs,
// pi_rollout) and the trainer's recomputed old log-probs (pi_old), with verl's metric names under
// "rollout_corr/".
//
//   IS (rollout_is = token | sequence): w = exp(clamp(log(pi_old / pi_rollout), -20, 20)) per
//     token, or of the row's summed log-ratio; zero on padding; truncated above at
//     rollout_is_threshold; optionally divided by the batch's mean weight. The policy loss
//     multiplies its per-token loss by w (core_algos.h compute_policy_loss).
//   RS (rollout_rs = "token_k1,seq_mean_k3,..."): a token or a whole row leaves response_mask
//     when its divergence estimate (k1 / k2 / k3, per token or its row's sum, mean or max) falls
//     outside rollout_rs_threshold; every listed option must pass.
//
// Pure functions of their tensors (no state, no randomness); the batch-normalised mean may span
// every DP rank through the all_reduce_sum callback (verl's distributed_masked_mean). Errors are
// verl::Error (kInvalidConfig) naming the algorithm.rollout_correction key.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace verl::trainer::algos {

// algorithm.rollout_correction.rollout_is.
enum class RolloutIsLevel { kNone, kToken, kSequence };
RolloutIsLevel parse_rollout_is(const std::optional<std::string>& name);

// One rejection-sampling option with its bounds. k1 options bound log-ratio space from below and
// above (lower/upper as ratios); the others only from above.
struct RolloutRsOption {
  std::string name;                // token_k1 ... seq_max_k3
  std::optional<double> lower;     // k1 only
  double upper = 0;
};
// verl's _parse_rollout_rs_thresholds: rollout_rs is a comma-separated list (duplicates dropped),
// threshold one value for all or one per option; a k1 entry is "lower_upper" or "upper"
// (lower = 1/upper). Throws verl::Error naming the key and the offending entry.
std::vector<RolloutRsOption> parse_rollout_rs(const std::string& rollout_rs,
                                              const std::optional<std::string>& rollout_rs_threshold);

struct RolloutCorrectionConfig {
  RolloutIsLevel rollout_is = RolloutIsLevel::kNone;
  double rollout_is_threshold = 2.0;
  bool rollout_is_batch_normalize = false;
  std::vector<RolloutRsOption> rollout_rs;  // empty: no rejection sampling
  // True when either IS or RS is on: the engine's log-probs then travel with the batch.
  bool enabled() const { return rollout_is != RolloutIsLevel::kNone || !rollout_rs.empty(); }
};
// From the keys' values (null = nullopt); throws verl::Error as the parsers above.
RolloutCorrectionConfig make_rollout_correction(const std::optional<std::string>& rollout_is,
                                                double rollout_is_threshold, bool batch_normalize,
                                                const std::optional<std::string>& rollout_rs,
                                                const std::optional<std::string>& rollout_rs_threshold);

using MetricValues = std::map<std::string, double>;
// Sums a CPU float64 tensor over every DP rank in place (ParallelStrategy::all_reduce_sum).
using AllReduceSum = std::function<void(torch::Tensor&)>;

// compute_rollout_correction_weights: [B, T] truncated (and optionally normalised) weights,
// detached, and the rollout_is_* metrics (without the prefix). log_ratio = old - rollout.
torch::Tensor rollout_is_weights(const torch::Tensor& log_ratio, const torch::Tensor& response_mask,
                                 RolloutIsLevel level, double threshold, bool batch_normalize,
                                 MetricValues& metrics, const AllReduceSum& all_reduce_sum = {});

// compute_rollout_rejection_mask: the response mask with rejected tokens zeroed, and the
// rollout_rs_* metrics (without the prefix).
torch::Tensor rollout_rejection_mask(const torch::Tensor& log_ratio, const torch::Tensor& response_mask,
                                     const std::vector<RolloutRsOption>& options, MetricValues& metrics);

// compute_offpolicy_metrics: training/rollout perplexities, KL (direct and k3), chi-square, without
// the prefix. rollout_log_prob may be undefined (then only training_ppl / training_log_ppl).
MetricValues offpolicy_metrics(const torch::Tensor& old_log_prob, const torch::Tensor& rollout_log_prob,
                               const torch::Tensor& response_mask);

struct RolloutCorrection {
  torch::Tensor weights;        // [B, T], undefined without rollout_is
  torch::Tensor response_mask;  // [B, T], rejection applied (a copy of the input without rollout_rs)
  MetricValues metrics;         // "rollout_corr/..." names
};
// compute_rollout_correction_and_rejection_mask. Throws verl::Error when the mask holds no token
// (verl raises ValueError there) or the shapes differ.
RolloutCorrection compute_rollout_correction(const torch::Tensor& old_log_prob, const torch::Tensor& rollout_log_prob,
                                             const torch::Tensor& response_mask,
                                             const RolloutCorrectionConfig& config,
                                             const AllReduceSum& all_reduce_sum = {});

// compute_rollout_corr_metrics_from_logprobs: the off-policy metrics of the current policy's
// log-probs against the rollout's, prefixed, as verl's actor logs them per micro-batch.
MetricValues rollout_corr_metrics_from_logprobs(const torch::Tensor& log_prob, const torch::Tensor& rollout_log_prob,
                                                const torch::Tensor& response_mask);

}  // namespace verl::trainer::algos

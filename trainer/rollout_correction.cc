#include "trainer/rollout_correction.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include "common/error.h"
#include "trainer/core_algos.h"

namespace verl::trainer::algos {
namespace {

// verl's SAFETY_BOUND: log-ratios are clamped to +-20 before exp (exp(20) ~ 4.9e8).
constexpr double kSafetyBound = 20.0;
constexpr double kEps = 1e-8;
const char* const kKey = "algorithm.rollout_correction";

const std::vector<std::string>& rs_names() {
  static const std::vector<std::string> names = {"token_k1",    "token_k2",    "token_k3",   "seq_sum_k1",
                                                 "seq_sum_k2",  "seq_sum_k3",  "seq_mean_k1", "seq_mean_k2",
                                                 "seq_mean_k3", "seq_max_k2",  "seq_max_k3"};
  return names;
}

Error config_error(const std::string& key, const std::string& message) {
  std::string all;
  for (const auto& n : rs_names()) all += (all.empty() ? "" : ", ") + n;
  return Error{ExitCode::kInvalidConfig, std::string(kKey) + "." + key + ": " + message,
               "rollout_rs takes a comma-separated list of " + all +
                   "; rollout_rs_threshold one value for all of them or one per option (k1: 'lower_upper' or 'upper')"};
}

std::vector<std::string> split_trimmed(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) {
    const auto b = part.find_first_not_of(" \t");
    const auto e = part.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(part.substr(b, e - b + 1));
  }
  return out;
}

double parse_number(const std::string& text, const std::string& option) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty()) {
    throw config_error("rollout_rs_threshold", "invalid numeric threshold '" + text + "' for option '" + option + "'");
  }
  return v;
}

bool ends_with_k1(const std::string& name) { return name.size() >= 2 && name.compare(name.size() - 2, 2, "k1") == 0; }

torch::Tensor float_mask(const torch::Tensor& mask, const torch::Tensor& like) { return mask.to(like.scalar_type()); }

// verl_F.masked_sum along the last dimension.
torch::Tensor row_sum(const torch::Tensor& values, const torch::Tensor& mask) {
  auto valid = torch::where(mask != 0, values, torch::zeros_like(values));
  return (valid * mask).sum(-1);
}

double item(const torch::Tensor& t) { return t.detach().to(torch::kCPU).to(torch::kFloat64).item<double>(); }

// The unbiased std of a 1-D tensor, 0 for fewer than two elements (verl's `x.std() if numel > 1`).
double std_or_zero(const torch::Tensor& v) { return v.numel() > 1 ? item(v.std()) : 0.0; }

void check_has_token(const torch::Tensor& mask) {
  if (!(mask != 0).any().item<bool>()) {
    throw Error{ExitCode::kFailure, "rollout correction: response_mask holds no token",
                "every response of the batch is empty; lengthen data.max_response_length"};
  }
}

}  // namespace

RolloutIsLevel parse_rollout_is(const std::optional<std::string>& name) {
  if (!name) return RolloutIsLevel::kNone;
  if (*name == "token") return RolloutIsLevel::kToken;
  if (*name == "sequence") return RolloutIsLevel::kSequence;
  throw Error{ExitCode::kInvalidConfig,
              std::string(kKey) + ".rollout_is: '" + *name + "' is not an IS level",
              "use token, sequence or null (off)"};
}

std::vector<RolloutRsOption> parse_rollout_rs(const std::string& rollout_rs,
                                              const std::optional<std::string>& rollout_rs_threshold) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const auto& opt : split_trimmed(rollout_rs)) {
    if (std::find(rs_names().begin(), rs_names().end(), opt) == rs_names().end()) {
      throw config_error("rollout_rs", "'" + opt + "' is not a rejection-sampling option");
    }
    if (seen.insert(opt).second) names.push_back(opt);
  }
  if (names.empty()) throw config_error("rollout_rs", "must name at least one option");
  if (!rollout_rs_threshold) {
    throw config_error("rollout_rs_threshold", "must be set when rollout_rs is (verl has no default for it)");
  }
  auto specs = split_trimmed(*rollout_rs_threshold);
  if (specs.empty()) throw config_error("rollout_rs_threshold", "must hold at least one threshold");
  if (specs.size() != 1 && specs.size() != names.size()) {
    throw config_error("rollout_rs_threshold", "has " + std::to_string(specs.size()) + " thresholds for " +
                                                   std::to_string(names.size()) + " rollout_rs options");
  }
  if (specs.size() == 1) specs.assign(names.size(), specs[0]);
  std::vector<RolloutRsOption> out;
  for (size_t i = 0; i < names.size(); ++i) {
    RolloutRsOption o;
    o.name = names[i];
    const auto& spec = specs[i];
    const auto us = spec.find('_');
    if (ends_with_k1(o.name)) {
      if (us != std::string::npos) {
        o.lower = parse_number(spec.substr(0, us), o.name);
        o.upper = parse_number(spec.substr(us + 1), o.name);
      } else {
        o.upper = parse_number(spec, o.name);
        o.lower = 1.0 / o.upper;
      }
      if (!(*o.lower > 0) || !(o.upper > 0)) {
        throw config_error("rollout_rs_threshold", "thresholds for '" + o.name + "' must be positive, got " + spec);
      }
    } else {
      if (us != std::string::npos) {
        throw config_error("rollout_rs_threshold",
                           "'" + o.name + "' takes a single upper bound without '_', got '" + spec + "'");
      }
      o.upper = parse_number(spec, o.name);
      if (!(o.upper > 0)) {
        throw config_error("rollout_rs_threshold", "the threshold for '" + o.name + "' must be positive, got " + spec);
      }
    }
    out.push_back(o);
  }
  return out;
}

RolloutCorrectionConfig make_rollout_correction(const std::optional<std::string>& rollout_is,
                                                double rollout_is_threshold, bool batch_normalize,
                                                const std::optional<std::string>& rollout_rs,
                                                const std::optional<std::string>& rollout_rs_threshold) {
  RolloutCorrectionConfig c;
  c.rollout_is = parse_rollout_is(rollout_is);
  if (c.rollout_is != RolloutIsLevel::kNone && !(rollout_is_threshold > 0)) {
    throw Error{ExitCode::kInvalidConfig,
                std::string(kKey) + ".rollout_is_threshold must be positive, got " + std::to_string(rollout_is_threshold),
                "verl's default is 2.0"};
  }
  c.rollout_is_threshold = rollout_is_threshold;
  c.rollout_is_batch_normalize = batch_normalize;
  if (rollout_rs) c.rollout_rs = parse_rollout_rs(*rollout_rs, rollout_rs_threshold);
  return c;
}

namespace {

MetricValues is_metrics(const torch::Tensor& weights, const torch::Tensor& log_ratio_for_metrics,
                        const torch::Tensor& mask, RolloutIsLevel level, double threshold) {
  MetricValues m;
  const double lower = 1.0 / threshold;
  // verl takes the logs of float32 scalars (torch.tensor(threshold)).
  const auto log_upper = torch::log(torch::tensor(threshold, torch::kFloat32)).item<float>();
  const auto log_lower = torch::log(torch::tensor(lower, torch::kFloat32)).item<float>();
  const auto mask_bool = mask != 0;
  if (level == RolloutIsLevel::kSequence) {
    m["rollout_is_max"] = item(torch::exp(torch::clamp_max(log_ratio_for_metrics.max(), kSafetyBound)));
    m["rollout_is_min"] = item(torch::exp(log_ratio_for_metrics.min()));
    m["rollout_is_mean"] = item(masked_mean(weights, mask));
    m["rollout_is_ratio_fraction_high"] = item((log_ratio_for_metrics > log_upper).to(torch::kFloat32).mean());
    m["rollout_is_ratio_fraction_low"] = item((log_ratio_for_metrics < log_lower).to(torch::kFloat32).mean());
  } else {
    m["rollout_is_mean"] = item(masked_mean(weights, mask));
    m["rollout_is_ratio_fraction_high"] = item(masked_mean((weights > threshold).to(torch::kFloat32), mask));
    m["rollout_is_ratio_fraction_low"] = item(masked_mean((weights < lower).to(torch::kFloat32), mask));
    m["rollout_is_max"] = item(weights.masked_fill(~mask_bool, -std::numeric_limits<double>::infinity()).max());
    m["rollout_is_min"] = item(weights.masked_fill(~mask_bool, std::numeric_limits<double>::infinity()).min());
  }
  const auto clamped = weights.clamp(lower, threshold);
  if (item(mask.sum()) > 1) {
    auto mean_clamped = masked_mean(clamped, mask);
    auto var = masked_mean(clamped.square(), mask) - mean_clamped.square();
    m["rollout_is_std"] = item(torch::sqrt(torch::clamp_min(var, 0.0)));
  } else {
    m["rollout_is_std"] = 0.0;
  }
  auto normalized = clamped / (masked_mean(clamped, mask) + kEps);
  m["rollout_is_eff_sample_size"] = 1.0 / item(masked_mean(normalized.square(), mask));
  auto seq_mean = masked_mean(weights, mask, -1);
  m["rollout_is_seq_mean"] = item(seq_mean.mean());
  m["rollout_is_seq_std"] = std_or_zero(seq_mean);
  m["rollout_is_seq_max"] = item(seq_mean.max());
  m["rollout_is_seq_min"] = item(seq_mean.min());
  m["rollout_is_seq_max_deviation"] = item((seq_mean - 1.0).abs().max());
  m["rollout_is_seq_fraction_high"] = item((seq_mean > threshold).to(torch::kFloat32).mean());
  m["rollout_is_seq_fraction_low"] = item((seq_mean < lower).to(torch::kFloat32).mean());
  return m;
}

}  // namespace

torch::Tensor rollout_is_weights(const torch::Tensor& log_ratio, const torch::Tensor& response_mask,
                                 RolloutIsLevel level, double threshold, bool batch_normalize,
                                 MetricValues& metrics, const AllReduceSum& all_reduce_sum) {
  torch::NoGradGuard no_grad;
  const auto mask = float_mask(response_mask, log_ratio);
  torch::Tensor weights, for_metrics;
  if (level == RolloutIsLevel::kToken) {
    for_metrics = log_ratio;
    weights = torch::exp(torch::clamp(log_ratio, -kSafetyBound, kSafetyBound));
  } else if (level == RolloutIsLevel::kSequence) {
    auto sum = row_sum(log_ratio, mask).unsqueeze(-1);
    for_metrics = sum;
    weights = torch::exp(torch::clamp(sum, -kSafetyBound, kSafetyBound)).expand_as(log_ratio);
  } else {
    throw Error{ExitCode::kFailure, "rollout_is_weights: no IS level", "set algorithm.rollout_correction.rollout_is"};
  }
  weights = weights * mask;
  for (auto& [k, v] : is_metrics(weights, for_metrics, mask, level, threshold)) metrics[k] = v;
  weights = weights.clamp_max(threshold);
  if (batch_normalize) {
    // The mean over the whole batch: token weights, or one weight per non-empty row. Summed over
    // every rank first when there are several (verl's distributed_masked_mean).
    torch::Tensor num, den;
    if (level == RolloutIsLevel::kToken) {
      num = row_sum(weights, mask).sum();
      den = mask.sum();
    } else {
      auto seq_weights = masked_mean(weights, mask, -1);
      auto seq_mask = (mask.sum(-1) > 0).to(weights.scalar_type());
      num = (seq_weights * seq_mask).sum();
      den = seq_mask.sum();
    }
    auto sums = torch::stack({num, den}).to(torch::kCPU, torch::kFloat64);
    if (all_reduce_sum) all_reduce_sum(sums);
    // verl: masked_mean's +1e-8 (token level) or clamp_min(1e-8) (sequence level) on the count.
    const double count = sums[1].item<double>();
    const double mean = sums[0].item<double>() /
                        (level == RolloutIsLevel::kToken ? count + kEps : std::max(count, kEps));
    if (mean > kEps) {
      weights = weights / static_cast<float>(mean);
      metrics["rollout_is_batch_norm_factor"] = mean;
    } else {
      metrics["rollout_is_batch_norm_factor"] = 1.0;
    }
  }
  return weights.detach();
}

namespace {

void rs_metrics(const std::string& option, const torch::Tensor& stat, const torch::Tensor& mask,
                const torch::Tensor& seq_valid, bool sequence_level, const torch::Tensor& per_sequence,
                double upper, double lower, bool apply_lower, MetricValues& m) {
  const std::string prefix = "rollout_rs_" + option;
  const auto mask_bool = mask != 0;
  auto seq_values = per_sequence.defined() ? per_sequence : masked_mean(stat, mask, -1);
  auto valid = seq_values.index({seq_valid});
  m[prefix + "_mean"] = item(masked_mean(stat, mask));
  const bool seq = sequence_level && valid.numel() > 0;
  if (seq) {
    m[prefix + "_max"] = item(valid.max());
    m[prefix + "_min"] = item(valid.min());
    m[prefix + "_fraction_high"] = item((valid > upper).to(torch::kFloat32).mean());
    m[prefix + "_fraction_low"] = apply_lower ? item((valid < lower).to(torch::kFloat32).mean()) : 0.0;
  } else {
    m[prefix + "_max"] = item(stat.masked_fill(~mask_bool, -std::numeric_limits<double>::infinity()).max());
    m[prefix + "_min"] = item(stat.masked_fill(~mask_bool, std::numeric_limits<double>::infinity()).min());
    m[prefix + "_fraction_high"] = item(masked_mean((stat > upper).to(torch::kFloat32), mask));
    m[prefix + "_fraction_low"] = apply_lower ? item(masked_mean((stat < lower).to(torch::kFloat32), mask)) : 0.0;
  }
  if (item(mask.sum()) > 1) {
    auto clamped = stat.clamp(apply_lower ? lower : 0.0, upper);
    auto mean_clamped = masked_mean(clamped, mask);
    auto var = masked_mean(clamped.square(), mask) - mean_clamped.square();
    m[prefix + "_std"] = item(torch::sqrt(torch::clamp_min(var, 0.0)));
  } else {
    m[prefix + "_std"] = 0.0;
  }
  if (valid.numel() > 0) {
    m[prefix + "_seq_mean"] = item(valid.mean());
    m[prefix + "_seq_std"] = std_or_zero(valid);
    m[prefix + "_seq_max"] = item(valid.max());
    m[prefix + "_seq_min"] = item(valid.min());
    m[prefix + "_seq_max_deviation"] = item(valid.abs().max());
    m[prefix + "_seq_fraction_high"] = item((valid > upper).to(torch::kFloat32).mean());
    if (apply_lower) m[prefix + "_seq_fraction_low"] = item((valid < lower).to(torch::kFloat32).mean());
  } else {
    for (const char* k : {"_seq_mean", "_seq_std", "_seq_max", "_seq_min", "_seq_max_deviation", "_seq_fraction_high",
                          "_seq_fraction_low"})
      m[prefix + k] = 0.0;
  }
}

}  // namespace

torch::Tensor rollout_rejection_mask(const torch::Tensor& log_ratio, const torch::Tensor& response_mask,
                                     const std::vector<RolloutRsOption>& options, MetricValues& metrics) {
  torch::NoGradGuard no_grad;
  if (log_ratio.size(0) == 0) return response_mask;
  const auto mask = float_mask(response_mask, log_ratio);
  const auto mask_bool = mask != 0;
  auto safe = torch::clamp(log_ratio, -kSafetyBound, kSafetyBound);
  auto k1 = -safe;
  auto k2 = 0.5 * safe.square();
  auto k3 = torch::exp(safe) - 1.0 - safe;
  auto seq_valid = mask.sum(-1) > 0;
  auto combined = torch::ones_like(mask);
  for (const auto& o : options) {
    const bool is_k1 = ends_with_k1(o.name);
    const char kind = o.name.back();
    const auto& token_stat = kind == '1' ? k1 : kind == '2' ? k2 : k3;
    const double upper_log = is_k1 ? std::log(o.upper) : 0.0;
    const double lower_log = is_k1 ? std::log(*o.lower) : 0.0;
    auto keep = [&](const torch::Tensor& s) {
      return is_k1 ? (s >= lower_log) & (s <= upper_log) : s <= o.upper;
    };
    const bool token_level = o.name.rfind("token_", 0) == 0;
    torch::Tensor per_token, per_seq, keep_bool;
    if (token_level) {
      per_token = token_stat;
      keep_bool = keep(per_token);
    } else {
      if (o.name.rfind("seq_sum", 0) == 0) {
        per_seq = row_sum(token_stat, mask);
      } else if (o.name.rfind("seq_mean", 0) == 0) {
        per_seq = masked_mean(token_stat, mask, -1);
      } else {  // seq_max: the row's largest token value, 0 for an empty row
        auto masked = token_stat.masked_fill(~mask_bool, -std::numeric_limits<double>::infinity());
        auto mx = std::get<0>(masked.max(-1));
        per_seq = torch::where(torch::isinf(mx) & (mx < 0), torch::zeros_like(mx), mx);
      }
      keep_bool = keep(per_seq).unsqueeze(-1).expand_as(mask_bool);
      per_token = per_seq.unsqueeze(-1).expand_as(mask);
    }
    const double metric_upper = is_k1 ? upper_log : o.upper;
    const double metric_lower = is_k1 ? lower_log : 0.0;
    auto keep_mask = keep_bool.to(log_ratio.scalar_type());
    combined = combined * keep_mask;
    auto seq_keep = (~((~keep_bool) & mask_bool)).all(-1);
    rs_metrics(o.name, per_token, mask, seq_valid, !token_level, per_seq, metric_upper, metric_lower, is_k1, metrics);
    metrics["rollout_rs_" + o.name + "_masked_fraction"] = item(masked_mean(1 - keep_mask, mask));
    auto seq_valid_f = seq_valid.to(log_ratio.scalar_type());
    metrics["rollout_rs_" + o.name + "_seq_masked_fraction"] =
        item(seq_valid_f.sum()) > 0
            ? item(((1.0 - seq_keep.to(log_ratio.scalar_type())) * seq_valid_f).sum() / seq_valid_f.sum())
            : 0.0;
  }
  metrics["rollout_rs_masked_fraction"] = item(masked_mean(1 - combined, mask));
  auto final_keep = (combined > 0.5) & mask_bool;
  metrics["rollout_rs_seq_masked_fraction"] = item(((~final_keep) & mask_bool).any(-1).to(torch::kFloat32).mean());
  return (response_mask * combined).to(response_mask.scalar_type());
}

MetricValues offpolicy_metrics(const torch::Tensor& old_log_prob, const torch::Tensor& rollout_log_prob,
                               const torch::Tensor& response_mask) {
  torch::NoGradGuard no_grad;
  MetricValues m;
  const auto mask = float_mask(response_mask, old_log_prob);
  auto mean_train = masked_mean(old_log_prob, mask, -1);
  m["training_ppl"] = item(torch::exp(-mean_train).mean());
  m["training_log_ppl"] = item((-mean_train).mean());
  if (!rollout_log_prob.defined()) return m;
  m["kl"] = item(masked_mean(rollout_log_prob - old_log_prob, mask));
  auto log_ratio = old_log_prob - rollout_log_prob;
  m["k3_kl"] = item(masked_mean(torch::exp(log_ratio) - log_ratio - 1, mask));
  auto mean_rollout = masked_mean(rollout_log_prob, mask, -1);
  m["rollout_ppl"] = item(torch::exp(-mean_rollout).mean());
  m["rollout_log_ppl"] = item((-mean_rollout).mean());
  auto diff = mean_rollout - mean_train;
  m["log_ppl_diff"] = item(diff.mean());
  m["log_ppl_abs_diff"] = item(diff.abs().mean());
  m["log_ppl_diff_max"] = item(diff.max());
  m["log_ppl_diff_min"] = item(diff.min());
  m["ppl_ratio"] = item(torch::exp(diff).mean());
  auto rho = torch::exp(torch::clamp(log_ratio, -kSafetyBound, kSafetyBound));
  m["chi2_token"] = item(masked_mean(rho.square(), mask) - 1.0);
  auto sum = torch::clamp(row_sum(log_ratio, mask), -kSafetyBound, kSafetyBound);
  m["chi2_seq"] = item(torch::exp(2.0 * sum).mean() - 1.0);
  return m;
}

RolloutCorrection compute_rollout_correction(const torch::Tensor& old_log_prob, const torch::Tensor& rollout_log_prob,
                                             const torch::Tensor& response_mask,
                                             const RolloutCorrectionConfig& config,
                                             const AllReduceSum& all_reduce_sum) {
  torch::NoGradGuard no_grad;
  check_has_token(response_mask);
  if (old_log_prob.sizes() != rollout_log_prob.sizes() || old_log_prob.sizes() != response_mask.sizes()) {
    throw Error{ExitCode::kFailure,
                "rollout correction: old_log_prob " + c10::str(old_log_prob.sizes()) + ", rollout_log_prob " +
                    c10::str(rollout_log_prob.sizes()) + " and response_mask " + c10::str(response_mask.sizes()) +
                    " differ in shape",
                "the rollout engine must return one log-prob per response position"};
  }
  auto log_ratio = old_log_prob - rollout_log_prob;
  RolloutCorrection out;
  MetricValues m;
  if (config.rollout_is != RolloutIsLevel::kNone) {
    out.weights = rollout_is_weights(log_ratio, response_mask, config.rollout_is, config.rollout_is_threshold,
                                     config.rollout_is_batch_normalize, m, all_reduce_sum);
  }
  out.response_mask = response_mask.clone();
  if (!config.rollout_rs.empty()) out.response_mask = rollout_rejection_mask(log_ratio, response_mask, config.rollout_rs, m);
  for (auto& [k, v] : offpolicy_metrics(old_log_prob, rollout_log_prob, response_mask)) m[k] = v;
  for (auto& [k, v] : m) out.metrics["rollout_corr/" + k] = v;
  return out;
}

MetricValues rollout_corr_metrics_from_logprobs(const torch::Tensor& log_prob, const torch::Tensor& rollout_log_prob,
                                                const torch::Tensor& response_mask) {
  MetricValues out;
  for (auto& [k, v] : offpolicy_metrics(log_prob.detach(), rollout_log_prob, response_mask)) out["rollout_corr/" + k] = v;
  return out;
}

}  // namespace verl::trainer::algos

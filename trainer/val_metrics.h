// Validation metrics as verl computes and names them: process_validation_metrics
// (verl/trainer/ppo/metric_utils.py) and RayPPOTrainer._val_metrics_update
// (verl/trainer/ppo/ray_trainer.py). For every data_source, every numeric variable of the
// reward ("reward", and a dict reward's fields such as math_dapo's "score", "acc") and every
// prompt (verl's uid) with its N responses:
//   mean@N, std@N (N > 1), and for n in 2, 4, 8, ... < N and N: best@n/{mean,std},
//   worst@n/{mean,std}, and maj@n/{mean,std} when the reward gives a "pred" to vote on,
// each best/worst/maj a bootstrap of 1000 draws of n of the N responses. A metric is then the
// mean over the prompts. Named "val-core/<data_source>/<var>/<metric>" for the core variable
// ("acc" when the reward has one, else "reward") at the largest n (mean@N, best@N/..., maj@N/...),
// "val-aux/..." for the rest.
//
// The bootstrap draws exactly as verl's: np.random.seed(seed) (the legacy MT19937, which
// std::mt19937 is) and np.random.choice's masked rejection sampling of 32-bit outputs; means
// and standard deviations use numpy's pairwise summation, so a single process reproduces
// verl's numbers bit for bit (tests/peers/verl_reward checks it against verl's Python).
//
// Pure functions of their inputs, no torch; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace verl::trainer::val_metrics {

// One scored validation response.
struct Sample {
  std::string data_source;
  std::string uid;                                  // the prompt it answers
  std::vector<std::pair<std::string, double>> vars;  // "reward" first, then the reward's fields
  std::optional<std::string> pred;                  // the answer maj@n votes on
};

// data_source -> var -> metric name -> values, one per prompt in order of first appearance.
using PerPrompt = std::map<std::string, std::map<std::string, std::map<std::string, std::vector<double>>>>;
// data_source -> var -> metric name -> value.
using Metrics = std::map<std::string, std::map<std::string, std::map<std::string, double>>>;

// verl's gen_ns: 2, 4, 8, ... below n_resps, then n_resps; none for n_resps <= 1.
std::vector<int64_t> bootstrap_sizes(int64_t n_resps);
// The metric names one prompt of n_resps responses yields (mean@N, std@N, best@n/mean, ...).
std::vector<std::string> metric_names(int64_t n_resps, bool has_pred);

// numpy's np.sum / np.mean / np.std (ddof 0) of a float64 array, pairwise summation included.
double numpy_sum(const std::vector<double>& v);
double numpy_mean(const std::vector<double>& v);
double numpy_std(const std::vector<double>& v);

// np.random.seed(seed); np.random.choice(n_data, size=(n_bootstrap, subset_size)), row-major.
std::vector<int64_t> numpy_choice(uint32_t seed, int64_t n_data, int64_t n_bootstrap, int64_t subset_size);

// The first half of process_validation_metrics: each prompt's metrics.
PerPrompt per_prompt_metrics(const std::vector<Sample>& samples, uint32_t seed = 42);
// The second half: the mean over prompts.
Metrics mean_over_prompts(const PerPrompt& per_prompt);
inline Metrics process_validation_metrics(const std::vector<Sample>& samples, uint32_t seed = 42) {
  return mean_over_prompts(per_prompt_metrics(samples, seed));
}

// _val_metrics_update's naming: "val-core/<ds>/<var>/<metric>" or "val-aux/...".
std::map<std::string, double> metric_dict(const Metrics& metrics);

}  // namespace verl::trainer::val_metrics

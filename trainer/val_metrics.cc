#include "trainer/val_metrics.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace verl::trainer::val_metrics {
namespace {

constexpr int64_t kBootstrapDraws = 1000;  // process_validation_metrics' n_bootstrap
constexpr int64_t kPairwiseBlock = 128;    // numpy's PW_BLOCKSIZE

// numpy's pairwise_sum (loops_utils.h.src): 8 accumulators per block of 128, halves above it.
double pairwise_sum(const double* a, int64_t n) {
  if (n < 8) {
    double res = 0.0;
    for (int64_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= kPairwiseBlock) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    int64_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  int64_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

// calc_maj_val: the first value of the most voted prediction (ties: the first seen).
double majority_value(const std::vector<double>& vals, const std::vector<std::string>& preds,
                      const int64_t* idx, int64_t k) {
  std::vector<std::pair<const std::string*, std::pair<int64_t, double>>> votes;  // insertion order
  for (int64_t j = 0; j < k; ++j) {
    const auto& p = preds[static_cast<size_t>(idx[j])];
    auto it = std::find_if(votes.begin(), votes.end(), [&](const auto& v) { return *v.first == p; });
    if (it == votes.end()) {
      votes.push_back({&p, {1, vals[static_cast<size_t>(idx[j])]}});
    } else {
      ++it->second.first;
    }
  }
  const auto best = std::max_element(votes.begin(), votes.end(), [](const auto& a, const auto& b) {
    return a.second.first < b.second.first;  // max_element keeps the first of equals
  });
  return best->second.second;
}

}  // namespace

std::vector<int64_t> bootstrap_sizes(int64_t n_resps) {
  std::vector<int64_t> ns;
  if (n_resps <= 1) return ns;
  for (int64_t n = 2; n < n_resps; n *= 2) ns.push_back(n);
  ns.push_back(n_resps);
  return ns;
}

std::vector<std::string> metric_names(int64_t n_resps, bool has_pred) {
  const std::string big = std::to_string(n_resps);
  std::vector<std::string> names = {"mean@" + big};
  if (n_resps <= 1) return names;
  names.push_back("std@" + big);
  for (int64_t n : bootstrap_sizes(n_resps)) {
    const std::string k = std::to_string(n);
    for (const char* kind : {"best@", "worst@"}) {
      names.push_back(kind + k + "/mean");
      names.push_back(kind + k + "/std");
    }
    if (has_pred) {
      names.push_back("maj@" + k + "/mean");
      names.push_back("maj@" + k + "/std");
    }
  }
  return names;
}

double numpy_sum(const std::vector<double>& v) { return 0.0 + pairwise_sum(v.data(), static_cast<int64_t>(v.size())); }

double numpy_mean(const std::vector<double>& v) { return numpy_sum(v) / static_cast<double>(v.size()); }

double numpy_std(const std::vector<double>& v) {
  const double mean = numpy_mean(v);
  std::vector<double> sq(v.size());
  for (size_t i = 0; i < v.size(); ++i) sq[i] = (v[i] - mean) * (v[i] - mean);
  return std::sqrt(numpy_sum(sq) / static_cast<double>(v.size()));
}

std::vector<int64_t> numpy_choice(uint32_t seed, int64_t n_data, int64_t n_bootstrap, int64_t subset_size) {
  // RandomState.choice(n, size) is randint(0, n, size): for a range below 2**32, legacy
  // numpy masks each 32-bit output to the smallest all-ones mask >= n-1 and redraws above it.
  std::mt19937 mt(seed);
  const uint32_t rng = static_cast<uint32_t>(n_data - 1);
  uint32_t mask = rng;
  for (int shift = 1; shift < 32; shift <<= 1) mask |= mask >> shift;
  std::vector<int64_t> out(static_cast<size_t>(n_bootstrap * subset_size));
  for (auto& x : out) {
    if (rng == 0) {
      x = 0;
      continue;
    }
    uint32_t v;
    do {
      v = static_cast<uint32_t>(mt()) & mask;
    } while (v > rng);
    x = v;
  }
  return out;
}

PerPrompt per_prompt_metrics(const std::vector<Sample>& samples, uint32_t seed) {
  // Group as verl does: data_source -> uid -> var -> values, in order of first appearance.
  struct Prompt {
    std::vector<std::pair<std::string, std::vector<double>>> vars;
    std::vector<std::string> preds;
    bool has_pred = false;
  };
  std::map<std::string, std::vector<std::pair<std::string, Prompt>>> grouped;
  for (const auto& s : samples) {
    auto& prompts = grouped[s.data_source];
    auto it = std::find_if(prompts.begin(), prompts.end(), [&](const auto& p) { return p.first == s.uid; });
    if (it == prompts.end()) it = prompts.insert(prompts.end(), {s.uid, Prompt{}});
    Prompt& p = it->second;
    for (const auto& [name, value] : s.vars) {
      auto v = std::find_if(p.vars.begin(), p.vars.end(), [&](const auto& x) { return x.first == name; });
      if (v == p.vars.end()) v = p.vars.insert(p.vars.end(), {name, {}});
      v->second.push_back(value);
    }
    if (s.pred) {
      p.preds.push_back(*s.pred);
      p.has_pred = true;
    }
  }
  PerPrompt out;
  for (const auto& [source, prompts] : grouped) {
    for (const auto& [uid, p] : prompts) {
      for (const auto& [name, vals] : p.vars) {
        if (vals.empty()) continue;
        auto& metrics = out[source][name];
        const auto n_resps = static_cast<int64_t>(vals.size());
        const std::string big = std::to_string(n_resps);
        metrics["mean@" + big].push_back(numpy_mean(vals));
        if (n_resps <= 1) continue;
        metrics["std@" + big].push_back(numpy_std(vals));
        const bool maj = p.has_pred && p.preds.size() == vals.size();
        for (int64_t k : bootstrap_sizes(n_resps)) {
          // One seeding for best, worst and maj alike: verl reseeds before each bootstrap.
          const auto idx = numpy_choice(seed, n_resps, kBootstrapDraws, k);
          std::vector<double> best(kBootstrapDraws), worst(kBootstrapDraws), major(kBootstrapDraws);
          for (int64_t b = 0; b < kBootstrapDraws; ++b) {
            const int64_t* row = idx.data() + b * k;
            double hi = vals[static_cast<size_t>(row[0])], lo = hi;
            for (int64_t j = 1; j < k; ++j) {
              const double x = vals[static_cast<size_t>(row[j])];
              if (x > hi) hi = x;  // Python's max/min keep the first of equals
              if (x < lo) lo = x;
            }
            best[static_cast<size_t>(b)] = hi;
            worst[static_cast<size_t>(b)] = lo;
            if (maj) major[static_cast<size_t>(b)] = majority_value(vals, p.preds, row, k);
          }
          const std::string ks = std::to_string(k);
          metrics["best@" + ks + "/mean"].push_back(numpy_mean(best));
          metrics["best@" + ks + "/std"].push_back(numpy_std(best));
          metrics["worst@" + ks + "/mean"].push_back(numpy_mean(worst));
          metrics["worst@" + ks + "/std"].push_back(numpy_std(worst));
          if (maj) {
            metrics["maj@" + ks + "/mean"].push_back(numpy_mean(major));
            metrics["maj@" + ks + "/std"].push_back(numpy_std(major));
          }
        }
      }
    }
  }
  return out;
}

Metrics mean_over_prompts(const PerPrompt& per_prompt) {
  Metrics out;
  for (const auto& [source, vars] : per_prompt) {
    for (const auto& [var, metrics] : vars) {
      for (const auto& [name, vals] : metrics) {
        if (!vals.empty()) out[source][var][name] = numpy_mean(vals);
      }
    }
  }
  return out;
}

std::map<std::string, double> metric_dict(const Metrics& metrics) {
  std::map<std::string, double> out;
  for (const auto& [source, vars] : metrics) {
    const std::string core = vars.count("acc") ? "acc" : "reward";
    for (const auto& [var, by_name] : vars) {
      // n_max: the largest n of "mean@N", "best@n/mean", ... of this variable.
      int64_t n_max = 0;
      for (const auto& [name, value] : by_name) {
        const std::string tail = name.substr(name.rfind('@') + 1);
        n_max = std::max<int64_t>(n_max, std::stoll(tail.substr(0, tail.find('/'))));
      }
      const std::string at = "@" + std::to_string(n_max);
      for (const auto& [name, value] : by_name) {
        const bool core_prefix = name.rfind("mean", 0) == 0 || name.rfind("maj", 0) == 0 || name.rfind("best", 0) == 0;
        const bool is_core = var == core && core_prefix && name.find(at) != std::string::npos;
        out[std::string(is_core ? "val-core/" : "val-aux/") + source + "/" + var + "/" + name] = value;
      }
    }
  }
  return out;
}

}  // namespace verl::trainer::val_metrics

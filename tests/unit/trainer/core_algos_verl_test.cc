// Golden values from verl's own functions: tests/data/verl_algos/fixtures.json is written by
// tests/peers/verl_algos/make_fixtures.py, which runs verl/trainer/ppo/core_algos.py (at the commit
// the file records) on seeded float32 cases: random shapes, rows without a token, groups of
// responses (uids). Each case here feeds the same inputs to our function and requires every output
// and gradient within kRtol relative. Near 0 an element's own relative error is unbounded (it is
// often a difference like score - mean, where float32 cancellation decides the last digits on
// both sides), so there the bound is kRtol of the tensor's largest magnitude, plus kAtol.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "common/config.h"
#include "common/error.h"
#include "trainer/core_algos.h"
#include "trainer/rollout_correction.h"

namespace verl::trainer::algos {
namespace {

constexpr double kRtol = 1e-6;
constexpr double kAtol = 1e-7;

using Json = nlohmann::json;

const Json& fixtures() {
  static const Json kFixtures = [] {
    std::ifstream in(std::string(VERL_SOURCE_DIR) + "/tests/data/verl_algos/fixtures.json");
    return Json::parse(in);
  }();
  return kFixtures;
}

torch::Tensor tensor_of(const Json& j, torch::Dtype dtype = torch::kFloat32) {
  std::vector<int64_t> shape = j.at("shape").get<std::vector<int64_t>>();
  std::vector<double> data = j.at("data").get<std::vector<double>>();
  return torch::tensor(data, torch::kFloat64).reshape(shape).to(dtype);
}

torch::Tensor input(const Json& c, const char* name, torch::Dtype dtype = torch::kFloat32) {
  return tensor_of(c.at("inputs").at(name), dtype);
}

// Compares ours with verl's output `name`; reports the case and the worst element.
void expect_close(const Json& c, const std::string& name, const torch::Tensor& ours) {
  SCOPED_TRACE(c.at("name").get<std::string>() + " / " + name);
  const Json& want = c.at("outputs").at(name);
  torch::Tensor expected = want.is_object() ? tensor_of(want, torch::kFloat64)
                                            : torch::tensor(want.get<double>(), torch::kFloat64);
  ASSERT_TRUE(ours.defined()) << "ours is missing";
  auto got = ours.detach().to(torch::kCPU, torch::kFloat64).reshape(expected.sizes());
  const double scale = expected.numel() > 0 ? expected.abs().max().item<double>() : 0.0;
  auto err = (got - expected).abs() - (kRtol * expected.abs() + kRtol * scale + kAtol);
  const int64_t worst = err.reshape({-1}).argmax().item<int64_t>();
  EXPECT_LE(err.reshape({-1})[worst].item<double>(), 0.0)
      << "element " << worst << ": ours " << got.reshape({-1})[worst].item<double>() << ", verl "
      << expected.reshape({-1})[worst].item<double>();
}

std::vector<const Json*> cases_of(const std::string& fn) {
  std::vector<const Json*> out;
  for (const auto& c : fixtures().at("cases"))
    if (c.at("fn") == fn) out.push_back(&c);
  return out;
}

// Walks every name verl registers (ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY at the fixtures'
// commit, listed by make_fixtures.py from verl's loaded module): the config accepts it and the
// trainer parses it, or both refuse it saying "not supported" with the reason.
TEST(CoreAlgosVerl, EveryNameVerlRegistersIsAcceptedOrRefusedWithTheReason) {
  struct Key {
    const char* registry;
    const char* path;
    std::function<void(const std::string&)> parse;
  };
  const std::vector<Key> keys = {
      {"adv_estimator", "algorithm.adv_estimator", [](const std::string& n) { parse_adv_estimator(n); }},
      {"policy_loss", "actor_rollout_ref.actor.policy_loss.loss_mode", [](const std::string& n) { parse_policy_loss_mode(n); }}};
  for (const auto& key : keys) {
    const auto names = fixtures().at("registries").at(key.registry).get<std::vector<std::string>>();
    ASSERT_GE(names.size(), 9u) << key.registry;
    int accepted = 0;
    for (const auto& name : names) {
      SCOPED_TRACE(std::string(key.path) + "=" + name);
      auto doc = config::resolve(config::Kind::kJob, "", {std::string(key.path) + "=" + name, "actor_rollout_ref.rollout.n=4"});
      bool parsed = true;
      try {
        key.parse(name);
      } catch (const Error& e) {
        parsed = false;
        EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
        EXPECT_NE(std::string(e.what()).find("not supported:"), std::string::npos) << e.what();
      }
      if (parsed) {
        ++accepted;
        EXPECT_TRUE(doc.ok()) << config::format_issues(doc.issues);
      } else {
        EXPECT_FALSE(doc.ok()) << "the config accepts a name the trainer refuses";
        bool named = false;
        for (const auto& i : doc.issues) named |= i.path == key.path && i.message.find("not supported") != std::string::npos;
        EXPECT_TRUE(named) << config::format_issues(doc.issues);
      }
    }
    EXPECT_GE(accepted, 8) << key.registry;
  }
}

TEST(CoreAlgosVerl, FixturesComeFromVerlsRecordedCommit) {
  EXPECT_EQ(fixtures().at("verl_commit").get<std::string>(), "b178a3cd56f58b2d502255daba591e92833930a7");
  EXPECT_GT(fixtures().at("cases").size(), 200u);
}

TEST(CoreAlgosVerl, AggLossAndItsGradientMatchVerlIncludingEmptyRows) {
  auto cases = cases_of("agg_loss");
  ASSERT_FALSE(cases.empty());
  for (const Json* c : cases) {
    auto loss_mat = input(*c, "loss_mat").requires_grad_(true);
    auto loss = agg_loss(loss_mat, input(*c, "mask"), parse_loss_agg_mode(c->at("params").at("mode").get<std::string>()));
    loss.backward();
    expect_close(*c, "loss", loss);
    expect_close(*c, "grad_loss_mat", loss_mat.grad());
  }
}

TEST(CoreAlgosVerl, GlobalBatchNormalisedAggLossMatchesVerlsEnginePath) {
  auto cases = cases_of("agg_loss_global");
  ASSERT_EQ(cases.size(), 12u);
  for (const Json* c : cases) {
    const Json& p = c->at("params");
    GlobalBatchInfo info;
    info.dp_size = p.at("dp_size").get<int64_t>();
    info.batch_num_tokens = p.at("batch_num_tokens").get<double>();
    info.global_batch_size = p.at("global_batch_size").get<double>();
    auto loss_mat = input(*c, "loss_mat").requires_grad_(true);
    auto loss = agg_loss(loss_mat, input(*c, "mask"), parse_loss_agg_mode(p.at("mode").get<std::string>()), info,
                         p.at("loss_scale_factor").get<double>());
    loss.backward();
    expect_close(*c, "loss", loss);
    expect_close(*c, "grad_loss_mat", loss_mat.grad());
  }
}

TEST(CoreAlgosVerl, KlEstimatorsAndKlLossMatchVerl) {
  for (const Json* c : cases_of("kl_penalty")) {
    auto lp = input(*c, "logprob").requires_grad_(true);
    auto kl = kl_penalty(lp, input(*c, "ref_logprob"), parse_kl_penalty(c->at("params").at("type").get<std::string>()));
    kl.sum().backward();
    expect_close(*c, "kl", kl);
    expect_close(*c, "grad_logprob", lp.grad());
  }
  auto losses = cases_of("kl_loss");
  ASSERT_FALSE(losses.empty());
  for (const Json* c : losses) {
    auto lp = input(*c, "logprob").requires_grad_(true);
    auto loss = kl_loss(lp, input(*c, "ref_logprob"), input(*c, "mask"), parse_kl_penalty(c->at("params").at("type").get<std::string>()),
                        parse_loss_agg_mode(c->at("params").at("mode").get<std::string>()));
    loss.backward();
    expect_close(*c, "loss", loss);
    expect_close(*c, "grad_logprob", lp.grad());
  }
}

TEST(CoreAlgosVerl, EntropyAndMaskedStatisticsMatchVerl) {
  for (const Json* c : cases_of("entropy_from_logits"))
    expect_close(*c, "entropy", entropy_from_logits(input(*c, "logits")));
  auto cases = cases_of("masked");
  ASSERT_FALSE(cases.empty());
  for (const Json* c : cases) {
    auto v = input(*c, "values");
    auto m = input(*c, "mask");
    expect_close(*c, "mean", masked_mean(v, m));
    expect_close(*c, "mean_dim", masked_mean(v, m, /*dim=*/-1));
    expect_close(*c, "var", masked_var(v, m));
    expect_close(*c, "whiten", masked_whiten(v, m));
    expect_close(*c, "whiten_noshift", masked_whiten(v, m, /*shift_mean=*/false));
  }
}

AdvantageReturn run_estimator(const Json& c) {
  const Json& p = c.at("params");
  const std::string name = p.at("estimator");
  auto rewards = input(c, "rewards");
  auto mask = input(c, "mask");
  auto index = [&] { return input(c, "index", torch::kInt64); };
  const bool norm = p.value("norm_adv_by_std_in_grpo", true);
  switch (parse_adv_estimator(name)) {
    case AdvantageEstimator::kGae:
      return compute_gae_advantage_return(rewards, input(c, "values"), mask, p.at("gamma").get<double>(),
                                          p.at("lam").get<double>());
    case AdvantageEstimator::kGrpo:
      return compute_grpo_outcome_advantage(rewards, mask, index(), norm);
    case AdvantageEstimator::kGrpoVectorized:
      return compute_grpo_vectorized_outcome_advantage(rewards, mask, index(), norm);
    case AdvantageEstimator::kGrpoPassk:
      return compute_grpo_passk_outcome_advantage(rewards, mask, index(), norm);
    case AdvantageEstimator::kRloo:
      return compute_rloo_outcome_advantage(rewards, mask, index());
    case AdvantageEstimator::kRlooVectorized:
      return compute_rloo_outcome_advantage(rewards, mask, index(), SingletonGroup::kZero);
    case AdvantageEstimator::kReinforcePlusPlus:
      return compute_reinforce_plus_plus_outcome_advantage(rewards, mask, p.at("gamma").get<double>());
    case AdvantageEstimator::kReinforcePlusPlusBaseline:
      return compute_reinforce_plus_plus_baseline_outcome_advantage(rewards, mask, index());
    case AdvantageEstimator::kOpo:
      return compute_opo_outcome_advantage(rewards, mask, index());
    case AdvantageEstimator::kGpg: {
      const int64_t nonzero = rewards.sum(-1).count_nonzero().item<int64_t>();
      return compute_gpg_outcome_advantage(rewards, mask, index(), gpg_alpha(rewards.size(0), nonzero));
    }
  }
  return {};
}

TEST(CoreAlgosVerl, EveryAdvantageEstimatorMatchesVerl) {
  auto cases = cases_of("adv");
  ASSERT_FALSE(cases.empty());
  std::map<std::string, int> seen;
  for (const Json* c : cases) {
    const auto ar = run_estimator(*c);
    expect_close(*c, "advantages", ar.advantages);
    if (c->at("outputs").contains("returns")) expect_close(*c, "returns", ar.returns);
    ++seen[c->at("params").at("estimator").get<std::string>()];
  }
  EXPECT_EQ(seen.size(), 10u) << "one fixture family per supported estimator";
}

// verl computes a group's std in float32, where eight 0.7s have a std of ~1 ulp, not 0, so the
// "equal" responses get advantages of 0.056 (and +-0.47 with other values). We compute in double
// and give exactly 0: responses that scored the same carry no signal. Kept on purpose (issue 20).
TEST(CoreAlgosVerl, GrpoOnIdenticalNonIntegerScoresGivesZeroWhereVerlGivesNoise) {
  auto cases = cases_of("adv_identical");
  ASSERT_EQ(cases.size(), 1u);
  const Json& c = *cases[0];
  const auto verl = tensor_of(c.at("outputs").at("advantages"), torch::kFloat64);
  EXPECT_GT(verl.abs().max().item<double>(), 0.01) << "verl's float32 noise is recorded in the fixture";
  const auto ours = run_estimator(c).advantages;
  EXPECT_EQ(ours.abs().max().item<double>(), 0.0);
}

TEST(CoreAlgosVerl, EveryPolicyLossModeAndItsGradientMatchVerl) {
  auto cases = cases_of("policy_loss");
  ASSERT_FALSE(cases.empty());
  std::map<std::string, int> seen;
  for (const Json* c : cases) {
    const Json& p = c->at("params");
    const std::string loss_mode = p.at("loss_mode");
    const auto agg = parse_loss_agg_mode(p.at("mode").get<std::string>());
    auto old = input(*c, "old_log_prob");
    auto lp = input(*c, "log_prob").requires_grad_(true);
    auto adv = input(*c, "advantages");
    auto mask = input(*c, "mask");
    PolicyLoss pl;
    if (loss_mode == "reinforce") {
      pl = compute_policy_loss_reinforce(old, lp, adv, mask, agg);
    } else {
      PolicyLossParams params;
      params.loss_mode = parse_policy_loss_mode(loss_mode);
      params.agg = agg;
      params.clip_ratio_low = p.at("clip_ratio_low").get<double>();
      params.clip_ratio_high = p.at("clip_ratio_high").get<double>();
      params.clip_ratio_c = p.at("clip_ratio_c").get<double>();
      params.tau_pos = p.at("tau_pos").get<double>();
      params.tau_neg = p.at("tau_neg").get<double>();
      params.clip_cov_ratio = p.value("clip_cov_ratio", params.clip_cov_ratio);
      params.clip_cov_lb = p.value("clip_cov_lb", params.clip_cov_lb);
      params.clip_cov_ub = p.value("clip_cov_ub", params.clip_cov_ub);
      params.kl_cov_ratio = p.value("kl_cov_ratio", params.kl_cov_ratio);
      params.ppo_kl_coef = p.value("ppo_kl_coef", params.ppo_kl_coef);
      const auto& in = c->at("inputs");
      pl = compute_policy_loss(old, lp, adv, mask, params,
                               in.contains("rollout_is_weights") ? input(*c, "rollout_is_weights") : torch::Tensor());
    }
    pl.pg_loss.backward();
    expect_close(*c, "loss", pl.pg_loss);
    expect_close(*c, "grad_log_prob", lp.grad());
    const Json& out = c->at("outputs");
    if (out.contains("pg_clipfrac")) expect_close(*c, "pg_clipfrac", pl.pg_clipfrac);
    if (out.contains("ppo_kl")) expect_close(*c, "ppo_kl", pl.ppo_kl);
    if (out.contains("pg_clipfrac_lower")) expect_close(*c, "pg_clipfrac_lower", pl.pg_clipfrac_lower);
    ++seen[loss_mode];
    if (c->at("inputs").contains("rollout_is_weights")) ++seen["with rollout IS weights"];
  }
  EXPECT_EQ(seen.size(), 10u) << "eight loss modes, the REINFORCE form, and the modes with IS weights";
}

// Every "rollout_corr/..." metric verl reports, each within the fixtures' tolerance.
void expect_metrics(const Json& c, const MetricValues& ours) {
  const Json& want = c.at("outputs").at("metrics");
  for (const auto& [name, value] : want.items()) {
    SCOPED_TRACE(c.at("name").get<std::string>() + " / " + name);
    auto it = ours.find(name);
    ASSERT_NE(it, ours.end()) << "ours lacks the metric";
    const double v = value.get<double>();
    EXPECT_NEAR(it->second, v, kRtol * std::abs(v) + 1e-6) << name;
  }
  EXPECT_EQ(ours.size(), want.size()) << c.at("name").get<std::string>() << ": ours has extra metrics";
}

TEST(CoreAlgosVerl, RolloutCorrectionWeightsRejectionAndMetricsMatchVerl) {
  auto cases = cases_of("rollout_correction");
  ASSERT_EQ(cases.size(), 72u);
  std::map<std::string, int> options;
  for (const Json* c : cases) {
    const Json& p = c->at("params");
    auto opt = [&](const char* k) {
      return p.contains(k) && !p.at(k).is_null() ? std::optional<std::string>(p.at(k).get<std::string>()) : std::nullopt;
    };
    const auto config = make_rollout_correction(opt("rollout_is"), p.value("rollout_is_threshold", 2.0),
                                                p.value("rollout_is_batch_normalize", false), opt("rollout_rs"),
                                                opt("rollout_rs_threshold"));
    auto rc = compute_rollout_correction(input(*c, "old_log_prob"), input(*c, "rollout_log_prob"), input(*c, "mask"), config);
    expect_close(*c, "response_mask", rc.response_mask);
    if (c->at("outputs").contains("weights")) {
      expect_close(*c, "weights", rc.weights);
    } else {
      EXPECT_FALSE(rc.weights.defined()) << c->at("name");
    }
    expect_metrics(*c, rc.metrics);
    for (const auto& o : config.rollout_rs) ++options[o.name];
  }
  EXPECT_EQ(options.size(), 11u) << "every rejection-sampling option verl has";
  for (const Json* c : cases_of("rollout_corr_metrics"))
    expect_metrics(*c, rollout_corr_metrics_from_logprobs(input(*c, "log_prob"), input(*c, "rollout_log_prob"),
                                                          input(*c, "mask")));
}

TEST(CoreAlgosVerl, RolloutRsThresholdsAreParsedAsVerlDoes) {
  auto o = parse_rollout_rs("token_k1, seq_mean_k3,token_k1", std::string("0.5_2.0,0.01"));
  ASSERT_EQ(o.size(), 2u);  // the duplicate is dropped
  EXPECT_DOUBLE_EQ(*o[0].lower, 0.5);
  EXPECT_DOUBLE_EQ(o[0].upper, 2.0);
  EXPECT_FALSE(o[1].lower.has_value());
  EXPECT_DOUBLE_EQ(o[1].upper, 0.01);
  auto one = parse_rollout_rs("seq_sum_k1", std::string("4"));
  EXPECT_DOUBLE_EQ(*one[0].lower, 0.25);  // 1 / upper
  for (const auto& [rs, threshold] : std::vector<std::pair<std::string, std::string>>{
           {"token_k4", "1"}, {"token_k2", "0.1_0.2"}, {"token_k1,token_k2", "1,2,3"}, {"token_k2", "-1"}, {"token_k2", "x"}}) {
    EXPECT_THROW(parse_rollout_rs(rs, threshold), Error) << rs << " / " << threshold;
  }
  EXPECT_THROW(parse_rollout_rs("token_k2", std::nullopt), Error);
}

TEST(CoreAlgosVerl, ValueLossAndItsGradientMatchVerl) {
  auto cases = cases_of("value_loss");
  ASSERT_FALSE(cases.empty());
  for (const Json* c : cases) {
    auto vp = input(*c, "vpreds").requires_grad_(true);
    auto vl = compute_value_loss(vp, input(*c, "returns"), input(*c, "values"), input(*c, "mask"),
                                 c->at("params").at("cliprange_value").get<double>(),
                                 parse_loss_agg_mode(c->at("params").at("mode").get<std::string>()));
    vl.vf_loss.backward();
    expect_close(*c, "loss", vl.vf_loss);
    expect_close(*c, "clipfrac", vl.vf_clipfrac);
    expect_close(*c, "grad_vpreds", vp.grad());
  }
}

// The same weights and the same draws: torch.multinomial from a CPU generator seeded as verl's
// torch.manual_seed seeds the global one.
TEST(CoreAlgosVerl, PfPpoResamplesTheRowsVerlResamples) {
  auto cases = cases_of("pf_ppo");
  ASSERT_EQ(cases.size(), 4u);
  for (const Json* c : cases) {
    const Json& p = c->at("params");
    auto gen = at::detail::createCPUGenerator(p.at("seed").get<uint64_t>());
    auto idx = pf_ppo_resample_indices(input(*c, "token_level_scores").sum(-1),
                                       parse_pf_ppo_method(p.at("reweight_method").get<std::string>()),
                                       p.at("weight_pow").get<double>(), gen);
    const auto want = c->at("outputs").at("indices").at("data").get<std::vector<int64_t>>();
    ASSERT_EQ(idx.numel(), static_cast<int64_t>(want.size()));
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(idx[i].item<int64_t>(), want[i]) << c->at("name").get<std::string>() << " draw " << i;
  }
}

// Where verl divides 0 by 0 (no token in the micro-batch), we return 0 so the micro-batch adds
// nothing to the gradient.
TEST(CoreAlgosVerl, FullyMaskedMicroBatchAggregatesToZeroNotNaN) {
  auto loss_mat = torch::randn({3, 4}).requires_grad_(true);
  auto mask = torch::zeros({3, 4});
  for (const auto mode : {LossAggMode::kTokenMean, LossAggMode::kSeqMeanTokenSum, LossAggMode::kSeqMeanTokenMean,
                          LossAggMode::kSeqMeanTokenSumNorm}) {
    auto loss = agg_loss(loss_mat, mask, mode);
    EXPECT_EQ(loss.item<double>(), 0.0) << to_string(mode);
  }
}

TEST(CoreAlgosVerl, EstimatorsVerlHasButWeCannotRunAreRejectedWithTheReason) {
  for (const std::string name : {"remax", "optimal_token_baseline", "tir_optimal_token_baseline"}) {
    try {
      parse_adv_estimator(name);
      ADD_FAILURE() << name << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
      EXPECT_NE(std::string(e.what()).find("not supported:"), std::string::npos) << e.what();
    }
  }
  try {
    parse_policy_loss_mode("bypass_mode");
    ADD_FAILURE() << "bypass_mode was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("recomputes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace verl::trainer::algos

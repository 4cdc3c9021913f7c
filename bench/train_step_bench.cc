// bench_train_step: the actor's training step (ActorWorker::update_policy: forward, log-probs
// over the vocabulary, PPO loss, backward, grad-norm clip, AdamW) on a model of config.json's
// shape with random weights, the C++ side of bench/train_gpu_vs_hf.sh (issue #14, table 2; the
// peer is bench/hf_train.py, transformers' forward + backward + AdamW on the same shape).
//   bench_train_step --config DIR/config.json [--batch 16] [--seq 512] [--lengths full|varied]
//                    [--device cuda] [--dtype bfloat16] [--runs 5] [--profile TRACE.json]
//                    [--weight-cast once|per-use]
//                    [KEY=VALUE ...]   (job-config overrides, e.g.
//                    actor_rollout_ref.model.use_remove_padding=false)
// Each row is a 1-token prompt and a response of seq - 1 tokens ("full"), or of a length drawn
// evenly from [seq/8, seq - 1] ("varied": about half the tokens of full rows), so the LM head
// runs over as many positions as a causal-LM training step's. One mini-batch, one micro-batch
// of all rows unless the overrides say otherwise. Run 1 is a warm-up; runs 2.. are timed with a
// device sync and their median is reported, with tokens/s over real tokens, perf/mfu/actor as
// the trainer reports it (verl's FLOPs formula, trainer/flops_counter.h), the time of a no-grad
// log-prob pass over the same batch, and the allocator's peak. --profile saves a Kineto trace
// (chrome://tracing JSON) of one more update (libtorch >= 2 with CUDA only). --weight-cast
// per-use casts the fp32 weights to the compute dtype at every use, as before the per-forward
// copies (model.h's WeightCast), so that one binary measures both.
// Prints one JSON line.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>
#if VERL_TORCH_HAS_CUDA && TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/autograd/profiler_kineto.h>
#define VERL_BENCH_KINETO 1
#endif

#include "common/config.h"
#include "common/error.h"
#include "trainer/actor_worker.h"
#include "trainer/hf_model.h"
#include "trainer/parallel_strategy.h"
#include "trainer/step_metrics.h"

namespace {

namespace vt = verl::trainer;
using nlohmann::json;

struct Args {
  std::string config, device = "cuda", dtype = "bfloat16", lengths = "full", profile, weight_cast = "once";
  int64_t batch = 16, seq = 512, runs = 5;
  std::vector<std::string> overrides;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto v = [&]() -> std::string {
      if (i + 1 >= argc) throw verl::Error{verl::ExitCode::kInvalidConfig, k + " needs a value", ""};
      return argv[++i];
    };
    if (k == "--config") a.config = v();
    else if (k == "--device") a.device = v();
    else if (k == "--dtype") a.dtype = v();
    else if (k == "--lengths") a.lengths = v();
    else if (k == "--profile") a.profile = v();
    else if (k == "--weight-cast") a.weight_cast = v();
    else if (k == "--batch") a.batch = std::stoll(v());
    else if (k == "--seq") a.seq = std::stoll(v());
    else if (k == "--runs") a.runs = std::stoll(v());
    else if (k.find('=') != std::string::npos && k.rfind("--", 0) != 0) a.overrides.push_back(k);
    else throw verl::Error{verl::ExitCode::kInvalidConfig, "unknown argument " + k, "see the comment at the top of bench/train_step_bench.cc"};
  }
  if (a.config.empty()) throw verl::Error{verl::ExitCode::kInvalidConfig, "--config is required", ""};
  if (a.lengths != "full" && a.lengths != "varied")
    throw verl::Error{verl::ExitCode::kInvalidConfig, "--lengths is full or varied, not " + a.lengths, ""};
  if (a.weight_cast != "once" && a.weight_cast != "per-use")
    throw verl::Error{verl::ExitCode::kInvalidConfig, "--weight-cast is once or per-use, not " + a.weight_cast, ""};
  return a;
}

void sync(const torch::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize(d.index());
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) try {
  const Args a = parse(argc, argv);
  const torch::Device device = vt::parse_device(a.device, "--device");
  const auto dir = a.config.substr(0, a.config.rfind('/'));
  auto model_config = vt::read_hf_config(dir.empty() ? "." : dir);
  model_config.compute_dtype = a.dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat32;
  model_config.weight_cast = a.weight_cast == "once" ? vt::WeightCast::kOncePerForward : vt::WeightCast::kPerUse;

  const std::string b = std::to_string(a.batch);
  std::vector<std::string> overrides = {
      "data.train_batch_size=" + b, "actor_rollout_ref.rollout.n=1", "actor_rollout_ref.actor.ppo_mini_batch_size=" + b,
      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=" + b, "actor_rollout_ref.actor.ppo_epochs=1",
      "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=" + b, "critic.ppo_micro_batch_size_per_gpu=" + b,
      "data.max_prompt_length=1", "data.max_response_length=" + std::to_string(a.seq - 1),
      // the job's own architecture keys are not the model's here (config.json is): only the limit
      "actor_rollout_ref.model.max_position_embeddings=" + std::to_string(std::max<int64_t>(a.seq, 64))};
  overrides.insert(overrides.end(), a.overrides.begin(), a.overrides.end());
  const auto job = vt::JobConfig::from_json(nlohmann::json::parse(verl::config::load_job("", overrides).dump()));

  auto strategy = vt::make_data_parallel(nullptr);
  vt::ActorWorker actor(job, vt::make_causal_lm(model_config, 1, device), device, *strategy);

  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> token(0, model_config.vocab_size - 1);
  std::uniform_int_distribution<int64_t> length(std::max<int64_t>(1, a.seq / 8), a.seq - 1);
  std::vector<std::vector<int64_t>> prompts, responses;
  for (int64_t i = 0; i < a.batch; ++i) {
    prompts.push_back({token(rng)});
    std::vector<int64_t> r(static_cast<size_t>(a.lengths == "full" ? a.seq - 1 : length(rng)));
    for (auto& t : r) t = token(rng);
    responses.push_back(std::move(r));
  }
  const auto batch = vt::make_batch(prompts, responses, a.seq - 1, 0, device);
  const double tokens = batch.attention_mask.sum().item<double>();

  vt::PolicyUpdateInputs in;
  in.advantages = torch::randn({a.batch, a.seq - 1}, torch::TensorOptions().device(device)) * batch.response_mask;
  std::vector<double> log_prob_s, update_s, mfu;
  for (int64_t run = 0; run < a.runs; ++run) {
    sync(device);
    auto t0 = std::chrono::steady_clock::now();
    in.old_log_prob = actor.compute_log_prob(batch).log_probs.detach();
    sync(device);
    const double lp = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    const auto m = actor.update_policy(batch, in, run + 1, 1000);
    sync(device);
    const double up = seconds_since(t0);
    if (run == 0) continue;  // warm-up: allocator growth, cuBLAS / flash autotuning
    log_prob_s.push_back(lp);
    update_s.push_back(up);
    mfu.push_back(m.at("perf/mfu/actor"));
  }
  json out = {{"engine", "verlctl"},
              {"batch", a.batch},
              {"seq", a.seq},
              {"lengths", a.lengths},
              {"tokens", tokens},
              {"remove_padding", job.model.use_remove_padding},
              {"gradient_checkpointing", job.model.enable_gradient_checkpointing},
              {"weight_cast", a.weight_cast},
              {"update_s", median(update_s)},
              {"tokens_per_s", tokens / median(update_s)},
              {"mfu", median(mfu)},
              {"log_prob_s", median(log_prob_s)}};
  vt::MetricMap mem;
  vt::add_memory_metrics(mem, device);
  out["max_allocated_gb"] = mem["perf/max_memory_allocated_gb"];
  out["max_reserved_gb"] = mem["perf/max_memory_reserved_gb"];
  if (!a.profile.empty()) {
#ifdef VERL_BENCH_KINETO
    namespace prof = torch::profiler::impl;
    const prof::ProfilerConfig cfg(prof::ProfilerState::KINETO);
    const std::set<prof::ActivityType> activities = {prof::ActivityType::CPU, prof::ActivityType::CUDA};
    torch::autograd::profiler::prepareProfiler(cfg, activities);
    torch::autograd::profiler::enableProfiler(cfg, activities);
    sync(device);
    const auto t0 = std::chrono::steady_clock::now();
    actor.update_policy(batch, in, a.runs + 1, 1000);
    sync(device);
    out["profiled_update_s"] = seconds_since(t0);
    torch::autograd::profiler::disableProfiler()->save(a.profile);
    out["profile"] = a.profile;
#else
    out["profile_error"] = "--profile needs libtorch >= 2 with CUDA (Kineto)";
#endif
  }
  std::cout << out.dump() << std::endl;
  return 0;
} catch (const std::exception& e) {
  std::cout << json{{"engine", "verlctl"}, {"error", e.what()}}.dump() << std::endl;
  return 1;
}

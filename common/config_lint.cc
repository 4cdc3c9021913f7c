// `verlctl config lint`: the scale-out advice of the guide this project grew from
// (../shared/seeds), each warning with its reason. Only advice: a job that draws warnings
// is still valid.
#include <cstdlib>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include "common/config.h"

namespace verl::config {
namespace {

double getd(const Json& root, const char* path) {
  const Json* j = find(root, path);
  return j && j->is_number() ? j->get<double>() : 0.0;
}

std::string fmt_count(double v) {
  std::ostringstream o;
  o.precision(3);
  if (v >= 1e9) o << v / 1e9 << "B";
  else if (v >= 1e6) o << v / 1e6 << "M";
  else o << v;
  return o.str();
}

}  // namespace

std::vector<Issue> lint_job(const Json& job, const Json* cluster, double gpu_memory_gib) {
  std::vector<Issue> out;
  auto warn = [&](std::string path, std::string msg, std::string hint) {
    out.push_back({Severity::kWarning, std::move(path), std::move(msg), std::move(hint), {}});
  };
  const double nnodes = getd(job, "trainer.nnodes");
  const double per_node = getd(job, "trainer.n_gpus_per_node");
  const double ranks = nnodes * per_node;
  const double batch = getd(job, "data.train_batch_size");

  // 1. The global batch should grow with the node count, or each GPU idles on a sliver of it.
  if (nnodes > 1 && batch / ranks < 8) {
    warn("data.train_batch_size",
         "train_batch_size " + fmt_count(batch) + " over " + fmt_count(ranks) + " ranks is " +
             fmt_count(batch / ranks) + " prompts per rank: adding nodes without growing the global batch "
             "leaves each GPU a sliver of work and communication dominates",
         "grow data.train_batch_size with trainer.nnodes (the guide runs 4096 on 4 x 8 GPUs, i.e. 128 per GPU)");
  }
  // 2. Rollout memory share: below 0.8 wastes KV-cache room, above 0.95 risks OOM beside training.
  const double util = getd(job, "actor_rollout_ref.rollout.gpu_memory_utilization");
  if (util < 0.8 || util > 0.95) {
    std::ostringstream v;
    v << util;
    warn("actor_rollout_ref.rollout.gpu_memory_utilization",
         "is " + v.str() + "; " +
             (util < 0.8 ? std::string("below 0.8 the rollout engine leaves KV-cache memory unused and generation slows")
                         : std::string("above 0.95 leaves no headroom for activations and fragmentation: out-of-memory")),
         "0.8-0.95 is the range that suits most GPUs");
  }
  // 3. Large models want tensor parallelism, which the embedded trainer does not have (tp > 1 is
  //    refused by validation): one GPU's memory cannot hold their weights + KV cache.
  const double h = getd(job, "actor_rollout_ref.model.hidden_size");
  const double layers = getd(job, "actor_rollout_ref.model.num_hidden_layers");
  const double inter = getd(job, "actor_rollout_ref.model.intermediate_size");
  const double params = layers * (4 * h * h + 3 * h * inter);  // attention + SwiGLU MLP
  const double tp = getd(job, "actor_rollout_ref.rollout.tensor_model_parallel_size");
  if (params >= 6e9 && tp < 2) {
    warn("actor_rollout_ref.rollout.tensor_model_parallel_size",
         "the model has about " + fmt_count(params) +
             " parameters and every rank must hold all of it (the embedded trainer has no tensor parallelism)",
         "use a smaller model here, or run it under verl with tensor_model_parallel_size=2 (or more) so that weights and KV cache fit");
  }
  // 4. Small GPU memory: weights + grads + Adam states (16 bytes/param in mixed precision) must fit.
  const double gpu_gib = gpu_memory_gib;
  const double train_gib = params * 16 / (1024.0 * 1024 * 1024);
  if (train_gib > 0.9 * gpu_gib) {
    std::ostringstream v;
    v.precision(3);
    v << train_gib << " GiB of weights, gradients and optimizer state against " << gpu_gib << " GiB per GPU";
    warn("actor_rollout_ref.model",
         "training state is about " + v.str(),
         "offload parameters/optimizer to CPU (verl: actor_rollout_ref.actor.fsdp_config.param_offload=True, "
         "optimizer_offload=True) or shard over more GPUs");
  }
  // 5. GRPO compares samples of one prompt: with n=1 every advantage is zero.
  const Json* est = find(job, "algorithm.adv_estimator");
  const bool grouped = est && est->is_string() &&
                       std::set<std::string>{"grpo", "grpo_vectorized", "rloo", "rloo_vectorized", "opo", "gpg",
                                             "reinforce_plus_plus_baseline"}
                           .count(est->get<std::string>());
  if (grouped && getd(job, "actor_rollout_ref.rollout.n") < 2) {
    warn("actor_rollout_ref.rollout.n", "algorithm.adv_estimator=" + est->get<std::string>() +
                                            " with rollout.n=1: each group has one sample and every advantage is 0",
         "set actor_rollout_ref.rollout.n to 4 or more");
  }
  // 6. HF tokenizers fork-bomb and deadlock under multiprocessing unless told not to.
  std::string tp_env;
  if (const char* e = std::getenv("TOKENIZERS_PARALLELISM")) tp_env = e;
  if (cluster) {
    if (const Json* v = find(*cluster, "env"); v && v->is_object() && v->contains("TOKENIZERS_PARALLELISM"))
      tp_env = (*v)["TOKENIZERS_PARALLELISM"].is_string() ? (*v)["TOKENIZERS_PARALLELISM"].get<std::string>()
                                                          : (*v)["TOKENIZERS_PARALLELISM"].dump();
  }
  if (!tp_env.empty() && tp_env != "false") {
    warn("env.TOKENIZERS_PARALLELISM", "is '" + tp_env + "': tokenizer threads inside forked data workers deadlock "
                                       "or oversubscribe the CPUs",
         "set TOKENIZERS_PARALLELISM=false (verlctl sets it for its ranks unless the spec's env says otherwise)");
  }
  // 7. verl's service loggers: the trainer skips them (trainer/tracking.h), metrics.jsonl stays.
  if (const Json* lg = find(job, "trainer.logger")) {
    std::vector<std::string> names;
    if (lg->is_string()) names.push_back(lg->get<std::string>());
    if (lg->is_array())
      for (const auto& e : *lg)
        if (e.is_string()) names.push_back(e.get<std::string>());
    for (const auto& name : names) {
      if (name == "console" || name == "file" || name == "tensorboard") continue;
      warn("trainer.logger", "'" + name + "' needs a service or Python client that the trainer does not have: "
                             "it is skipped (metrics still go to metrics.jsonl)",
           "use console, file (verl's JSON lines) or tensorboard (event files)");
    }
  }
  return out;
}

}  // namespace verl::config

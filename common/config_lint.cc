// `verlctl config lint`: the scale-out advice of the guide this project grew from
// (../shared/seeds), each warning with its reason. Only advice: a job that draws warnings
// is still valid.
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/role_placement.h"

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
  const Json* est = find(job, "algorithm.adv_estimator");
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
  // 3. Large models want a tensor-parallel rollout: with tp = 1 every rank's rollout holds a
  //    whole copy of the weights beside the training state.
  const double h = getd(job, "actor_rollout_ref.model.hidden_size");
  const double layers = getd(job, "actor_rollout_ref.model.num_hidden_layers");
  const double inter = getd(job, "actor_rollout_ref.model.intermediate_size");
  const double params = layers * (4 * h * h + 3 * h * inter);  // attention + SwiGLU MLP
  const double tp = getd(job, "actor_rollout_ref.rollout.tensor_model_parallel_size");
  if (params >= 6e9 && tp < 2) {
    warn("actor_rollout_ref.rollout.tensor_model_parallel_size",
         "the model has about " + fmt_count(params) +
             " parameters and with tensor_model_parallel_size=1 every rank's rollout holds all of them",
         "set actor_rollout_ref.rollout.tensor_model_parallel_size=2 (or more) so that each rank holds 1/tp of the "
         "rollout's weights");
  }
  //    A tensor-parallel group is consecutive ranks (trainer/tensor_parallel.h): it belongs within
  //    one node, where its two all-reduces per layer and its logits gather stay off the network.
  if (const auto span = tensor_parallel_span_warning(static_cast<long long>(tp), static_cast<long long>(nnodes),
                                                    static_cast<long long>(per_node));
      !span.empty()) {
    warn("actor_rollout_ref.rollout.tensor_model_parallel_size", span,
         "pick a tensor_model_parallel_size that divides trainer.n_gpus_per_node (" + fmt_count(per_node) + ")");
  }
  // 4. Small GPU memory: the training state per GPU under the roles' strategies (trainer/
  //    module_engine.h): fp32 weights 4 B/param, gradients 4, Adam moments 8; FSDP divides each
  //    by the shard group's size (the rank count for fsdp_size=-1, fsdp_size for hybrid sharding's
  //    groups, 1 for fsdp_size=1), param_offload moves weights + gradients to the CPU, optimizer_offload
  //    the moments. The critic (GAE) is a second model; the reference (KL) a third, frozen.
  const double gpu_gib = gpu_memory_gib;
  const double gib = 1024.0 * 1024 * 1024;
  struct Role { const char* name; const char* fsdp; bool trainable; bool present; };
  const bool critic = est == nullptr || !est->is_string() || est->get<std::string>() == "gae";
  const Json* kl_loss = find(job, "actor_rollout_ref.actor.use_kl_loss");
  const Json* kl_reward = find(job, "algorithm.use_kl_in_reward");
  const bool ref = (kl_loss && kl_loss->is_boolean() && kl_loss->get<bool>()) ||
                   (kl_reward && kl_reward->is_boolean() && kl_reward->get<bool>());
  const Role roles[] = {{"actor", "actor_rollout_ref.actor.fsdp_config", true, true},
                        {"critic", "critic.model.fsdp_config", true, critic},
                        {"ref", "actor_rollout_ref.ref.fsdp_config", false, ref}};
  double total_gib = 0;
  std::ostringstream parts;
  parts.precision(3);
  bool any_offload_off = false;
  for (const auto& r : roles) {
    if (!r.present) continue;
    const std::string base = r.fsdp;
    const double fsdp_size = getd(job, (base + ".fsdp_size").c_str());
    const Json* po = find(job, base + ".param_offload");
    const Json* oo = find(job, base + ".optimizer_offload");
    const bool param_off = po && po->is_boolean() && po->get<bool>();
    const bool optim_off = oo && oo->is_boolean() && oo->get<bool>();
    const double shards = ranks <= 1 || fsdp_size == 1 ? 1 : fsdp_size > 1 && fsdp_size < ranks ? fsdp_size : ranks;
    double bytes = param_off ? 0 : (r.trainable ? 8 : 4) * params / shards;
    if (r.trainable && !optim_off) bytes += 8 * params / shards;
    any_offload_off |= !param_off || (r.trainable && !optim_off);
    total_gib += bytes / gib;
    parts << (parts.tellp() > 0 ? ", " : "") << r.name << " " << bytes / gib;
  }
  if (total_gib > 0.9 * gpu_gib) {
    std::ostringstream v;
    v.precision(3);
    v << "training state is about " << total_gib << " GiB per GPU (" << parts.str() << ") against " << gpu_gib
      << " GiB per GPU";
    warn("actor_rollout_ref.model", v.str(),
         std::string(any_offload_off ? "offload parameters/optimizer to CPU (actor_rollout_ref.actor.fsdp_config."
                                       "param_offload=true, optimizer_offload=true; critic.model.fsdp_config.*) or "
                                     : "") +
             "shard over more GPUs (fsdp_config.fsdp_size=-1 over more ranks, or a larger fsdp_size)");
  }
  // 5. GRPO compares samples of one prompt: with n=1 every advantage is zero.
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

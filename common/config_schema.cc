#include "common/config_schema.h"
#include "common/error.h"
#include "common/role_placement.h"

#include <algorithm>
#include <map>

namespace verl::config::schema {

const char* type_name(Type type) {
  switch (type) {
    case Type::kAny: return "a scalar";
    case Type::kBool: return "a boolean (true/false)";
    case Type::kInt: return "an integer";
    case Type::kFloat: return "a number";
    case Type::kString: return "a string";
    case Type::kStrings: return "a string or a list of strings";
    case Type::kList: return "a list";
    case Type::kMap: return "a mapping";
    case Type::kFreeMap: return "a mapping";
    case Type::kObjects: return "a list of mappings";
  }
  return "a value";
}

namespace {

Rule positive(const std::string& path) { Rule r; r.path = path; r.min = 1; return r; }
Rule range(const std::string& path, double lo, double hi) { Rule r; r.path = path; r.min = lo; r.max = hi; return r; }
Rule at_least(const std::string& path, double lo) { Rule r; r.path = path; r.min = lo; return r; }
Rule choice(const std::string& path, std::vector<std::string> c) { Rule r; r.path = path; r.choices = std::move(c); return r; }
Rule nullable(const std::string& path, Type t, std::optional<double> lo = std::nullopt) {
  Rule r; r.path = path; r.type = t; r.nullable = true; r.min = lo; return r;
}
Rule nullable_choice(const std::string& path, std::vector<std::string> c) {
  Rule r = choice(path, std::move(c)); r.type = Type::kString; r.nullable = true; return r;
}
Rule typed(const std::string& path, Type t, double lo) { Rule r; r.path = path; r.type = t; r.min = lo; return r; }
Rule list_of(const std::string& path, Type element) { Rule r; r.path = path; r.type = Type::kList; r.element = element; return r; }
// One name or a list of names, each one of choices.
Rule strings_of(const std::string& path, std::vector<std::string> c) { Rule r; r.path = path; r.type = Type::kStrings; r.choices = std::move(c); return r; }

// A role's device (common/role_placement.h): its grammar is checked with the job's shape below.
Rule device(const std::string& path) { Rule r; r.path = path; r.type = Type::kString; return r; }
// Reasons for verl's names that verlctl refuses (Rule::refused).
const char* const kNoSumPiSquared =
    "its baseline needs sum_pi_squared (the sum of squared token probabilities over the vocabulary at every "
    "response position), which verlctl's log-prob pass does not compute";
const char* const kStraightThrough =
    "verl itself raises NotImplementedError for the straight-through '+' forms (its kl_penalty_forward "
    "knows no name ending in '+')";
const char* const kBypass =
    "bypass mode trains against the rollout engine's log-probs in place of recomputed old log-probs; verlctl "
    "always recomputes them (verl's decoupled mode: algorithm.rollout_correction.rollout_is / rollout_rs work)";
Rule refusing(Rule r, std::map<std::string, std::string> refused) { r.refused = std::move(refused); return r; }

const std::vector<std::string> kLossAgg = {"token-mean", "seq-mean-token-sum", "seq-mean-token-mean",
                                           "seq-mean-token-sum-norm"};

std::vector<Rule> job_rules() {
  std::vector<Rule> r = {
      nullable("data.train_files", Type::kStrings),
      nullable("data.val_files", Type::kStrings),
      positive("data.max_prompt_length"),
      positive("data.max_response_length"),
      choice("data.truncation", {"error", "left", "right", "middle"}),
      positive("data.train_batch_size"),
      nullable("data.val_batch_size", Type::kInt, 1),
      nullable("data.seed", Type::kInt),
      choice("data.builtin.task", {"arithmetic", "countdown"}),
      positive("data.builtin.train_size"),
      positive("data.builtin.val_size"),
      range("data.builtin.digits", 1, 6),
      nullable("actor_rollout_ref.model.path", Type::kString),
      nullable("critic.model.path", Type::kString),
      at_least("actor_rollout_ref.model.lora_rank", 0),
      [] { Rule r = at_least("actor_rollout_ref.model.lora_alpha", 0); r.type = Type::kFloat; return r; }(),
      nullable("actor_rollout_ref.model.target_modules", Type::kStrings),
      nullable("actor_rollout_ref.model.exclude_modules", Type::kStrings),
      nullable("actor_rollout_ref.model.lora_adapter_path", Type::kString),
      choice("actor_rollout_ref.model.dtype", {"float32", "bfloat16"}),
      positive("actor_rollout_ref.model.hidden_size"),
      positive("actor_rollout_ref.model.intermediate_size"),
      positive("actor_rollout_ref.model.num_hidden_layers"),
      positive("actor_rollout_ref.model.num_attention_heads"),
      positive("actor_rollout_ref.model.num_key_value_heads"),
      positive("actor_rollout_ref.model.max_position_embeddings"),
      nullable("actor_rollout_ref.model.use_remove_padding", Type::kBool),
      nullable("actor_rollout_ref.model.enable_gradient_checkpointing", Type::kBool),
      nullable("critic.model.enable_gradient_checkpointing", Type::kBool),
      device("actor_rollout_ref.actor.device"),
      positive("actor_rollout_ref.actor.ppo_mini_batch_size"),
      nullable("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", Type::kInt, 1),
      positive("actor_rollout_ref.actor.ppo_max_token_len_per_gpu"),
      positive("actor_rollout_ref.actor.ppo_epochs"),
      range("actor_rollout_ref.actor.clip_ratio", 0, 10),
      range("actor_rollout_ref.actor.clip_ratio_low", 0, 10),
      range("actor_rollout_ref.actor.clip_ratio_high", 0, 10),
      at_least("actor_rollout_ref.actor.clip_ratio_c", 1),
      choice("actor_rollout_ref.actor.loss_agg_mode", kLossAgg),
      at_least("actor_rollout_ref.actor.entropy_coeff", 0),
      at_least("actor_rollout_ref.actor.kl_loss_coef", 0),
      refusing(choice("actor_rollout_ref.actor.kl_loss_type", {"kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"}),
               {{"k1+", kStraightThrough}, {"k2+", kStraightThrough}, {"k3+", kStraightThrough},
                {"kl+", kStraightThrough}, {"mse+", kStraightThrough}, {"low_var_kl+", kStraightThrough}}),
      refusing(choice("actor_rollout_ref.actor.policy_loss.loss_mode",
                      {"vanilla", "gspo", "sapo", "gpg", "clip_cov", "kl_cov", "geo_mean", "cispo"}),
               {{"bypass_mode", kBypass}}),
      range("actor_rollout_ref.actor.policy_loss.clip_cov_ratio", 0, 1),
      range("actor_rollout_ref.actor.policy_loss.kl_cov_ratio", 0, 1),
      at_least("actor_rollout_ref.actor.policy_loss.ppo_kl_coef", 0),
      range("actor_rollout_ref.actor.tau_pos", 1e-6, 1e6),  // sapo divides by it
      range("actor_rollout_ref.actor.tau_neg", 1e-6, 1e6),
      at_least("actor_rollout_ref.actor.grad_clip", 0),
      range("actor_rollout_ref.actor.optim.lr", 0, 1),
      at_least("actor_rollout_ref.actor.optim.lr_warmup_steps", -1),
      range("actor_rollout_ref.actor.optim.lr_warmup_steps_ratio", 0, 1),
      at_least("actor_rollout_ref.actor.optim.weight_decay", 0),
      list_of("actor_rollout_ref.actor.optim.betas", Type::kFloat),
      choice("actor_rollout_ref.rollout.name", {"native", "vllm", "sglang", "hf"}),
      positive("actor_rollout_ref.rollout.max_num_seqs"),
      positive("actor_rollout_ref.rollout.max_num_batched_tokens"),
      [] { Rule r = list_of("actor_rollout_ref.rollout.cudagraph_capture_sizes", Type::kInt); r.nullable = true; r.min = 1; return r; }(),
      positive("actor_rollout_ref.rollout.n"),
      at_least("actor_rollout_ref.rollout.temperature", 0),
      at_least("actor_rollout_ref.rollout.top_k", -1),
      range("actor_rollout_ref.rollout.top_p", 0, 1),
      range("actor_rollout_ref.rollout.gpu_memory_utilization", 0.05, 1),
      positive("actor_rollout_ref.rollout.tensor_model_parallel_size"),
      nullable("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", Type::kInt, 1),
      nullable("actor_rollout_ref.rollout.log_prob_use_dynamic_bsz", Type::kBool),
      nullable("actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu", Type::kInt, 1),
      at_least("actor_rollout_ref.rollout.val_kwargs.temperature", 0),
      at_least("actor_rollout_ref.rollout.val_kwargs.top_k", -1),
      range("actor_rollout_ref.rollout.val_kwargs.top_p", 0, 1),
      positive("actor_rollout_ref.rollout.val_kwargs.n"),
      device("actor_rollout_ref.ref.device"),
      device("actor_rollout_ref.rollout.device"),
      nullable("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", Type::kInt, 1),
      device("critic.device"),
      typed("critic.ppo_mini_batch_size", Type::kInt, 1),
      nullable("critic.ppo_micro_batch_size_per_gpu", Type::kInt, 1),
      typed("critic.ppo_epochs", Type::kInt, 1),
      nullable("actor_rollout_ref.ref.log_prob_use_dynamic_bsz", Type::kBool),
      nullable("actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", Type::kInt, 1),
      nullable("critic.use_dynamic_bsz", Type::kBool),
      positive("critic.ppo_max_token_len_per_gpu"),
      nullable("critic.forward_max_token_len_per_gpu", Type::kInt, 1),
      at_least("critic.cliprange_value", 0),
      choice("critic.loss_agg_mode", kLossAgg),
      at_least("critic.grad_clip", 0),
      range("critic.optim.lr", 0, 1),
      at_least("critic.optim.lr_warmup_steps", -1),
      range("critic.optim.lr_warmup_steps_ratio", 0, 1),
      at_least("critic.optim.weight_decay", 0),
      list_of("critic.optim.betas", Type::kFloat),
      refusing(choice("algorithm.adv_estimator",
                      {"gae", "grpo", "grpo_vectorized", "grpo_passk", "rloo", "rloo_vectorized",
                       "reinforce_plus_plus", "reinforce_plus_plus_baseline", "opo", "gpg"}),
               {{"remax", "ReMax's baseline is the reward of an extra greedy rollout per prompt, which verlctl's "
                          "trainer does not generate"},
                {"optimal_token_baseline", kNoSumPiSquared},
                {"tir_optimal_token_baseline", kNoSumPiSquared}}),
      range("algorithm.gamma", 0, 1),
      range("algorithm.lam", 0, 1),
      refusing(choice("algorithm.kl_penalty", {"kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"}),
               {{"k1+", kStraightThrough}, {"k2+", kStraightThrough}, {"k3+", kStraightThrough},
                {"kl+", kStraightThrough}, {"mse+", kStraightThrough}, {"low_var_kl+", kStraightThrough}}),
      choice("algorithm.kl_ctrl.type", {"fixed", "adaptive"}),
      nullable_choice("algorithm.rollout_correction.rollout_is", {"token", "sequence"}),
      nullable("algorithm.rollout_correction.rollout_rs", Type::kString),
      nullable("algorithm.rollout_correction.rollout_rs_threshold", Type::kString),
      nullable("actor_rollout_ref.actor.loss_scale_factor", Type::kFloat),
      choice("trainer.use_legacy_worker_impl", {"auto", "enable", "disable"}),
      choice("algorithm.pf_ppo.reweight_method", {"pow", "max_min", "max_random"}),
      at_least("algorithm.kl_ctrl.kl_coef", 0),
      positive("algorithm.kl_ctrl.horizon"),
      at_least("algorithm.kl_ctrl.target_kl", 0),
      strings_of("trainer.logger", {"wandb", "mlflow", "swanlab", "vemlp_wandb", "tensorboard", "console", "clearml",
                                    "trackio", "file", "tracking"}),  // verl's names: trainer/tracking.h
      positive("trainer.nnodes"),
      positive("trainer.n_gpus_per_node"),
      choice("trainer.device", {"auto", "cpu", "cuda"}),
      positive("trainer.total_epochs"),
      nullable("trainer.total_training_steps", Type::kInt, 1),
      at_least("trainer.sft_warmup_steps", 0),
      at_least("trainer.critic_warmup", 0),
      at_least("trainer.test_freq", -1),
      at_least("trainer.save_freq", -1),
      choice("trainer.resume_mode", {"auto", "disable", "resume_path"}),
      at_least("trainer.max_restarts", 0),
      nullable("trainer.resume_from_path", Type::kString),
      nullable("trainer.metrics_file", Type::kString),
  };
  return r;
}

std::vector<Rule> cluster_rules() {
  Rule nodes;
  nodes.path = "nodes";
  nodes.type = Type::kObjects;
  nodes.item = Json{{"host", nullptr}, {"port", 22}, {"user", nullptr}, {"gpus", 0},
                    {"resources", {{"cpus", nullptr}, {"gpus", nullptr}, {"gpu_ids", nullptr}}}};
  Rule gpu_ids = nullable("nodes[].resources.gpu_ids", Type::kList);
  gpu_ids.element = Type::kInt;
  nodes.required = {"host"};
  return {
      choice("backend", {"local", "ssh", "slurm"}),
      range("head.dashboard_port", 1, 65535),
      range("head.store_port", 1, 65535),
      range("head.heartbeat_interval_s", 0.05, 60),
      range("head.heartbeat_timeout_s", 0.1, 86400),
      range("head.agent_exit_after_s", 1, 86400),
      nodes,
      range("nodes[].port", 1, 65535),
      nullable("nodes[].user", Type::kString),
      at_least("nodes[].gpus", 0),
      nullable("nodes[].resources.cpus", Type::kInt, 1),
      nullable("nodes[].resources.gpus", Type::kInt, 0),
      gpu_ids,
      nullable("ssh.user", Type::kString),
      range("ssh.port", 1, 65535),
      nullable("ssh.identity_file", Type::kString),
      range("ssh.connect_timeout_s", 1, 3600),
      range("ssh.command_timeout_s", 1, 86400),
      range("ssh.keepalive_s", 0, 3600),
      choice("ssh.copy_binary", {"auto", "always", "never"}),
      range("ssh.parallel", 1, 1024),
      positive("slurm.nodes"),
      at_least("slurm.gpus_per_node", 0),
      positive("slurm.cpus_per_task"),
      nullable("slurm.partition", Type::kString),
      nullable("slurm.account", Type::kString),
      nullable("slurm.output", Type::kString),
      nullable("slurm.error", Type::kString),
      choice("container.runtime", {"none", "docker", "podman", "apptainer", "pyxis"}),
      nullable("container.image", Type::kString),
      list_of("container.mounts", Type::kString),
      at_least("probes.min_busbw_gbps", 0),
      at_least("probes.min_tcp_gbps", 0),
      at_least("probes.max_clock_offset_ms", 0),
      at_least("probes.min_shm_gib", 0),
      at_least("probes.min_free_disk_gib", 0),
      at_least("probes.min_copy_gbps", 0),
      at_least("probes.min_d2d_gbps", 0),
      at_least("probes.min_bf16_tflops", 0),
  };
}

std::string normalise(const std::string& path) {
  // nodes[3].port -> nodes[].port: list items share one rule.
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '[') {
      out += "[]";
      while (i < path.size() && path[i] != ']') ++i;
    } else {
      out += path[i];
    }
  }
  return out;
}

long long geti(const Json& root, const char* path) {
  const Json* j = find(root, path);
  return j && j->is_number() ? j->get<long long>() : 0;
}

}  // namespace

const Rule* find_rule(Kind kind, const std::string& path) {
  static const std::map<std::string, Rule> kJob = [] {
    std::map<std::string, Rule> m;
    for (auto& r : job_rules()) m[r.path] = r;
    return m;
  }();
  static const std::map<std::string, Rule> kCluster = [] {
    std::map<std::string, Rule> m;
    for (auto& r : cluster_rules()) m[r.path] = r;
    return m;
  }();
  const auto& m = kind == Kind::kJob ? kJob : kCluster;
  auto it = m.find(normalise(path));
  return it == m.end() ? nullptr : &it->second;
}

void check_consistency(Kind kind, const Json& root, const std::map<std::string, Location>& where,
                       std::vector<Issue>& issues) {
  auto loc = [&](const std::string& path) {
    auto w = where.find(path);
    return w == where.end() ? Location{} : w->second;
  };
  auto fail = [&](const std::string& path, std::string msg, std::string hint) {
    issues.push_back({Severity::kError, path, std::move(msg), std::move(hint), loc(path)});
  };
  if (kind == Kind::kCluster) {
    const Json* backend = find(root, "backend");
    const Json* nodes = find(root, "nodes");
    if (backend && *backend == "ssh" && nodes && nodes->empty())
      fail("nodes", "the ssh backend needs at least one entry in nodes", "add nodes: [{host: 10.0.0.2}, ...]");
    if (geti(root, "head.dashboard_port") == geti(root, "head.store_port"))
      fail("head.store_port", "the store port equals the dashboard port", "give the two head ports different numbers");
    const Json* interval = find(root, "head.heartbeat_interval_s");
    const Json* timeout = find(root, "head.heartbeat_timeout_s");
    if (interval && timeout && interval->is_number() && timeout->is_number() &&
        timeout->get<double>() < 2 * interval->get<double>())
      fail("head.heartbeat_timeout_s", "the heartbeat timeout is under twice the heartbeat interval",
           "one late heartbeat would mark a node lost: make head.heartbeat_timeout_s at least 2 x head.heartbeat_interval_s");
    return;
  }
  const long long ranks = geti(root, "trainer.nnodes") * geti(root, "trainer.n_gpus_per_node");
  const long long batch = geti(root, "data.train_batch_size");
  const long long n = geti(root, "actor_rollout_ref.rollout.n");
  const std::string ranks_text = "trainer.nnodes x trainer.n_gpus_per_node = " + std::to_string(ranks) + " ranks";
  if (ranks > 0 && (batch * n) % ranks != 0)
    fail("data.train_batch_size",
         "train_batch_size * rollout.n = " + std::to_string(batch) + " * " + std::to_string(n) + " = " +
             std::to_string(batch * n) + " responses do not split evenly over " + ranks_text,
         "make data.train_batch_size * actor_rollout_ref.rollout.n a multiple of " + std::to_string(ranks));
  // verl builds a critic only for GAE: the critic's batch sizes matter only then.
  const Json* estimator = find(root, "algorithm.adv_estimator");
  const bool critic = !estimator || !estimator->is_string() || estimator->get<std::string>() == "gae";
  for (const std::string role : {"actor_rollout_ref.actor", "critic"}) {
    if (role == "critic" && !critic) continue;
    const long long mini = geti(root, (role + ".ppo_mini_batch_size").c_str());
    const long long micro = geti(root, (role + ".ppo_micro_batch_size_per_gpu").c_str());
    if (mini > batch) {
      fail(role + ".ppo_mini_batch_size",
           "ppo_mini_batch_size " + std::to_string(mini) + " exceeds data.train_batch_size " + std::to_string(batch),
           "a mini batch is a part of the step's batch (both count prompts)");
      continue;
    }
    if (mini > 0 && batch % mini != 0)
      fail(role + ".ppo_mini_batch_size",
           "data.train_batch_size " + std::to_string(batch) + " is not a multiple of ppo_mini_batch_size " +
               std::to_string(mini),
           "each step is split into whole mini batches");
    if (ranks > 0 && (mini * n) % ranks != 0) {
      fail(role + ".ppo_mini_batch_size",
           "ppo_mini_batch_size * rollout.n = " + std::to_string(mini * n) + " responses do not split over " + ranks_text,
           "make it a multiple of " + std::to_string(ranks));
      continue;
    }
    const long long per_rank = ranks > 0 ? mini * n / ranks : 0;
    // With use_dynamic_bsz a token budget forms the micro-batches and the row count is unused
    // (verl skips the check too); critic.use_dynamic_bsz null follows the actor's.
    auto dynamic = [&](const std::string& r) {
      const Json* d = find(root, r + ".use_dynamic_bsz");
      return d && d->is_boolean() && d->get<bool>();
    };
    const Json* own = find(root, role + ".use_dynamic_bsz");
    if (own && own->is_null() ? dynamic("actor_rollout_ref.actor") : dynamic(role)) continue;
    if (micro > 0 && per_rank % micro != 0)
      fail(role + ".ppo_micro_batch_size_per_gpu",
           "a mini batch gives " + std::to_string(per_rank) + " responses per rank (ppo_mini_batch_size " +
               std::to_string(mini) + " * rollout.n " + std::to_string(n) + " / " + std::to_string(ranks) +
               " ranks), not a multiple of ppo_micro_batch_size_per_gpu " + std::to_string(micro),
           "pick a micro batch that divides " + std::to_string(per_rank));
  }
  const long long heads = geti(root, "actor_rollout_ref.model.num_attention_heads");
  const long long kv = geti(root, "actor_rollout_ref.model.num_key_value_heads");
  const long long hidden = geti(root, "actor_rollout_ref.model.hidden_size");
  if (heads > 0 && hidden % heads != 0)
    fail("actor_rollout_ref.model.hidden_size",
         "hidden_size " + std::to_string(hidden) + " is not a multiple of num_attention_heads " + std::to_string(heads),
         "each attention head gets hidden_size / num_attention_heads channels");
  if (kv > 0 && heads % kv != 0)
    fail("actor_rollout_ref.model.num_key_value_heads",
         "num_attention_heads " + std::to_string(heads) + " is not a multiple of num_key_value_heads " + std::to_string(kv),
         "grouped-query attention shares each key/value head among a whole group of query heads");
  const long long ctx = geti(root, "data.max_prompt_length") + geti(root, "data.max_response_length");
  const Json* model_path = find(root, "actor_rollout_ref.model.path");
  if ((!model_path || model_path->is_null()) && ctx > geti(root, "actor_rollout_ref.model.max_position_embeddings"))
    fail("actor_rollout_ref.model.max_position_embeddings",
         "max_prompt_length + max_response_length = " + std::to_string(ctx) + " exceeds max_position_embeddings " +
             std::to_string(geti(root, "actor_rollout_ref.model.max_position_embeddings")),
         "raise max_position_embeddings or shorten the prompt/response lengths");
  // Role placement: each role's device names its GPUs (one per local rank in a list).
  bool devices_ok = true;
  const int per_node = static_cast<int>(geti(root, "trainer.n_gpus_per_node"));
  for (const char* key : {"actor_rollout_ref.actor.device", "actor_rollout_ref.rollout.device",
                          "actor_rollout_ref.ref.device", "critic.device"}) {
    const Json* v = find(root, key);
    if (!v || !v->is_string()) continue;
    try {
      for (int local = 0; local < std::max(1, per_node); ++local) role_gpu(key, v->get<std::string>(), local, per_node);
    } catch (const Error& e) {
      fail(key, e.what(), e.hint());
      devices_ok = false;
    }
  }
  if (devices_ok && per_node > 0) {
    try {
      role_placement(root, per_node);
    } catch (const Error& e) {
      fail("actor_rollout_ref.actor.device", e.what(), e.hint());
    }
  }
  // The rollout's tensor parallelism (trainer/tensor_parallel.h) cuts the heads and the MLP over
  // the group: a built-in model that cannot be cut is refused here; an HF model is checked when
  // its config.json is read, the world size when the ranks start.
  if (const long long tp = geti(root, "actor_rollout_ref.rollout.tensor_model_parallel_size");
      tp > 1 && (!model_path || model_path->is_null())) {
    const long long inter = geti(root, "actor_rollout_ref.model.intermediate_size");
    std::string why;
    if (heads > 0 && heads % tp != 0) why = "num_attention_heads " + std::to_string(heads);
    else if (inter > 0 && inter % tp != 0) why = "intermediate_size " + std::to_string(inter);
    else if (kv > 0 && (kv >= tp ? kv % tp != 0 : tp % kv != 0)) why = "num_key_value_heads " + std::to_string(kv);
    if (!why.empty())
      fail("actor_rollout_ref.rollout.tensor_model_parallel_size",
           std::to_string(tp) + " ranks cannot split the model's " + why,
           "pick a size that divides the attention heads and the intermediate size and divides, or is a multiple "
           "of, the KV heads");
  }
  // verl resamples (compute_pf_ppo_reweight_data) only in its GAE branch; elsewhere the key does nothing.
  const Json* pf = find(root, "algorithm.use_pf_ppo");
  if (pf && pf->is_boolean() && pf->get<bool>() && !critic)
    issues.push_back({Severity::kWarning, "algorithm.use_pf_ppo",
                      "has no effect with algorithm.adv_estimator=" + estimator->get<std::string>() +
                          ": PF-PPO resamples only with gae (as in verl)",
                      "set algorithm.adv_estimator=gae, or use_pf_ppo=false to silence this", loc("algorithm.use_pf_ppo")});
  // Checked here, not when the first step runs: the loss modes' and the rollout correction's own bounds.
  auto number = [&](const char* path) {
    const Json* v = find(root, path);
    return v && v->is_number() ? std::optional<double>(v->get<double>()) : std::nullopt;
  };
  const Json* loss_mode = find(root, "actor_rollout_ref.actor.policy_loss.loss_mode");
  const std::string lm = loss_mode && loss_mode->is_string() ? loss_mode->get<std::string>() : "";
  if (lm == "clip_cov" && number("actor_rollout_ref.actor.policy_loss.clip_cov_ratio").value_or(1) <= 0)
    fail("actor_rollout_ref.actor.policy_loss.clip_cov_ratio", "must be > 0 with loss_mode=clip_cov (verl asserts it)",
         "verl's default is 0.0002");
  if (lm == "kl_cov" && number("actor_rollout_ref.actor.policy_loss.kl_cov_ratio").value_or(1) <= 0)
    fail("actor_rollout_ref.actor.policy_loss.kl_cov_ratio", "must be > 0 with loss_mode=kl_cov (verl asserts it)",
         "verl's default is 0.0002");
  if (lm == "clip_cov" && number("actor_rollout_ref.actor.policy_loss.clip_cov_lb").value_or(0) >=
                             number("actor_rollout_ref.actor.policy_loss.clip_cov_ub").value_or(1))
    fail("actor_rollout_ref.actor.policy_loss.clip_cov_lb",
         "clip_cov_lb must be below clip_cov_ub: no token's covariance could lie in the window",
         "verl's defaults are 1.0 and 5.0");
  if (number("actor_rollout_ref.actor.loss_scale_factor").value_or(1) <= 0)
    fail("actor_rollout_ref.actor.loss_scale_factor", "must be > 0 or null", "null divides by the response width");
  const Json* is = find(root, "algorithm.rollout_correction.rollout_is");
  if (is && is->is_string() && number("algorithm.rollout_correction.rollout_is_threshold").value_or(1) <= 0)
    fail("algorithm.rollout_correction.rollout_is_threshold", "must be > 0 (the IS weights' upper truncation)",
         "verl's default is 2.0");
  const Json* rs = find(root, "algorithm.rollout_correction.rollout_rs");
  const Json* rs_threshold = find(root, "algorithm.rollout_correction.rollout_rs_threshold");
  if (rs && rs->is_string() && (!rs_threshold || rs_threshold->is_null()))
    fail("algorithm.rollout_correction.rollout_rs_threshold", "must be set when rollout_rs is (verl has no default)",
         "e.g. rollout_rs=token_k1 rollout_rs_threshold=0.5_2.0, or seq_mean_k3 with 0.01");
  const Json* mode = find(root, "trainer.resume_mode");
  const Json* rpath = find(root, "trainer.resume_from_path");
  if (mode && *mode == "resume_path" && (!rpath || rpath->is_null()))
    fail("trainer.resume_from_path", "trainer.resume_mode=resume_path needs trainer.resume_from_path",
         "set trainer.resume_from_path=<default_local_dir>/global_step_N");
  if (!find(root, "data.train_files")->is_null() && find(root, "data.val_files")->is_null())
    fail("data.val_files", "data.train_files is set but data.val_files is not",
         "give a held-out JSONL file for validation");
}

}  // namespace verl::config::schema

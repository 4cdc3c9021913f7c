#include "trainer/job_config.h"

#include <sstream>

#include "common/error.h"

namespace verl::trainer {
namespace {

// Walks a dotted path; throws naming the first missing component.
const nlohmann::json& at_path(const nlohmann::json& root, const std::string& path) {
  const nlohmann::json* node = &root;
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '.')) {
    if (!node->is_object() || !node->contains(part)) {
      throw Error{ExitCode::kInvalidConfig, "job config: missing key '" + path + "'",
                  "start from `verlctl config show` (templates/job.yaml) and override keys"};
    }
    node = &(*node)[part];
  }
  return *node;
}

template <typename T>
T get(const nlohmann::json& root, const std::string& path) {
  const auto& v = at_path(root, path);
  try {
    if constexpr (std::is_same_v<T, double>) {
      if (!v.is_number()) throw std::runtime_error("not a number");
    } else if constexpr (std::is_same_v<T, int64_t>) {
      if (!v.is_number_integer()) throw std::runtime_error("not an integer");
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean()) throw std::runtime_error("not a boolean");
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!v.is_string()) throw std::runtime_error("not a string");
    }
    return v.get<T>();
  } catch (const std::exception& e) {
    throw Error{ExitCode::kInvalidConfig,
                "job config: key '" + path + "' has the wrong type (" + e.what() + "): " + v.dump(),
                "see templates/job.yaml for the expected type"};
  }
}

template <typename T>
std::optional<T> get_nullable(const nlohmann::json& root, const std::string& path) {
  if (at_path(root, path).is_null()) return std::nullopt;
  return get<T>(root, path);
}

// A role's fsdp_config at `path` (optimizer_offload only where the role has an optimizer).
FsdpConfig read_fsdp(const nlohmann::json& c, const std::string& path, bool has_optimizer) {
  FsdpConfig f;
  f.fsdp_size = get<int64_t>(c, path + ".fsdp_size");
  if (f.fsdp_size == 0 || f.fsdp_size < -1) {
    throw Error{ExitCode::kInvalidConfig,
                "job config: key '" + path + ".fsdp_size' is " + std::to_string(f.fsdp_size) +
                    ": -1 (shard over all ranks) or a positive group size",
                "use -1 (verl's default), 1 (every rank holds the whole model) or a divisor of the rank count "
                "(hybrid sharding: shards within groups of that many ranks)"};
  }
  f.param_offload = get<bool>(c, path + ".param_offload");
  if (has_optimizer) f.optimizer_offload = get<bool>(c, path + ".optimizer_offload");
  f.reshard_after_forward = get<bool>(c, path + ".reshard_after_forward");
  return f;
}

// A module-name list as verl's target_modules / exclude_modules: a list, or a string of names
// separated by commas ("all-linear" among them). PEFT also takes a regex string; that is refused.
std::vector<std::string> read_module_names(const nlohmann::json& c, const std::string& path) {
  const auto& v = at_path(c, path);
  std::vector<std::string> out;
  auto add = [&](const std::string& name) {
    if (name.find_first_of("*.[]()|^$\\+?{}") != std::string::npos) {
      throw Error{ExitCode::kInvalidConfig, "job config: key '" + path + "' = '" + name + "' looks like a regex",
                  "list the projection names instead, e.g. [q_proj, v_proj] (or all-linear)"};
    }
    if (!name.empty()) out.push_back(name);
  };
  if (v.is_null()) return out;
  if (v.is_string()) {
    std::stringstream ss(v.get<std::string>());
    std::string part;
    while (std::getline(ss, part, ',')) {
      part.erase(0, part.find_first_not_of(' '));
      part.erase(part.find_last_not_of(' ') + 1);
      add(part);
    }
    return out;
  }
  if (v.is_array()) {
    for (const auto& e : v) {
      if (!e.is_string()) throw Error{ExitCode::kInvalidConfig, "job config: key '" + path + "' holds a non-string: " + e.dump(), "a list of projection names"};
      add(e.get<std::string>());
    }
    return out;
  }
  throw Error{ExitCode::kInvalidConfig, "job config: key '" + path + "' must be a list of names or a string: " + v.dump(),
              "e.g. all-linear or [q_proj, v_proj]"};
}

LoraSpec read_lora(const nlohmann::json& c, const std::string& mp) {
  LoraSpec l;
  l.rank = get<int64_t>(c, mp + ".lora_rank");
  if (l.rank < 0) {
    throw Error{ExitCode::kInvalidConfig, "job config: key '" + mp + ".lora_rank' is " + std::to_string(l.rank),
                "0 for full fine-tuning, or the adapters' rank (8, 16, 32, ...)"};
  }
  l.alpha = get<double>(c, mp + ".lora_alpha");
  l.target_modules = read_module_names(c, mp + ".target_modules");
  if (l.target_modules.empty()) l.target_modules = {"all-linear"};
  l.exclude_modules = read_module_names(c, mp + ".exclude_modules");
  l.adapter_path = get_nullable<std::string>(c, mp + ".lora_adapter_path");
  return l;
}

// verl accepts a single path or a list of paths for data files.
std::optional<std::vector<std::string>> get_files(const nlohmann::json& root,
                                                  const std::string& path) {
  const auto& v = at_path(root, path);
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) return std::vector<std::string>{v.get<std::string>()};
  if (v.is_array()) {
    std::vector<std::string> out;
    for (const auto& e : v) {
      if (!e.is_string()) break;
      out.push_back(e.get<std::string>());
    }
    if (out.size() == v.size()) return out;
  }
  throw Error{ExitCode::kInvalidConfig,
              "job config: key '" + path + "' must be null, a path or a list of paths",
              "e.g. " + path + "=data/train.jsonl"};
}

OptimConfig read_optim(const nlohmann::json& c, const std::string& p) {
  OptimConfig o;
  o.lr = get<double>(c, p + ".lr");
  o.lr_warmup_steps = get<int64_t>(c, p + ".lr_warmup_steps");
  o.lr_warmup_steps_ratio = get<double>(c, p + ".lr_warmup_steps_ratio");
  o.weight_decay = get<double>(c, p + ".weight_decay");
  const auto& betas = at_path(c, p + ".betas");
  if (!betas.is_array() || betas.size() != 2 || !betas[0].is_number() || !betas[1].is_number()) {
    throw Error{ExitCode::kInvalidConfig, "job config: key '" + p + ".betas' must be [b1, b2]",
                "e.g. [0.9, 0.999]"};
  }
  o.beta1 = betas[0].get<double>();
  o.beta2 = betas[1].get<double>();
  return o;
}

SamplingConfig read_sampling(const nlohmann::json& c, const std::string& p) {
  SamplingConfig s;
  s.temperature = get<double>(c, p + ".temperature");
  s.top_k = get<int64_t>(c, p + ".top_k");
  s.top_p = get<double>(c, p + ".top_p");
  s.do_sample = get<bool>(c, p + ".do_sample");
  s.n = get<int64_t>(c, p + ".n");
  return s;
}

void require(bool ok, const std::string& key, const std::string& what) {
  if (!ok) throw Error{ExitCode::kInvalidConfig, "job config: key '" + key + "' " + what, ""};
}

}  // namespace

JobConfig JobConfig::from_json(const nlohmann::json& c) {
  JobConfig j;
  auto& d = j.data;
  d.train_files = get_files(c, "data.train_files");
  d.val_files = get_files(c, "data.val_files");
  d.prompt_key = get<std::string>(c, "data.prompt_key");
  d.max_prompt_length = get<int64_t>(c, "data.max_prompt_length");
  d.max_response_length = get<int64_t>(c, "data.max_response_length");
  d.truncation = get<std::string>(c, "data.truncation");
  d.filter_overlong_prompts = get<bool>(c, "data.filter_overlong_prompts");
  d.train_batch_size = get<int64_t>(c, "data.train_batch_size");
  d.val_batch_size = get_nullable<int64_t>(c, "data.val_batch_size").value_or(kWholeBatch);
  d.shuffle = get<bool>(c, "data.shuffle");
  d.seed = get_nullable<int64_t>(c, "data.seed").value_or(get<int64_t>(c, "trainer.seed"));
  d.builtin.task = get<std::string>(c, "data.builtin.task");
  d.builtin.train_size = get<int64_t>(c, "data.builtin.train_size");
  d.builtin.val_size = get<int64_t>(c, "data.builtin.val_size");
  d.builtin.digits = get<int64_t>(c, "data.builtin.digits");
  d.builtin.num_operands = get<int64_t>(c, "data.builtin.num_operands");

  auto& m = j.model;
  const std::string mp = "actor_rollout_ref.model";
  m.path = get_nullable<std::string>(c, mp + ".path");
  m.lora = read_lora(c, mp);
  m.dtype = get<std::string>(c, mp + ".dtype");
  m.hidden_size = get<int64_t>(c, mp + ".hidden_size");
  m.intermediate_size = get<int64_t>(c, mp + ".intermediate_size");
  m.num_hidden_layers = get<int64_t>(c, mp + ".num_hidden_layers");
  m.num_attention_heads = get<int64_t>(c, mp + ".num_attention_heads");
  m.num_key_value_heads = get<int64_t>(c, mp + ".num_key_value_heads");
  m.rope_theta = get<double>(c, mp + ".rope_theta");
  m.rms_norm_eps = get<double>(c, mp + ".rms_norm_eps");
  m.tie_word_embeddings = get<bool>(c, mp + ".tie_word_embeddings");
  m.attention_bias = get<bool>(c, mp + ".attention_bias");
  m.max_position_embeddings = get<int64_t>(c, mp + ".max_position_embeddings");
  // null: verl's true for an HF model; false for the built-in one, where both cost time on the
  // CPU and save nothing that matters (templates/job.yaml).
  m.use_remove_padding = get_nullable<bool>(c, mp + ".use_remove_padding").value_or(m.path.has_value());
  m.enable_gradient_checkpointing =
      get_nullable<bool>(c, mp + ".enable_gradient_checkpointing").value_or(m.path.has_value());

  auto& a = j.actor;
  const std::string ap = "actor_rollout_ref.actor";
  a.device = get<std::string>(c, ap + ".device");
  a.ppo_mini_batch_size = get<int64_t>(c, ap + ".ppo_mini_batch_size");
  a.ppo_micro_batch_size_per_gpu = get_nullable<int64_t>(c, ap + ".ppo_micro_batch_size_per_gpu").value_or(kWholeBatch);
  a.use_dynamic_bsz = get<bool>(c, ap + ".use_dynamic_bsz");
  a.ppo_max_token_len_per_gpu = get<int64_t>(c, ap + ".ppo_max_token_len_per_gpu");
  a.ppo_epochs = get<int64_t>(c, ap + ".ppo_epochs");
  a.shuffle = get<bool>(c, ap + ".shuffle");
  a.clip_ratio_low = get<double>(c, ap + ".clip_ratio_low");
  a.clip_ratio_high = get<double>(c, ap + ".clip_ratio_high");
  a.clip_ratio_c = get<double>(c, ap + ".clip_ratio_c");
  a.tau_pos = get<double>(c, ap + ".tau_pos");
  a.tau_neg = get<double>(c, ap + ".tau_neg");
  a.loss_mode = get<std::string>(c, ap + ".policy_loss.loss_mode");
  a.clip_cov_ratio = get<double>(c, ap + ".policy_loss.clip_cov_ratio");
  a.clip_cov_lb = get<double>(c, ap + ".policy_loss.clip_cov_lb");
  a.clip_cov_ub = get<double>(c, ap + ".policy_loss.clip_cov_ub");
  a.kl_cov_ratio = get<double>(c, ap + ".policy_loss.kl_cov_ratio");
  a.ppo_kl_coef = get<double>(c, ap + ".policy_loss.ppo_kl_coef");
  a.loss_agg_mode = get<std::string>(c, ap + ".loss_agg_mode");
  a.loss_scale_factor = get_nullable<double>(c, ap + ".loss_scale_factor");
  a.entropy_coeff = get<double>(c, ap + ".entropy_coeff");
  a.calculate_entropy = get<bool>(c, ap + ".calculate_entropy");
  a.use_kl_loss = get<bool>(c, ap + ".use_kl_loss");
  a.kl_loss_coef = get<double>(c, ap + ".kl_loss_coef");
  a.kl_loss_type = get<std::string>(c, ap + ".kl_loss_type");
  a.grad_clip = get<double>(c, ap + ".grad_clip");
  a.fsdp = read_fsdp(c, ap + ".fsdp_config", /*has_optimizer=*/true);
  a.optim = read_optim(c, ap + ".optim");

  auto& r = j.rollout;
  const std::string rp = "actor_rollout_ref.rollout";
  r.name = get<std::string>(c, rp + ".name");
  r.sampling = read_sampling(c, rp);
  r.seed = get<int64_t>(c, rp + ".seed");
  r.log_prob_micro_batch_size_per_gpu = get_nullable<int64_t>(c, rp + ".log_prob_micro_batch_size_per_gpu").value_or(kWholeBatch);
  // null follows the actor, as verl's ${oc.select:actor_rollout_ref.actor...} defaults do.
  r.log_prob_use_dynamic_bsz = get_nullable<bool>(c, rp + ".log_prob_use_dynamic_bsz").value_or(a.use_dynamic_bsz);
  r.log_prob_max_token_len_per_gpu =
      get_nullable<int64_t>(c, rp + ".log_prob_max_token_len_per_gpu").value_or(a.ppo_max_token_len_per_gpu);
  r.val = read_sampling(c, rp + ".val_kwargs");
  r.gpu_memory_utilization = get<double>(c, rp + ".gpu_memory_utilization");
  r.max_num_seqs = get<int64_t>(c, rp + ".max_num_seqs");
  r.max_num_batched_tokens = get<int64_t>(c, rp + ".max_num_batched_tokens");
  r.enforce_eager = get<bool>(c, rp + ".enforce_eager");
  r.free_cache_engine = get<bool>(c, rp + ".free_cache_engine");
  r.ignore_eos = get<bool>(c, rp + ".ignore_eos");
  r.tensor_model_parallel_size = get<int64_t>(c, rp + ".tensor_model_parallel_size");
  r.device = get<std::string>(c, rp + ".device");
  if (const auto& sizes = at_path(c, rp + ".cudagraph_capture_sizes"); !sizes.is_null())
    for (const auto& v : sizes) r.cudagraph_capture_sizes.push_back(v.get<int64_t>());

  j.ref.device = get<std::string>(c, "actor_rollout_ref.ref.device");
  j.ref.fsdp = read_fsdp(c, "actor_rollout_ref.ref.fsdp_config", /*has_optimizer=*/false);
  j.ref.log_prob_micro_batch_size_per_gpu =
      get_nullable<int64_t>(c, "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu").value_or(kWholeBatch);
  j.ref.log_prob_use_dynamic_bsz =
      get_nullable<bool>(c, "actor_rollout_ref.ref.log_prob_use_dynamic_bsz").value_or(a.use_dynamic_bsz);
  j.ref.log_prob_max_token_len_per_gpu =
      get_nullable<int64_t>(c, "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu").value_or(a.ppo_max_token_len_per_gpu);

  auto& cr = j.critic;
  cr.model_path = get_nullable<std::string>(c, "critic.model.path");
  if (!cr.model_path) cr.model_path = j.model.path;
  cr.use_remove_padding = get<bool>(c, "critic.model.use_remove_padding");
  cr.enable_gradient_checkpointing =
      get_nullable<bool>(c, "critic.model.enable_gradient_checkpointing").value_or(cr.model_path.has_value());
  cr.device = get<std::string>(c, "critic.device");
  cr.ppo_mini_batch_size = get<int64_t>(c, "critic.ppo_mini_batch_size");
  cr.ppo_micro_batch_size_per_gpu = get_nullable<int64_t>(c, "critic.ppo_micro_batch_size_per_gpu").value_or(kWholeBatch);
  cr.use_dynamic_bsz = get_nullable<bool>(c, "critic.use_dynamic_bsz").value_or(a.use_dynamic_bsz);
  cr.ppo_max_token_len_per_gpu = get<int64_t>(c, "critic.ppo_max_token_len_per_gpu");
  cr.forward_max_token_len_per_gpu =
      get_nullable<int64_t>(c, "critic.forward_max_token_len_per_gpu").value_or(cr.ppo_max_token_len_per_gpu);
  cr.ppo_epochs = get<int64_t>(c, "critic.ppo_epochs");
  cr.cliprange_value = get<double>(c, "critic.cliprange_value");
  cr.loss_agg_mode = get<std::string>(c, "critic.loss_agg_mode");
  cr.grad_clip = get<double>(c, "critic.grad_clip");
  cr.fsdp = read_fsdp(c, "critic.model.fsdp_config", /*has_optimizer=*/true);
  cr.optim = read_optim(c, "critic.optim");

  auto& al = j.algorithm;
  al.adv_estimator = get<std::string>(c, "algorithm.adv_estimator");
  al.gamma = get<double>(c, "algorithm.gamma");
  al.lam = get<double>(c, "algorithm.lam");
  al.norm_adv_by_std_in_grpo = get<bool>(c, "algorithm.norm_adv_by_std_in_grpo");
  al.use_kl_in_reward = get<bool>(c, "algorithm.use_kl_in_reward");
  al.kl_penalty = get<std::string>(c, "algorithm.kl_penalty");
  al.kl_ctrl.type = get<std::string>(c, "algorithm.kl_ctrl.type");
  al.kl_ctrl.kl_coef = get<double>(c, "algorithm.kl_ctrl.kl_coef");
  al.kl_ctrl.horizon = get<int64_t>(c, "algorithm.kl_ctrl.horizon");
  al.kl_ctrl.target_kl = get<double>(c, "algorithm.kl_ctrl.target_kl");
  al.use_pf_ppo = get<bool>(c, "algorithm.use_pf_ppo");
  al.pf_ppo_reweight_method = get<std::string>(c, "algorithm.pf_ppo.reweight_method");
  al.pf_ppo_weight_pow = get<double>(c, "algorithm.pf_ppo.weight_pow");
  const std::string rc = "algorithm.rollout_correction";
  al.rollout_is = get_nullable<std::string>(c, rc + ".rollout_is");
  al.rollout_is_threshold = get<double>(c, rc + ".rollout_is_threshold");
  al.rollout_is_batch_normalize = get<bool>(c, rc + ".rollout_is_batch_normalize");
  al.rollout_rs = get_nullable<std::string>(c, rc + ".rollout_rs");
  // verl takes a number or a string ("0.5_2.0,0.01"); both are kept as text and parsed once.
  const auto& threshold = at_path(c, rc + ".rollout_rs_threshold");
  if (threshold.is_number()) {
    std::ostringstream os;
    os.precision(17);
    os << threshold.get<double>();
    al.rollout_rs_threshold = os.str();
  } else {
    al.rollout_rs_threshold = get_nullable<std::string>(c, rc + ".rollout_rs_threshold");
  }

  auto& t = j.trainer;
  t.project_name = get<std::string>(c, "trainer.project_name");
  t.experiment_name = get<std::string>(c, "trainer.experiment_name");
  t.logger.clear();
  const auto& lg = at_path(c, "trainer.logger");
  if (lg.is_string()) {
    t.logger.push_back(lg.get<std::string>());
  } else {
    for (const auto& e : lg) t.logger.push_back(e.get<std::string>());
  }
  t.device = get<std::string>(c, "trainer.device");
  t.n_gpus_per_node = get<int64_t>(c, "trainer.n_gpus_per_node");
  t.seed = get<int64_t>(c, "trainer.seed");
  t.total_epochs = get<int64_t>(c, "trainer.total_epochs");
  t.use_legacy_worker_impl = get<std::string>(c, "trainer.use_legacy_worker_impl");
  t.total_training_steps = get_nullable<int64_t>(c, "trainer.total_training_steps");
  t.sft_warmup_steps = get<int64_t>(c, "trainer.sft_warmup_steps");
  t.sft_lr = get<double>(c, "trainer.sft_lr");
  t.critic_warmup = get<int64_t>(c, "trainer.critic_warmup");
  t.test_freq = get<int64_t>(c, "trainer.test_freq");
  t.val_before_train = get<bool>(c, "trainer.val_before_train");
  t.save_freq = get<int64_t>(c, "trainer.save_freq");
  t.resume_mode = get<std::string>(c, "trainer.resume_mode");
  t.resume_from_path = get_nullable<std::string>(c, "trainer.resume_from_path");
  t.default_local_dir = get<std::string>(c, "trainer.default_local_dir");
  t.metrics_file = get_nullable<std::string>(c, "trainer.metrics_file");

  // Checks that the schema's types cannot express but the loop relies on.
  require(d.train_batch_size > 0, "data.train_batch_size", "must be > 0");
  require(d.max_response_length > 0, "data.max_response_length", "must be > 0");
  require(r.sampling.n > 0, rp + ".n", "must be > 0");
  require(a.ppo_mini_batch_size > 0 && d.train_batch_size % a.ppo_mini_batch_size == 0,
          ap + ".ppo_mini_batch_size", "must divide data.train_batch_size");
  require(j.algorithm.adv_estimator != "gae" ||
              (cr.ppo_mini_batch_size > 0 && d.train_batch_size % cr.ppo_mini_batch_size == 0),
          "critic.ppo_mini_batch_size", "must divide data.train_batch_size");
  require(a.ppo_micro_batch_size_per_gpu > 0, ap + ".ppo_micro_batch_size_per_gpu", "must be > 0");
  require(cr.ppo_micro_batch_size_per_gpu > 0, "critic.ppo_micro_batch_size_per_gpu", "must be > 0");
  require(m.hidden_size % m.num_attention_heads == 0, mp + ".hidden_size",
          "must be a multiple of num_attention_heads");
  require(m.num_attention_heads % m.num_key_value_heads == 0, mp + ".num_key_value_heads",
          "must divide num_attention_heads");
  require((m.hidden_size / m.num_attention_heads) % 2 == 0, mp + ".hidden_size",
          "must give an even head dim (rotary embeddings)");
  require(m.path || d.max_prompt_length + d.max_response_length <= m.max_position_embeddings,
          mp + ".max_position_embeddings",
          "must be >= data.max_prompt_length + data.max_response_length");
  require(d.truncation == "error" || d.truncation == "left" || d.truncation == "right" || d.truncation == "middle",
          "data.truncation", "must be error | left | right | middle");
  return j;
}

}  // namespace verl::trainer

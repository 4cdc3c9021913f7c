// JobConfig is the typed view of the resolved job config (templates/job.yaml shape) that the
// trainer uses. Every key the trainer reads is read here, once, so that a renamed key breaks in
// one place and the rest of trainer/ never touches JSON paths. The input is already validated
// and interpolated by common/config; from_json still throws verl::Error (invalid config) naming
// the key path when a key is missing or has the wrong type, because tests build configs by hand.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace verl::trainer {

// A null micro-batch or validation batch size (verl's default): the whole batch at once.
inline constexpr int64_t kWholeBatch = int64_t{1} << 30;

struct OptimConfig {
  double lr = 1e-3;
  int64_t lr_warmup_steps = -1;        // -1: derived from lr_warmup_steps_ratio
  double lr_warmup_steps_ratio = 0.0;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
};

struct BuiltinDataConfig {
  std::string task = "arithmetic";     // arithmetic | countdown
  int64_t train_size = 4096;
  int64_t val_size = 256;
  int64_t digits = 2;
  int64_t num_operands = 2;            // arithmetic: a+b(+c...); countdown: how many numbers
};

struct DataConfig {
  std::optional<std::vector<std::string>> train_files;   // nullopt: the built-in task
  std::optional<std::vector<std::string>> val_files;
  std::string prompt_key = "prompt";
  int64_t max_prompt_length = 24;
  int64_t max_response_length = 12;
  std::string truncation = "error";    // error | left | right | middle
  bool filter_overlong_prompts = false;  // drop rows over max_prompt_length instead
  int64_t train_batch_size = 64;
  int64_t val_batch_size = 256;
  bool shuffle = true;
  int64_t seed = 1;
  BuiltinDataConfig builtin;
};

// actor_rollout_ref.model.lora_* (trainer/model.h add_lora): rank 0 is full fine-tuning.
struct LoraSpec {
  int64_t rank = 0;
  double alpha = 16;
  std::vector<std::string> target_modules{"all-linear"};
  std::vector<std::string> exclude_modules;
  std::optional<std::string> adapter_path;  // a PEFT adapter directory to start from
};

struct ModelArchConfig {
  std::optional<std::string> path;
  LoraSpec lora;
  std::string dtype = "float32";       // float32 | bfloat16
  int64_t hidden_size = 64;
  int64_t intermediate_size = 176;
  int64_t num_hidden_layers = 2;
  int64_t num_attention_heads = 4;
  int64_t num_key_value_heads = 2;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = true;
  bool attention_bias = false;
  int64_t max_position_embeddings = 64;
  bool use_remove_padding = true;             // verl's default: packed sequences, no padding compute
  bool enable_gradient_checkpointing = true;  // verl's default: recompute layers in backward
};

// A role's actor_rollout_ref.*.fsdp_config / critic.model.fsdp_config (trainer/module_engine.h).
struct FsdpConfig {
  int64_t fsdp_size = -1;            // -1: shard over every rank; 1: replicate (DDP); N: hybrid
  bool param_offload = false;
  bool optimizer_offload = false;    // the reference has none
  bool reshard_after_forward = true;
};

struct ActorConfig {
  std::string device = "auto";
  int64_t ppo_mini_batch_size = 32;
  int64_t ppo_micro_batch_size_per_gpu = 64;
  bool use_dynamic_bsz = false;               // micro-batches by ppo_max_token_len_per_gpu
  int64_t ppo_max_token_len_per_gpu = 16384;
  int64_t ppo_epochs = 1;
  bool shuffle = false;
  double clip_ratio_low = 0.2;
  double clip_ratio_high = 0.2;
  double clip_ratio_c = 3.0;
  double tau_pos = 1.0;                       // sapo
  double tau_neg = 1.05;
  std::string loss_mode = "vanilla";          // policy_loss.loss_mode
  double clip_cov_ratio = 0.0002;             // policy_loss.* (clip_cov, kl_cov)
  double clip_cov_lb = 1.0;
  double clip_cov_ub = 5.0;
  double kl_cov_ratio = 0.0002;
  double ppo_kl_coef = 0.1;
  std::string loss_agg_mode = "token-mean";
  std::optional<double> loss_scale_factor;    // seq-mean-token-sum-norm's divisor; nullopt: the response width
  double entropy_coeff = 0.0;
  bool calculate_entropy = false;  // entropy in the update even with entropy_coeff 0 (verl's key)
  bool use_kl_loss = false;
  double kl_loss_coef = 0.001;
  std::string kl_loss_type = "low_var_kl";
  double grad_clip = 1.0;
  FsdpConfig fsdp;
  OptimConfig optim;
};

struct SamplingConfig {
  double temperature = 1.0;
  int64_t top_k = -1;
  double top_p = 1.0;
  bool do_sample = true;
  int64_t n = 1;
};

struct RolloutConfig {
  std::string name = "native";
  SamplingConfig sampling;             // temperature, top_k, top_p, do_sample, n
  int64_t seed = 7;
  int64_t log_prob_micro_batch_size_per_gpu = 128;
  bool log_prob_use_dynamic_bsz = false;          // null in the config: actor.use_dynamic_bsz
  int64_t log_prob_max_token_len_per_gpu = 16384;  // null: actor.ppo_max_token_len_per_gpu
  SamplingConfig val;                  // rollout.val_kwargs
  // verl's share of GPU memory for the rollout; the native rollout shares the trainer's
  // allocator, so it caps the whole process's CUDA caching allocator on each device it uses.
  double gpu_memory_utilization = 0.85;
  // The slot engine's knobs (rollout.name vllm / sglang; trainer/slot_rollout.h), verl's names.
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 8192;
  bool enforce_eager = false;
  bool free_cache_engine = true;
  std::vector<int64_t> cudagraph_capture_sizes;  // null: powers of two up to the slot count
  bool ignore_eos = false;
  std::string device = "auto";  // auto: the actor's device
  // Ranks that generate together on one model cut over them (trainer/tensor_parallel.h).
  int64_t tensor_model_parallel_size = 1;
};

struct RefConfig {
  std::string device = "auto";
  FsdpConfig fsdp;
  int64_t log_prob_micro_batch_size_per_gpu = 128;
  bool log_prob_use_dynamic_bsz = false;          // null in the config: actor.use_dynamic_bsz
  int64_t log_prob_max_token_len_per_gpu = 16384;  // null: actor.ppo_max_token_len_per_gpu
};

struct CriticConfig {
  std::optional<std::string> model_path;  // critic.model.path; nullopt: the actor's model path
  bool use_remove_padding = false;             // critic.model.*: verl's defaults
  bool enable_gradient_checkpointing = true;
  std::string device = "auto";
  int64_t ppo_mini_batch_size = 32;
  int64_t ppo_micro_batch_size_per_gpu = 64;
  bool use_dynamic_bsz = false;                // null in the config: actor.use_dynamic_bsz
  int64_t ppo_max_token_len_per_gpu = 32768;
  int64_t forward_max_token_len_per_gpu = 32768;  // compute_values; null: ppo_max_token_len_per_gpu
  int64_t ppo_epochs = 1;
  double cliprange_value = 0.5;
  std::string loss_agg_mode = "token-mean";
  double grad_clip = 1.0;
  FsdpConfig fsdp;
  OptimConfig optim;
};

struct KlCtrlConfig {
  std::string type = "fixed";
  double kl_coef = 0.001;
  int64_t horizon = 10000;
  double target_kl = 0.1;
};

struct AlgorithmConfig {
  std::string adv_estimator = "gae";   // core_algos.h's AdvantageEstimator names
  double gamma = 1.0;
  double lam = 1.0;
  bool norm_adv_by_std_in_grpo = true;
  bool use_kl_in_reward = false;
  std::string kl_penalty = "kl";
  KlCtrlConfig kl_ctrl;
  bool use_pf_ppo = false;
  std::string pf_ppo_reweight_method = "pow";  // pf_ppo.reweight_method
  double pf_ppo_weight_pow = 2.0;              // pf_ppo.weight_pow
  // rollout_correction.* (trainer/rollout_correction.h); null values as nullopt.
  std::optional<std::string> rollout_is;
  double rollout_is_threshold = 2.0;
  bool rollout_is_batch_normalize = false;
  std::optional<std::string> rollout_rs;
  std::optional<std::string> rollout_rs_threshold;  // a number in the YAML is kept as its text
};

struct TrainerLoopConfig {
  std::string project_name = "verlctl";
  std::string experiment_name = "default";
  std::vector<std::string> logger = {"console"};
  std::string device = "auto";
  int64_t n_gpus_per_node = 1;  // ranks per node: the length of a role's GPU list (common/role_placement.h)
  int64_t seed = 1;
  int64_t total_epochs = 1;
  // use_legacy_worker_impl: "disable" normalises the actor's losses by the global batch (verl's
  // engine workers); "auto" / "enable" per micro-batch (verl's dp_actor).
  std::string use_legacy_worker_impl = "auto";
  bool global_batch_loss() const { return use_legacy_worker_impl == "disable"; }
  std::optional<int64_t> total_training_steps = 60;
  int64_t sft_warmup_steps = 0;       // null in the config: 95 built-in, 0 with an HF model
  double sft_lr = -1.0;                // -1: actor.optim.lr
  int64_t critic_warmup = 0;
  int64_t test_freq = 10;
  bool val_before_train = true;
  int64_t save_freq = -1;
  std::string resume_mode = "auto";
  std::optional<std::string> resume_from_path;
  std::string default_local_dir = "checkpoints";
  std::optional<std::string> metrics_file;

  // Where rank 0 writes metrics.jsonl, whatever trainer.logger says (launcher/job_controller.cc's
  // metrics_path() computes the same from the config).
  std::string metrics_path() const { return metrics_file.value_or(default_local_dir + "/metrics.jsonl"); }
};

struct JobConfig {
  DataConfig data;
  ModelArchConfig model;               // actor_rollout_ref.model
  ActorConfig actor;
  RolloutConfig rollout;
  RefConfig ref;
  CriticConfig critic;
  AlgorithmConfig algorithm;
  TrainerLoopConfig trainer;

  // True when the advantage estimator needs a critic (verl: use_critic).
  bool use_critic() const { return algorithm.adv_estimator == "gae"; }
  // True when a reference policy must be kept (KL in the loss or in the reward).
  bool use_reference() const { return actor.use_kl_loss || algorithm.use_kl_in_reward; }

  // Reads the resolved config; throws verl::Error (kInvalidConfig) naming the key path.
  static JobConfig from_json(const nlohmann::json& config);
};

}  // namespace verl::trainer

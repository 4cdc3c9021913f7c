#include "trainer/ppo_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include "common/error.h"
#include "common/log.h"
#include "trainer/checkpoint.h"
#include "trainer/rewards.h"

namespace verl::trainer {
namespace {

// Peak dense FLOP/s used for perf/mfu/actor. CUDA: an H100/H200's bf16 tensor-core peak, or
// its fp32 peak; CPU: a nominal 100 GFLOP/s per rank (there is no honest single number).
double peak_flops(const torch::Device& device, torch::Dtype dtype) {
  if (device.is_cuda()) return dtype == torch::kBFloat16 ? 989e12 : 67e12;
  return 100e9;
}

double item(const torch::Tensor& t) { return t.defined() ? t.detach().to(torch::kCPU).to(torch::kFloat64).item<double>() : 0.0; }

// Row subsets of the tensors the update loops use.
using TensorMap = std::map<std::string, torch::Tensor>;
TensorMap select_rows(const TensorMap& m, const torch::Tensor& rows) {
  TensorMap out;
  for (const auto& [k, v] : m) {
    if (v.defined()) out[k] = v.index_select(0, rows.to(v.device()));
  }
  return out;
}

// Mean of per-micro-batch metric values, accumulated under one key.
class MeanAccumulator {
 public:
  void add(const std::string& key, double v) {
    auto& e = sums_[key];
    e.first += v;
    e.second += 1;
  }
  void into(MetricMap& m) const {
    for (const auto& [k, e] : sums_) m[k] = e.second ? e.first / e.second : 0.0;
  }

 private:
  std::map<std::string, std::pair<double, int64_t>> sums_;
};

torch::Device resolve_device(const std::string& spec, const std::string& key,
                             const std::string& trainer_device, int64_t local_rank) {
  std::string s = spec == "auto" ? trainer_device : spec;
  if (s == "auto") s = torch::cuda::is_available() ? "cuda" : "cpu";
  if (s == "cuda" && torch::cuda::is_available()) {
    const auto n = static_cast<int64_t>(torch::cuda::device_count());
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(n > 0 ? local_rank % n : 0));
  }
  return parse_device(s, key);
}

torch::Tensor critic_response_values(CriticModel& critic, const TensorMap& b, int64_t width) {
  const auto& ids = b.at("input_ids");
  const int64_t total = ids.size(1);
  auto v = critic->forward(ids.narrow(1, 0, total - 1), b.at("attention_mask").narrow(1, 0, total - 1),
                           b.at("position_ids").narrow(1, 0, total - 1));
  return v.narrow(1, total - width - 1, width);
}

}  // namespace

struct PpoTrainer::StepBatch {
  RolloutBatch rb;
  std::vector<int64_t> row_prompt;  // dataset index of each response row
  torch::Tensor group_index;        // [B] int64: prompt id within the global batch
  torch::Tensor scores;             // [B]
  torch::Tensor token_level_scores, token_level_rewards;
  torch::Tensor old_log_prob, ref_log_prob, values, advantages, returns;
};

PpoTrainer::PpoTrainer(const JobConfig& config, Distributed* dist)
    : config_(config),
      dist_(dist),
      actor_device_(torch::kCPU),
      critic_device_(torch::kCPU),
      ref_device_(torch::kCPU) {
  const int64_t local_rank = dist_ ? dist_->local_rank() : 0;
  const auto& t = config_.trainer;
  actor_device_ = resolve_device(config_.actor.device, "actor_rollout_ref.actor.device", t.device, local_rank);
  critic_device_ = resolve_device(config_.critic.device, "critic.device", t.device, local_rank);
  ref_device_ = resolve_device(config_.ref.device, "actor_rollout_ref.ref.device", t.device, local_rank);
  for (const auto& d : {actor_device_, critic_device_, ref_device_})
    limit_device_memory(d, config_.rollout.gpu_memory_utilization);
  if (config_.model.path) {
    throw Error{ExitCode::kInvalidConfig,
                "actor_rollout_ref.model.path: loading HF checkpoints is not implemented yet",
                "leave actor_rollout_ref.model.path=null to train from scratch"};
  }
  const int64_t w = world();
  const auto& d = config_.data;
  const int64_t n = config_.rollout.sampling.n;
  auto check_div = [&](int64_t value, int64_t by, const std::string& what) {
    if (by <= 0 || value % by != 0) {
      throw Error{ExitCode::kInvalidConfig,
                  what + " (" + std::to_string(value) + ") must be divisible by " + std::to_string(by),
                  "pick batch sizes that split evenly over the ranks"};
    }
  };
  check_div(d.train_batch_size, w, "data.train_batch_size over the world size");
  check_div(config_.actor.ppo_mini_batch_size * n, w,
            "actor_rollout_ref.actor.ppo_mini_batch_size * rollout.n over the world size");
  check_div(config_.critic.ppo_mini_batch_size * n, w, "critic.ppo_mini_batch_size * rollout.n over the world size");

  std::tie(train_, val_) = load_datasets(d, tokenizer_);
  sampler_ = std::make_unique<DataSampler>(static_cast<int64_t>(train_.size()), d.train_batch_size,
                                           d.shuffle, d.seed);
  sft_sampler_ = std::make_unique<DataSampler>(static_cast<int64_t>(train_.size()), d.train_batch_size,
                                               /*shuffle=*/true, d.seed + 7919);

  model_config_ = ModelConfig::from_job(config_.model, tokenizer_.vocab_size());
  actor_ = make_causal_lm(model_config_, static_cast<uint64_t>(t.seed));
  actor_->to(actor_device_);
  const auto& ao = config_.actor.optim;
  actor_optim_ = std::make_unique<torch::optim::AdamW>(
      actor_->parameters(), torch::optim::AdamWOptions(ao.lr)
                                .betas({ao.beta1, ao.beta2})
                                .weight_decay(ao.weight_decay));
  if (config_.use_critic()) {
    critic_ = make_critic(model_config_, static_cast<uint64_t>(t.seed) + 1);
    critic_->to(critic_device_);
    copy_shared_parameters(*actor_, *critic_, "model.", "model.");
    const auto& co = config_.critic.optim;
    critic_optim_ = std::make_unique<torch::optim::AdamW>(
        critic_->parameters(), torch::optim::AdamWOptions(co.lr)
                                   .betas({co.beta1, co.beta2})
                                   .weight_decay(co.weight_decay));
  }
  const auto& kc = config_.algorithm.kl_ctrl;
  kl_ctrl_ = algos::make_kl_controller(kc.type, kc.kl_coef, kc.target_kl, kc.horizon);
  ckpt_ = std::make_unique<CheckpointManager>(t.default_local_dir, dist_);

  if (rank() == 0) {
    log::Info() << "trainer: " << count_parameters(*actor_) << " actor parameters on "
                << actor_device_.str() << ", " << train_.size() << " train / " << val_.size()
                << " val prompts, world " << w << ", adv_estimator " << config_.algorithm.adv_estimator;
  }
}

PpoTrainer::~PpoTrainer() = default;

int64_t PpoTrainer::rank() const { return dist_ ? dist_->rank() : 0; }
int64_t PpoTrainer::world() const { return dist_ ? dist_->world_size() : 1; }

void PpoTrainer::reduce(MetricMap& m) {
  if (dist_ && dist_->is_distributed()) dist_->all_reduce_metrics(m);
}

int64_t PpoTrainer::total_steps() const {
  if (config_.trainer.total_training_steps) return *config_.trainer.total_training_steps;
  return sampler_->batches_per_epoch() * config_.trainer.total_epochs;
}

double PpoTrainer::lr_at(const OptimConfig& o, int64_t scheduler_step) const {
  // verl's constant schedule with warmup: lr * step / warmup while step < warmup.
  int64_t warmup = o.lr_warmup_steps > 0
                       ? o.lr_warmup_steps
                       : static_cast<int64_t>(o.lr_warmup_steps_ratio * static_cast<double>(total_steps()));
  if (warmup > 0 && scheduler_step < warmup) {
    return o.lr * static_cast<double>(scheduler_step) / static_cast<double>(warmup);
  }
  return o.lr;
}

void PpoTrainer::set_lr(torch::optim::Optimizer& opt, double lr) {
  for (auto& group : opt.param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  }
}

void PpoTrainer::record(int64_t step, const MetricMap& m) {
  if (recorder_) recorder_->record(step, m);
}

void PpoTrainer::start_recorder(int64_t total, int64_t resume_from_step, std::vector<std::string> console_keys) {
  if (rank() != 0) return;
  const auto& t = config_.trainer;
  auto has = [&](const char* logger) { return std::find(t.logger.begin(), t.logger.end(), logger) != t.logger.end(); };
  MetricsOptions mo;
  if (has("file")) mo.jsonl_path = t.metrics_file.value_or(t.default_local_dir + "/metrics.jsonl");
  mo.console = has("console");
  mo.total_steps = total;
  mo.resume_from_step = resume_from_step;
  if (!console_keys.empty()) mo.console_keys = std::move(console_keys);
  recorder_ = std::make_unique<MetricsRecorder>(mo);
}

void PpoTrainer::maybe_save(int64_t step, bool force) {
  const int64_t freq = config_.trainer.save_freq;
  if (!force && (freq <= 0 || step % freq != 0)) return;
  CheckpointParts parts;
  parts.actor = actor_.ptr().get();
  parts.actor_optim = actor_optim_.get();
  if (critic_) {
    parts.critic = critic_.ptr().get();
    parts.critic_optim = critic_optim_.get();
  }
  if (ref_) parts.ref = ref_.ptr().get();
  TrainerState state;
  state.global_step = step;
  state.data.epoch = sampler_->state().epoch;
  state.data.position = sampler_->state().cursor * config_.data.train_batch_size;
  state.data.shuffle_seed = config_.data.seed;
  state.kl_coef = kl_ctrl_->value();
  state.extra = {{"sft_steps_done", sft_steps_done_},
                 {"actor_updates", actor_updates_},
                 {"critic_updates", critic_updates_},
                 {"sft_epoch", sft_sampler_->state().epoch},
                 {"sft_cursor", sft_sampler_->state().cursor}};
  const auto dir = ckpt_->save(parts, state);
  if (rank() == 0) log::Info() << "checkpoint: saved " << dir;
}

// ---------------------------------------------------------------- validation

ValidationResult PpoTrainer::validate() {
  ValidationResult res;
  const auto& vk = config_.rollout.val;
  GenerateOptions opt;
  opt.sampling = vk;
  opt.max_response_length = config_.data.max_response_length;
  opt.stop_token_ids = {tokenizer_.eos_id()};
  opt.pad_token_id = tokenizer_.pad_id();
  // Every rank knows every data source, so metric keys agree across ranks.
  std::map<std::string, std::pair<double, double>> sums;  // source -> (sum, count)
  for (size_t i = 0; i < val_.size(); ++i) sums[val_[i].example.data_source] = {0.0, 0.0};
  const int64_t w = world(), r = rank();
  std::vector<int64_t> mine;
  for (int64_t i = r; i < static_cast<int64_t>(val_.size()); i += w) mine.push_back(i);
  const int64_t n = std::max<int64_t>(1, vk.n);
  const int64_t chunk = std::max<int64_t>(1, config_.data.val_batch_size / w);
  int64_t shown = 0;
  for (size_t start = 0; start < mine.size(); start += static_cast<size_t>(chunk)) {
    const size_t end = std::min(mine.size(), start + static_cast<size_t>(chunk));
    std::vector<std::vector<int64_t>> prompts;
    std::vector<uint64_t> seeds;
    std::vector<int64_t> rows;
    for (size_t k = start; k < end; ++k) {
      for (int64_t j = 0; j < n; ++j) {
        prompts.push_back(val_[static_cast<size_t>(mine[k])].prompt_ids);
        seeds.push_back(row_seed(static_cast<uint64_t>(config_.rollout.seed) ^ 0x7A11ULL, 0,
                                 static_cast<uint64_t>(mine[k] * n + j)));
        rows.push_back(mine[k]);
      }
    }
    auto batch = generate(actor_, prompts, opt, seeds, actor_device_);
    auto resp = batch.responses.to(torch::kCPU);
    auto ra = resp.accessor<int64_t, 2>();
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& row = val_[static_cast<size_t>(rows[i])];
      std::vector<int64_t> ids;
      for (int64_t j = 0; j < batch.response_lengths[i]; ++j) ids.push_back(ra[static_cast<int64_t>(i)][j]);
      const std::string text = tokenizer_.decode(ids);
      const double score = rewards::compute_score(row.example.data_source, text, row.example.ground_truth);
      auto& s = sums[row.example.data_source];
      s.first += score;
      s.second += 1;
      if (r == 0 && shown < 3) {
        log::Debug() << "val sample: " << row.example.prompt << " -> " << text << " (score " << score << ")";
        ++shown;
      }
    }
  }
  MetricMap red;
  for (const auto& [src, s] : sums) {
    red["val_sum/" + src] = s.first;
    red["val_count/" + src] = s.second;
  }
  reduce(red);  // means of sums: the ratios below are the global ones
  double total = 0, count = 0;
  for (const auto& [src, s] : sums) {
    const double sum = red["val_sum/" + src], cnt = red["val_count/" + src];
    const double mean = cnt > 0 ? sum / cnt : 0.0;
    res.by_source[src] = mean;
    res.metrics["val-core/" + src + "/reward/mean@" + std::to_string(n)] = mean;
    total += sum;
    count += cnt;
  }
  res.score = count > 0 ? total / count : 0.0;
  res.samples = static_cast<int64_t>(std::llround(count * static_cast<double>(w)));
  res.metrics["val/score/mean"] = res.score;
  return res;
}

// ---------------------------------------------------------------- SFT

MetricMap PpoTrainer::sft_step() {
  MetricMap m;
  const auto t0 = std::chrono::steady_clock::now();
  const auto batch_idx = sft_sampler_->next_batch();
  const int64_t per = config_.data.train_batch_size / world();
  std::vector<std::vector<int64_t>> prompts, targets;
  for (int64_t i = rank() * per; i < (rank() + 1) * per; ++i) {
    const auto& row = train_[static_cast<size_t>(batch_idx[static_cast<size_t>(i)])];
    prompts.push_back(row.prompt_ids);
    targets.push_back(row.sft_ids);
  }
  auto batch = make_batch(prompts, targets, config_.data.max_response_length, tokenizer_.pad_id(), actor_device_);
  actor_->train();
  // The actor's own optimizer, so RL starts with warm Adam moments: a fresh Adam's first steps
  // move every weight by ~lr, which knocks a small policy far off (ppo_kl ~0.5 at step 1).
  set_lr(*actor_optim_, config_.trainer.sft_lr > 0 ? config_.trainer.sft_lr : config_.actor.optim.lr);
  actor_optim_->zero_grad();
  const int64_t micro = config_.actor.ppo_micro_batch_size_per_gpu;
  // Normalised by the mean token count per rank over ALL ranks, so that the averaged gradient
  // is the token-mean gradient of the global batch (as one rank holding it would compute).
  auto token_count = batch.response_mask.sum().to(torch::kFloat64).to(torch::kCPU).reshape({1});
  const double local_tokens = token_count.item<double>();
  if (dist_) dist_->all_reduce_sum(token_count);
  const double tokens = token_count.item<double>() / static_cast<double>(world());
  double loss_sum = 0, correct = 0;
  for (int64_t s = 0; s < per; s += micro) {
    const int64_t k = std::min(micro, per - s);
    auto logits = response_logits(actor_, batch.input_ids.narrow(0, s, k), batch.attention_mask.narrow(0, s, k),
                                  batch.position_ids.narrow(0, s, k), batch.response_width());
    auto labels = batch.responses.narrow(0, s, k);
    auto mask = batch.response_mask.narrow(0, s, k);
    auto lp = log_probs_from_logits(logits, labels);
    // Token-mean over the whole (rank's) batch, accumulated across micro-batches.
    auto loss = -(lp * mask).sum() / std::max(tokens, 1.0);
    loss.backward();
    loss_sum += item(loss);
    correct += item(((logits.argmax(-1) == labels).to(torch::kFloat32) * mask).sum());
  }
  auto params = actor_->parameters();
  if (dist_) dist_->all_reduce_gradients(params);
  const double grad_norm = torch::nn::utils::clip_grad_norm_(params, config_.actor.grad_clip);
  if (std::isfinite(grad_norm)) actor_optim_->step();
  actor_optim_->zero_grad();
  ++sft_steps_done_;
  m["sft/loss"] = loss_sum;
  m["sft/token_acc"] = correct / std::max(local_tokens, 1.0);
  m["sft/grad_norm"] = grad_norm;
  m["timing_s/sft"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  reduce(m);
  return m;
}

void PpoTrainer::after_sft() {
  // The reference is the policy RL starts from; the critic starts from the same backbone.
  if (config_.use_reference()) ref_ = make_reference(actor_, ref_device_);
  if (critic_) copy_shared_parameters(*actor_, *critic_, "model.", "model.");
}

// ---------------------------------------------------------------- the RL step

void PpoTrainer::generate_and_score(int64_t step, StepBatch& sb, MetricMap& m) {
  const auto batch_idx = sampler_->next_batch();
  const int64_t per = config_.data.train_batch_size / world();
  const int64_t n = config_.rollout.sampling.n;
  std::vector<std::vector<int64_t>> prompts;
  std::vector<uint64_t> seeds;
  std::vector<int64_t> groups;
  for (int64_t i = rank() * per; i < (rank() + 1) * per; ++i) {
    const int64_t idx = batch_idx[static_cast<size_t>(i)];
    for (int64_t j = 0; j < n; ++j) {  // verl repeats interleaved: p0 x n, p1 x n, ...
      prompts.push_back(train_[static_cast<size_t>(idx)].prompt_ids);
      seeds.push_back(row_seed(static_cast<uint64_t>(config_.rollout.seed), static_cast<uint64_t>(step),
                               static_cast<uint64_t>(i * n + j)));
      groups.push_back(i);
      sb.row_prompt.push_back(idx);
    }
  }
  {
    ScopedTimer timer(m, "gen");
    GenerateOptions opt;
    opt.sampling = config_.rollout.sampling;
    opt.max_response_length = config_.data.max_response_length;
    opt.stop_token_ids = {tokenizer_.eos_id()};
    opt.pad_token_id = tokenizer_.pad_id();
    sb.rb = generate(actor_, prompts, opt, seeds, actor_device_);
  }
  sb.group_index = torch::tensor(groups, torch::kLong);
  {
    ScopedTimer timer(m, "reward");
    const int64_t b = sb.rb.batch_size(), width = sb.rb.response_width();
    auto resp = sb.rb.responses.to(torch::kCPU);
    auto ra = resp.accessor<int64_t, 2>();
    auto scores = torch::zeros({b}, torch::kFloat32);
    auto tls = torch::zeros({b, width}, torch::kFloat32);
    for (int64_t i = 0; i < b; ++i) {
      const auto& row = train_[static_cast<size_t>(sb.row_prompt[static_cast<size_t>(i)])];
      const int64_t len = sb.rb.response_lengths[static_cast<size_t>(i)];
      std::vector<int64_t> ids(ra[i].data(), ra[i].data() + len);
      const double s = rewards::compute_score(row.example.data_source, tokenizer_.decode(ids),
                                              row.example.ground_truth);
      scores[i] = s;
      if (len > 0) tls[i][len - 1] = s;  // the outcome reward sits on the last response token
    }
    sb.scores = scores.to(actor_device_);
    sb.token_level_scores = tls.to(actor_device_);
  }
}

void PpoTrainer::compute_advantages(StepBatch& sb, MetricMap& m) {
  ScopedTimer timer(m, "adv");
  const auto& mask = sb.rb.response_mask;
  const auto kl_type = algos::parse_kl_penalty(config_.algorithm.kl_penalty);
  if (config_.algorithm.use_kl_in_reward) {
    auto kr = algos::apply_kl_penalty(sb.token_level_scores, sb.old_log_prob, sb.ref_log_prob, mask,
                                      *kl_ctrl_, kl_type);
    sb.token_level_rewards = kr.token_level_rewards;
    m["actor/reward_kl_penalty"] = kr.current_kl;
    m["actor/reward_kl_penalty_coeff"] = kr.beta;
  } else {
    sb.token_level_rewards = sb.token_level_scores;
  }
  const auto est = algos::parse_adv_estimator(config_.algorithm.adv_estimator);
  torch::NoGradGuard no_grad;
  const auto& al = config_.algorithm;
  algos::AdvantageReturn ar;
  Distributed* d = dist_;
  auto whiten = [&](const torch::Tensor& v) {
    return d ? global_masked_whiten(v, mask, *d) : algos::masked_whiten(v, mask);
  };
  switch (est) {
    case algos::AdvantageEstimator::kGae: {
      ar = algos::compute_gae_advantage_return(sb.token_level_rewards, sb.values, mask, al.gamma, al.lam);
      // Re-whiten over every rank's tokens, as verl does over the driver's full batch.
      ar.advantages = whiten(ar.returns - sb.values) * mask;
      break;
    }
    case algos::AdvantageEstimator::kGrpo:
      ar = algos::compute_grpo_outcome_advantage(sb.token_level_rewards, mask, sb.group_index.to(mask.device()),
                                                 al.norm_adv_by_std_in_grpo);
      break;
    case algos::AdvantageEstimator::kRloo:
      ar = algos::compute_rloo_outcome_advantage(sb.token_level_rewards, mask, sb.group_index.to(mask.device()));
      break;
    case algos::AdvantageEstimator::kReinforcePlusPlus:
      ar = algos::compute_reinforce_plus_plus_outcome_advantage(sb.token_level_rewards, mask, al.gamma);
      ar.advantages = whiten(ar.returns) * mask;
      break;
  }
  sb.advantages = ar.advantages;
  sb.returns = ar.returns;
}

void PpoTrainer::update_critic(StepBatch& sb, MetricMap& m, int64_t step) {
  ScopedTimer timer(m, "update_critic");
  const auto& cc = config_.critic;
  const auto mode = algos::parse_loss_agg_mode(cc.loss_agg_mode);
  const int64_t b = sb.rb.batch_size();
  const int64_t mini = cc.ppo_mini_batch_size * config_.rollout.sampling.n / world();
  const int64_t micro = cc.ppo_micro_batch_size_per_gpu;
  const auto dev = critic_device_;
  TensorMap all = {{"input_ids", sb.rb.input_ids.to(dev)},
                   {"attention_mask", sb.rb.attention_mask.to(dev)},
                   {"position_ids", sb.rb.position_ids.to(dev)},
                   {"response_mask", sb.rb.response_mask.to(dev)},
                   {"values", sb.values.to(dev)},
                   {"returns", sb.returns.to(dev)}};
  critic_->train();
  set_lr(*critic_optim_, lr_at(cc.optim, critic_updates_));
  m["critic/lr"] = lr_at(cc.optim, critic_updates_);
  ++critic_updates_;
  MeanAccumulator acc;
  auto params = critic_->parameters();
  for (int64_t epoch = 0; epoch < cc.ppo_epochs; ++epoch) {
    for (int64_t s = 0; s < b; s += mini) {
      const int64_t mb = std::min(mini, b - s);
      critic_optim_->zero_grad();
      for (int64_t u = s; u < s + mb; u += micro) {
        const int64_t k = std::min(micro, s + mb - u);
        auto rows = torch::arange(u, u + k, torch::kLong);
        auto mbatch = select_rows(all, rows);
        auto vpreds = critic_response_values(critic_, mbatch, sb.rb.response_width());
        auto vl = algos::compute_value_loss(vpreds, mbatch["returns"], mbatch["values"], mbatch["response_mask"],
                                            cc.cliprange_value, mode);
        (vl.vf_loss * (static_cast<double>(k) / static_cast<double>(mb))).backward();
        acc.add("critic/vf_loss", item(vl.vf_loss));
        acc.add("critic/vf_clipfrac", item(vl.vf_clipfrac));
        acc.add("critic/vpred_mean", item(algos::masked_mean(vpreds.detach(), mbatch["response_mask"])));
      }
      if (dist_) dist_->all_reduce_gradients(params);
      const double gn = torch::nn::utils::clip_grad_norm_(params, cc.grad_clip);
      acc.add("critic/grad_norm", gn);
      if (std::isfinite(gn)) {
        critic_optim_->step();
      } else {
        log::Warn() << "step " << step << ": critic grad norm is " << gn << ", update skipped";
      }
      critic_optim_->zero_grad();
    }
  }
  acc.into(m);
}

void PpoTrainer::update_actor(StepBatch& sb, MetricMap& m, int64_t step) {
  ScopedTimer timer(m, "update_actor");
  const auto start = std::chrono::steady_clock::now();
  const auto& ac = config_.actor;
  const auto mode = algos::parse_loss_agg_mode(ac.loss_agg_mode);
  const auto kl_type = algos::parse_kl_penalty(ac.kl_loss_type);
  const int64_t b = sb.rb.batch_size();
  const int64_t mini = ac.ppo_mini_batch_size * config_.rollout.sampling.n / world();
  const int64_t micro = ac.ppo_micro_batch_size_per_gpu;
  const double temperature = config_.rollout.sampling.temperature > 0 ? config_.rollout.sampling.temperature : 1.0;
  TensorMap all = {{"input_ids", sb.rb.input_ids},       {"attention_mask", sb.rb.attention_mask},
                   {"position_ids", sb.rb.position_ids}, {"responses", sb.rb.responses},
                   {"response_mask", sb.rb.response_mask}, {"old_log_prob", sb.old_log_prob},
                   {"advantages", sb.advantages}};
  if (ac.use_kl_loss) all["ref_log_prob"] = sb.ref_log_prob.to(actor_device_);
  actor_->train();
  const double lr = lr_at(ac.optim, actor_updates_);
  set_lr(*actor_optim_, lr);
  m["actor/lr"] = lr;
  ++actor_updates_;
  MeanAccumulator acc;
  auto params = actor_->parameters();
  int64_t skipped = 0;
  for (int64_t epoch = 0; epoch < ac.ppo_epochs; ++epoch) {
    torch::Tensor order = torch::arange(b, torch::kLong);
    if (ac.shuffle) {
      std::mt19937_64 rng(static_cast<uint64_t>(config_.trainer.seed) * 7919ULL + static_cast<uint64_t>(step) * 131ULL +
                          static_cast<uint64_t>(epoch));
      std::vector<int64_t> v(static_cast<size_t>(b));
      std::iota(v.begin(), v.end(), 0);
      for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng() % i]);
      order = torch::tensor(v, torch::kLong);
    }
    for (int64_t s = 0; s < b; s += mini) {
      const int64_t mb = std::min(mini, b - s);
      actor_optim_->zero_grad();
      for (int64_t u = s; u < s + mb; u += micro) {
        const int64_t k = std::min(micro, s + mb - u);
        auto mbatch = select_rows(all, order.narrow(0, u, k));
        const auto& mask = mbatch["response_mask"];
        auto logits = response_logits(actor_, mbatch["input_ids"], mbatch["attention_mask"],
                                      mbatch["position_ids"], sb.rb.response_width());
        if (temperature != 1.0) logits = logits / temperature;
        auto log_prob = log_probs_from_logits(logits, mbatch["responses"]);
        auto pl = algos::compute_policy_loss(mbatch["old_log_prob"], log_prob, mbatch["advantages"], mask,
                                             ac.clip_ratio_low, ac.clip_ratio_high, ac.clip_ratio_c, mode);
        auto loss = pl.pg_loss;
        torch::Tensor entropy;
        if (ac.entropy_coeff != 0.0) {
          entropy = algos::agg_loss(algos::entropy_from_logits(logits), mask, mode);
          loss = loss - ac.entropy_coeff * entropy;
        } else {
          torch::NoGradGuard no_grad;
          entropy = algos::agg_loss(algos::entropy_from_logits(logits.detach()), mask, mode);
        }
        if (ac.use_kl_loss) {
          auto kl = algos::kl_loss(log_prob, mbatch["ref_log_prob"], mask, kl_type, mode);
          loss = loss + ac.kl_loss_coef * kl;
          acc.add("actor/kl_loss", item(kl));
          acc.add("actor/kl_coef", ac.kl_loss_coef);
        }
        (loss * (static_cast<double>(k) / static_cast<double>(mb))).backward();
        acc.add("actor/pg_loss", item(pl.pg_loss));
        acc.add("actor/pg_clipfrac", item(pl.pg_clipfrac));
        acc.add("actor/ppo_kl", item(pl.ppo_kl));
        acc.add("actor/pg_clipfrac_lower", item(pl.pg_clipfrac_lower));
        acc.add("actor/entropy", item(entropy));
      }
      if (dist_) dist_->all_reduce_gradients(params);
      const double gn = torch::nn::utils::clip_grad_norm_(params, ac.grad_clip);
      if (std::isfinite(gn)) {
        acc.add("actor/grad_norm", gn);
        actor_optim_->step();
      } else {
        ++skipped;
        log::Warn() << "step " << step << ": actor grad norm is " << gn << ", update skipped";
      }
      actor_optim_->zero_grad();
    }
  }
  acc.into(m);
  m["actor/skipped_updates"] = static_cast<double>(skipped);
  // perf/mfu/actor: 6 N flops per token for forward + backward, over the update's time.
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double tokens = item(sb.rb.attention_mask.sum()) * static_cast<double>(ac.ppo_epochs);
  const double flops = 6.0 * static_cast<double>(count_parameters(*actor_)) * tokens;
  m["perf/mfu/actor"] = secs > 0 ? flops / secs / peak_flops(actor_device_, model_config_.compute_dtype) : 0.0;
}

MetricMap PpoTrainer::train_step(int64_t step) {
  MetricMap m;
  const auto t0 = std::chrono::steady_clock::now();
  StepBatch sb;
  generate_and_score(step, sb, m);
  const auto& mask = sb.rb.response_mask;
  const double temperature = config_.rollout.sampling.temperature > 0 ? config_.rollout.sampling.temperature : 1.0;
  {
    ScopedTimer timer(m, "old_log_prob");
    sb.old_log_prob = compute_log_probs(actor_, sb.rb, config_.rollout.log_prob_micro_batch_size_per_gpu, temperature);
  }
  if (config_.use_reference()) {
    ScopedTimer timer(m, "ref");
    RolloutBatch on_ref = sb.rb;
    on_ref.input_ids = sb.rb.input_ids.to(ref_device_);
    on_ref.attention_mask = sb.rb.attention_mask.to(ref_device_);
    on_ref.position_ids = sb.rb.position_ids.to(ref_device_);
    on_ref.responses = sb.rb.responses.to(ref_device_);
    sb.ref_log_prob = compute_log_probs(ref_, on_ref, config_.ref.log_prob_micro_batch_size_per_gpu, temperature)
                          .to(actor_device_);
  }
  if (critic_) {
    ScopedTimer timer(m, "values");
    torch::NoGradGuard no_grad;
    critic_->eval();
    TensorMap all = {{"input_ids", sb.rb.input_ids.to(critic_device_)},
                     {"attention_mask", sb.rb.attention_mask.to(critic_device_)},
                     {"position_ids", sb.rb.position_ids.to(critic_device_)}};
    std::vector<torch::Tensor> parts;
    const int64_t micro = config_.rollout.log_prob_micro_batch_size_per_gpu;
    for (int64_t s = 0; s < sb.rb.batch_size(); s += micro) {
      const int64_t k = std::min(micro, sb.rb.batch_size() - s);
      parts.push_back(critic_response_values(critic_, select_rows(all, torch::arange(s, s + k, torch::kLong)),
                                             sb.rb.response_width()));
    }
    sb.values = torch::cat(parts, 0).to(actor_device_) * mask;
  }
  compute_advantages(sb, m);
  if (critic_) update_critic(sb, m, step);
  if (step > config_.trainer.critic_warmup) update_actor(sb, m, step);

  // verl's compute_data_metrics.
  auto seq_rewards = sb.token_level_rewards.sum(-1);
  m["critic/score/mean"] = item(sb.scores.mean());
  m["critic/score/max"] = item(sb.scores.max());
  m["critic/score/min"] = item(sb.scores.min());
  m["critic/rewards/mean"] = item(seq_rewards.mean());
  m["critic/advantages/mean"] = item(algos::masked_mean(sb.advantages, mask));
  m["critic/advantages/max"] = item(sb.advantages.masked_select(mask > 0).max());
  m["critic/advantages/min"] = item(sb.advantages.masked_select(mask > 0).min());
  m["critic/returns/mean"] = item(algos::masked_mean(sb.returns, mask));
  if (critic_) m["critic/values/mean"] = item(algos::masked_mean(sb.values, mask));
  auto resp_len = mask.sum(-1);
  const double width = static_cast<double>(sb.rb.response_width());
  m["response_length/mean"] = item(resp_len.mean());
  m["response_length/max"] = item(resp_len.max());
  m["response_length/min"] = item(resp_len.min());
  m["response_length/clip_ratio"] = item((resp_len >= width).to(torch::kFloat32).mean());
  std::vector<double> plen(sb.rb.prompt_lengths.begin(), sb.rb.prompt_lengths.end());
  m["prompt_length/mean"] = std::accumulate(plen.begin(), plen.end(), 0.0) / static_cast<double>(plen.size());
  m["prompt_length/max"] = *std::max_element(plen.begin(), plen.end());
  m["prompt_length/min"] = *std::min_element(plen.begin(), plen.end());
  auto tokens = sb.rb.attention_mask.sum().to(torch::kFloat64).to(torch::kCPU).reshape({1});
  if (dist_) dist_->all_reduce_sum(tokens);
  const double step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m["timing_s/step"] = step_s;
  m["perf/total_num_tokens"] = tokens.item<double>();
  m["perf/throughput"] = tokens.item<double>() / step_s / static_cast<double>(world());
  m["training/global_step"] = static_cast<double>(step);
  m["training/epoch"] = static_cast<double>(sampler_->state().epoch);
  reduce(m);
  m["perf/total_num_tokens"] = tokens.item<double>();  // a global sum already; keep it unaveraged
  return m;
}

// ---------------------------------------------------------------- fit

FitResult PpoTrainer::fit() {
  FitResult out;
  const auto& t = config_.trainer;
  const int64_t total = total_steps();
  int64_t resumed_from = -1;
  CheckpointParts parts;
  parts.actor = actor_.ptr().get();
  parts.actor_optim = actor_optim_.get();
  if (critic_) {
    parts.critic = critic_.ptr().get();
    parts.critic_optim = critic_optim_.get();
  }
  // The reference is part of the checkpoint: a resumed run must get back the post-SFT policy,
  // not a copy of the resumed actor. Built here so that load() has a module to fill.
  if (config_.use_reference()) {
    ref_ = make_reference(actor_, ref_device_);
    parts.ref = ref_.ptr().get();
  }
  const auto resume_dir = ckpt_->resolve_resume(parse_resume_mode(t.resume_mode), t.resume_from_path.value_or(""));
  if (resume_dir) {
    const auto st = ckpt_->load(*resume_dir, parts);
    global_step_ = st.global_step;
    resumed_from = st.global_step;
    SamplerState ss;
    ss.epoch = st.data.epoch;
    ss.cursor = st.data.position / config_.data.train_batch_size;
    sampler_->set_state(ss);
    kl_ctrl_->set_value(st.kl_coef);
    sft_steps_done_ = st.extra.value("sft_steps_done", int64_t{0});
    actor_updates_ = st.extra.value("actor_updates", int64_t{0});
    critic_updates_ = st.extra.value("critic_updates", int64_t{0});
    SamplerState sft_ss;
    sft_ss.epoch = st.extra.value("sft_epoch", int64_t{0});
    sft_ss.cursor = st.extra.value("sft_cursor", int64_t{0});
    sft_sampler_->set_state(sft_ss);
    if (rank() == 0) log::Info() << "resumed from " << *resume_dir << " at step " << global_step_;
  }
  start_recorder(total, resumed_from, {});
  // SFT warm start, only on a fresh run (a resumed one has it in its weights).
  if (resumed_from < 0 && t.sft_warmup_steps > 0) {
    const auto t0 = std::chrono::steady_clock::now();
    MetricMap last;
    for (int64_t s = 0; s < t.sft_warmup_steps; ++s) last = sft_step();
    if (rank() == 0) {
      log::Info() << "sft warm start: " << t.sft_warmup_steps << " steps in "
                  << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
                  << " s, loss " << last["sft/loss"] << ", token acc " << last["sft/token_acc"];
    }
  }
  // A resumed run has its reference and critic in the checkpoint.
  if (resumed_from < 0) after_sft();
  if (t.val_before_train && global_step_ == 0) {
    const auto v0 = std::chrono::steady_clock::now();
    auto v = validate();
    v.metrics["timing_s/testing"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - v0).count();
    out.val_scores.emplace_back(0, v.score);
    if (rank() == 0) log::Info() << "initial validation: val/score/mean " << v.score << " on " << v.samples << " prompts";
    record(0, v.metrics);
  }
  for (int64_t step = global_step_ + 1; step <= total; ++step) {
    auto m = train_step(step);
    global_step_ = step;
    const bool last = step == total;
    if (t.test_freq > 0 && (step % t.test_freq == 0 || last)) {
      const auto v0 = std::chrono::steady_clock::now();
      auto v = validate();
      for (const auto& [k, val] : v.metrics) m[k] = val;
      m["timing_s/testing"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - v0).count();
      out.val_scores.emplace_back(step, v.score);
    }
    record(step, m);
    maybe_save(step, last && t.save_freq > 0);
    out.last_metrics = m;
  }
  out.steps = global_step_;
  return out;
}

FitResult PpoTrainer::fit_sft() {
  FitResult out;
  const auto& t = config_.trainer;
  const int64_t total = t.sft_warmup_steps > 0 ? t.sft_warmup_steps : total_steps();
  start_recorder(total, /*resume_from_step=*/-1, {"sft/loss", "sft/token_acc", "val/score/mean"});
  if (t.val_before_train) {
    auto v = validate();
    out.val_scores.emplace_back(0, v.score);
    record(0, v.metrics);
  }
  for (int64_t step = 1; step <= total; ++step) {
    auto m = sft_step();
    const bool last = step == total;
    if (t.test_freq > 0 && (step % t.test_freq == 0 || last)) {
      auto v = validate();
      for (const auto& [k, val] : v.metrics) m[k] = val;
      out.val_scores.emplace_back(step, v.score);
    }
    m["training/global_step"] = static_cast<double>(step);
    record(step, m);
    out.last_metrics = m;
  }
  // Under <default_local_dir>/sft/, so that a later RL run does not auto-resume from it.
  CheckpointManager sft_ckpt(t.default_local_dir + "/sft", dist_);
  CheckpointParts parts;
  parts.actor = actor_.ptr().get();
  parts.actor_optim = actor_optim_.get();
  TrainerState state;
  state.global_step = total;
  state.extra = {{"sft_steps_done", sft_steps_done_}};
  const auto dir = sft_ckpt.save(parts, state);
  if (rank() == 0) log::Info() << "sft: saved " << dir;
  out.steps = total;
  return out;
}

void run_trainer(const nlohmann::json& config, bool sft_only) {
  const auto job = JobConfig::from_json(config);
  const auto device = resolve_device(job.actor.device, "actor_rollout_ref.actor.device", job.trainer.device,
                                     Distributed::options_from_env().local_rank);
  Distributed dist(device);
  PpoTrainer trainer(job, &dist);
  const auto res = sft_only ? trainer.fit_sft() : trainer.fit();
  if (dist.rank() != 0) return;
  if (!res.val_scores.empty()) {
    log::Info() << "done: " << res.steps << " steps, val/score/mean " << res.val_scores.front().second << " -> "
                << res.val_scores.back().second;
  } else {
    log::Info() << "done: " << res.steps << " steps (no validation: trainer.test_freq and val_before_train are off)";
  }
  const auto& t = job.trainer;
  const bool file = std::find(t.logger.begin(), t.logger.end(), "file") != t.logger.end();
  if (file) log::Info() << "metrics: " << t.metrics_file.value_or(t.default_local_dir + "/metrics.jsonl");
  CheckpointManager ckpt(sft_only ? t.default_local_dir + "/sft" : t.default_local_dir, nullptr);
  if (auto latest = ckpt.latest_step())
    log::Info() << "checkpoints: " << ckpt.step_dir(*latest) << " (latest of " << t.default_local_dir << ")";
  else
    log::Info() << "checkpoints: none saved (trainer.save_freq=" << t.save_freq << ")";
}

}  // namespace verl::trainer

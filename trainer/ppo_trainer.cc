#include "trainer/ppo_trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#if VERL_TORCH_HAS_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "common/error.h"
#include "common/role_placement.h"
#include "common/log.h"
#include "text/char_tokenizer.h"
#include "trainer/actor_worker.h"
#include "trainer/batch.h"
#include "trainer/checkpoint.h"
#include "trainer/critic_worker.h"
#include "trainer/flops_counter.h"
#include "trainer/hf_model.h"
#include "trainer/host_memory.h"
#include "text/hf_tokenizer.h"
#include "trainer/minibatch_update.h"
#include "trainer/native_rollout.h"
#include "trainer/parallel_strategy.h"
#include "trainer/ref_worker.h"
#include "trainer/rewards.h"
#include "trainer/slot_rollout.h"
#include "trainer/tensor_parallel.h"
#include "trainer/step_metrics.h"
#include "trainer/tracking.h"
#include "trainer/val_metrics.h"

namespace verl::trainer {
namespace {

// A role's device for this rank (common/role_placement.h): a GPU number or list names cuda:N of
// the rank's view; auto / cuda the rank's own GPU, cpu the CPU.
torch::Device resolve_device(const std::string& spec, const std::string& key, const std::string& trainer_device,
                             int64_t local_rank, int64_t ranks_per_node) {
  const int g = role_gpu(key, spec, static_cast<int>(local_rank), static_cast<int>(ranks_per_node));
  if (g >= 0) return parse_device("cuda:" + std::to_string(g), key);
  std::string s = spec == "auto" ? trainer_device : spec;
  if (s == "auto") s = torch::cuda::is_available() ? "cuda" : "cpu";
  if (s == "cuda" && torch::cuda::is_available()) {
    const auto n = static_cast<int64_t>(torch::cuda::device_count());
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(n > 0 ? local_rank % n : 0));
  }
  return parse_device(s, key);
}

}  // namespace

struct PpoTrainer::StepBatch {
  RolloutBatch rb;
  std::vector<int64_t> row_prompt;  // dataset index of each response row
  torch::Tensor group_index;        // [B] int64: prompt id within the global batch
  torch::Tensor scores;             // [B]
  torch::Tensor token_level_scores, token_level_rewards;
  torch::Tensor old_log_prob, ref_log_prob, values, advantages, returns;
  torch::Tensor rollout_is_weights;  // algorithm.rollout_correction.rollout_is
  int64_t step = 0;                 // the global step (seeds PF-PPO's draw)
};

namespace {

template <typename T>
std::vector<T> gather_rows(const std::vector<T>& v, const std::vector<int64_t>& idx) {
  std::vector<T> out;
  out.reserve(idx.size());
  for (int64_t i : idx) out.push_back(v[static_cast<size_t>(i)]);
  return out;
}

}  // namespace

// PF-PPO (verl's compute_pf_ppo_reweight_data): the step's rows drawn again, with replacement, by
// weights from their scores; every per-row field follows. verl draws over the driver's whole
// batch; here each rank draws among its own rows (the same with one rank), from a generator
// seeded by trainer.seed, the step and the rank, so a run repeats.
void PpoTrainer::resample_pf_ppo(StepBatch& sb) {
  const auto& al = config_.algorithm;
  auto gen = at::detail::createCPUGenerator(static_cast<uint64_t>(config_.trainer.seed) * 1000003ULL +
                                            static_cast<uint64_t>(sb.step) * 7919ULL +
                                            static_cast<uint64_t>(strategy_->dp_rank()));
  auto idx = algos::pf_ppo_resample_indices(sb.token_level_scores.sum(-1), algos::parse_pf_ppo_method(al.pf_ppo_reweight_method),
                                            al.pf_ppo_weight_pow, gen);
  auto pick = [&](torch::Tensor& t) {
    if (t.defined()) t = t.index_select(0, idx.to(t.device()));
  };
  for (torch::Tensor* t : {&sb.rb.prompts, &sb.rb.responses, &sb.rb.input_ids, &sb.rb.attention_mask,
                           &sb.rb.position_ids, &sb.rb.response_mask, &sb.rb.rollout_log_probs, &sb.group_index, &sb.scores,
                           &sb.token_level_scores, &sb.token_level_rewards, &sb.old_log_prob, &sb.ref_log_prob,
                           &sb.values, &sb.advantages, &sb.returns, &sb.rollout_is_weights})
    pick(*t);
  const auto rows = std::vector<int64_t>(idx.data_ptr<int64_t>(), idx.data_ptr<int64_t>() + idx.numel());
  sb.rb.prompt_lengths = gather_rows(sb.rb.prompt_lengths, rows);
  sb.rb.response_lengths = gather_rows(sb.rb.response_lengths, rows);
  sb.rb.finished = gather_rows(sb.rb.finished, rows);
  if (!sb.row_prompt.empty()) sb.row_prompt = gather_rows(sb.row_prompt, rows);
}

PpoTrainer::PpoTrainer(const JobConfig& config, Distributed* dist)
    : config_(config),
      strategy_(make_data_parallel(dist)),
      actor_device_(torch::kCPU),
      critic_device_(torch::kCPU),
      ref_device_(torch::kCPU),
      rollout_device_(torch::kCPU) {
  const int64_t local_rank = dist ? dist->local_rank() : 0;
  rank_ = dist ? dist->rank() : 0;
  world_ = dist ? dist->world_size() : 1;
  rollout_tp_ = config_.rollout.tensor_model_parallel_size;
  if (rollout_tp_ < 1 || world_ % rollout_tp_ != 0) {
    throw Error{ExitCode::kInvalidConfig,
                std::string(kTpKey) + "=" + std::to_string(rollout_tp_) + " does not divide the job's " +
                    std::to_string(world_) + " rank" + (world_ == 1 ? "" : "s"),
                "each tensor-parallel rollout group takes that many ranks: run a multiple of it (trainer.nnodes x "
                "trainer.n_gpus_per_node), or set it to 1"};
  }
  const auto& t = config_.trainer;
  const int64_t per_node = t.n_gpus_per_node;
  actor_device_ = resolve_device(config_.actor.device, "actor_rollout_ref.actor.device", t.device, local_rank, per_node);
  critic_device_ = resolve_device(config_.critic.device, "critic.device", t.device, local_rank, per_node);
  ref_device_ = resolve_device(config_.ref.device, "actor_rollout_ref.ref.device", t.device, local_rank, per_node);
  rollout_device_ = config_.rollout.device == "auto"
                        ? actor_device_
                        : resolve_device(config_.rollout.device, "actor_rollout_ref.rollout.device", t.device,
                                         local_rank, per_node);
  for (const auto& d : {actor_device_, critic_device_, ref_device_, rollout_device_})
    limit_device_memory(d, config_.rollout.gpu_memory_utilization);
  const int64_t w = strategy_->dp_size();
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

  if (config_.model.path) {
    model_dir_ = resolve_model_dir(*config_.model.path, "actor_rollout_ref.model.path");
    tokenizer_ = text::load_hf_tokenizer(model_dir_);
  } else {
    tokenizer_ = std::make_shared<text::CharTokenizer>();
  }
  std::tie(train_, val_) = load_datasets(d, *tokenizer_);
  sampler_ = std::make_unique<DataSampler>(static_cast<int64_t>(train_.size()), d.train_batch_size,
                                           d.shuffle, d.seed);
  sft_sampler_ = std::make_unique<DataSampler>(static_cast<int64_t>(train_.size()), d.train_batch_size,
                                               /*shuffle=*/true, d.seed + 7919);

  // Parameters stay float32 (the optimizer's master copy); model.dtype is the compute dtype.
  const auto compute = config_.model.dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat32;
  CausalLm policy{nullptr};
  if (model_dir_.empty()) {
    model_config_ = ModelConfig::from_job(config_.model, tokenizer_->vocab_size());
    policy = make_causal_lm(model_config_, static_cast<uint64_t>(t.seed), actor_device_);
  } else {
    policy = load_causal_lm(model_dir_, actor_device_, torch::kFloat32, compute);
    model_config_ = policy->config();
    if (tokenizer_->vocab_size() > model_config_.vocab_size) {
      throw Error{ExitCode::kInvalidConfig,
                  "actor_rollout_ref.model.path: the tokenizer of " + model_dir_ + " has " +
                      std::to_string(tokenizer_->vocab_size()) + " tokens, more than config.json's vocab_size " +
                      std::to_string(model_config_.vocab_size),
                  "the tokenizer files and the weights must come from the same model"};
    }
  }
  actor_ = std::make_unique<ActorWorker>(config_, policy, actor_device_, *strategy_);
  if (config_.use_critic()) {
    CriticModel critic{nullptr};
    if (config_.critic.model_path) {
      critic_from_path_ = true;
      critic = load_critic(resolve_model_dir(*config_.critic.model_path, "critic.model.path"), critic_device_,
                           static_cast<uint64_t>(t.seed) + 1, torch::kFloat32, compute);
    } else {
      critic = make_critic(model_config_, static_cast<uint64_t>(t.seed) + 1);
      FullParamsScope actor_full(actor_->engine());
      copy_shared_parameters(*actor_->module(), *critic, "model.", "model.");
    }
    critic_ = std::make_unique<CriticWorker>(config_, critic, critic_device_, *strategy_);
  }
  // vllm / sglang name a serving engine: verlctl's is the slot engine; native and hf the loop.
  const bool slot_engine = config_.rollout.name == "vllm" || config_.rollout.name == "sglang";
  std::unique_ptr<TensorParallel> tp_group;
  if (rollout_tp_ > 1)
    tp_group = std::make_unique<TensorParallel>(strategy_->distributed()->subgroup(rollout_group(), "rollout_tp", rollout_device_),
                                                TpLayout::of(model_config_, rollout_tp_, rank_ % rollout_tp_));
  if (slot_engine)
    rollout_ = std::make_unique<SlotRollout>(model_config_, rollout_device_, SlotRolloutOptions::from(config_.rollout),
                                             std::move(tp_group));
  else
    rollout_ = std::make_unique<NativeRollout>(model_config_, rollout_device_, std::move(tp_group));
  const auto& kc = config_.algorithm.kl_ctrl;
  kl_ctrl_ = algos::make_kl_controller(kc.type, kc.kl_coef, kc.target_kl, kc.horizon);
  const auto& al = config_.algorithm;
  rollout_correction_ = algos::make_rollout_correction(al.rollout_is, al.rollout_is_threshold, al.rollout_is_batch_normalize,
                                                       al.rollout_rs, al.rollout_rs_threshold);
  ckpt_ = std::make_unique<CheckpointManager>(t.default_local_dir, strategy_->distributed());

  if (strategy_->is_rank0()) {
    log::Info() << "trainer: " << (model_dir_.empty() ? std::string("built-in model, ") : model_dir_ + " (" + model_config_.hf_architecture + "), ")
                << count_parameters(*actor_->module()) << " actor parameters on "
                << actor_device_.str() << ", " << train_.size() << " train / " << val_.size()
                << " val prompts, world " << w << ", adv_estimator " << config_.algorithm.adv_estimator;
    if (actor_device_ != rollout_device_ || actor_device_ != ref_device_ || (critic_ && actor_device_ != critic_device_))
      log::Info() << "roles: actor " << actor_device_.str() << ", rollout " << rollout_device_.str() << ", ref "
                  << ref_device_.str() << (critic_ ? ", critic " + critic_device_.str() : std::string())
                  << " (rank 0)";
    {
      std::string on;
      auto add = [&](const char* role, bool present, const torch::Device& d) {
        if (present && sleeps_during_rollout(d)) on += std::string(on.empty() ? "" : ", ") + role;
      };
      add("actor", true, actor_device_);
      add("critic", critic_ != nullptr, critic_device_);
      add("reference", ref_ != nullptr, ref_device_);
      if (!on.empty())
        log::Info() << "rollout: free_cache_engine: the " << on << " training state moves to host memory while the rollout "
                    << "generates on " << rollout_device_.str() << " (rank 0)";
    }
    const int64_t per_node = config_.trainer.n_gpus_per_node;
    if (const auto span = tensor_parallel_span_warning(rollout_tp_, per_node > 0 ? (world_ + per_node - 1) / per_node : 1,
                                                       per_node);
        !span.empty())
      log::Warn() << "rollout: " << span << "; pick a size that divides " << per_node;
    if (rollout_tp_ > 1)
      log::Info() << "rollout: tensor-parallel, " << world_ / rollout_tp_ << " group(s) of " << rollout_tp_
                  << " ranks, each rank holding 1/" << rollout_tp_
                  << " of the rollout's attention, MLP, embedding and LM head"
                  << (slot_engine ? " (the slot engine runs eagerly: no CUDA graphs)" : "");
    if (config_.rollout.name != "native")
      log::Info() << "rollout: actor_rollout_ref.rollout.name=" << config_.rollout.name << " selects verlctl's "
                  << (slot_engine ? "slot engine (paged KV cache, continuous batching, CUDA graphs on GPUs)"
                                  : "native loop")
                  << " (no " << config_.rollout.name << " here; its engine_kwargs are ignored)";
  }
}

PpoTrainer::~PpoTrainer() = default;

CausalLm& PpoTrainer::actor() { return actor_->module(); }

std::vector<int64_t> PpoTrainer::stop_ids() const { return tokenizer_->stop_ids(); }

int64_t PpoTrainer::total_steps() const {
  if (config_.trainer.total_training_steps) return *config_.trainer.total_training_steps;
  return sampler_->batches_per_epoch() * config_.trainer.total_epochs;
}

void PpoTrainer::sync_rollout_weights(MetricMap* m) {
  if (!rollout_stale_) return;
  const auto t0 = std::chrono::steady_clock::now();
  actor_->sync_to(*rollout_);
  rollout_stale_ = false;
  if (m) (*m)["timing_s/update_weights"] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<int> PpoTrainer::rollout_group() const {
  std::vector<int> ranks;
  const int first = rank_ / static_cast<int>(rollout_tp_) * static_cast<int>(rollout_tp_);
  for (int i = 0; i < rollout_tp_; ++i) ranks.push_back(first + i);
  return ranks;
}

bool PpoTrainer::sleeps_during_rollout(const torch::Device& worker_device) const {
  return config_.rollout.free_cache_engine && !rollout_device_.is_cpu() && worker_device == rollout_device_;
}

class PpoTrainer::WorkersAsleep {
 public:
  explicit WorkersAsleep(PpoTrainer& t) {
    const torch::Device at = t.rollout_device_;
    auto add = [&](auto* worker) {
      if (worker != nullptr && t.sleeps_during_rollout(worker->device()))
        workers_.push_back({[worker] { worker->sleep(); }, [worker] { worker->wake(); }});
    };
    add(t.actor_.get());
    add(t.critic_.get());
    add(t.ref_.get());
    for (auto& w : workers_) w.sleep();
#if VERL_TORCH_HAS_CUDA
    // The freed blocks back to the driver: the slot engine sizes its cache from what it reports free.
    if (!workers_.empty() && at.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
  }
  // Woken here rather than in the destructor, so that a failure (out of memory) is an error.
  void wake() {
    auto workers = std::move(workers_);
    workers_.clear();
    for (auto& w : workers) w.wake();
  }
  ~WorkersAsleep() {
    try {
      wake();
    } catch (const std::exception& e) {  // already unwinding from the rollout's own failure
      log::Err() << "trainer: waking the workers after a failed rollout: " << e.what();
    }
  }

 private:
  struct Worker {
    std::function<void()> sleep, wake;
  };
  std::vector<Worker> workers_;
};

RolloutBatch PpoTrainer::group_generate(const std::vector<RolloutRequest>& members, const GenerateOptions& options) {
  if (members.size() == 1) return on_actor_device(rollout_->generate(members[0].prompts, options, members[0].seeds));
  RolloutRequest all;
  int64_t mine = 0, count = 0;
  for (size_t m = 0; m < members.size(); ++m) {
    if (static_cast<int>(m) == rank_ % rollout_tp_) {
      mine = static_cast<int64_t>(all.prompts.size());
      count = static_cast<int64_t>(members[m].prompts.size());
    }
    all.prompts.insert(all.prompts.end(), members[m].prompts.begin(), members[m].prompts.end());
    all.seeds.insert(all.seeds.end(), members[m].seeds.begin(), members[m].seeds.end());
  }
  return on_actor_device(slice_rows(rollout_->generate(all.prompts, options, all.seeds), mine, count));
}

RolloutBatch PpoTrainer::on_actor_device(RolloutBatch b) const {
  if (rollout_device_ == actor_device_) return b;
  for (auto* t : {&b.prompts, &b.responses, &b.input_ids, &b.attention_mask, &b.position_ids, &b.response_mask,
                  &b.rollout_log_probs})
    if (t->defined()) *t = t->to(actor_device_);
  return b;
}

void PpoTrainer::record(int64_t step, const MetricMap& m) {
  if (recorder_) recorder_->record(step, m);
}

void PpoTrainer::start_recorder(int64_t total, int64_t resume_from_step, std::vector<std::string> console_keys) {
  if (!strategy_->is_rank0()) return;
  const auto& t = config_.trainer;
  const auto plan = plan_tracking(t.logger, t.project_name, t.experiment_name, process_env());
  MetricsOptions mo;
  // Always: `verlctl logs`, the head and the dashboard read it, whatever trainer.logger says.
  mo.jsonl_path = t.metrics_path();
  mo.verl_file_path = plan.verl_file_path;
  mo.tensorboard_dir = plan.tensorboard_dir;
  mo.console = plan.console;
  mo.total_steps = total;
  mo.resume_from_step = resume_from_step;
  if (!console_keys.empty()) mo.console_keys = std::move(console_keys);
  for (const auto& name : plan.skipped) log::Warn() << skipped_logger_warning(name, mo.jsonl_path);
  recorder_ = std::make_unique<MetricsRecorder>(mo);
  if (!plan.verl_file_path.empty()) log::Info() << "file logger: " << plan.verl_file_path;
  if (!plan.tensorboard_dir.empty()) log::Info() << "tensorboard: " << plan.tensorboard_dir;
}

bool PpoTrainer::maybe_save(int64_t step, bool force) {
  const int64_t freq = config_.trainer.save_freq;
  if (!force && (freq <= 0 || step % freq != 0)) return false;
  CheckpointParts parts;
  actor_->add_to(parts);
  if (critic_) critic_->add_to(parts);
  if (ref_) ref_->add_to(parts);
  parts.actor_hf_export = hf_export();
  TrainerState state;
  state.global_step = step;
  state.data.epoch = sampler_->state().epoch;
  state.data.position = sampler_->state().cursor * config_.data.train_batch_size;
  state.data.shuffle_seed = config_.data.seed;
  state.kl_coef = kl_ctrl_->value();
  state.extra = {{"sft_steps_done", sft_steps_done_},
                 {"actor_updates", actor_->updates()},
                 {"critic_updates", critic_ ? critic_->updates() : 0},
                 {"sft_epoch", sft_sampler_->state().epoch},
                 {"sft_cursor", sft_sampler_->state().cursor},
                 {"lora_base_is_warm_start", actor_->lora_base_is_warm_start()}};
  // The HF export writes the whole actor: gathered on every rank when it is sharded.
  c10::optional<FullParamsScope> full;
  if (parts.actor_hf_export) full.emplace(actor_->engine());
  const auto dir = ckpt_->save(parts, state);
  if (strategy_->is_rank0()) log::Info() << "checkpoint: saved " << dir;
  return true;
}

// ---------------------------------------------------------------- validation

ValidationResult PpoTrainer::validate() {
  ValidationResult res;
  const auto& vk = config_.rollout.val;
  GenerateOptions opt;
  opt.sampling = vk;
  opt.max_response_length = config_.data.max_response_length;
  opt.stop_token_ids = stop_ids();
  opt.pad_token_id = tokenizer_->pad_id();
  opt.ignore_eos = config_.rollout.ignore_eos;
  sync_rollout_weights(nullptr);
  // Every rank knows every data source, so metric keys agree across ranks. One score of an
  // empty response per source gives the reward's fields (math_dapo's score, acc, pred) and
  // refuses a data_source without a reward function before any generation.
  std::map<std::string, std::pair<double, double>> sums;  // source -> (sum, count)
  std::map<std::string, rewards::Score> shape;             // source -> the reward's fields
  for (size_t i = 0; i < val_.size(); ++i) {
    const auto& row = val_[i];
    sums[row.example.data_source] = {0.0, 0.0};
    if (!shape.count(row.example.data_source)) {
      shape[row.example.data_source] = rewards::score(row.example.data_source, "", row.example.ground_truth);
    }
  }
  const int64_t w = strategy_->dp_size(), r = strategy_->dp_rank();
  // Rank q validates prompts q, q + w, ...; the members of a rollout TP group generate their
  // chunks together, as many chunks as the member with the most prompts has.
  auto rows_of = [&](int64_t q) {
    std::vector<int64_t> rows;
    for (int64_t i = q; i < static_cast<int64_t>(val_.size()); i += w) rows.push_back(i);
    return rows;
  };
  const std::vector<int64_t> mine = rows_of(r);
  const int64_t n = std::max<int64_t>(1, vk.n);
  const int64_t chunk = std::max<int64_t>(1, config_.data.val_batch_size / w);
  std::vector<std::vector<int64_t>> member_rows;  // every member's prompts, listed once
  size_t most = 0;
  for (int member : rollout_group()) {
    member_rows.push_back(rows_of(member));
    most = std::max(most, member_rows.back().size());
  }
  auto request_of = [&](const std::vector<int64_t>& rows, size_t start) {
    RolloutRequest req;
    for (size_t k = start; k < std::min(rows.size(), start + static_cast<size_t>(chunk)); ++k) {
      for (int64_t j = 0; j < n; ++j) {
        req.prompts.push_back(val_[static_cast<size_t>(rows[k])].prompt_ids);
        req.seeds.push_back(row_seed(static_cast<uint64_t>(config_.rollout.seed) ^ 0x7A11ULL, 0,
                                     static_cast<uint64_t>(rows[k] * n + j)));
      }
    }
    return req;
  };
  std::vector<val_metrics::Sample> samples;  // verl's reward_extra_infos_dict, one row per response
  int64_t shown = 0;
  WorkersAsleep asleep(*this);
  for (size_t start = 0; start < most; start += static_cast<size_t>(chunk)) {
    const size_t end = std::min(mine.size(), start + static_cast<size_t>(chunk));
    std::vector<int64_t> rows;
    for (size_t k = start; k < end; ++k) {
      for (int64_t j = 0; j < n; ++j) rows.push_back(mine[k]);
    }
    std::vector<RolloutRequest> requests;
    for (const auto& rows_m : member_rows) requests.push_back(request_of(rows_m, start));
    auto batch = group_generate(requests, opt);
    auto resp = batch.responses.to(torch::kCPU);
    auto ra = resp.accessor<int64_t, 2>();
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& row = val_[static_cast<size_t>(rows[i])];
      std::vector<int64_t> ids;
      for (int64_t j = 0; j < batch.response_lengths[i]; ++j) ids.push_back(ra[static_cast<int64_t>(i)][j]);
      const std::string text = tokenizer_->decode(ids, true);
      const auto sc = rewards::score(row.example.data_source, text, row.example.ground_truth);
      auto& s = sums[row.example.data_source];
      s.first += sc.score;
      s.second += 1;
      // verl's "reward" is the float32 reward tensor summed over the response: 0.1 reads
      // 0.10000000149011612 there, so here too.
      val_metrics::Sample sample{row.example.data_source, std::to_string(rows[i]),
                                 {{"reward", static_cast<double>(static_cast<float>(sc.score))}}, sc.pred};
      for (const auto& [k, v] : sc.extra) sample.vars.emplace_back(k, v);
      samples.push_back(std::move(sample));
      if (r == 0 && shown < 3) {
        log::Debug() << "val sample: " << row.example.prompt << " -> " << text << " (score " << sc.score << ")";
        ++shown;
      }
    }
  }
  asleep.wake();
  // verl's metrics per prompt here, on the rank that generated its n responses; their mean over
  // all prompts through sums and counts, as the same keys on every rank.
  const auto per_prompt = val_metrics::per_prompt_metrics(samples);
  MetricMap red;
  for (const auto& [src, s] : sums) {
    red["val_sum/" + src] = s.first;
    red["val_count/" + src] = s.second;
    const auto& sh = shape[src];
    std::vector<std::string> vars = {"reward"};
    for (const auto& [k, v] : sh.extra) vars.push_back(k);
    for (const auto& var : vars) {
      for (const auto& name : val_metrics::metric_names(n, sh.pred.has_value())) {
        const std::string key = src + "/" + var + "/" + name;
        double sum = 0, count = 0;
        if (auto a = per_prompt.find(src); a != per_prompt.end()) {
          if (auto b = a->second.find(var); b != a->second.end()) {
            if (auto c = b->second.find(name); c != b->second.end()) {
              sum = val_metrics::numpy_sum(c->second);
              count = static_cast<double>(c->second.size());
            }
          }
        }
        red["val_prompt_sum/" + key] = sum;
        red["val_prompt_count/" + key] = count;
      }
    }
  }
  strategy_->reduce_metrics(red);  // means of sums: the ratios below are the global ones
  double total = 0, count = 0;
  val_metrics::Metrics by_prompt;
  for (const auto& [src, s] : sums) {
    const double sum = red["val_sum/" + src], cnt = red["val_count/" + src];
    res.by_source[src] = cnt > 0 ? sum / cnt : 0.0;
    total += sum;
    count += cnt;
    const auto& sh = shape[src];
    std::vector<std::string> vars = {"reward"};
    for (const auto& [k, v] : sh.extra) vars.push_back(k);
    for (const auto& var : vars) {
      for (const auto& name : val_metrics::metric_names(n, sh.pred.has_value())) {
        const std::string key = src + "/" + var + "/" + name;
        const double c = red["val_prompt_count/" + key];
        if (c > 0) by_prompt[src][var][name] = red["val_prompt_sum/" + key] / c;
      }
    }
  }
  for (const auto& [k, v] : val_metrics::metric_dict(by_prompt)) res.metrics[k] = v;
  res.score = count > 0 ? total / count : 0.0;
  res.samples = static_cast<int64_t>(std::llround(count * static_cast<double>(w)));
  res.metrics["val/score/mean"] = res.score;
  return res;
}

// ---------------------------------------------------------------- SFT

MetricMap PpoTrainer::sft_step() {
  MetricMap m;
  ScopedTimer timer(m, "sft");
  const auto batch_idx = sft_sampler_->next_batch();
  const auto [begin, end] = strategy_->shard(config_.data.train_batch_size);
  std::vector<std::vector<int64_t>> prompts, targets;
  for (int64_t i = begin; i < end; ++i) {
    const auto& row = train_[static_cast<size_t>(batch_idx[static_cast<size_t>(i)])];
    prompts.push_back(row.prompt_ids);
    targets.push_back(row.sft_ids);
  }
  auto batch = make_batch(prompts, targets, config_.data.max_response_length, tokenizer_->pad_id(), actor_device_);
  // The actor's own optimizer, so RL starts with warm Adam moments: a fresh Adam's first steps
  // move every weight by ~lr, which knocks a small policy far off (ppo_kl ~0.5 at step 1).
  for (auto& [k, v] : actor_->sft_step(batch, config_.trainer.sft_lr > 0 ? config_.trainer.sft_lr : config_.actor.optim.lr))
    m[k] = v;
  rollout_stale_ = true;
  ++sft_steps_done_;
  m["timing_s/sft"] = timer.elapsed();
  strategy_->reduce_metrics(m);
  return m;
}

void PpoTrainer::after_sft() {
  if (actor_->lora_pending()) {
    actor_->enter_lora();
    rollout_stale_ = true;
    if (strategy_->is_rank0())
      log::Info() << "lora: adapters added after the warm start (its model is the base and the reference)";
  }
  // The reference is the policy RL starts from; the critic starts from the same backbone.
  FullParamsScope actor_full(actor_->engine());
  // Under LoRA the reference is the actor with its adapters off: no copy.
  if (config_.use_reference() && !actor_->lora())
    ref_ = std::make_unique<RefWorker>(config_, actor_->module(), ref_device_, *strategy_);
  // A critic from its own directory keeps its backbone (verl's critic.model.path).
  if (critic_ && !critic_from_path_) {
    FullParamsScope critic_full(critic_->engine());
    copy_shared_parameters(*actor_->module(), *critic_->module(), "model.", "model.");
    critic_->engine().commit_full();
  }
}

std::function<void(const std::string&)> PpoTrainer::hf_export() {
  if (model_dir_.empty()) return {};  // the built-in model has no HF tokenizer to go with it
  return [this](const std::string& dir) {
    save_hf(actor_->module(), dir, model_dir_);  // merged weights under LoRA
    // verl's actor/lora_adapter/ beside actor/huggingface/: the adapter in PEFT's layout.
    if (actor_->lora() && actor_->lora_base_is_warm_start()) {
      log::Warn() << "lora: no lora_adapter/ export: the adapters' base is the warm start's model, which no file on "
                     "disk holds; huggingface/ holds the whole merged model";
    } else if (actor_->lora()) {
      save_peft_adapter(actor_->module(), config_.model.lora, (std::filesystem::path(dir).parent_path() / "lora_adapter").string(), model_dir_);
    }
  };
}

// ---------------------------------------------------------------- the RL step

void PpoTrainer::generate_and_score(int64_t step, StepBatch& sb, MetricMap& m) {
  const auto batch_idx = sampler_->next_batch();
  const auto [begin, end] = strategy_->shard(config_.data.train_batch_size);
  const int64_t n = config_.rollout.sampling.n;
  std::vector<int64_t> groups;
  for (int64_t i = begin; i < end; ++i) {
    for (int64_t j = 0; j < n; ++j) {  // verl repeats interleaved: p0 x n, p1 x n, ...
      groups.push_back(i);
      sb.row_prompt.push_back(batch_idx[static_cast<size_t>(i)]);
    }
  }
  // Every member of the rollout group asks for its own share (the r-th contiguous slice); the
  // seeds follow the global row, so the tokens do not depend on who generates them.
  const int64_t per = config_.data.train_batch_size / world_;
  std::vector<RolloutRequest> requests;
  for (int member : rollout_group()) {
    RolloutRequest req;
    for (int64_t i = member * per; i < (member + 1) * per; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        req.prompts.push_back(train_[static_cast<size_t>(batch_idx[static_cast<size_t>(i)])].prompt_ids);
        req.seeds.push_back(row_seed(static_cast<uint64_t>(config_.rollout.seed), static_cast<uint64_t>(step),
                                     static_cast<uint64_t>(i * n + j)));
      }
    }
    requests.push_back(std::move(req));
  }
  {
    ScopedTimer timer(m, "gen");
    GenerateOptions opt;
    opt.sampling = config_.rollout.sampling;
    opt.max_response_length = config_.data.max_response_length;
    opt.stop_token_ids = stop_ids();
    opt.pad_token_id = tokenizer_->pad_id();
    opt.ignore_eos = config_.rollout.ignore_eos;
    WorkersAsleep asleep(*this);
    sb.rb = group_generate(requests, opt);
    asleep.wake();
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
      const double s = rewards::compute_score(row.example.data_source, tokenizer_->decode(ids, true),
                                              row.example.ground_truth);
      scores[i] = s;
      if (len > 0) tls[i][len - 1] = s;  // the outcome reward sits on the last response token
    }
    sb.scores = scores.to(actor_device_);
    sb.token_level_scores = tls.to(actor_device_);
  }
}

// verl's compute_rollout_correction_and_add_to_batch, where verl calls it: after the rewards,
// before the advantages, so that rejected tokens leave response_mask for everything after.
// The weights' batch mean spans every rank; the metrics are this rank's, averaged over ranks
// with the others (verl computes them over the driver's whole batch: equal with one rank).
void PpoTrainer::apply_rollout_correction(StepBatch& sb, MetricMap& m) {
  if (!rollout_correction_.enabled()) return;
  auto rc = algos::compute_rollout_correction(sb.old_log_prob, sb.rb.rollout_log_probs.to(sb.old_log_prob.device()),
                                              sb.rb.response_mask, rollout_correction_,
                                              [&](torch::Tensor& t) { strategy_->all_reduce_sum(t); });
  sb.rb.response_mask = rc.response_mask;
  sb.rollout_is_weights = rc.weights;
  for (const auto& [k, v] : rc.metrics) m[k] = v;
}

void PpoTrainer::compute_advantages(StepBatch& sb, MetricMap& m) {
  ScopedTimer timer(m, "adv");
  const auto kl_type = algos::parse_kl_penalty(config_.algorithm.kl_penalty);
  if (config_.algorithm.use_kl_in_reward) {
    auto kr = algos::apply_kl_penalty(sb.token_level_scores, sb.old_log_prob, sb.ref_log_prob, sb.rb.response_mask,
                                      *kl_ctrl_, kl_type);
    sb.token_level_rewards = kr.token_level_rewards;
    m["actor/reward_kl_penalty"] = kr.current_kl;
    m["actor/reward_kl_penalty_coeff"] = kr.beta;
  } else {
    sb.token_level_rewards = sb.token_level_scores;
  }
  apply_rollout_correction(sb, m);
  const auto est = algos::parse_adv_estimator(config_.algorithm.adv_estimator);
  const auto& mask = sb.rb.response_mask;  // after rejection sampling
  torch::NoGradGuard no_grad;
  const auto& al = config_.algorithm;
  algos::AdvantageReturn ar;
  auto whiten = [&](const torch::Tensor& v) { return strategy_->masked_whiten(v, mask); };
  auto group_index = [&] { return sb.group_index.to(mask.device()); };
  switch (est) {
    case algos::AdvantageEstimator::kGae: {
      ar = algos::compute_gae_advantage_return(sb.token_level_rewards, sb.values, mask, al.gamma, al.lam);
      // Re-whiten over every rank's tokens, as verl does over the driver's full batch.
      ar.advantages = whiten(ar.returns - sb.values) * mask;
      break;
    }
    case algos::AdvantageEstimator::kGrpo:
      ar = algos::compute_grpo_outcome_advantage(sb.token_level_rewards, mask, group_index(),
                                                 al.norm_adv_by_std_in_grpo);
      break;
    case algos::AdvantageEstimator::kRloo:
      ar = algos::compute_rloo_outcome_advantage(sb.token_level_rewards, mask, group_index());
      break;
    case algos::AdvantageEstimator::kReinforcePlusPlus:
      ar = algos::compute_reinforce_plus_plus_outcome_advantage(sb.token_level_rewards, mask, al.gamma);
      ar.advantages = whiten(ar.returns) * mask;
      break;
    case algos::AdvantageEstimator::kGrpoVectorized:
      ar = algos::compute_grpo_vectorized_outcome_advantage(sb.token_level_rewards, mask, group_index(),
                                                            al.norm_adv_by_std_in_grpo);
      break;
    case algos::AdvantageEstimator::kGrpoPassk:
      ar = algos::compute_grpo_passk_outcome_advantage(sb.token_level_rewards, mask, group_index(),
                                                       al.norm_adv_by_std_in_grpo);
      break;
    case algos::AdvantageEstimator::kRlooVectorized:
      ar = algos::compute_rloo_outcome_advantage(sb.token_level_rewards, mask, group_index(),
                                                 algos::SingletonGroup::kZero);
      break;
    case algos::AdvantageEstimator::kReinforcePlusPlusBaseline: {
      // score - group mean (a group of one keeps its score) is GRPO without the std; whitened
      // over every rank's tokens, as verl does over the driver's full batch.
      auto centered = algos::compute_grpo_outcome_advantage(sb.token_level_rewards, mask, group_index(),
                                                            /*norm_adv_by_std=*/false).advantages;
      ar.advantages = whiten(centered) * mask;
      ar.returns = ar.advantages;
      break;
    }
    case algos::AdvantageEstimator::kOpo:
      ar = algos::compute_opo_outcome_advantage(sb.token_level_rewards, mask, group_index());
      break;
    case algos::AdvantageEstimator::kGpg: {
      // alpha = B / #nonzero scores over the whole batch, i.e. over every rank.
      auto counts = torch::stack({torch::tensor(static_cast<double>(sb.token_level_rewards.size(0)), torch::kFloat64),
                                  sb.token_level_rewards.sum(-1).count_nonzero().to(torch::kCPU, torch::kFloat64)});
      strategy_->all_reduce_sum(counts);
      const double alpha = algos::gpg_alpha(static_cast<int64_t>(counts[0].item<double>()),
                                            static_cast<int64_t>(counts[1].item<double>()));
      ar = algos::compute_gpg_outcome_advantage(sb.token_level_rewards, mask, group_index(), alpha);
      break;
    }
  }
  sb.advantages = ar.advantages;
  sb.returns = ar.returns;
  // verl applies PF-PPO in its GAE branch only, after the advantages.
  if (est == algos::AdvantageEstimator::kGae && al.use_pf_ppo) resample_pf_ppo(sb);
}

double PpoTrainer::comm_seconds() const {
  const Distributed* d = strategy_->distributed();
  return d ? d->comm_seconds() : 0.0;
}

double PpoTrainer::batch_entropy(const torch::Tensor& entropy, const torch::Tensor& mask) {
  const auto mode = algos::parse_loss_agg_mode(config_.actor.loss_agg_mode);
  const auto m = mask.to(entropy.device()).to(torch::kFloat64);
  torch::Tensor t;
  if (mode == algos::LossAggMode::kTokenMean) {
    t = torch::stack({(entropy.to(torch::kFloat64) * m).sum(), m.sum()});
  } else {
    const auto value = algos::agg_loss(entropy, mask.to(entropy.device()), mode, config_.actor.loss_scale_factor.value_or(0.0));
    t = torch::stack({value.to(torch::kFloat64), torch::ones({}, m.options())});
  }
  strategy_->all_reduce_sum(t);
  const auto host = t.to(torch::kCPU);
  const double count = host[1].item<double>();
  return count > 0 ? host[0].item<double>() / count : 0.0;
}

MetricMap PpoTrainer::train_step(int64_t step) {
  MetricMap m;
  const auto t0 = std::chrono::steady_clock::now();
  const double comm0 = comm_seconds();
  sync_rollout_weights(&m);
  StepBatch sb;
  sb.step = step;
  generate_and_score(step, sb, m);
  const auto& mask = sb.rb.response_mask;
  {
    ScopedTimer timer(m, "old_log_prob");
    // verl's trainer: the old log-prob pass also computes the entropy, and actor/entropy is its
    // loss_agg_mode aggregate over the whole batch (the update adds its own only when asked).
    auto old = actor_->compute_log_prob(sb.rb, /*with_entropy=*/true);
    sb.old_log_prob = old.log_probs;
    // verl's engine workers: the forward pass's MFU, a third of a training step's FLOPs.
    m["perf/mfu/actor_infer"] =
        model_flops_utilization(actor_->module()->config(), sb.rb.attention_mask, 1, timer.elapsed(), actor_device_) / 3.0;
    m["actor/entropy"] = batch_entropy(old.entropy, mask);
  }
  if (ref_) {
    ScopedTimer timer(m, "ref");
    sb.ref_log_prob = ref_->compute_ref_log_prob(sb.rb).to(actor_device_);
  } else if (config_.use_reference()) {  // LoRA: the base model is the reference
    ScopedTimer timer(m, "ref");
    sb.ref_log_prob = actor_->compute_base_log_prob(sb.rb);
  }
  if (critic_) {
    ScopedTimer timer(m, "values");
    sb.values = critic_->compute_values(sb.rb).to(actor_device_) * mask;
  }
  compute_advantages(sb, m);
  if (critic_) {
    ScopedTimer timer(m, "update_critic");
    for (const auto& [k, v] : critic_->update_critic(sb.rb, sb.values, sb.returns, step, total_steps())) m[k] = v;
  }
  if (step > config_.trainer.critic_warmup) {
    ScopedTimer timer(m, "update_actor");
    PolicyUpdateInputs in;
    in.old_log_prob = sb.old_log_prob;
    in.advantages = sb.advantages;
    in.ref_log_prob = sb.ref_log_prob;
    if (rollout_correction_.enabled()) {
      in.rollout_log_prob = sb.rb.rollout_log_probs;
      in.rollout_is_weights = sb.rollout_is_weights;
    }
    for (const auto& [k, v] : actor_->update_policy(sb.rb, in, step, total_steps())) m[k] = v;
    rollout_stale_ = true;
  }
  // Right after the update, as verl's update_weights, so that its time is this step's.
  sync_rollout_weights(&m);

  // verl's compute_data_metrics, compute_timing_metrics and compute_throughout_metrics.
  DataMetricsInput dm;
  dm.token_level_scores = sb.token_level_scores;
  dm.token_level_rewards = sb.token_level_rewards;
  dm.advantages = sb.advantages;
  dm.returns = sb.returns;
  if (critic_) dm.values = sb.values;
  dm.response_mask = mask;
  dm.prompt_lengths = sb.rb.prompt_lengths;
  dm.max_prompt_length = config_.data.max_prompt_length;
  for (const auto& [k, v] : compute_data_metrics(dm)) m[k] = v;
  torch::Tensor moments;
  if (critic_) {
    moments = explained_variance_moments(sb.returns, sb.values, mask);
    strategy_->all_reduce_sum(moments);
  }
  // Global [prompt, response] token counts: timing per token and throughput are per batch.
  const double prompt_tokens = std::accumulate(sb.rb.prompt_lengths.begin(), sb.rb.prompt_lengths.end(), 0.0);
  auto tokens = torch::stack({torch::tensor(prompt_tokens, torch::kFloat64),
                              mask.sum().to(torch::kCPU).to(torch::kFloat64)});
  strategy_->all_reduce_sum(tokens);
  const double global_prompt = tokens[0].item<double>(), global_response = tokens[1].item<double>();
  const double total_tokens = global_prompt + global_response;
  const double step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m["timing_s/step"] = step_s;
  // Time in collectives within the step (the scaling check's communication share, issue 19).
  m["timing_s/comm"] = comm_seconds() - comm0;
  m["perf/time_per_step"] = step_s;
  m["perf/throughput"] = total_tokens / step_s / static_cast<double>(strategy_->dp_size());
  add_memory_metrics(m, actor_device_);
  m["training/global_step"] = static_cast<double>(step);
  m["training/epoch"] = static_cast<double>(sampler_->state().epoch);
  strategy_->reduce_metrics(m);
  // Computed from global figures after the average, so that they are not averaged again.
  add_timing_per_token(m, global_prompt, global_response);
  if (critic_) m["critic/vf_explained_var"] = explained_variance(moments);
  m["perf/total_num_tokens"] = total_tokens;
  return m;
}

// ---------------------------------------------------------------- fit

Error out_of_memory_error(const std::string& what, const std::string& phase, int64_t step, int rank,
                          const std::string& device) {
  static const std::map<std::string, std::string> hints = {
      {"gen",
       "the rollout's KV cache: lower actor_rollout_ref.rollout.gpu_memory_utilization, max_num_seqs or "
       "data.max_response_length, and keep actor_rollout_ref.rollout.free_cache_engine=true (the training state "
       "leaves the GPU while it generates)"},
      {"old_log_prob",
       "lower actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu (or log_prob_max_token_len_per_gpu with "
       "log_prob_use_dynamic_bsz=true)"},
      {"ref",
       "lower actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu (or log_prob_max_token_len_per_gpu), or set "
       "actor_rollout_ref.ref.fsdp_config.param_offload=true"},
      {"values",
       "lower actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu (the critic's forward micro-batch), or "
       "critic.forward_max_token_len_per_gpu with critic.use_dynamic_bsz=true"},
      {"update_critic",
       "lower critic.ppo_micro_batch_size_per_gpu (or critic.ppo_max_token_len_per_gpu), set "
       "critic.model.enable_gradient_checkpointing=true, or critic.model.fsdp_config.param_offload / "
       "optimizer_offload=true"},
      {"sft",
       "lower actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu (the SFT step's micro-batch) or "
       "data.max_response_length, or set actor_rollout_ref.model.enable_gradient_checkpointing=true"},
      {"update_actor",
       "lower actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu (or ppo_max_token_len_per_gpu), set "
       "actor_rollout_ref.model.enable_gradient_checkpointing=true, or actor_rollout_ref.actor.fsdp_config."
       "param_offload / optimizer_offload=true"},
  };
  const auto h = hints.find(phase);
  const std::string first_line = what.substr(0, what.find('\n'));
  return Error{ExitCode::kFailure,
               "rank " + std::to_string(rank) + ": out of memory on " + device +
                   (phase.empty() ? std::string() : " in " + phase) + " at step " + std::to_string(step) + ": " +
                   first_line,
               h != hints.end() ? h->second
                                : "`verlctl config lint` estimates the memory per GPU of this job; "
                                  "fsdp_config.param_offload / optimizer_offload or more GPUs lower it"};
}

namespace {
bool is_out_of_memory(const c10::Error& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr) return true;
  const std::string w = e.what_without_backtrace();
  return w.find("out of memory") != std::string::npos || w.find("can't allocate memory") != std::string::npos ||
         w.find("not enough memory") != std::string::npos;
}
}  // namespace

FitResult PpoTrainer::fit() { return naming_out_of_memory([this] { return run_fit(); }); }

FitResult PpoTrainer::fit_sft() { return naming_out_of_memory([this] { return run_fit_sft(); }); }

FitResult PpoTrainer::naming_out_of_memory(const std::function<FitResult()>& run) {
  try {
    return run();
  } catch (const c10::Error& e) {
    const std::string phase = take_failed_phase();
    if (!is_out_of_memory(e)) throw;
    // The device of the role that ran the phase.
    torch::Device device = actor_device_;
    if (phase == "gen") device = rollout_device_;
    else if (phase == "values" || phase == "update_critic") device = critic_device_;
    else if (phase == "ref") device = ref_device_;
    throw out_of_memory_error(e.what_without_backtrace(), phase, global_step_ + 1, rank_, device.str());
  }
}

FitResult PpoTrainer::run_fit() {
  FitResult out;
  const auto& t = config_.trainer;
  const int64_t total = total_steps();
  int64_t resumed_from = -1;
  const auto resume_dir = ckpt_->resolve_resume(parse_resume_mode(t.resume_mode), t.resume_from_path.value_or(""));
  // A checkpoint of the RL steps holds the actor with its adapters: add them before loading.
  if (resume_dir && actor_->lora_pending()) actor_->enter_lora();
  CheckpointParts parts;
  actor_->add_to(parts);
  if (critic_) critic_->add_to(parts);
  // The reference is part of the checkpoint: a resumed run must get back the post-SFT policy,
  // not a copy of the resumed actor. Built here so that load() has a module to fill.
  if (config_.use_reference() && !actor_->lora()) {
    FullParamsScope actor_full(actor_->engine());
    ref_ = std::make_unique<RefWorker>(config_, actor_->module(), ref_device_, *strategy_);
    ref_->add_to(parts);
  }
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
    actor_->set_updates(st.extra.value("actor_updates", int64_t{0}));
    actor_->set_lora_base_is_warm_start(st.extra.value("lora_base_is_warm_start", false));
    if (critic_) critic_->set_updates(st.extra.value("critic_updates", int64_t{0}));
    rollout_stale_ = true;
    SamplerState sft_ss;
    sft_ss.epoch = st.extra.value("sft_epoch", int64_t{0});
    sft_ss.cursor = st.extra.value("sft_cursor", int64_t{0});
    sft_sampler_->set_state(sft_ss);
    if (strategy_->is_rank0()) log::Info() << "resumed from " << *resume_dir << " at step " << global_step_;
  }
  start_recorder(total, resumed_from, {});
  // SFT warm start, only on a fresh run (a resumed one has it in its weights).
  if (resumed_from < 0 && t.sft_warmup_steps > 0) {
    const auto t0 = std::chrono::steady_clock::now();
    MetricMap last;
    for (int64_t s = 0; s < t.sft_warmup_steps; ++s) last = sft_step();
    if (strategy_->is_rank0()) {
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
    if (strategy_->is_rank0()) log::Info() << "initial validation: val/score/mean " << v.score << " on " << v.samples << " prompts";
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
    // Saved before the step is recorded, as verl does, so that its time is in the step's metrics.
    const auto s0 = std::chrono::steady_clock::now();
    if (maybe_save(step, last && t.save_freq > 0))
      m["timing_s/save_checkpoint"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
    record(step, m);
    out.last_metrics = m;
  }
  out.steps = global_step_;
  return out;
}

FitResult PpoTrainer::run_fit_sft() {
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
  CheckpointManager sft_ckpt(t.default_local_dir + "/sft", strategy_->distributed());
  CheckpointParts parts;
  actor_->add_to(parts);
  parts.actor_hf_export = hf_export();
  TrainerState state;
  state.global_step = total;
  state.extra = {{"sft_steps_done", sft_steps_done_}};
  c10::optional<FullParamsScope> full;
  if (parts.actor_hf_export) full.emplace(actor_->engine());
  const auto dir = sft_ckpt.save(parts, state);
  if (strategy_->is_rank0()) log::Info() << "sft: saved " << dir;
  out.steps = total;
  return out;
}

void run_trainer(const nlohmann::json& config, bool sft_only) {
  const auto job = JobConfig::from_json(config);
  const auto device = resolve_device(job.actor.device, "actor_rollout_ref.actor.device", job.trainer.device,
                                     Distributed::options_from_env().local_rank, job.trainer.n_gpus_per_node);
  if (device.is_cpu() && keep_freed_host_memory())
    log::Debug() << "host allocator: large blocks from the heap, freed memory kept for reuse";
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
  log::Info() << "metrics: " << t.metrics_path();
  CheckpointManager ckpt(sft_only ? t.default_local_dir + "/sft" : t.default_local_dir, nullptr);
  if (auto latest = ckpt.latest_step())
    log::Info() << "checkpoints: " << ckpt.step_dir(*latest) << " (latest of " << t.default_local_dir << ")";
  else
    log::Info() << "checkpoints: none saved (trainer.save_freq=" << t.save_freq << ")";
}

}  // namespace verl::trainer

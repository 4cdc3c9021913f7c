#include "common/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "common/error.h"
#include "common/hydra.h"
#include "tests/testing/temp_dir.h"

namespace verl::config {
namespace {

namespace fs = std::filesystem;

std::string write_temp(const std::string& name, const std::string& text) {
  fs::path p = fs::temp_directory_path() / ("verl_config_test_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p) << text;
  return p.string();
}

const Issue* issue_at(const Document& d, const std::string& path) {
  for (const auto& i : d.issues)
    if (i.path == path) return &i;
  return nullptr;
}

TEST(Config, DefaultJobIsValidAndInterpolated) {
  Json job = default_job();
  EXPECT_EQ(job["trainer"]["nnodes"], 1);
  EXPECT_EQ(job["trainer"]["default_local_dir"], "checkpoints/verlctl/default");
}

TEST(Config, TypedOverrides) {
  Json job = load_job("", {"trainer.nnodes=1", "actor_rollout_ref.actor.optim.lr=3e-4", "data.shuffle=false",
                           "trainer.logger=[console,file]", "trainer.experiment_name=2024", "+trainer.extra.note=hi"});
  EXPECT_DOUBLE_EQ(job["actor_rollout_ref"]["actor"]["optim"]["lr"].get<double>(), 3e-4);
  EXPECT_EQ(job["data"]["shuffle"], false);
  EXPECT_EQ(job["trainer"]["logger"], Json::array({"console", "file"}));
  EXPECT_EQ(job["trainer"]["experiment_name"], "2024");  // a string key keeps the text
  EXPECT_EQ(job["trainer"]["extra"]["note"], "hi");
  EXPECT_EQ(job["trainer"]["default_local_dir"], "checkpoints/verlctl/2024");
}

// verl writes trainer.logger either way: logger=console and logger=['console','wandb'].
TEST(Config, LoggerIsOneNameOrAListOfVerlsNames) {
  EXPECT_EQ(load_job("", {"trainer.logger=console"})["trainer"]["logger"], "console");
  EXPECT_EQ(load_job("", {"trainer.logger=[console,file,tensorboard,wandb]"})["trainer"]["logger"],
            Json::array({"console", "file", "tensorboard", "wandb"}));
  auto d = resolve(Kind::kJob, "", {"trainer.logger=[console,tensorbord]"});
  ASSERT_FALSE(d.ok());
  const Issue* i = issue_at(d, "trainer.logger[1]");
  ASSERT_NE(i, nullptr);
  EXPECT_NE(i->message.find("'tensorbord' is not one of: wandb, mlflow"), std::string::npos) << i->message;
  EXPECT_EQ(i->hint, "did you mean 'tensorboard'?");
  EXPECT_FALSE(resolve(Kind::kJob, "", {"trainer.logger=wandbb"}).ok());
}

TEST(Config, UnknownOverrideSuggestsTheKey) {
  auto d = resolve(Kind::kJob, "", {"trainer.nnode=2"});
  ASSERT_FALSE(d.ok());
  const Issue* i = issue_at(d, "trainer.nnode");
  ASSERT_NE(i, nullptr);
  EXPECT_NE(i->hint.find("trainer.nnodes"), std::string::npos);
}

TEST(Config, KeyInTheWrongSectionSuggestsWhereItLives) {
  auto d = resolve(Kind::kJob, "", {"trainer.train_batch_size=8"});
  const Issue* i = issue_at(d, "trainer.train_batch_size");
  ASSERT_NE(i, nullptr);
  EXPECT_NE(i->hint.find("data.train_batch_size"), std::string::npos);
}

TEST(Config, RemoveOverrideDropsAnAddedKey) {
  Json job = load_job("", {"+trainer.note=x", "~trainer.note"});
  EXPECT_FALSE(job["trainer"].contains("note"));
}

TEST(Config, RemovingASchemaKeyIsAnError) {
  auto d = resolve(Kind::kJob, "", {"~trainer.nnodes"});
  ASSERT_NE(issue_at(d, "trainer.nnodes"), nullptr);
  EXPECT_NE(issue_at(d, "trainer.nnodes")->message.find("cannot be removed"), std::string::npos);
}

TEST(Config, BrokenFileReportsEveryProblemWithLocation) {
  auto d = resolve(Kind::kJob, std::string(VERL_SOURCE_DIR) + "/tests/data/broken_job.yaml", {});
  ASSERT_FALSE(d.ok());
  const Issue* typo = issue_at(d, "data.max_prompt_lenght");
  ASSERT_NE(typo, nullptr);
  EXPECT_NE(typo->hint.find("data.max_prompt_length"), std::string::npos);
  EXPECT_EQ(typo->where.line, 4);
  EXPECT_EQ(typo->where.column, 3);
  const Issue* temp = issue_at(d, "actor_rollout_ref.rollout.temperature");
  ASSERT_NE(temp, nullptr);
  EXPECT_NE(temp->message.find("expected a number"), std::string::npos);
  EXPECT_NE(issue_at(d, "actor_rollout_ref.actor.clip_ratio"), nullptr);      // out of range
  EXPECT_NE(issue_at(d, "algorithm.adv_estimator"), nullptr);                 // not a choice
  EXPECT_NE(issue_at(d, "trainer.logger"), nullptr);                          // not a logger name
  EXPECT_GE(d.issues.size(), 5u);
}

TEST(Config, BatchConsistencyNamesTheNumbers) {
  // 30 * 4 = 120 responses over 16 ranks does not divide.
  auto d = resolve(Kind::kJob, "", {"data.train_batch_size=30", "trainer.nnodes=2", "trainer.n_gpus_per_node=8",
                                    "actor_rollout_ref.actor.ppo_mini_batch_size=30",
                                    "critic.ppo_mini_batch_size=30"});
  const Issue* i = issue_at(d, "data.train_batch_size");
  ASSERT_NE(i, nullptr);
  EXPECT_NE(i->message.find("120"), std::string::npos);
  EXPECT_NE(i->message.find("16 ranks"), std::string::npos);
}

TEST(Config, MiniBatchMustSplitIntoMicroBatches) {
  // 32 prompts * 4 = 128 responses per rank; 48 does not divide them.
  auto d = resolve(Kind::kJob, "", {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=48"});
  const Issue* i = issue_at(d, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu");
  ASSERT_NE(i, nullptr);
  EXPECT_NE(i->message.find("128"), std::string::npos);
}

TEST(Config, DynamicBszLeavesTheMicroBatchRowCountUnchecked) {
  // A token budget forms the micro-batches; the critic's null follows the actor's switch.
  auto d = resolve(Kind::kJob, "", {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=48",
                                    "critic.ppo_micro_batch_size_per_gpu=48",
                                    "actor_rollout_ref.actor.use_dynamic_bsz=true"});
  EXPECT_EQ(issue_at(d, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"), nullptr);
  EXPECT_EQ(issue_at(d, "critic.ppo_micro_batch_size_per_gpu"), nullptr);
  auto e = resolve(Kind::kJob, "", {"critic.ppo_micro_batch_size_per_gpu=48",
                                    "actor_rollout_ref.actor.use_dynamic_bsz=true", "critic.use_dynamic_bsz=false"});
  EXPECT_NE(issue_at(e, "critic.ppo_micro_batch_size_per_gpu"), nullptr);
}

TEST(Config, TensorParallelRolloutMustCutTheBuiltInModel) {
  // The built-in model: 4 heads, 2 KV heads, intermediate 176.
  for (const char* ok : {"2", "4"}) {
    auto d = resolve(Kind::kJob, "", {std::string("actor_rollout_ref.rollout.tensor_model_parallel_size=") + ok});
    EXPECT_TRUE(d.ok()) << ok;
    EXPECT_EQ(issue_at(d, "actor_rollout_ref.rollout.tensor_model_parallel_size"), nullptr) << ok;
  }
  auto bad = resolve(Kind::kJob, "", {"actor_rollout_ref.rollout.tensor_model_parallel_size=3"});
  EXPECT_FALSE(bad.ok());
  const Issue* i = issue_at(bad, "actor_rollout_ref.rollout.tensor_model_parallel_size");
  ASSERT_NE(i, nullptr);
  EXPECT_EQ(i->severity, Severity::kError);
  EXPECT_NE(i->message.find("num_attention_heads 4"), std::string::npos) << i->message;
}

TEST(Config, GpuMemoryShareMustLeaveTheAllocatorSomething) {
  auto d = resolve(Kind::kJob, "", {"actor_rollout_ref.rollout.gpu_memory_utilization=0"});
  ASSERT_NE(issue_at(d, "actor_rollout_ref.rollout.gpu_memory_utilization"), nullptr);
}

TEST(Config, YamlSyntaxErrorHasLineAndColumn) {
  auto f = write_temp("syntax.yaml", "data:\n  train_batch_size: [1, 2\ntrainer:\n  nnodes: 1\n");
  auto d = resolve(Kind::kJob, f, {});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.issues[0].message.find("YAML syntax error"), std::string::npos);
  EXPECT_GT(d.issues[0].where.line, 0);
  EXPECT_EQ(d.issues[0].where.file, f);
}

TEST(Config, LoadThrowsInvalidConfigListingAll) {
  try {
    load_job(std::string(VERL_SOURCE_DIR) + "/tests/data/broken_job.yaml", {});
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    std::string m = e.what();
    EXPECT_NE(m.find("broken_job.yaml:4:3"), std::string::npos) << m;
    EXPECT_NE(m.find("algorithm.adv_estimator"), std::string::npos);
  }
}

TEST(Config, BadInterpolationIsReported) {
  auto d = resolve(Kind::kJob, "", {"trainer.default_local_dir=ckpt/${trainer.nope}"});
  EXPECT_NE(issue_at(d, "trainer.default_local_dir"), nullptr);
}

TEST(Config, ClusterSpecNodesAreChecked) {
  auto f = write_temp("cluster.yaml", "backend: ssh\nnodes:\n  - {host: 127.0.0.2, port: 2222}\n  - {port: 70000}\n");
  auto d = resolve(Kind::kCluster, f, {});
  EXPECT_NE(issue_at(d, "nodes[1].host"), nullptr);
  EXPECT_NE(issue_at(d, "nodes[1].port"), nullptr);
  EXPECT_EQ(issue_at(d, "nodes[0].host"), nullptr);
}

TEST(Config, ClusterEnvIsAFreeMap) {
  Json c = load_cluster("", {"env.NCCL_DEBUG=INFO"});
  EXPECT_EQ(c["env"]["NCCL_DEBUG"], "INFO");
}

TEST(Lint, ScaleOutAdvice) {
  Json job = load_job("", {"trainer.nnodes=4", "trainer.n_gpus_per_node=8", "actor_rollout_ref.rollout.n=1",
                           "algorithm.adv_estimator=grpo", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
                           "critic.ppo_micro_batch_size_per_gpu=1",
                           "actor_rollout_ref.rollout.gpu_memory_utilization=0.5"});
  auto w = lint_job(job, nullptr, 80);
  auto has = [&](const std::string& path) {
    for (const auto& i : w)
      if (i.path == path) return true;
    return false;
  };
  EXPECT_TRUE(has("data.train_batch_size"));
  EXPECT_TRUE(has("actor_rollout_ref.rollout.gpu_memory_utilization"));
  EXPECT_TRUE(has("actor_rollout_ref.rollout.n"));
  for (const auto& i : w) EXPECT_EQ(i.severity, Severity::kWarning);
}

TEST(Lint, LargeModelWantsTensorParallelAndOffload) {
  Json job = load_job("", {"actor_rollout_ref.model.hidden_size=4096", "actor_rollout_ref.model.num_hidden_layers=32",
                           "actor_rollout_ref.model.intermediate_size=11008",
                           "actor_rollout_ref.model.num_attention_heads=32",
                           "actor_rollout_ref.model.num_key_value_heads=8",
                           "actor_rollout_ref.rollout.gpu_memory_utilization=0.9"});
  auto w = lint_job(job, nullptr, 24);
  bool tp = false, offload = false;
  for (const auto& i : w) {
    tp |= i.path == "actor_rollout_ref.rollout.tensor_model_parallel_size";
    offload |= i.hint.find("offload") != std::string::npos;
  }
  EXPECT_TRUE(tp);
  EXPECT_TRUE(offload);
}

// A TP group is consecutive ranks: a size that does not divide the GPUs per node puts a group
// across two nodes.
TEST(Lint, TensorParallelGroupsAcrossNodesAreWarned) {
  auto warned = [](const std::string& tp, const std::string& per_node) {
    Json job = load_job("", {"trainer.nnodes=2", "trainer.n_gpus_per_node=" + per_node,
                             "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
                             "critic.ppo_micro_batch_size_per_gpu=1",
                             "actor_rollout_ref.rollout.tensor_model_parallel_size=" + tp});
    for (const auto& i : lint_job(job, nullptr, 80))
      if (i.path == "actor_rollout_ref.rollout.tensor_model_parallel_size" &&
          i.message.find("span two nodes") != std::string::npos)
        return true;
    return false;
  };
  EXPECT_TRUE(warned("4", "2"));
  EXPECT_FALSE(warned("4", "8"));
  EXPECT_FALSE(warned("2", "8"));
  EXPECT_FALSE(warned("1", "2"));
}

// The memory model follows the roles' fsdp_config: a 6.5B-parameter body (7B shape) with GAE is
// 2 x 16 B/param = ~193 GiB on one GPU; sharded over 8 ranks ~24 GiB; with every offload on, the
// weights and moments leave the GPU.
TEST(Lint, TrainingMemoryPerGpuFollowsShardingAndOffload) {
  const std::vector<std::string> shape = {
      "actor_rollout_ref.model.hidden_size=4096", "actor_rollout_ref.model.num_hidden_layers=32",
      "actor_rollout_ref.model.intermediate_size=11008", "actor_rollout_ref.model.num_attention_heads=32",
      "actor_rollout_ref.model.num_key_value_heads=8", "actor_rollout_ref.rollout.gpu_memory_utilization=0.9",
      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1", "critic.ppo_micro_batch_size_per_gpu=1"};
  auto memory_warning = [&](std::vector<std::string> extra) -> std::string {
    extra.insert(extra.end(), shape.begin(), shape.end());
    for (const auto& i : lint_job(load_job("", extra), nullptr, 80))
      if (i.path == "actor_rollout_ref.model") return i.message + " | " + i.hint;
    return "";
  };
  const auto one = memory_warning({});
  EXPECT_NE(one.find("actor 96.5"), std::string::npos) << one;
  EXPECT_NE(one.find("critic 96.5"), std::string::npos) << one;
  EXPECT_NE(one.find("offload"), std::string::npos) << one;
  // 8 ranks, sharded (verl's default fsdp_size=-1): ~24 GiB, under 0.9 x 80.
  EXPECT_EQ(memory_warning({"trainer.n_gpus_per_node=8"}), "");
  // ... but not with fsdp_size=1 (every rank holds everything).
  EXPECT_NE(memory_warning({"trainer.n_gpus_per_node=8", "actor_rollout_ref.actor.fsdp_config.fsdp_size=1",
                            "critic.model.fsdp_config.fsdp_size=1"}),
            "");
  // Hybrid sharding divides by the shard group: groups of 2 of 8 ranks hold half each (~48 GiB a
  // role); groups of 8 are the whole world (-1).
  const auto halves = memory_warning({"trainer.n_gpus_per_node=8", "actor_rollout_ref.actor.fsdp_config.fsdp_size=2",
                                      "critic.model.fsdp_config.fsdp_size=2"});
  EXPECT_NE(halves.find("actor 48."), std::string::npos) << halves;
  EXPECT_NE(halves.find("critic 48."), std::string::npos) << halves;
  EXPECT_EQ(memory_warning({"trainer.n_gpus_per_node=8", "actor_rollout_ref.actor.fsdp_config.fsdp_size=8",
                            "critic.model.fsdp_config.fsdp_size=8"}),
            "");
  // One GPU with every offload on: nothing of the state stays on the GPU.
  EXPECT_EQ(memory_warning({"actor_rollout_ref.actor.fsdp_config.param_offload=true",
                            "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true",
                            "critic.model.fsdp_config.param_offload=true", "critic.model.fsdp_config.optimizer_offload=true"}),
            "");
}

TEST(Lint, TokenizersParallelismFromClusterEnv) {
  Json job = load_job("", {"actor_rollout_ref.rollout.gpu_memory_utilization=0.9"});
  Json cluster = load_cluster("", {"env.TOKENIZERS_PARALLELISM=true"});
  auto w = lint_job(job, &cluster, 80);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].path, "env.TOKENIZERS_PARALLELISM");
}

// ---- verl's keys, Hydra's syntax, presets ------------------------------------------------------

const Issue* issue_containing(const Document& d, const std::string& text) {
  for (const auto& i : d.issues)
    if (i.message.find(text) != std::string::npos || i.path.find(text) != std::string::npos) return &i;
  return nullptr;
}

TEST(VerlKeys, AnEngineKnobIsAcceptedWithAWarningThatSaysWhy) {
  auto d = resolve(Kind::kJob, "", {"actor_rollout_ref.rollout.enable_prefix_caching=False",
                                    "actor_rollout_ref.rollout.engine_kwargs.vllm.swap_space=4"});
  EXPECT_TRUE(d.ok()) << format_issues(d.issues);
  const Issue* w = issue_containing(d, "vLLM/SGLang engine setting");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->severity, Severity::kWarning);
  EXPECT_EQ(find(d.value, "actor_rollout_ref.rollout.enable_prefix_caching"), nullptr);  // the trainer never sees it
}

TEST(VerlKeys, TheSlotEnginesKnobsAreRealKeysWithVerlsDefaults) {
  auto d = resolve(Kind::kJob, "", {"actor_rollout_ref.rollout.enforce_eager=True",
                                    "actor_rollout_ref.rollout.cudagraph_capture_sizes=[1,8,64]"});
  EXPECT_TRUE(d.ok()) << format_issues(d.issues);
  EXPECT_EQ(find(d.value, "actor_rollout_ref.rollout.enforce_eager")->get<bool>(), true);
  EXPECT_EQ(find(d.value, "actor_rollout_ref.rollout.cudagraph_capture_sizes")->size(), 3u);
  EXPECT_EQ(find(d.value, "actor_rollout_ref.rollout.max_num_seqs")->get<int64_t>(), 256);
  EXPECT_EQ(find(d.value, "actor_rollout_ref.rollout.max_num_batched_tokens")->get<int64_t>(), 8192);
  EXPECT_EQ(find(d.value, "actor_rollout_ref.rollout.free_cache_engine")->get<bool>(), true);
  auto bad = resolve(Kind::kJob, "", {"actor_rollout_ref.rollout.max_num_seqs=0"});
  EXPECT_NE(issue_at(bad, "actor_rollout_ref.rollout.max_num_seqs"), nullptr);
}

TEST(VerlKeys, AnUnsupportedFeatureSwitchedOnIsAnErrorThatSaysNotSupported) {
  auto d = resolve(Kind::kJob, "", {"actor_rollout_ref.actor.strategy=megatron", "critic.model.lora_rank=32",
                                    "actor_rollout_ref.actor.fsdp_config.offload_policy=true"});
  for (const std::string key : {"actor_rollout_ref.actor.strategy", "critic.model.lora_rank",
                                "actor_rollout_ref.actor.fsdp_config.offload_policy"}) {
    const Issue* i = issue_at(d, key);
    ASSERT_NE(i, nullptr) << key;
    EXPECT_EQ(i->severity, Severity::kError);
    EXPECT_EQ(i->message.rfind("not supported", 0), 0u) << i->message;
  }
  EXPECT_NE(issue_at(d, "actor_rollout_ref.actor.strategy")->hint.find("strategy=fsdp"), std::string::npos);
}

// issue 20: every name verl's generated config allows is either accepted or refused by name with
// the reason (an error at the key, exit 3 on load).
TEST(VerlKeys, EveryVerlAdvantageEstimatorIsAcceptedOrRefusedWithTheReason) {
  for (const std::string name : {"gae", "grpo", "grpo_vectorized", "grpo_passk", "rloo", "rloo_vectorized",
                                 "reinforce_plus_plus", "reinforce_plus_plus_baseline", "opo", "gpg"}) {
    auto d = resolve(Kind::kJob, "", {"algorithm.adv_estimator=" + name, "actor_rollout_ref.rollout.n=4"});
    EXPECT_EQ(issue_at(d, "algorithm.adv_estimator"), nullptr) << name << ": " << format_issues(d.issues);
  }
  for (const std::string name : {"remax", "optimal_token_baseline", "tir_optimal_token_baseline"}) {
    auto d = resolve(Kind::kJob, "", {"algorithm.adv_estimator=" + name});
    const Issue* i = issue_at(d, "algorithm.adv_estimator");
    ASSERT_NE(i, nullptr) << name;
    EXPECT_EQ(i->severity, Severity::kError);
    EXPECT_EQ(i->message.rfind("'" + name + "' is not supported: ", 0), 0u) << i->message;
    EXPECT_NE(i->hint.find("grpo_passk"), std::string::npos) << i->hint;
  }
  try {
    load_job("", {"algorithm.adv_estimator=remax"});
    FAIL() << "remax was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find("greedy rollout"), std::string::npos) << e.what();
  }
}

TEST(VerlKeys, EveryVerlPolicyLossModeIsAcceptedOrRefusedWithTheReason) {
  for (const std::string name : {"vanilla", "gspo", "sapo", "gpg", "clip_cov", "kl_cov", "geo_mean", "cispo"}) {
    auto d = resolve(Kind::kJob, "", {"actor_rollout_ref.actor.policy_loss.loss_mode=" + name,
                                      "actor_rollout_ref.actor.policy_loss.clip_cov_ratio=0.001",
                                      "actor_rollout_ref.actor.tau_neg=1.2"});
    EXPECT_TRUE(d.ok()) << name << ": " << format_issues(d.issues);
    EXPECT_EQ(find(d.value, "actor_rollout_ref.actor.policy_loss.loss_mode")->get<std::string>(), name);
  }
  auto d = resolve(Kind::kJob, "", {"actor_rollout_ref.actor.policy_loss.loss_mode=bypass_mode"});
  const Issue* i = issue_at(d, "actor_rollout_ref.actor.policy_loss.loss_mode");
  ASSERT_NE(i, nullptr);
  EXPECT_EQ(i->severity, Severity::kError);
  EXPECT_NE(i->message.find("rollout_correction"), std::string::npos) << i->message;
}

TEST(VerlKeys, PfPpoIsAcceptedAndWarnsWhereVerlIgnoresIt) {
  auto d = resolve(Kind::kJob, "", {"algorithm.use_pf_ppo=true", "algorithm.pf_ppo.reweight_method=max_min"});
  EXPECT_TRUE(d.ok()) << format_issues(d.issues);
  EXPECT_EQ(issue_at(d, "algorithm.use_pf_ppo"), nullptr);  // gae: it resamples
  auto g = resolve(Kind::kJob, "", {"algorithm.use_pf_ppo=true", "algorithm.adv_estimator=grpo",
                                    "actor_rollout_ref.rollout.n=4"});
  const Issue* w = issue_at(g, "algorithm.use_pf_ppo");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->severity, Severity::kWarning);
  auto bad = resolve(Kind::kJob, "", {"algorithm.pf_ppo.reweight_method=softmax"});
  EXPECT_NE(issue_at(bad, "algorithm.pf_ppo.reweight_method"), nullptr);
}

TEST(VerlKeys, RolloutCorrectionIsAcceptedAndBypassModeRefusedWithTheReason) {
  auto is = resolve(Kind::kJob, "", {"algorithm.rollout_correction.rollout_is=sequence",
                                     "algorithm.rollout_correction.rollout_is_threshold=3.0",
                                     "algorithm.rollout_correction.rollout_rs=token_k1,seq_mean_k3",
                                     "algorithm.rollout_correction.rollout_rs_threshold=0.5_2.0,0.01"});
  EXPECT_TRUE(is.ok()) << format_issues(is.issues);
  auto numeric = resolve(Kind::kJob, "", {"algorithm.rollout_correction.rollout_rs=seq_max_k2",
                                          "algorithm.rollout_correction.rollout_rs_threshold=2.5"});
  EXPECT_TRUE(numeric.ok()) << format_issues(numeric.issues);
  for (const std::string kv : {"algorithm.rollout_correction.rollout_is=tokens",
                               "algorithm.rollout_correction.rollout_rs=token_k1",  // no threshold
                               "algorithm.rollout_correction.bypass_mode=true"}) {
    auto d = resolve(Kind::kJob, "", {kv, "algorithm.rollout_correction.rollout_is_threshold=2.0"});
    EXPECT_FALSE(d.ok()) << kv;
  }
  auto bypass = resolve(Kind::kJob, "", {"algorithm.rollout_correction.bypass_mode=true"});
  const Issue* i = issue_at(bypass, "algorithm.rollout_correction.bypass_mode");
  ASSERT_NE(i, nullptr);
  EXPECT_EQ(i->message.rfind("not supported", 0), 0u) << i->message;
  auto zero = resolve(Kind::kJob, "", {"algorithm.rollout_correction.rollout_is=token",
                                       "algorithm.rollout_correction.rollout_is_threshold=0"});
  EXPECT_NE(issue_at(zero, "algorithm.rollout_correction.rollout_is_threshold"), nullptr);
}

TEST(VerlKeys, CovLossBoundsAreCheckedWhenTheConfigIsValidated) {
  auto ok = resolve(Kind::kJob, "", {"actor_rollout_ref.actor.policy_loss.loss_mode=clip_cov"});
  EXPECT_TRUE(ok.ok()) << format_issues(ok.issues);
  auto ratio = resolve(Kind::kJob, "", {"actor_rollout_ref.actor.policy_loss.loss_mode=clip_cov",
                                        "actor_rollout_ref.actor.policy_loss.clip_cov_ratio=0"});
  EXPECT_NE(issue_at(ratio, "actor_rollout_ref.actor.policy_loss.clip_cov_ratio"), nullptr);
  auto kl = resolve(Kind::kJob, "", {"actor_rollout_ref.actor.policy_loss.loss_mode=kl_cov",
                                     "actor_rollout_ref.actor.policy_loss.kl_cov_ratio=0"});
  EXPECT_NE(issue_at(kl, "actor_rollout_ref.actor.policy_loss.kl_cov_ratio"), nullptr);
  auto window = resolve(Kind::kJob, "", {"actor_rollout_ref.actor.policy_loss.loss_mode=clip_cov",
                                         "actor_rollout_ref.actor.policy_loss.clip_cov_lb=5",
                                         "actor_rollout_ref.actor.policy_loss.clip_cov_ub=1"});
  EXPECT_NE(issue_at(window, "actor_rollout_ref.actor.policy_loss.clip_cov_lb"), nullptr);
  // Another loss mode does not read them: no error.
  auto other = resolve(Kind::kJob, "", {"actor_rollout_ref.actor.policy_loss.clip_cov_ratio=0"});
  EXPECT_TRUE(other.ok()) << format_issues(other.issues);
  auto scale = resolve(Kind::kJob, "", {"actor_rollout_ref.actor.loss_scale_factor=0"});
  EXPECT_NE(issue_at(scale, "actor_rollout_ref.actor.loss_scale_factor"), nullptr);
  auto legacy = resolve(Kind::kJob, "", {"trainer.use_legacy_worker_impl=disable", "actor_rollout_ref.actor.loss_scale_factor=512"});
  EXPECT_TRUE(legacy.ok()) << format_issues(legacy.issues);
}

TEST(VerlKeys, StraightThroughKlEstimatorsAreRefusedAsVerlRaisesOnThem) {
  auto k3 = resolve(Kind::kJob, "", {"algorithm.kl_penalty=k3", "actor_rollout_ref.actor.kl_loss_type=k2"});
  EXPECT_TRUE(k3.ok()) << format_issues(k3.issues);
  auto r = resolve(Kind::kJob, "", {"algorithm.kl_penalty=k3+"});
  ASSERT_NE(issue_at(r, "algorithm.kl_penalty"), nullptr);
  EXPECT_NE(issue_at(r, "algorithm.kl_penalty")->message.find("NotImplementedError"), std::string::npos);
  for (const std::string name : {"k1+", "k3+"}) {
    auto d = resolve(Kind::kJob, "", {"actor_rollout_ref.actor.kl_loss_type=" + name});
    const Issue* i = issue_at(d, "actor_rollout_ref.actor.kl_loss_type");
    ASSERT_NE(i, nullptr) << name;
    EXPECT_NE(i->message.find("NotImplementedError"), std::string::npos) << i->message;
    EXPECT_NE(i->hint.find("low_var_kl"), std::string::npos) << i->hint;
  }
}

// FSDP's switches are implemented (trainer/module_engine.h): accepted without a word.
TEST(VerlKeys, FsdpOffloadAndShardingKeysAreImplemented) {
  auto d = resolve(Kind::kJob, "", {"actor_rollout_ref.actor.fsdp_config.param_offload=true",
                                    "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true",
                                    "critic.model.fsdp_config.fsdp_size=1",
                                    "actor_rollout_ref.ref.fsdp_config.param_offload=true",
                                    "actor_rollout_ref.ref.fsdp_config.reshard_after_forward=false"});
  EXPECT_TRUE(d.ok()) << format_issues(d.issues);
  for (const auto& i : d.issues) EXPECT_EQ(i.path.find("fsdp_config"), std::string::npos) << i.path << ": " << i.message;
}

TEST(VerlKeys, AnUnsupportedFeatureLeftOffIsOnlyAWarning) {
  auto d = resolve(Kind::kJob, "", {"actor_rollout_ref.actor.strategy=fsdp2", "actor_rollout_ref.model.lora_rank=0",
                                    "actor_rollout_ref.actor.fsdp_config.param_offload=False"});
  EXPECT_TRUE(d.ok()) << format_issues(d.issues);
  EXPECT_FALSE(d.issues.empty());
}

TEST(VerlKeys, AKeyNeitherToolHasIsUnknownWithASuggestionFromItsOwnSection) {
  auto d = resolve(Kind::kJob, "", {"actor_rollout_ref.actor.fsdp_config.param_ofload=true", "critic.model.pth=/m"});
  const Issue* a = issue_at(d, "actor_rollout_ref.actor.fsdp_config.param_ofload");
  ASSERT_NE(a, nullptr);
  EXPECT_NE(a->hint.find("actor_rollout_ref.actor.fsdp_config.param_offload"), std::string::npos) << a->hint;
  const Issue* c = issue_at(d, "critic.model.pth");
  ASSERT_NE(c, nullptr);
  EXPECT_NE(c->hint.find("critic.model.path"), std::string::npos) << c->hint;
  EXPECT_EQ(c->hint.find("actor_rollout_ref"), std::string::npos) << c->hint;
}

TEST(VerlKeys, VerlsGeneratedConfigValidatesAsItIs) {
  auto d = resolve(Kind::kJob, std::string(VERL_SOURCE_DIR) + "/templates/verl/ppo_trainer.yaml", {});
  EXPECT_TRUE(d.ok()) << format_issues(d.issues);
  EXPECT_EQ(find(d.value, "actor_rollout_ref.model.path")->get<std::string>(), "~/models/deepseek-llm-7b-chat");
  EXPECT_TRUE(d.preset.empty());  // a model path: verl's defaults, no built-in preset
}

TEST(Config, DuplicateYamlKeysNameBothPlaces) {
  auto f = write_temp("dup.yaml", "trainer:\n  nnodes: 1\n  nnodes: 2\n");
  auto d = resolve(Kind::kJob, f, {});
  const Issue* i = issue_at(d, "trainer.nnodes");
  ASSERT_NE(i, nullptr);
  EXPECT_NE(i->message.find("duplicate key"), std::string::npos);
  EXPECT_NE(i->message.find(":2:"), std::string::npos) << i->message;  // the first one's line
  EXPECT_EQ(i->where.line, 3);
}

TEST(Config, OmegaConfInterpolationsResolveWithTheirTypes) {
  ::setenv("VERL_CONFIG_TEST_NAME", "from-env", 1);
  auto f = write_temp("interp.yaml",
                      "trainer:\n  experiment_name: ${oc.env:VERL_CONFIG_TEST_NAME}\n"
                      "  project_name: ${oc.env:VERL_CONFIG_TEST_UNSET,fallback}\n"
                      "  default_local_dir: /ck/${.project_name}\n"
                      "  total_epochs: ${oc.select:no.such.key,7}\n"
                      "  nnodes: ???\n");
  Json job = load_job(f, {"actor_rollout_ref.actor.ppo_epochs=3"});
  EXPECT_EQ(job["trainer"]["experiment_name"], "from-env");
  EXPECT_EQ(job["trainer"]["project_name"], "fallback");
  EXPECT_EQ(job["trainer"]["default_local_dir"], "/ck/fallback");
  EXPECT_EQ(job["trainer"]["total_epochs"], 7);   // an int, not the text "7"
  EXPECT_EQ(job["trainer"]["nnodes"], 1);         // ??? leaves the default
  EXPECT_EQ(job["critic"]["ppo_epochs"], 3);      // follows the actor, as verl's oc.select does
  auto bad = resolve(Kind::kJob, "", {"trainer.experiment_name=${oc.env:VERL_CONFIG_TEST_UNSET}"});
  const Issue* i = issue_at(bad, "trainer.experiment_name");
  ASSERT_NE(i, nullptr);
  EXPECT_NE(i->message.find("VERL_CONFIG_TEST_UNSET"), std::string::npos);
}

TEST(Config, TheBuiltInPresetAppliesOnlyWithoutAModelPathAndNeverOverAUserValue) {
  auto builtin = resolve(Kind::kJob, "", {"data.train_batch_size=32"});
  ASSERT_TRUE(builtin.ok()) << format_issues(builtin.issues);
  EXPECT_EQ(find(builtin.value, "actor_rollout_ref.actor.optim.lr")->get<double>(), 3e-4);
  EXPECT_EQ(find(builtin.value, "data.train_batch_size")->get<int>(), 32);
  EXPECT_EQ(find(builtin.value, "trainer.sft_warmup_steps")->get<int>(), 95);
  EXPECT_EQ(std::count(builtin.preset.begin(), builtin.preset.end(), "data.train_batch_size"), 0);
  auto hf = resolve(Kind::kJob, "", {"actor_rollout_ref.model.path=/models/qwen"});
  ASSERT_TRUE(hf.ok()) << format_issues(hf.issues);
  EXPECT_EQ(find(hf.value, "actor_rollout_ref.actor.optim.lr")->get<double>(), 1e-6);  // verl's defaults
  EXPECT_EQ(find(hf.value, "algorithm.lam")->get<double>(), 1.0);
  EXPECT_EQ(find(hf.value, "actor_rollout_ref.actor.ppo_epochs")->get<int>(), 1);
  EXPECT_EQ(find(hf.value, "trainer.sft_warmup_steps")->get<int>(), 0);
  EXPECT_TRUE(find(hf.value, "trainer.total_training_steps")->is_null());
  EXPECT_TRUE(hf.preset.empty());
}

TEST(Config, UnknownKeysAndCrossKeyProblemsAreReportedInOnePass) {
  auto d = resolve(Kind::kJob, "", {"trainer.no_such_key=1", "data.train_batch_size=30",
                                    "actor_rollout_ref.actor.ppo_mini_batch_size=32"});
  EXPECT_NE(issue_at(d, "trainer.no_such_key"), nullptr);
  EXPECT_NE(issue_at(d, "actor_rollout_ref.actor.ppo_mini_batch_size"), nullptr);
}

TEST(Hydra, VerlsConfigFolderComposesToVerlsGeneratedConfig) {
  const std::string folder = std::string(VERL_SOURCE_DIR) + "/tests/data/verl/config";
  const Json composed = parse_yaml_json(compose_hydra(hydra_primary(folder, "ppo_trainer")));
  std::ifstream in(std::string(VERL_SOURCE_DIR) + "/templates/verl/ppo_trainer.yaml");
  std::stringstream text;
  text << in.rdbuf();
  const Json generated = parse_yaml_json(text.str());
  // verl generates its file with Hydra itself: every leaf must agree (YAML spellings aside).
  std::function<void(const Json&, const Json&, const std::string&)> same = [&](const Json& a, const Json& b,
                                                                                const std::string& p) {
    if (a.is_object() && !a.empty()) {
      ASSERT_TRUE(b.is_object()) << p;
      EXPECT_EQ(a.size(), b.size()) << p;
      for (auto it = a.begin(); it != a.end(); ++it) {
        ASSERT_TRUE(b.contains(it.key())) << p << "." << it.key() << " missing from the composition";
        same(it.value(), b[it.key()], p + "." + it.key());
      }
      return;
    }
    if (a.is_number() && b.is_number()) {
      EXPECT_DOUBLE_EQ(a.get<double>(), b.get<double>()) << p;
      return;
    }
    if (a != b && a.is_string() != b.is_string()) return;  // 100_000 vs 100000, "true" vs true
    EXPECT_EQ(a, b) << p;
  };
  same(generated, composed, "");
  EXPECT_TRUE(resolve(Kind::kJob, hydra_primary(folder, "ppo_trainer"), {}).ok());
}

TEST(Hydra, AMissingDefaultsFileNamesTheEntryAndTheFile) {
  const testing::TempDir tmp("hydra");
  const std::string dir = tmp.str();
  std::ofstream(dir + "/main.yaml") << "defaults:\n  - actor@actor_rollout_ref.actor: nope\n  - _self_\n";
  try {
    compose_hydra(dir + "/main.yaml");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("actor/nope.yaml"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("main.yaml:2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace verl::config

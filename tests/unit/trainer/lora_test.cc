// LoRA (trainer/model.h add_lora, trainer/hf_model.h PEFT files): the adapted model starts as the
// base, merges exactly, trains only its adapters, turns them off for the reference, round-trips
// through PEFT's layout, and selects the projections verl's keys name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "trainer/hf_model.h"
#include "trainer/model.h"
#include "trainer/safetensors.h"

namespace verl::trainer {
namespace {
namespace fs = std::filesystem;

ModelConfig tiny() {
  ModelConfig c;  // vocab 100, hidden 64, 2 layers
  c.tie_word_embeddings = false;
  return c;
}

torch::Tensor logits_of(CausalLm& m) {
  auto gen = at::detail::createCPUGenerator(5);
  auto ids = torch::randint(0, 100, {3, 10}, gen, torch::kLong);
  auto mask = torch::ones({3, 10}, torch::kLong);
  torch::NoGradGuard no_grad;
  return m->forward(ids, mask, position_ids_from_mask(mask));
}

LoraSpec spec(int64_t r) {
  LoraSpec s;
  s.rank = r;
  s.alpha = 8;
  return s;
}

// B is random here (as after training) so that the adapters change the output.
void randomize_b(CausalLm& m) {
  torch::NoGradGuard no_grad;
  auto gen = at::detail::createCPUGenerator(11);
  for (auto& p : m->named_parameters())
    if (p.key().find(".lora_B.") != std::string::npos) p.value().copy_(torch::randn(p.value().sizes(), gen) * 0.05);
}

TEST(Lora, StartsAsTheBaseAndTrainsOnlyItsAdapters) {
  auto base = make_causal_lm(tiny(), 3);
  auto m = make_causal_lm(tiny(), 3);
  const int64_t adapted = add_lora(*m, spec(4), 1);
  EXPECT_EQ(adapted, 2 * 7);  // 2 layers x q, k, v, o, gate, up, down
  EXPECT_TRUE(torch::equal(logits_of(base), logits_of(m)));
  int64_t trainable = 0;
  for (const auto& p : m->named_parameters()) {
    const bool adapter = p.key().find(".lora_A.") != std::string::npos || p.key().find(".lora_B.") != std::string::npos;
    EXPECT_EQ(p.value().requires_grad(), adapter) << p.key();
    if (adapter) trainable += p.value().numel();
  }
  EXPECT_EQ(count_trainable(*m), trainable);
  // q_proj of layer 0: A [4, 64], B [64, 4], PEFT's names.
  auto named = m->named_parameters();
  ASSERT_NE(named.find("model.layers.0.self_attn.q_proj.lora_A.weight"), nullptr);
  EXPECT_EQ(named["model.layers.0.self_attn.q_proj.lora_A.weight"].sizes(), torch::IntArrayRef({4, 64}));
  EXPECT_EQ(named["model.layers.0.self_attn.q_proj.lora_B.weight"].sizes(), torch::IntArrayRef({64, 4}));
  EXPECT_EQ(named.find("lm_head.lora_A.weight"), nullptr);  // all-linear leaves the head out, as PEFT
}

// With every base weight (the embedding too) frozen, a checkpointed layer's only input that
// requires a gradient would be none: the adapters must train all the same, with the gradients
// of the plain forward, in fp32 and in bf16 compute.
TEST(Lora, GradientCheckpointingStillTrainsTheAdapters) {
  for (auto dt : {torch::kFloat32, torch::kBFloat16}) {
    auto grads = [&](bool checkpointing) {
      auto c = tiny();
      c.compute_dtype = dt;
      auto m = make_causal_lm(c, 3);
      add_lora(*m, spec(4), 1);
      randomize_b(m);
      m->model->set_gradient_checkpointing(checkpointing);
      m->train();
      auto gen = at::detail::createCPUGenerator(5);
      auto ids = torch::randint(0, 100, {3, 10}, gen, torch::kLong);
      auto mask = torch::ones({3, 10}, torch::kLong);
      auto logits = m->forward(ids, mask, position_ids_from_mask(mask));
      torch::log_softmax(logits, -1).select(-1, 7).sum().backward();
      std::map<std::string, torch::Tensor> out;
      for (const auto& p : m->named_parameters())
        if (p.value().requires_grad()) out[p.key()] = p.value().grad();
      return out;
    };
    const auto plain = grads(false), ckpt = grads(true);
    ASSERT_EQ(plain.size(), 2u * 7 * 2);
    for (const auto& [name, g] : plain) {
      const auto& gc = ckpt.at(name);
      ASSERT_TRUE(gc.defined()) << name << " has no gradient with checkpointing, dtype " << dt;
      EXPECT_GT(gc.abs().max().item<double>(), 0.0) << name;
      EXPECT_TRUE(torch::allclose(gc.to(torch::kFloat32), g.to(torch::kFloat32), 1e-2, 1e-4)) << name << " " << dt;
    }
  }
}

TEST(Lora, MergedWeightsGiveTheAdaptedModelsLogitsAndTheBaseWithAdaptersOff) {
  auto base = make_causal_lm(tiny(), 3);
  auto m = make_causal_lm(tiny(), 3);
  add_lora(*m, spec(4), 1);
  randomize_b(m);
  const auto adapted = logits_of(m);
  EXPECT_GT((adapted - logits_of(base)).abs().max().item<double>(), 1e-3);
  // A plain model holding W + B A alpha / r computes the same logits.
  auto merged = make_causal_lm(tiny(), 99);
  {
    torch::NoGradGuard no_grad;
    auto dst = merged->named_parameters();
    const auto weights = merged_lora_parameters(*m);
    EXPECT_EQ(weights.size(), dst.size());
    for (const auto& [name, t] : weights) dst[name].copy_(t);
  }
  EXPECT_LE((logits_of(merged) - adapted).abs().max().item<double>(), 1e-5);
  // Adapters off: the base model exactly.
  set_lora_enabled(*m, false);
  EXPECT_TRUE(torch::equal(logits_of(m), logits_of(base)));
  set_lora_enabled(*m, true);
  EXPECT_TRUE(torch::equal(logits_of(m), adapted));
}

TEST(Lora, TargetAndExcludeModulesSelectProjectionsAndAnUnknownNameIsAnError) {
  auto m = make_causal_lm(tiny(), 3);
  LoraSpec s = spec(2);
  s.target_modules = {"q_proj", "v_proj", "down_proj"};
  s.exclude_modules = {"down_proj"};
  EXPECT_EQ(add_lora(*m, s, 1), 2 * 2);
  auto named = m->named_parameters();
  EXPECT_NE(named.find("model.layers.1.self_attn.v_proj.lora_A.weight"), nullptr);
  EXPECT_EQ(named.find("model.layers.1.self_attn.k_proj.lora_A.weight"), nullptr);
  EXPECT_EQ(named.find("model.layers.1.mlp.down_proj.lora_A.weight"), nullptr);
  auto other = make_causal_lm(tiny(), 3);
  s.target_modules = {"qkv"};
  try {
    add_lora(*other, s, 1);
    ADD_FAILURE() << "accepted target_modules=qkv";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find("actor_rollout_ref.model.target_modules"), std::string::npos) << e.what();
  }
}

// PEFT's files: adapter_config.json with r / lora_alpha / target_modules and the tensors named
// base_model.model.<name>; loading them into fresh adapters restores them exactly.
TEST(Lora, PeftAdapterRoundTrip) {
  const auto dir = (fs::path(::testing::TempDir()) / ("lora_test_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  auto m = make_causal_lm(tiny(), 3);
  const auto s = spec(4);
  add_lora(*m, s, 1);
  randomize_b(m);
  save_peft_adapter(m, s, dir, "/models/base");
  std::ifstream in(fs::path(dir) / "adapter_config.json");
  const auto config = nlohmann::json::parse(in);
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["r"], 4);
  EXPECT_EQ(config["lora_alpha"], 8.0);
  EXPECT_EQ(config["target_modules"], "all-linear");
  EXPECT_EQ(config["base_model_name_or_path"], "/models/base");
  const auto file = safetensors::Checkpoint::open_file((fs::path(dir) / "adapter_model.safetensors").string());
  EXPECT_TRUE(file.contains("base_model.model.model.layers.1.mlp.up_proj.lora_B.weight"));
  EXPECT_EQ(file.names().size(), 2u * 2 * 7);

  auto back = make_causal_lm(tiny(), 3);
  add_lora(*back, s, /*seed=*/77);  // different A: the load must overwrite it
  load_peft_adapter(back, dir);
  EXPECT_TRUE(torch::equal(logits_of(back), logits_of(m)));

  auto small = make_causal_lm(tiny(), 3);
  add_lora(*small, spec(2), 1);
  try {
    load_peft_adapter(small, dir);
    ADD_FAILURE() << "loaded an r=4 adapter into r=2 adapters";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lora_rank"), std::string::npos) << e.what();
  }
}

// The HF export of an adapted model holds the merged weights under the base names only.
TEST(Lora, HfExportIsTheMergedModel) {
  const auto dir = (fs::path(::testing::TempDir()) / ("lora_hf_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  auto m = make_causal_lm(tiny(), 3);
  add_lora(*m, spec(4), 1);
  randomize_b(m);
  save_hf(m, dir, "");
  auto back = load_causal_lm(dir, torch::kCPU);
  EXPECT_LE((logits_of(back) - logits_of(m)).abs().max().item<double>(), 1e-5);
}

}  // namespace
}  // namespace verl::trainer

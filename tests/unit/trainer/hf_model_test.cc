// HF model directories: each architecture's config.json gives the model transformers builds
// (parameter names and shapes, biases, q/k norms, head_dim, llama3 RoPE, sliding window), a
// save then load is bit-exact (f32 and bf16, one file and shards), errors name the file and the
// key or tensor, and hub ids resolve through a Hugging Face cache.
#include "trainer/hf_model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "trainer/safetensors.h"

namespace verl::trainer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("verl_hf_model_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  c10::optional<std::string> old_;
};

json base_config(const std::string& arch) {
  return {{"architectures", {arch}}, {"vocab_size", 40},          {"hidden_size", 32},
          {"intermediate_size", 48}, {"num_hidden_layers", 2},    {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"max_position_embeddings", 64}, {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},   {"hidden_act", "silu"},      {"tie_word_embeddings", false}};
}

void write_config(const std::string& dir, const json& j) {
  fs::create_directories(dir);
  std::ofstream(fs::path(dir) / "config.json") << j.dump(2);
}

ModelConfig config_of(const json& j) {
  TempDir dir;
  write_config(dir.str(), j);
  return read_hf_config(dir.str());
}

template <typename F>
void expect_invalid(F f, std::initializer_list<std::string> needles) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig) << e.what();
    const std::string all = std::string(e.what()) + " | hint: " + e.hint();
    for (const auto& n : needles) EXPECT_NE(all.find(n), std::string::npos) << all << "\n  lacks: " << n;
  }
}

std::map<std::string, std::vector<int64_t>> shapes(const torch::nn::Module& m) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& p : m.named_parameters()) out[p.key()] = p.value().sizes().vec();
  return out;
}

torch::Tensor logits_of(CausalLm& m, int64_t vocab, uint64_t seed = 1) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto ids = torch::randint(0, vocab, {2, 9}, gen, torch::kLong);
  auto mask = torch::ones_like(ids);
  torch::NoGradGuard g;
  return m->forward(ids, mask, position_ids_from_mask(mask));
}

void expect_same_parameters(const torch::nn::Module& a, const torch::nn::Module& b) {
  auto pb = b.named_parameters();
  ASSERT_EQ(a.named_parameters().size(), pb.size());
  for (const auto& p : a.named_parameters()) {
    ASSERT_NE(pb.find(p.key()), nullptr) << p.key();
    EXPECT_EQ(p.value().scalar_type(), pb[p.key()].scalar_type()) << p.key();
    EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
  }
}

TEST(HfModel, Qwen2HasQkvBiasesOnly) {
  auto c = config_of(base_config("Qwen2ForCausalLM"));
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.attention_out_bias);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  auto m = make_causal_lm(c, 1);
  auto s = shapes(*m);
  EXPECT_EQ(s.at("model.layers.0.self_attn.q_proj.bias"), (std::vector<int64_t>{32}));
  EXPECT_EQ(s.at("model.layers.1.self_attn.k_proj.bias"), (std::vector<int64_t>{16}));
  EXPECT_EQ(s.count("model.layers.0.self_attn.o_proj.bias"), 0u);
  EXPECT_EQ(s.count("model.layers.0.mlp.gate_proj.bias"), 0u);
  EXPECT_EQ(s.at("lm_head.weight"), (std::vector<int64_t>{40, 32}));
  EXPECT_EQ(logits_of(m, 40).sizes(), (std::vector<int64_t>{2, 9, 40}));
  EXPECT_EQ(hf_architecture_for(c), "Qwen2ForCausalLM");
}

TEST(HfModel, Qwen3HasPerHeadQkNormsAndItsOwnHeadDim) {
  auto j = base_config("Qwen3ForCausalLM");
  j["head_dim"] = 16;  // 4 heads x 16 = 64 != hidden 32
  auto c = config_of(j);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.head_dim(), 16);
  EXPECT_FALSE(c.attention_bias);
  auto m = make_causal_lm(c, 1);
  auto s = shapes(*m);
  EXPECT_EQ(s.at("model.layers.0.self_attn.q_norm.weight"), (std::vector<int64_t>{16}));
  EXPECT_EQ(s.at("model.layers.1.self_attn.k_norm.weight"), (std::vector<int64_t>{16}));
  EXPECT_EQ(s.at("model.layers.0.self_attn.q_proj.weight"), (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(s.at("model.layers.0.self_attn.k_proj.weight"), (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(s.at("model.layers.0.self_attn.o_proj.weight"), (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(s.count("model.layers.0.self_attn.q_proj.bias"), 0u);
  EXPECT_EQ(logits_of(m, 40).sizes(), (std::vector<int64_t>{2, 9, 40}));
  // The norms act: scaling q_norm changes the logits.
  auto before = logits_of(m, 40);
  {
    torch::NoGradGuard g;
    m->named_parameters()["model.layers.0.self_attn.q_norm.weight"].mul_(3);
  }
  EXPECT_FALSE(torch::allclose(before, logits_of(m, 40)));
  // Absent head_dim is transformers' Qwen3 default, 128.
  EXPECT_EQ(config_of(base_config("Qwen3ForCausalLM")).head_dim(), 128);
}

TEST(HfModel, LlamaBiasesFollowAttentionBiasAndMlpBias) {
  auto j = base_config("LlamaForCausalLM");
  j.erase("num_key_value_heads");  // Llama: defaults to num_attention_heads
  j["attention_bias"] = true;
  j["mlp_bias"] = true;
  j["tie_word_embeddings"] = true;
  auto c = config_of(j);
  EXPECT_EQ(c.num_key_value_heads, 4);
  auto s = shapes(*make_causal_lm(c, 1));
  for (const char* n : {"model.layers.0.self_attn.q_proj.bias", "model.layers.0.self_attn.o_proj.bias",
                        "model.layers.0.mlp.gate_proj.bias", "model.layers.0.mlp.down_proj.bias"}) {
    EXPECT_EQ(s.count(n), 1u) << n;
  }
  EXPECT_EQ(s.count("lm_head.weight"), 0u);
  EXPECT_EQ(hf_architecture_for(c), "LlamaForCausalLM");
}

TEST(HfModel, ArchitectureDefaultsAreTransformers) {
  auto j = base_config("MistralForCausalLM");
  j.erase("num_key_value_heads");
  j.erase("tie_word_embeddings");
  j.erase("rope_theta");
  j.erase("max_position_embeddings");
  j["num_attention_heads"] = 16;
  auto c = config_of(j);
  EXPECT_EQ(c.num_key_value_heads, 8);  // MistralConfig's default
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.max_position_embeddings, 4096 * 32);
  EXPECT_EQ(c.sliding_window, 4096);  // absent key: MistralConfig's 4096
  j["sliding_window"] = nullptr;
  EXPECT_EQ(config_of(j).sliding_window, 0);
  j["max_position_embeddings"] = 64;
  j["sliding_window"] = 4096;  // at least the context: no effect, so none
  EXPECT_EQ(config_of(j).sliding_window, 0);
}

TEST(HfModel, MistralSlidingWindowHidesFarTokens) {
  auto j = base_config("MistralForCausalLM");
  j["sliding_window"] = 3;
  auto c = config_of(j);
  ASSERT_EQ(c.sliding_window, 3);
  c.initializer_range = 0.2;
  auto m = make_causal_lm(c, 2);
  auto ids = torch::randint(0, 40, {1, 12}, at::make_generator<at::CPUGeneratorImpl>(3), torch::kLong);
  auto changed = ids.clone();
  changed[0][0] = (ids[0][0].item<int64_t>() + 1) % 40;
  auto mask = torch::ones_like(ids);
  auto pos = position_ids_from_mask(mask);
  torch::NoGradGuard g;
  auto a = m->forward(ids, mask, pos), b = m->forward(changed, mask, pos);
  // Two layers of a 3-token window: position p sees tokens down to p - 4.
  EXPECT_FALSE(torch::allclose(a.narrow(1, 4, 1), b.narrow(1, 4, 1)));
  EXPECT_TRUE(torch::allclose(a.narrow(1, 5, 7), b.narrow(1, 5, 7), 1e-6, 1e-7));
  // Decoding with the KV cache sees the same window.
  KvCache cache;
  std::vector<torch::Tensor> steps{m->forward(ids.narrow(1, 0, 6), mask.narrow(1, 0, 6), pos.narrow(1, 0, 6), &cache)};
  for (int64_t t = 6; t < 12; ++t) {
    steps.push_back(m->forward(ids.narrow(1, t, 1), mask.narrow(1, 0, t + 1), pos.narrow(1, t, 1), &cache));
  }
  EXPECT_TRUE(torch::allclose(torch::cat(steps, 1), a, 1e-4, 1e-5));
}

TEST(HfModel, Llama3RopeScalingMatchesTheFormula) {
  auto j = base_config("LlamaForCausalLM");
  j["hidden_size"] = 256;  // head_dim 64: 32 frequencies spanning all three bands
  j["rope_theta"] = 500000.0;
  j["max_position_embeddings"] = 131072;
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  auto c = config_of(j);
  ASSERT_EQ(c.rope_scaling.type, RopeScalingType::kLlama3);
  auto got = rope_inv_freq(c);
  ASSERT_EQ(got.size(0), 32);
  int low = 0, mid = 0, high = 0;
  for (int i = 0; i < 32; ++i) {
    // Written out from Meta's reference (apply_scaling in llama/model.py), scalar by scalar.
    const double freq = 1.0 / std::pow(500000.0, (2.0 * i) / 64.0);
    const double wavelen = 2 * M_PI / freq;
    double want;
    if (wavelen < 8192.0 / 4.0) {
      want = freq, ++high;
    } else if (wavelen > 8192.0 / 1.0) {
      want = freq / 8.0, ++low;
    } else {
      const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      want = (1 - smooth) * freq / 8.0 + smooth * freq, ++mid;
    }
    EXPECT_NEAR(got[i].item<double>(), want, want * 1e-6) << i;
  }
  EXPECT_GT(low, 0);
  EXPECT_GT(mid, 0);
  EXPECT_GT(high, 0);
  // Without scaling, the unscaled frequencies; "type" is the old spelling of "rope_type".
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  auto lin = config_of(j);
  EXPECT_EQ(lin.rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_NEAR(rope_inv_freq(lin)[3].item<double>(), std::pow(500000.0, -6.0 / 64) / 2, 1e-7);
  // transformers 5's spelling: rope_parameters holds theta and type.
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000.0}};
  auto v5 = config_of(j);
  EXPECT_EQ(v5.rope_theta, 1000.0);
  EXPECT_EQ(v5.rope_scaling.type, RopeScalingType::kNone);
}

TEST(HfModel, UnsupportedConfigsNameFileAndKey) {
  TempDir dir;
  const std::string file = dir / "config.json";
  auto j = base_config("GPT2LMHeadModel");
  write_config(dir.str(), j);
  expect_invalid([&] { read_hf_config(dir.str()); }, {file, "'architectures'", "GPT2LMHeadModel", "Qwen3ForCausalLM"});
  j = base_config("LlamaForCausalLM");
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  write_config(dir.str(), j);
  expect_invalid([&] { read_hf_config(dir.str()); }, {file, "rope_scaling.rope_type", "yarn", "llama3"});
  j = base_config("LlamaForCausalLM");
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  write_config(dir.str(), j);
  expect_invalid([&] { read_hf_config(dir.str()); }, {file, "rope_scaling.low_freq_factor", "missing"});
  j = base_config("LlamaForCausalLM");
  j["hidden_act"] = "gelu";
  write_config(dir.str(), j);
  expect_invalid([&] { read_hf_config(dir.str()); }, {file, "'hidden_act'", "silu"});
  j = base_config("Qwen2ForCausalLM");
  j["use_sliding_window"] = true;
  j["sliding_window"] = 16;
  j["max_window_layers"] = 1;
  write_config(dir.str(), j);
  expect_invalid([&] { read_hf_config(dir.str()); }, {file, "'use_sliding_window'"});
  j = base_config("LlamaForCausalLM");
  j.erase("hidden_size");
  write_config(dir.str(), j);
  expect_invalid([&] { read_hf_config(dir.str()); }, {file, "'hidden_size'", "missing"});
  expect_invalid([&] { read_hf_config((dir / "nowhere")); }, {"nowhere", "config.json"});
}

// Round trips: save_hf then load_causal_lm gives the same parameters bit for bit.
class HfRoundTrip : public ::testing::TestWithParam<std::tuple<std::string, torch::Dtype, int64_t>> {};

TEST_P(HfRoundTrip, SaveThenLoadIsBitExact) {
  const auto& [arch, dtype, shard_bytes] = GetParam();
  TempDir src, out;
  auto j = base_config(arch);
  if (arch == "Qwen3ForCausalLM") j["head_dim"] = 16;
  if (arch == "LlamaForCausalLM") {
    j["tie_word_embeddings"] = true;
    j["rope_scaling"] = {{"rope_type", "llama3"},           {"factor", 8.0}, {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 16}};
  }
  if (arch == "MistralForCausalLM") j["sliding_window"] = 5;
  j["bos_token_id"] = 1;  // a key verlctl does not model: kept by the export
  write_config(src.str(), j);
  std::ofstream(src / "tokenizer.json") << R"({"model": {}})";
  std::ofstream(src / "tokenizer_config.json") << "{}";
  auto model = make_causal_lm(read_hf_config(src.str()), 5, torch::kCPU, dtype);
  SaveHfOptions o;
  o.dtype = dtype;
  o.max_shard_bytes = shard_bytes;
  save_hf(model, out.str(), src.str(), o);

  EXPECT_EQ(fs::exists(out / "model.safetensors.index.json"), shard_bytes < 1'000'000);
  EXPECT_TRUE(fs::exists(out / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(out / "tokenizer_config.json"));
  auto cj = json::parse(std::ifstream(out / "config.json"));
  EXPECT_EQ(cj["architectures"][0], arch);
  EXPECT_EQ(cj["bos_token_id"], 1);
  EXPECT_EQ(cj["torch_dtype"], dtype == torch::kBFloat16 ? "bfloat16" : "float32");
  EXPECT_EQ(cj["dtype"], cj["torch_dtype"]);
  EXPECT_EQ(cj["rope_parameters"]["rope_theta"], cj["rope_theta"]);
  if (arch == "LlamaForCausalLM") {
    EXPECT_EQ(cj["rope_parameters"]["rope_type"], "llama3");
    EXPECT_EQ(cj["rope_scaling"]["original_max_position_embeddings"], 16);
  } else {
    EXPECT_TRUE(cj["rope_scaling"].is_null());
  }
  EXPECT_EQ(read_hf_dtype(out.str()), dtype);

  auto loaded = load_causal_lm(out.str(), torch::kCPU, dtype, /*compute_dtype=*/torch::kFloat32);
  expect_same_parameters(*model, *loaded);
  const auto& a = model->config();
  const auto& b = loaded->config();
  EXPECT_EQ(a.head_dim(), b.head_dim());
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.attention_out_bias, b.attention_out_bias);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.rope_scaling.type, b.rope_scaling.type);
  EXPECT_TRUE(torch::equal(rope_inv_freq(a), rope_inv_freq(b)));
  EXPECT_TRUE(torch::equal(logits_of(model, 40), logits_of(loaded, 40)));
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, HfRoundTrip,
    ::testing::Values(std::make_tuple("Qwen2ForCausalLM", torch::kFloat32, int64_t{5'000'000'000}),
                      std::make_tuple("Qwen2ForCausalLM", torch::kBFloat16, int64_t{4096}),
                      std::make_tuple("Qwen3ForCausalLM", torch::kFloat32, int64_t{4096}),
                      std::make_tuple("Qwen3ForCausalLM", torch::kBFloat16, int64_t{5'000'000'000}),
                      std::make_tuple("LlamaForCausalLM", torch::kFloat32, int64_t{5'000'000'000}),
                      std::make_tuple("LlamaForCausalLM", torch::kBFloat16, int64_t{4096}),
                      std::make_tuple("MistralForCausalLM", torch::kFloat32, int64_t{4096})));

TEST(HfModel, LoadingIntoAnotherDtypeConvertsOnTheWay) {
  TempDir dir;
  write_config(dir.str(), base_config("Qwen2ForCausalLM"));
  auto model = make_causal_lm(read_hf_config(dir.str()), 5);
  save_hf(model, dir.str(), "");
  auto bf = load_causal_lm(dir.str(), torch::kCPU, torch::kBFloat16);
  EXPECT_EQ(bf->config().compute_dtype, torch::kBFloat16);
  for (const auto& p : bf->named_parameters()) {
    EXPECT_EQ(p.value().scalar_type(), torch::kBFloat16);
    EXPECT_TRUE(torch::equal(p.value(), model->named_parameters()[p.key()].to(torch::kBFloat16))) << p.key();
  }
  auto diff = (logits_of(bf, 40) - logits_of(model, 40)).abs().max().item<double>();
  EXPECT_LT(diff, 0.05);
}

TEST(HfModel, MissingAndUnexpectedTensorsAreNamed) {
  TempDir dir;
  write_config(dir.str(), base_config("Qwen2ForCausalLM"));
  auto model = make_causal_lm(read_hf_config(dir.str()), 5);
  std::vector<safetensors::NamedTensor> tensors;
  for (const auto& p : model->named_parameters()) {
    if (p.key() != "model.layers.1.mlp.up_proj.weight") tensors.push_back({p.key(), p.value()});
  }
  safetensors::write_checkpoint(dir.str(), tensors);
  expect_invalid([&] { load_causal_lm(dir.str(), torch::kCPU); },
                 {dir / "model.safetensors", "'model.layers.1.mlp.up_proj.weight'"});

  tensors.push_back({"model.layers.1.mlp.up_proj.weight", model->model->named_parameters()["layers.1.mlp.up_proj.weight"]});
  tensors.push_back({"model.rotary_emb.inv_freq", torch::ones({4})});  // ignorable, as transformers
  tensors.push_back({"model.layers.0.self_attn.extra.weight", torch::ones({4})});
  safetensors::write_checkpoint(dir.str(), tensors);
  expect_invalid([&] { load_causal_lm(dir.str(), torch::kCPU); },
                 {dir / "model.safetensors", "'model.layers.0.self_attn.extra.weight'"});

  tensors.pop_back();
  tensors[0].tensor = torch::ones({3, 3});  // embed_tokens with the wrong shape
  safetensors::write_checkpoint(dir.str(), tensors);
  expect_invalid([&] { load_causal_lm(dir.str(), torch::kCPU); }, {"'model.embed_tokens.weight'", "[3, 3]", "[40, 32]"});
}

TEST(HfModel, CriticTakesTheBackboneAndASeededFreshHead) {
  TempDir dir;
  write_config(dir.str(), base_config("Qwen2ForCausalLM"));
  auto policy = make_causal_lm(read_hf_config(dir.str()), 5);
  save_hf(policy, dir.str(), "");
  auto a = load_critic(dir.str(), torch::kCPU, 11), b = load_critic(dir.str(), torch::kCPU, 11);
  auto other = load_critic(dir.str(), torch::kCPU, 12);
  EXPECT_TRUE(torch::equal(a->model->norm->weight, policy->model->norm->weight));
  EXPECT_TRUE(torch::equal(a->model->embed_tokens->weight, policy->model->embed_tokens->weight));
  EXPECT_EQ(a->score->weight.sizes(), (std::vector<int64_t>{1, 32}));
  EXPECT_TRUE(torch::equal(a->score->weight, b->score->weight));
  EXPECT_FALSE(torch::equal(a->score->weight, other->score->weight));
  EXPECT_NEAR(a->score->weight.std().item<double>(), 0.02, 0.01);
  EXPECT_FALSE(a->score->bias.defined());

  // A directory holding a saved critic's score.weight/score.bias gives those back.
  std::vector<safetensors::NamedTensor> tensors;
  for (const auto& p : a->named_parameters()) tensors.push_back({p.key(), p.value()});
  tensors.push_back({"score.bias", torch::full({1}, 0.5f)});
  safetensors::write_checkpoint(dir.str(), tensors);
  auto saved = load_critic(dir.str(), torch::kCPU, 99);
  EXPECT_TRUE(torch::equal(saved->score->weight, a->score->weight));
  ASSERT_TRUE(saved->score->bias.defined());
  EXPECT_EQ(saved->score->bias.item<float>(), 0.5f);
}

TEST(HfModel, ConstructionAllocatesWithoutInitialising) {
  // ~170M parameters (680 MB in fp32): an init pass would take seconds and touch every page.
  ModelConfig c;
  c.vocab_size = 32000;
  c.hidden_size = 1024;
  c.intermediate_size = 2816;
  c.num_hidden_layers = 8;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 4;
  c.tie_word_embeddings = false;
  const auto start = std::chrono::steady_clock::now();
  CausalLm m(c);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(count_parameters(*m), 150'000'000);
  EXPECT_LT(secs, 1.0);
}

TEST(HfModel, HubIdsResolveThroughTheHfCache) {
  TempDir home;
  ScopedEnv hf_home("HF_HOME", home / "hf");
  ScopedEnv no_hub_cache("HF_HUB_CACHE", "");
  const fs::path repo = fs::path(home / "hf") / "hub" / "models--Qwen--Qwen2.5-0.5B";
  fs::create_directories(repo / "snapshots" / "aaa");
  fs::create_directories(repo / "snapshots" / "bbb");
  fs::last_write_time(repo / "snapshots" / "aaa", fs::file_time_type::clock::now() - std::chrono::hours(1));
  // Without refs/main: the newest snapshot.
  EXPECT_EQ(resolve_model_dir("Qwen/Qwen2.5-0.5B", "actor_rollout_ref.model.path"), (repo / "snapshots" / "bbb").string());
  fs::create_directories(repo / "refs");
  std::ofstream(repo / "refs" / "main") << "aaa\n";
  EXPECT_EQ(resolve_model_dir("Qwen/Qwen2.5-0.5B", "actor_rollout_ref.model.path"), (repo / "snapshots" / "aaa").string());

  expect_invalid([&] { resolve_model_dir("Qwen/Qwen3-8B", "critic.model.path"); },
                 {"'critic.model.path'", "Qwen/Qwen3-8B", "models--Qwen--Qwen3-8B/snapshots",
                  "huggingface-cli download Qwen/Qwen3-8B"});
  // A local directory wins, relative or under ~.
  ScopedEnv fake_home("HOME", home.str());
  fs::create_directories(home / "models/mine");
  EXPECT_EQ(resolve_model_dir("~/models/mine", "k"), home / "models/mine");
  expect_invalid([&] { resolve_model_dir("./no/such/dir", "k"); }, {"'k'", "no directory"});
}

}  // namespace
}  // namespace verl::trainer

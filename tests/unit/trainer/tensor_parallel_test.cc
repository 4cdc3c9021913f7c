// The tensor-parallel rollout (trainer/tensor_parallel.h) over Gloo ranks as threads: the
// shards' logits equal the whole model's, resharding is exact (the shards put back together are
// the training weights), and a TP group samples the tokens one rank holding the whole model does.
#include "trainer/tensor_parallel.h"

#include <gtest/gtest.h>

#include <mutex>

#include "common/error.h"
#include "tests/testing/tiny_model.h"
#include "tests/unit/trainer/rank_harness.h"
#include "trainer/native_rollout.h"
#include "trainer/slot_rollout.h"

namespace verl::trainer {
namespace {

using testing::run_ranks;

ModelConfig config(int64_t heads, int64_t kv_heads, bool bias) {
  // A vocabulary of 37, not a multiple of 2 or 4: the last rank's vocabulary rows are padding.
  ModelConfig c = verl::testing::tiny_model_config(37);
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.attention_bias = bias;          // q/k/v biases (Qwen2)
  c.attention_out_bias = bias;      // o_proj bias: row-parallel, added once
  c.mlp_bias = bias;                // down_proj bias likewise
  c.tie_word_embeddings = !bias;    // tied and untied LM heads
  c.max_position_embeddings = 64;
  return c;
}

CausalLm full_model(const ModelConfig& c) {
  auto m = make_causal_lm(c, 11);
  // Non-zero biases, so that adding a row-parallel bias twice would show.
  torch::NoGradGuard no_grad;
  for (auto& p : m->named_parameters()) {
    if (p.key().find(".bias") != std::string::npos) p.value().normal_(0, 0.1);
  }
  return m;
}

NamedTensors named(const CausalLm& m) {
  NamedTensors out;
  for (const auto& p : m->named_parameters()) out.emplace_back(p.key(), p.value().detach());
  return out;
}

std::vector<std::vector<int64_t>> prompts() { return {{1, 5, 6, 7}, {1, 9}, {1, 36, 8}, {1, 4, 5, 6, 30}}; }

// Each rank's NativeRollout over its TP group of `tp` consecutive ranks.
std::unique_ptr<NativeRollout> tp_rollout(Distributed& d, const ModelConfig& c, int64_t tp) {
  std::vector<int> ranks;
  for (int i = 0; i < tp; ++i) ranks.push_back(d.rank() / tp * tp + i);
  auto group = d.subgroup(ranks, "rollout_tp");
  auto layout = TpLayout::of(c, tp, d.rank() % tp);
  return std::make_unique<NativeRollout>(c, torch::kCPU, std::make_unique<TensorParallel>(std::move(group), layout));
}

struct Case {
  int64_t tp, heads, kv_heads;
  bool bias;
};

class TensorParallelRollout : public ::testing::TestWithParam<Case> {};

TEST_P(TensorParallelRollout, LogitsEqualTheWholeModels) {
  const auto p = GetParam();
  const auto c = config(p.heads, p.kv_heads, p.bias);
  auto whole = full_model(c);
  const auto ids = torch::tensor({{1, 5, 6, 7, 36, 2}, {0, 0, 1, 9, 3, 4}}, torch::kLong);
  const auto mask = (ids != 0).to(torch::kLong);
  torch::Tensor expected;
  {
    torch::NoGradGuard no_grad;
    expected = whole->forward(ids, mask, position_ids_from_mask(mask));
  }
  run_ranks(static_cast<int>(p.tp), [&](Distributed& d) {
    auto engine = tp_rollout(d, c, p.tp);
    engine->load_weights(named(whole));
    // Each rank holds 1/tp of the attention and MLP weights.
    auto& attn = *engine->model()->model->layers->at<DecoderLayerImpl>(0).self_attn;
    EXPECT_EQ(attn.q_proj->weight.size(0), c.num_attention_heads * c.head_dim() / p.tp);
    torch::NoGradGuard no_grad;
    auto got = engine->model()->forward(ids, mask, position_ids_from_mask(mask));
    ASSERT_EQ(got.sizes(), expected.sizes());
    EXPECT_TRUE(torch::allclose(got, expected, 1e-5, 1e-5)) << (got - expected).abs().max().item<double>();
  });
}

TEST_P(TensorParallelRollout, ReshardedWeightsPutTogetherAreTheTrainingWeights) {
  const auto p = GetParam();
  const auto c = config(p.heads, p.kv_heads, p.bias);
  auto whole = full_model(c);
  std::mutex mu;
  std::vector<std::map<std::string, torch::Tensor>> shards(static_cast<size_t>(p.tp));
  run_ranks(static_cast<int>(p.tp), [&](Distributed& d) {
    auto engine = tp_rollout(d, c, p.tp);
    engine->load_weights(named(whole));
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& q : engine->model()->named_parameters()) shards[static_cast<size_t>(d.rank())][q.key()] = q.value().clone();
  });
  const int64_t d = c.head_dim();
  for (const auto& [name, full] : named(whole)) {
    std::vector<torch::Tensor> parts;
    for (const auto& s : shards) parts.push_back(s.at(name));
    torch::Tensor joined;
    if (name.find("o_proj.weight") != std::string::npos || name.find("down_proj.weight") != std::string::npos) {
      joined = torch::cat(parts, 1);
    } else if (name.find("o_proj.bias") != std::string::npos || name.find("down_proj.bias") != std::string::npos) {
      joined = torch::stack(parts).sum(0);  // rank 0's bias, zeros elsewhere
      for (size_t r = 1; r < parts.size(); ++r) EXPECT_EQ(parts[r].abs().max().item<float>(), 0.0f) << name;
    } else if (name.find("k_proj") != std::string::npos || name.find("v_proj") != std::string::npos) {
      if (c.num_key_value_heads >= p.tp) {
        joined = torch::cat(parts, 0);
      } else {  // replicated: rank r holds KV head r * kv / tp
        for (int64_t r = 0; r < p.tp; ++r) {
          const int64_t kv = r * c.num_key_value_heads / p.tp;
          EXPECT_TRUE(torch::equal(parts[static_cast<size_t>(r)], full.narrow(0, kv * d, d))) << name << " rank " << r;
        }
        continue;
      }
    } else if (name.find("layernorm") != std::string::npos || name == "model.norm.weight") {
      for (const auto& part : parts) EXPECT_TRUE(torch::equal(part, full)) << name;
      continue;
    } else {
      joined = torch::cat(parts, 0);
      if (name.find("embed_tokens") != std::string::npos || name.find("lm_head") != std::string::npos) {
        EXPECT_EQ(joined.abs().narrow(0, c.vocab_size, joined.size(0) - c.vocab_size).sum().item<float>(), 0.0f);
        joined = joined.narrow(0, 0, c.vocab_size);
      }
    }
    EXPECT_TRUE(torch::equal(joined, full)) << name;  // exact: slices, no arithmetic
  }
}

TEST_P(TensorParallelRollout, SamplesTheTokensOfOneRankHoldingTheWholeModel) {
  const auto p = GetParam();
  const auto c = config(p.heads, p.kv_heads, p.bias);
  auto whole = full_model(c);
  GenerateOptions o;
  o.sampling.do_sample = true;
  o.sampling.temperature = 1.0;
  o.sampling.top_p = 0.9;
  o.max_response_length = 10;
  o.stop_token_ids = {2};
  std::vector<uint64_t> seeds;
  for (size_t i = 0; i < prompts().size(); ++i) seeds.push_back(row_seed(5, 1, i));
  NativeRollout one(c, torch::kCPU);
  one.load_weights(named(whole));
  const auto expected = one.generate(prompts(), o, seeds);
  run_ranks(static_cast<int>(p.tp), [&](Distributed& d) {
    auto engine = tp_rollout(d, c, p.tp);
    engine->load_weights(named(whole));
    const auto got = engine->generate(prompts(), o, seeds);
    EXPECT_TRUE(torch::equal(got.responses, expected.responses)) << got.responses << expected.responses;
    EXPECT_EQ(got.response_lengths, expected.response_lengths);
    EXPECT_TRUE(torch::allclose(got.rollout_log_probs, expected.rollout_log_probs, 1e-5, 1e-5));
  });
}

// The slot engine (rollout.name vllm / sglang) cut the same way: its tokens are those of the
// slot engine holding the whole model, with few slots so that sequences wait and refill.
TEST_P(TensorParallelRollout, TheSlotEngineSamplesAsItsWholeModelDoes) {
  const auto p = GetParam();
  const auto c = config(p.heads, p.kv_heads, p.bias);
  auto whole = full_model(c);
  GenerateOptions o;
  o.sampling.do_sample = true;
  o.sampling.temperature = 1.0;
  o.max_response_length = 10;
  o.stop_token_ids = {2};
  std::vector<uint64_t> seeds;
  for (size_t i = 0; i < prompts().size(); ++i) seeds.push_back(row_seed(9, 2, i));
  SlotRolloutOptions so;
  so.max_num_seqs = 2;
  SlotRollout one(c, torch::kCPU, so);
  one.load_weights(named(whole));
  const auto expected = one.generate(prompts(), o, seeds);
  run_ranks(static_cast<int>(p.tp), [&](Distributed& d) {
    std::vector<int> ranks;
    for (int i = 0; i < p.tp; ++i) ranks.push_back(i);
    auto tp = std::make_unique<TensorParallel>(d.subgroup(ranks, "slot_tp"), TpLayout::of(c, p.tp, d.rank()));
    SlotRollout engine(c, torch::kCPU, so, std::move(tp));
    engine.load_weights(named(whole));
    const auto got = engine.generate(prompts(), o, seeds);
    EXPECT_TRUE(torch::equal(got.responses, expected.responses)) << got.responses << expected.responses;
    EXPECT_TRUE(torch::allclose(got.rollout_log_probs, expected.rollout_log_probs, 1e-5, 1e-5));
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, TensorParallelRollout,
                         ::testing::Values(Case{2, 4, 2, false},   // KV heads split
                                           Case{2, 4, 2, true},    // biases, untied head
                                           Case{2, 4, 1, true},    // 1 KV head replicated on 2 ranks
                                           Case{4, 4, 2, false}),  // 2 KV heads replicated on 4 ranks
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return "tp" + std::to_string(i.param.tp) + "_heads" + std::to_string(i.param.heads) + "_kv" +
                                  std::to_string(i.param.kv_heads) + (i.param.bias ? "_bias" : "");
                         });

TEST(TensorParallel, AModelThatCannotBeCutIsAnErrorNamingTheKey) {
  auto c = config(4, 2, false);
  c.num_attention_heads = 6;
  c.num_key_value_heads = 3;
  for (int64_t tp : {4, 2}) {  // 6 heads over 4; 3 KV heads over 2
    try {
      TpLayout::of(c, tp, 0);
      ADD_FAILURE() << "no throw for tp " << tp;
    } catch (const verl::Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
      EXPECT_NE(std::string(e.what()).find(kTpKey), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(TpLayout::of(c, 3, 2).kv_begin, 2);  // 6 heads / 3 KV heads over 3 ranks: one each
}

}  // namespace
}  // namespace verl::trainer

// FSDP (trainer/fsdp.h) against plain data parallelism on the same ranks and data: the sharded
// engine must train the same model (to float summation order), hold about 1/N of the state per
// rank, give the same numbers with offload, and resume from shards saved on another world size;
// hybrid sharding (fsdp_size=2 on 4 ranks) the same, with 1/fsdp_size of the state per rank.
// Ranks are threads over Gloo (rank_harness.h).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/error.h"
#include "trainer/distributed.h"
#include "trainer/minibatch_update.h"
#include "trainer/model.h"
#include "trainer/module_engine.h"
#include "tests/unit/trainer/rank_harness.h"

namespace verl::trainer {
namespace {
namespace fs = std::filesystem;

constexpr int64_t kRows = 8;  // global batch
constexpr int64_t kLen = 12;

ModelConfig tiny() {
  ModelConfig c;  // vocab 100, hidden 64, 2 layers, 4 heads / 2 kv heads
  c.tie_word_embeddings = false;
  return c;
}

// The global batch: token ids and a mask with some left padding, the same on every rank.
TensorMap global_batch() {
  auto gen = at::detail::createCPUGenerator(1234);
  auto ids = torch::randint(1, 100, {kRows, kLen}, gen, torch::kLong);
  auto mask = torch::ones({kRows, kLen}, torch::kLong);
  for (int64_t r = 0; r < kRows; r += 3) mask[r].narrow(0, 0, 1 + r % 4).zero_();
  return {{"input_ids", ids}, {"attention_mask", mask}, {"position_ids", position_ids_from_mask(mask)}};
}

struct RunOptions {
  bool sharded = true;
  FsdpConfig fsdp;
  bool checkpointing = false;
  SequenceLayout layout = SequenceLayout::kPadded;
  int steps = 3;
  bool lora = false;  // adapters r=4 on every projection, the base frozen
  bool sleep_between_steps = false;  // ModuleEngine::sleep and wake after every step
  torch::Dtype compute_dtype = torch::kFloat32;  // the parameters stay fp32 either way
};

struct RunResult {
  std::vector<double> losses;                  // per step, rank 0's
  std::vector<double> grad_norms;               // per step, the group's
  std::map<std::string, torch::Tensor> params;  // full, after the steps
  int64_t state_bytes = 0;                      // rank 0's resident state
  int64_t awake_device_bytes = 0;               // rank 0's state on the device before its last sleep
  int64_t asleep_device_bytes = -1;             // ... and while asleep
};

// Next-token cross-entropy over real tokens, scaled for accumulation.
torch::Tensor lm_loss(CausalLm& model, const MicroBatch& mb, SequenceLayout layout) {
  const auto& d = mb.data;
  auto hidden = backbone_hidden(model->model, d.at("input_ids"), d.at("attention_mask"), d.at("position_ids"), layout);
  auto logits = model->logits(hidden).narrow(1, 0, kLen - 1);
  auto target = d.at("input_ids").narrow(1, 1, kLen - 1);
  auto m = d.at("attention_mask").narrow(1, 1, kLen - 1).to(torch::kFloat32);
  auto nll = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), target.reshape({-1}),
                                                  torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  return (nll * m.reshape({-1})).sum() / m.sum() * (static_cast<double>(mb.rows) / static_cast<double>(mb.mini_rows));
}

struct Trained {
  CausalLm model{nullptr};
  std::unique_ptr<ParallelStrategy> strategy;
  std::unique_ptr<ModuleEngine> engine;
  std::unique_ptr<torch::optim::AdamW> optim;
  std::vector<double> grad_norms;  // per step, before clipping (Adam hides a gradient's scale)

  Trained(Distributed& d, const RunOptions& o) {
    auto config = tiny();
    config.compute_dtype = o.compute_dtype;
    model = make_causal_lm(config, /*seed=*/7);
    model->model->set_gradient_checkpointing(o.checkpointing);
    if (o.lora) {
      LoraSpec l;
      l.rank = 4;
      l.alpha = 8;
      add_lora(*model, l, /*seed=*/1);
    }
    strategy = make_data_parallel(&d);
    FsdpConfig f = o.fsdp;
    if (!o.sharded) f.fsdp_size = 1;
    engine = make_module_engine(*model, *strategy, torch::kCPU, {"test.actor", true, f});
    EXPECT_EQ(engine->sharded(), o.sharded);
    optim = make_adamw(engine->optimizer_params(), 1e-2, 0.9, 0.999, 0.01);
  }

  double step(const TensorMap& batch, const RunOptions& o, int64_t step_index) {
    const auto [b, e] = strategy->shard(kRows);
    TensorMap mine;
    for (const auto& [k, v] : batch) mine[k] = v.narrow(0, b, e - b);
    UpdatePlan plan;
    plan.mini_batch = e - b;
    plan.micro_batch = 2;
    plan.grad_clip = 0.5;  // binding: the clip coefficient is part of what must agree
    plan.who = "test";
    MeanAccumulator acc;
    double loss = 0;
    run_minibatch_update(mine, e - b, plan, *optim, *engine, *strategy, acc, step_index, [&](const MicroBatch& mb) {
      auto l = lm_loss(model, mb, o.layout);
      loss += l.item<double>();
      return l;
    });
    MetricMap m;
    acc.into(m);
    grad_norms.push_back(m.at("test/grad_norm"));
    return loss;
  }

  std::map<std::string, torch::Tensor> full_params() {
    FullParamsScope full(*engine);
    std::map<std::string, torch::Tensor> out;
    for (const auto& p : model->named_parameters()) out[p.key()] = p.value().detach().clone();
    return out;
  }
};

RunResult run(int world, const RunOptions& o) {
  RunResult res;
  std::mutex mu;
  const auto batch = global_batch();
  testing::run_ranks(world, [&](Distributed& d) {
    Trained t(d, o);
    std::vector<double> losses;
    int64_t awake = 0, asleep = -1;
    for (int s = 0; s < o.steps; ++s) {
      losses.push_back(t.step(batch, o, s + 1));
      if (o.sleep_between_steps) {
        awake = t.engine->device_state_bytes(t.optim.get());
        t.engine->sleep(t.optim.get());
        asleep = t.engine->device_state_bytes(t.optim.get());
        t.engine->wake();
      }
    }
    auto params = t.full_params();
    const int64_t bytes = t.engine->resident_state_bytes(t.optim.get());
    if (d.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      res.losses = losses;
      res.grad_norms = t.grad_norms;
      res.params = params;
      res.state_bytes = bytes;
      res.awake_device_bytes = awake;
      res.asleep_device_bytes = asleep;
    }
  });
  return res;
}

void expect_close(const RunResult& a, const RunResult& b, double tol) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) EXPECT_NEAR(a.losses[i], b.losses[i], tol) << "step " << i + 1;
  ASSERT_EQ(a.grad_norms.size(), a.losses.size());
  ASSERT_EQ(b.grad_norms.size(), b.losses.size());
  for (size_t i = 0; i < a.grad_norms.size(); ++i)
    EXPECT_NEAR(a.grad_norms[i], b.grad_norms[i], tol * std::max(1.0, a.grad_norms[i])) << "grad norm, step " << i + 1;
  ASSERT_EQ(a.params.size(), b.params.size());
  for (const auto& [name, p] : a.params) {
    ASSERT_TRUE(b.params.count(name)) << name;
    EXPECT_LE((p - b.params.at(name)).abs().max().item<double>(), tol) << name;
  }
}

struct Case {
  int world;
  bool reshard_after_forward;
  bool checkpointing;
  SequenceLayout layout;
  bool lora = false;
};

class FsdpMatchesDp : public ::testing::TestWithParam<Case> {};

// The sharded engine trains the same weights as DDP on the same ranks: the same gradients
// (reduce-scattered instead of all-reduced), the same clip (the norm's squares summed over
// shards), the same element-wise AdamW. Only float summation order differs.
TEST_P(FsdpMatchesDp, SameLossesAndWeights) {
  const auto c = GetParam();
  RunOptions o;
  o.fsdp.reshard_after_forward = c.reshard_after_forward;
  o.checkpointing = c.checkpointing;
  o.layout = c.layout;
  o.lora = c.lora;
  o.sharded = false;
  const auto dp = run(c.world, o);
  o.sharded = true;
  const auto fsdp = run(c.world, o);
  // The losses move by ~1e-1 a step at this learning rate; agreement is ~1e-6.
  EXPECT_GT(std::fabs(dp.losses.front() - dp.losses.back()), 1e-2);
  expect_close(dp, fsdp, 2e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, FsdpMatchesDp,
    ::testing::Values(Case{2, true, false, SequenceLayout::kPadded}, Case{2, false, false, SequenceLayout::kPadded},
                      Case{2, true, true, SequenceLayout::kRemovePadding},
                      Case{4, true, false, SequenceLayout::kRemovePadding},
                      Case{2, true, false, SequenceLayout::kRemovePadding, /*lora=*/true}),
    [](const ::testing::TestParamInfo<Case>& i) {
      return "world" + std::to_string(i.param.world) + (i.param.reshard_after_forward ? "_reshard" : "_keep") +
             (i.param.checkpointing ? "_ckpt" : "") +
             (i.param.layout == SequenceLayout::kPadded ? "_padded" : "_packed") + (i.param.lora ? "_lora" : "");
    });

// bf16 compute over fp32 shards: each gather of a layer is cast once (model.h's ComputeWeights),
// and the gradients come back through that cast to be reduced in fp32. DDP computes the same
// bf16 forward from the same fp32 weights; only the order of the fp32 gradient sums differs,
// which can move a weight across a bf16 rounding boundary in later steps.
TEST(Fsdp, Bf16ComputeMatchesDp) {
  for (const bool checkpointing : {false, true}) {
    SCOPED_TRACE(checkpointing ? "with gradient checkpointing" : "without gradient checkpointing");
    RunOptions o;
    o.compute_dtype = torch::kBFloat16;
    o.checkpointing = checkpointing;
    o.sharded = false;
    const auto dp = run(2, o);
    o.sharded = true;
    const auto fsdp = run(2, o);
    EXPECT_GT(std::fabs(dp.losses.front() - dp.losses.back()), 1e-2);
    expect_close(dp, fsdp, 2e-5);
  }
}

// LoRA under FSDP: the base weights are separate frozen units the optimizer never sees (AdamW's
// weight decay would otherwise move them); only the adapters change.
TEST(Fsdp, LoraBaseWeightsStayFrozen) {
  RunOptions o;
  o.lora = true;
  o.steps = 2;
  const auto trained = run(2, o);
  o.steps = 0;
  const auto initial = run(2, o);
  int adapters_moved = 0;
  for (const auto& [name, p] : initial.params) {
    const bool adapter = name.find(".lora_") != std::string::npos;
    const double moved = (p - trained.params.at(name)).abs().max().item<double>();
    if (adapter) {
      adapters_moved += moved > 0;
    } else {
      EXPECT_EQ(moved, 0.0) << name;
    }
  }
  EXPECT_GT(adapters_moved, 20);
}

// Offload moves where the state lives, not what is computed: bit-identical on the CPU.
TEST(Fsdp, OffloadGivesTheSameNumbers) {
  RunOptions o;
  const auto plain = run(2, o);
  o.fsdp.param_offload = true;
  o.fsdp.optimizer_offload = true;
  const auto both = run(2, o);
  expect_close(plain, both, 0.0);
  o.fsdp.param_offload = false;
  const auto opt_only = run(2, o);
  expect_close(plain, opt_only, 0.0);
}

// One rank with offload runs the sharded engine (its shards are whole): same as no engine at all.
TEST(Fsdp, OneRankWithOffloadMatchesReplicated) {
  RunOptions o;
  o.sharded = false;
  const auto dp = run(1, o);
  o.sharded = true;
  o.fsdp.param_offload = true;
  const auto off = run(1, o);
  expect_close(dp, off, 1e-5);
}

// Rank 0's state after one step on 4 ranks with `sharded`'s engine, over DDP's.
double state_ratio_to_dp(RunOptions sharded) {
  sharded.steps = 1;
  const auto s = run(4, sharded);
  RunOptions dp = sharded;
  dp.sharded = false;
  const auto d = run(4, dp);
  return static_cast<double>(s.state_bytes) / static_cast<double>(d.state_bytes);
}

// Parameters, gradients and Adam moments between steps: each of N ranks holds 1/N of them
// (plus at most N-1 padding elements per unit).
TEST(Fsdp, StatePerRankIsAboutOneNth) {
  const double ratio = state_ratio_to_dp(RunOptions{});
  EXPECT_GT(ratio, 0.249);
  EXPECT_LT(ratio, 0.252);
}

// The hybrid engine's sleep (rollout.free_cache_engine): between steps the whole state leaves
// the device (here the CPU is the device) and comes back exactly, for both engines, with
// offload and with LoRA's frozen base.
TEST(Fsdp, SleepFreesTheStateOnTheDeviceAndChangesNothing) {
  struct Setup {
    std::string name;
    int world;
    RunOptions o;
  };
  std::vector<Setup> setups;
  RunOptions o;
  o.sharded = false;
  setups.push_back({"replicated, 1 rank", 1, o});
  setups.push_back({"replicated, 2 ranks", 2, o});
  o.sharded = true;
  setups.push_back({"sharded, 2 ranks", 2, o});
  o.lora = true;
  setups.push_back({"sharded, 2 ranks, LoRA", 2, o});
  o.lora = false;
  o.fsdp.optimizer_offload = true;
  setups.push_back({"sharded, 2 ranks, optimizer offload", 2, o});
  for (auto& [name, world, opts] : setups) {
    SCOPED_TRACE(name);
    const auto plain = run(world, opts);
    opts.sleep_between_steps = true;
    const auto slept = run(world, opts);
    expect_close(plain, slept, 0.0);
    EXPECT_GT(slept.awake_device_bytes, 0);
    EXPECT_EQ(slept.asleep_device_bytes, 0);
    // Awake, every byte of the state (parameters, gradients, Adam moments) is on the device
    // (with optimizer offload on a CPU "device" the master's gradient is the shard's own, once).
    if (opts.fsdp.optimizer_offload) EXPECT_LE(slept.awake_device_bytes, slept.state_bytes);
    else EXPECT_EQ(slept.awake_device_bytes, slept.state_bytes);
  }
}

std::string fresh_dir(const std::string& name) {
  const auto dir = (fs::path(::testing::TempDir()) / (name + "_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The full weights at a checkpoint and after the step that follows it.
struct AroundCheckpoint {
  std::map<std::string, torch::Tensor> at, after;
};

// Two steps on `world` ranks, the shards saved into dir, one more step.
AroundCheckpoint train_and_save(int world, const RunOptions& o, const std::string& dir) {
  const auto batch = global_batch();
  std::mutex mu;
  AroundCheckpoint out;
  testing::run_ranks(world, [&](Distributed& d) {
    Trained t(d, o);
    t.step(batch, o, 1);
    t.step(batch, o, 2);
    t.engine->save_shards(dir, t.optim.get());
    auto p = t.full_params();
    t.step(batch, o, 3);
    auto q = t.full_params();
    if (d.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      out.at = p;
      out.after = q;
    }
  });
  return out;
}

// The shards in dir loaded on `world` ranks, then the third step.
AroundCheckpoint load_and_step(int world, const RunOptions& o, const std::string& dir) {
  const auto batch = global_batch();
  std::mutex mu;
  AroundCheckpoint out;
  testing::run_ranks(world, [&](Distributed& d) {
    Trained t(d, o);
    t.engine->load_shards(dir, t.optim.get());
    auto p = t.full_params();
    t.step(batch, o, 3);
    auto q = t.full_params();
    if (d.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      out.at = p;
      out.after = q;
    }
  });
  return out;
}

// The loaded weights are the saved ones exactly, and the next step gives what it gave without
// the checkpoint (the Adam moments came back, resharded where the mesh changed).
void expect_resumed(const AroundCheckpoint& saved, const AroundCheckpoint& resumed, const std::string& how) {
  ASSERT_EQ(saved.at.size(), resumed.at.size()) << how;
  for (const auto& [name, p] : saved.at) EXPECT_TRUE(torch::equal(p, resumed.at.at(name))) << how << ": " << name;
  for (const auto& [name, p] : saved.after)
    EXPECT_LE((p - resumed.after.at(name)).abs().max().item<double>(), 2e-5) << how << ": " << name;
  // And the weights did move in that step (the comparison above is not vacuous).
  double moved = 0;
  for (const auto& [name, p] : saved.at) moved = std::max(moved, (p - saved.after.at(name)).abs().max().item<double>());
  EXPECT_GT(moved, 1e-4) << how;
}

void expect_rank_files(const std::string& dir, int world) {
  for (int r = 0; r < world; ++r) {
    const std::string tail = "_world_size_" + std::to_string(world) + "_rank_" + std::to_string(r) + ".pt";
    EXPECT_TRUE(fs::exists(fs::path(dir) / ("model" + tail))) << tail;
    EXPECT_TRUE(fs::exists(fs::path(dir) / ("optim" + tail))) << tail;
  }
}

// Shards saved by 4 ranks, loaded by 2: one more step on 2 ranks gives what it gives on 4.
TEST(Fsdp, ResumeOnAnotherWorldSize) {
  const auto dir = fresh_dir("fsdp_test");
  RunOptions o;
  const auto saved = train_and_save(4, o, dir);
  expect_rank_files(dir, 4);
  expect_resumed(saved, load_and_step(2, o, dir), "on 2 ranks");
}

// Hybrid sharding (fsdp_size=2 on 4 ranks: shard groups {0,1} and {2,3}, replicated across).
RunOptions hybrid() {
  RunOptions o;
  o.fsdp.fsdp_size = 2;
  return o;
}

// Hybrid sharding trains the same weights as DDP and as sharding over all ranks: gradients
// reduce-scattered in the shard group and then averaged across the replicas are the world's
// mean; the clip's squares summed over one shard group are the whole gradient's.
TEST(Fsdp, HybridShardingMatchesDpAndFullSharding) {
  RunOptions o = hybrid();
  o.layout = SequenceLayout::kRemovePadding;
  const auto hybrid_run = run(4, o);
  o.sharded = false;
  const auto dp = run(4, o);
  o.sharded = true;
  o.fsdp.fsdp_size = -1;
  const auto full = run(4, o);
  EXPECT_GT(std::fabs(dp.losses.front() - dp.losses.back()), 1e-2);
  expect_close(dp, hybrid_run, 2e-5);
  expect_close(full, hybrid_run, 2e-5);
}

// Offload under hybrid sharding: the same numbers as without.
TEST(Fsdp, HybridShardingWithOffloadGivesTheSameNumbers) {
  RunOptions o = hybrid();
  o.steps = 2;
  const auto plain = run(4, o);
  o.fsdp.param_offload = true;
  o.fsdp.optimizer_offload = true;
  expect_close(plain, run(4, o), 0.0);
}

// Each rank holds 1/fsdp_size of the state: half of DDP's with groups of 2.
TEST(Fsdp, HybridStatePerRankIsAboutOneOverTheGroupSize) {
  const double ratio = state_ratio_to_dp(hybrid());
  EXPECT_GT(ratio, 0.499);
  EXPECT_LT(ratio, 0.502);
}

// An engine made again on the same ranks (the actor's, when LoRA starts after the warm start)
// forms new shard and replicate groups and trains like the first.
TEST(Fsdp, AHybridEngineMadeAgainFormsItsGroupsAgain) {
  const auto batch = global_batch();
  const RunOptions o = hybrid();
  std::mutex mu;
  std::vector<double> losses;
  testing::run_ranks(4, [&](Distributed& d) {
    std::vector<double> mine;
    for (int k = 0; k < 2; ++k) {
      Trained t(d, o);
      mine.push_back(t.step(batch, o, 1));
    }
    if (d.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      losses = mine;
    }
  });
  ASSERT_EQ(losses.size(), 2u);
  EXPECT_EQ(losses[0], losses[1]);
}

// A hybrid checkpoint is verl's: every rank writes model/optim_world_size_4_rank_R.pt (the
// replicas the same shards). It resumes on the same mesh (each rank reads its own file), on 4
// ranks sharded over all of them and on 2 ranks (both resharded from the first group's files).
TEST(Fsdp, HybridCheckpointResumesOnAnyMesh) {
  const auto dir = fresh_dir("fsdp_hybrid_test");
  const auto saved = train_and_save(4, hybrid(), dir);
  expect_rank_files(dir, 4);
  expect_resumed(saved, load_and_step(4, hybrid(), dir), "on 4 ranks, fsdp_size=2");
  expect_resumed(saved, load_and_step(4, RunOptions{}, dir), "on 4 ranks, fsdp_size=-1");
  expect_resumed(saved, load_and_step(2, RunOptions{}, dir), "on 2 ranks");
}

// And the other way: shards cut over all 4 ranks load into shard groups of 2.
TEST(Fsdp, FullyShardedCheckpointResumesHybrid) {
  const auto dir = fresh_dir("fsdp_to_hybrid_test");
  const auto saved = train_and_save(4, RunOptions{}, dir);
  expect_resumed(saved, load_and_step(4, hybrid(), dir), "on 4 ranks, fsdp_size=2");
}

// The rollout's resharding (ActorWorker::sync_to) visits the sharded module a layer at a time:
// every parameter once, with the values the whole gathered module holds, and never more than one
// layer's units (trainable and frozen LoRA parts together) gathered at once.
TEST(Fsdp, VisitFullGathersOneLayerAtATime) {
  for (bool lora : {false, true}) {
    RunOptions o;
    o.lora = lora;
    testing::run_ranks(2, [&](Distributed& d) {
      Trained t(d, o);
      std::map<std::string, torch::Tensor> whole;
      {
        FullParamsScope full(*t.engine);
        for (const auto& p : t.model->named_parameters()) whole[p.key()] = p.value().detach().clone();
      }
      std::map<const c10::TensorImpl*, std::string> names;
      for (const auto& p : t.model->named_parameters()) names[p.value().unsafeGetTensorImpl()] = p.key();
      std::map<std::string, int> seen;
      int64_t most_gathered = 0;
      t.engine->visit_full([&](const std::vector<torch::Tensor>& params) {
        int64_t gathered = 0;  // parameters with storage right now
        for (const auto& p : t.model->parameters()) gathered += p.storage().nbytes() > 0 ? 1 : 0;
        most_gathered = std::max(most_gathered, gathered);
        for (const auto& p : params) {
          const auto& name = names.at(p.unsafeGetTensorImpl());
          ++seen[name];
          EXPECT_TRUE(torch::equal(p.detach(), whole.at(name))) << name;
        }
      });
      EXPECT_EQ(seen.size(), whole.size());
      for (const auto& [name, n] : seen) EXPECT_EQ(n, 1) << name;
      // One layer's parameters (the root's three, embedding, final norm and LM head, are fewer).
      const int64_t per_layer = static_cast<int64_t>(whole.size() - 3) / tiny().num_hidden_layers;
      EXPECT_EQ(most_gathered, per_layer) << "lora " << lora;
      // Outside, nothing of the decoder layers is gathered.
      EXPECT_EQ(t.model->model->layers[0]->parameters()[0].storage().nbytes(), 0u);
    });
  }
}

TEST(Fsdp, ALoadFromAnotherModelNamesTheFileAndTheModule) {
  const auto dir = (fs::path(::testing::TempDir()) / ("fsdp_test_other_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  RunOptions o;
  testing::run_ranks(2, [&](Distributed& d) {
    Trained t(d, o);
    t.engine->save_shards(dir, t.optim.get());
  });
  testing::run_ranks(2, [&](Distributed& d) {
    auto other = tiny();
    other.num_hidden_layers = 3;
    auto model = make_causal_lm(other, 7);
    auto strategy = make_data_parallel(&d);
    auto engine = make_module_engine(*model, *strategy, torch::kCPU, {"test.actor", true, FsdpConfig{}});
    try {
      engine->load_shards(dir, nullptr);
      ADD_FAILURE() << "loaded another model's shards";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("model_world_size_2_rank_"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("test.actor"), std::string::npos) << e.what();
    }
  });
}

TEST(Fsdp, AShardGroupSizeThatDoesNotDivideTheWorldNamesTheKey) {
  const int world = 4;
  testing::run_ranks(world, [&](Distributed& d) {
    auto model = make_causal_lm(tiny(), 7);
    auto strategy = make_data_parallel(&d);
    FsdpConfig f;
    f.fsdp_size = 3;
    try {
      make_module_engine(*model, *strategy, torch::kCPU, {"critic.model", true, f});
      ADD_FAILURE() << "accepted fsdp_size=3 on " << world << " ranks";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
      EXPECT_NE(std::string(e.what()).find("critic.model.fsdp_config.fsdp_size=3"), std::string::npos) << e.what();
      EXPECT_NE(e.hint().find("divisor"), std::string::npos) << e.hint();
    }
  });
}

// As verl's create_device_mesh: a shard group larger than the world is the world (a config
// written for 8 GPUs runs on 2), the same numbers as fsdp_size=-1.
TEST(Fsdp, AShardGroupLargerThanTheWorldShardsOverAllRanks) {
  RunOptions o;
  o.steps = 2;
  const auto all = run(2, o);
  o.fsdp.fsdp_size = 8;
  expect_close(all, run(2, o), 0.0);
}

}  // namespace
}  // namespace verl::trainer

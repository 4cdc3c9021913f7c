// The PPO loop across ranks and across restarts:
//  - two Gloo ranks (threads in this process, each with its own store client on loopback) train
//    like one rank holding the whole batch;
//  - a run of 2N steps and a run of N steps + resume for N more write the same metrics.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/config.h"
#include "common/error.h"
#include "trainer/distributed.h"
#include "trainer/ppo_trainer.h"
#include "tests/unit/trainer/rank_harness.h"

namespace verl::trainer {
namespace {
namespace fs = std::filesystem;


std::string fresh_dir(const std::string& name) {
  const auto d = fs::path(::testing::TempDir()) / ("ppo_distributed_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  return d.string();
}

// A small job: 8 prompts x n=2 responses per step, CPU, metrics to <dir>/metrics.jsonl.
JobConfig small_job(const std::string& dir, std::vector<std::string> extra) {
  std::vector<std::string> o = {
      "trainer.device=cpu",
      "data.train_batch_size=8",
      "actor_rollout_ref.rollout.n=2",
      "actor_rollout_ref.actor.ppo_mini_batch_size=4",
      "critic.ppo_mini_batch_size=4",
      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
      "critic.ppo_micro_batch_size_per_gpu=4",
      "data.val_batch_size=16",
      "data.builtin.val_size=16",
      "trainer.val_before_train=false",
      "trainer.test_freq=-1",
      "trainer.logger=[]",  // no console lines; metrics.jsonl is written anyway
      "trainer.default_local_dir=" + dir,
  };
  o.insert(o.end(), extra.begin(), extra.end());
  return JobConfig::from_json(nlohmann::json::parse(config::load_job("", o).dump()));
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

// Wall-clock metrics legitimately differ between runs.
bool is_timing(const std::string& key) {
  // Clocks and the machine's memory (perf/cpu_memory_used_gb counts every process) vary run to run.
  return key.rfind("timing_s/", 0) == 0 || key.rfind("timing_per_token_ms/", 0) == 0 || key.rfind("perf/", 0) == 0;
}

void run_world(int world, const std::function<void(Distributed&)>& fn) {
  testing::run_ranks(world, fn, testing::RanksOptions{0, false, std::chrono::seconds(120)});
}

// Two ranks with 4 prompts each against one rank with all 8 (train_batch_size is global).
// Same by construction: the prompts of a step (one sampler; rank r takes the r-th shard), the
// sampling seeds (per global response row), the initial weights (same seed), the advantage
// whitening (global_masked_whiten) and the averaged gradients. Chosen so that they stay the same:
//  - ppo_mini_batch_size = train_batch_size: one optimizer step per epoch over the whole batch.
//    With smaller mini-batches the two runs step on different row sets (rank r splits its own
//    shard, as verl's data-parallel workers do), a real difference, not an error.
//  - loss_agg_mode seq-mean-token-mean: each rank's loss is a mean over the same number of
//    sequences, so the mean of the ranks' gradients is the one-rank gradient (token-mean would
//    weight a rank with fewer tokens more, as it does in verl).
// Not the same: float summation order (all-reduce, per-rank partial sums): ~1e-7 relative per
// operation; checked at 1e-4 relative to max(1, |value|) over 3 steps, well below the
// step-to-step movement of the losses (~1e-2). Compared: the metrics whose definition does not
// depend on how rows are split over ranks (per-sequence means over equal counts, global norms).
// Token-weighted metrics (ppo_kl, clipfracs, values/advantages means) are averaged rank by
// rank, as verl reduces worker metrics, and legitimately differ; they are only required present.
// Over both engines (trainer/module_engine.h): FSDP sharding (verl's default fsdp_size=-1) and
// replication (fsdp_size=1, DDP); and hybrid sharding on 4 ranks below.
// `world` ranks with fsdp_size for the actor and critic (and `more` keys), run in two_dir,
// against one rank.
void expect_ranks_match_one_rank(int world, const std::string& fsdp_size, const std::string& two_dir,
                                 std::vector<std::string> more = {}) {
  std::vector<std::string> extra = {
      "trainer.total_training_steps=3",
      "actor_rollout_ref.actor.ppo_mini_batch_size=8",
      "critic.ppo_mini_batch_size=8",
      "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",
      "critic.loss_agg_mode=seq-mean-token-mean",
      "trainer.save_freq=-1",
      "actor_rollout_ref.actor.fsdp_config.fsdp_size=" + fsdp_size,
      "critic.model.fsdp_config.fsdp_size=" + fsdp_size,
  };
  extra.insert(extra.end(), more.begin(), more.end());
  const std::string tag = std::to_string(world) + "_" + fsdp_size;
  const std::string one_dir = fresh_dir("one_rank_" + tag);
  {
    PpoTrainer t(small_job(one_dir, extra), nullptr);
    t.fit();
  }
  run_world(world, [&](Distributed& d) {
    PpoTrainer t(small_job(two_dir, extra), &d);
    t.fit();
  });
  const auto one = read_jsonl(one_dir + "/metrics.jsonl");
  const auto two = read_jsonl(two_dir + "/metrics.jsonl");
  ASSERT_EQ(one.size(), 3u);
  ASSERT_EQ(two.size(), one.size());
  const std::vector<std::string> invariant = {
      "critic/score/mean", "critic/rewards/mean", "response_length/mean", "actor/pg_loss",
      "actor/entropy",     "actor/grad_norm",     "critic/vf_loss",       "critic/grad_norm"};
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i]["step"], two[i]["step"]);
    for (const auto& [key, v] : one[i].items()) {
      EXPECT_TRUE(two[i].contains(key)) << "step " << i + 1 << ": " << key;
    }
    for (const auto& key : invariant) {
      ASSERT_TRUE(one[i].contains(key)) << key;
      ASSERT_TRUE(two[i].contains(key)) << key;
      const double a = one[i][key].get<double>(), b = two[i][key].get<double>();
      EXPECT_NEAR(a, b, 1e-4 * std::max(1.0, std::fabs(a))) << "step " << i + 1 << ": " << key;
    }
  }
  // Step 1 rolls out from identical weights with identical seeds: identical samples.
  EXPECT_EQ(one[0]["critic/score/mean"], two[0]["critic/score/mean"]);
  EXPECT_EQ(one[0]["response_length/mean"], two[0]["response_length/mean"]);
}

class PpoDistributed : public ::testing::TestWithParam<std::string> {};

TEST_P(PpoDistributed, TwoGlooRanksMatchOneRankOnTheDoubledBatch) {
  expect_ranks_match_one_rank(2, GetParam(), fresh_dir("two_ranks_" + GetParam()));
}

// rollout.tensor_model_parallel_size=2 on 4 ranks (two TP groups of two, each generating its
// members' rows on a model cut in half) against the same 4 ranks each holding the whole rollout
// model: the same samples (per-row seeds; logits equal up to the all-reduce's summation order),
// so the same training. 15 validation prompts: the members of a group hold 4 and 3 of them.
// Both engines: the native loop and the slot engine (rollout.name=vllm).
class PpoTensorParallelEngines : public ::testing::TestWithParam<std::string> {};

TEST_P(PpoTensorParallelEngines, FourRanksInTwoTpGroupsTrainAsWithoutTp) {
  std::vector<std::string> extra = {"trainer.total_training_steps=2", "trainer.val_before_train=true",
                                    "trainer.test_freq=2", "data.builtin.val_size=15", "trainer.save_freq=-1",
                                    "actor_rollout_ref.rollout.name=" + GetParam()};
  auto with_tp = extra;
  with_tp.push_back("actor_rollout_ref.rollout.tensor_model_parallel_size=2");
  const std::string plain_dir = fresh_dir("tp1_" + GetParam()), tp_dir = fresh_dir("tp2_" + GetParam());
  run_world(4, [&](Distributed& d) {
    PpoTrainer t(small_job(plain_dir, extra), &d);
    t.fit();
  });
  run_world(4, [&](Distributed& d) {
    PpoTrainer t(small_job(tp_dir, with_tp), &d);
    t.fit();
  });
  const auto plain = read_jsonl(plain_dir + "/metrics.jsonl");
  const auto tp = read_jsonl(tp_dir + "/metrics.jsonl");
  ASSERT_EQ(plain.size(), tp.size());
  ASSERT_GE(plain.size(), 3u);  // step 0's validation, steps 1 and 2
  size_t compared = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    for (const auto& [key, v] : plain[i].items()) {
      ASSERT_TRUE(tp[i].contains(key)) << key;
      if (is_timing(key) || !v.is_number()) continue;
      const double a = v.get<double>(), b = tp[i][key].get<double>();
      EXPECT_NEAR(a, b, 1e-4 * std::max(1.0, std::fabs(a))) << "row " << i << ": " << key;
      ++compared;
    }
  }
  EXPECT_GT(compared, 40u);
  EXPECT_TRUE(plain[0].contains("val-core/arith/reward/mean@1") || plain[0].contains("val/score/mean")) << plain[0].dump();
}

INSTANTIATE_TEST_SUITE_P(Engines, PpoTensorParallelEngines, ::testing::Values("native", "vllm"));

TEST(PpoTensorParallel, ASizeThatDoesNotDivideTheRanksIsAnErrorNamingTheKey) {
  try {
    PpoTrainer t(small_job(fresh_dir("tp_one_rank"), {"actor_rollout_ref.rollout.tensor_model_parallel_size=2"}), nullptr);
    FAIL() << "no throw";
  } catch (const verl::Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find("actor_rollout_ref.rollout.tensor_model_parallel_size=2 does not divide the job's 1 rank"),
              std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, PpoDistributed, ::testing::Values("-1", "1"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return i.param == "1" ? std::string("Replicated") : std::string("Sharded");
                         });

// LoRA (actor_rollout_ref.model.lora_rank): the reference is the base model (the actor with its
// adapters off, no copy: no ref/ in the checkpoint); the adapters come after the warm start, whose
// model is the base, so the KL starts at 0 and grows; two sharded ranks train the adapters like one rank on the
// doubled batch.
TEST(PpoLora, ReferenceIsTheBaseModelAndTwoShardedRanksMatchOne) {
  const std::vector<std::string> extra = {
      "trainer.total_training_steps=3", "trainer.save_freq=3",
      "actor_rollout_ref.model.lora_rank=4", "actor_rollout_ref.model.lora_alpha=32",
      "actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.actor.optim.lr=1e-3",
      "actor_rollout_ref.actor.ppo_epochs=1",  // the built-in preset's 2 would step before the 2nd epoch's KL
      "actor_rollout_ref.actor.ppo_mini_batch_size=8", "critic.ppo_mini_batch_size=8",
      "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean", "critic.loss_agg_mode=seq-mean-token-mean",
  };
  const std::string one_dir = fresh_dir("lora_one"), two_dir = fresh_dir("lora_two");
  {
    PpoTrainer t(small_job(one_dir, extra), nullptr);
    t.fit();
  }
  run_world(2, [&](Distributed& d) {
    PpoTrainer t(small_job(two_dir, extra), &d);
    t.fit();
  });
  const auto one = read_jsonl(one_dir + "/metrics.jsonl");
  const auto two = read_jsonl(two_dir + "/metrics.jsonl");
  ASSERT_EQ(one.size(), 3u);
  ASSERT_EQ(two.size(), 3u);
  EXPECT_NEAR(one[0]["actor/kl_loss"].get<double>(), 0.0, 1e-6);
  EXPECT_GT(one[2]["actor/kl_loss"].get<double>(), 1e-6);
  for (size_t i = 0; i < 3; ++i) {
    for (const std::string key : {"critic/score/mean", "actor/pg_loss", "actor/kl_loss", "actor/grad_norm"}) {
      const double a = one[i][key].get<double>(), b = two[i][key].get<double>();
      EXPECT_NEAR(a, b, 1e-4 * std::max(1.0, std::fabs(a))) << "step " << i + 1 << ": " << key;
    }
  }
  EXPECT_FALSE(fs::exists(one_dir + "/global_step_3/ref"));
  EXPECT_FALSE(fs::exists(two_dir + "/global_step_3/ref"));
  EXPECT_TRUE(fs::exists(two_dir + "/global_step_3/actor/model_world_size_2_rank_1.pt"));
}

// Hybrid sharding (fsdp_size=2 on 4 ranks; the reference too, use_kl_loss) trains like one rank
// on the whole batch, and every rank writes its part of the checkpoint, as verl does.
TEST(PpoDistributedFsdp, HybridShardingOnFourRanksMatchesOneRank) {
  const auto dir = fresh_dir("hybrid_four_ranks");
  expect_ranks_match_one_rank(4, "2", dir,
                              {"actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.ref.fsdp_config.fsdp_size=2",
                               "trainer.save_freq=3"});
  for (const std::string part : {"actor", "critic", "ref"}) {
    for (int r = 0; r < 4; ++r) {
      EXPECT_TRUE(fs::exists(dir + "/global_step_3/" + part + "/model_world_size_4_rank_" + std::to_string(r) + ".pt"))
          << part << " rank " << r;
    }
  }
}

// FSDP checkpoints are sharded per rank in verl's layout; 2 ranks x (2 steps + resume 2) equal 2
// ranks x 4 steps straight (the reference policy sharded too: use_kl_loss), and the same
// checkpoint resumes on ONE rank with param_offload (its shards joined and re-cut), which then
// trains like the two ranks did (to summation order, as the doubled-batch test above).
TEST(PpoDistributedFsdp, ShardedCheckpointResumesExactlyAndOnAnotherWorldSize) {
  const std::vector<std::string> common = {
      "actor_rollout_ref.actor.use_kl_loss=true",
      "actor_rollout_ref.actor.ppo_mini_batch_size=8",
      "critic.ppo_mini_batch_size=8",
      "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",
      "critic.loss_agg_mode=seq-mean-token-mean",
  };
  auto job = [&](const std::string& dir, std::vector<std::string> more) {
    more.insert(more.end(), common.begin(), common.end());
    return small_job(dir, more);
  };
  const std::string straight = fresh_dir("fsdp_straight"), resumed = fresh_dir("fsdp_resumed"),
                    one = fresh_dir("fsdp_one_rank");
  run_world(2, [&](Distributed& d) {
    PpoTrainer t(job(straight, {"trainer.total_training_steps=4", "trainer.save_freq=-1", "trainer.resume_mode=disable"}), &d);
    t.fit();
  });
  run_world(2, [&](Distributed& d) {
    PpoTrainer t(job(resumed, {"trainer.total_training_steps=2", "trainer.save_freq=2", "trainer.resume_mode=auto"}), &d);
    t.fit();
  });
  for (const std::string part : {"actor", "critic", "ref"}) {
    for (int r = 0; r < 2; ++r) {
      EXPECT_TRUE(fs::exists(resumed + "/global_step_2/" + part + "/model_world_size_2_rank_" + std::to_string(r) + ".pt"))
          << part << " rank " << r;
    }
  }
  EXPECT_TRUE(fs::exists(resumed + "/global_step_2/actor/optim_world_size_2_rank_1.pt"));
  EXPECT_FALSE(fs::exists(resumed + "/global_step_2/ref/optim_world_size_2_rank_0.pt"));
  fs::copy(resumed, one, fs::copy_options::recursive);
  run_world(2, [&](Distributed& d) {
    PpoTrainer t(job(resumed, {"trainer.total_training_steps=4", "trainer.save_freq=-1", "trainer.resume_mode=auto"}), &d);
    EXPECT_EQ(t.fit().steps, 4);
  });
  {
    PpoTrainer t(job(one, {"trainer.total_training_steps=4", "trainer.save_freq=-1", "trainer.resume_mode=auto",
                           "actor_rollout_ref.actor.fsdp_config.param_offload=true",
                           "critic.model.fsdp_config.optimizer_offload=true",
                           "actor_rollout_ref.ref.fsdp_config.param_offload=true"}),
                 nullptr);
    EXPECT_EQ(t.fit().steps, 4);
  }
  const auto a = read_jsonl(straight + "/metrics.jsonl");
  const auto b = read_jsonl(resumed + "/metrics.jsonl");
  const auto c = read_jsonl(one + "/metrics.jsonl");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  ASSERT_EQ(c.size(), 4u);
  int compared = 0;
  for (size_t i = 2; i < 4; ++i) {
    for (const auto& [key, va] : a[i].items()) {
      if (key == "step" || is_timing(key) || !va.is_number()) continue;
      ASSERT_TRUE(b[i].contains(key)) << key;
      EXPECT_NEAR(va.get<double>(), b[i][key].get<double>(), 1e-6) << "step " << a[i]["step"] << ": " << key;
      ++compared;
    }
    for (const std::string key : {"critic/score/mean", "actor/pg_loss", "actor/kl_loss", "actor/grad_norm",
                                  "critic/vf_loss", "critic/grad_norm"}) {
      ASSERT_TRUE(c[i].contains(key)) << key;
      const double x = a[i][key].get<double>();
      EXPECT_NEAR(x, c[i][key].get<double>(), 1e-4 * std::max(1.0, std::fabs(x))) << "step " << i + 1 << ": " << key;
    }
  }
  EXPECT_GT(compared, 40);
}

// 2N = 4 steps straight vs 2 steps (checkpoint) + resume for 2 more, same seed, CPU: the metrics
// of steps 3..4 must be equal (to 1e-6; JSON round-trips doubles exactly, so in practice bit for
// bit); resume restores weights, Adam moments, the data sampler, the KL coefficient and the
// RNGs. Over estimators: GAE has a critic, GRPO does not; gae_kl_loss adds the KL loss, whose
// reference policy must come back too (not be rebuilt from the resumed actor).
class PpoResume : public ::testing::TestWithParam<std::string> {};

TEST_P(PpoResume, ResumeIsExact) {
  const bool kl = GetParam() == "gae_kl_loss";
  const std::string est = kl ? "actor_rollout_ref.actor.use_kl_loss=true"
                             : "algorithm.adv_estimator=" + GetParam();
  const std::string straight = fresh_dir("straight_" + GetParam());
  const std::string resumed = fresh_dir("resumed_" + GetParam());
  {
    PpoTrainer t(small_job(straight, {est, "trainer.total_training_steps=4", "trainer.save_freq=-1",
                                      "trainer.resume_mode=disable"}),
                 nullptr);
    t.fit();
  }
  {
    PpoTrainer t(small_job(resumed, {est, "trainer.total_training_steps=2", "trainer.save_freq=2",
                                     "trainer.resume_mode=auto"}),
                 nullptr);
    EXPECT_EQ(t.fit().steps, 2);
  }
  ASSERT_TRUE(fs::exists(resumed + "/global_step_2/actor/model.pt"));
  {
    PpoTrainer t(small_job(resumed, {est, "trainer.total_training_steps=4", "trainer.save_freq=-1",
                                     "trainer.resume_mode=auto"}),
                 nullptr);
    EXPECT_EQ(t.fit().steps, 4);
  }
  const auto a = read_jsonl(straight + "/metrics.jsonl");
  const auto b = read_jsonl(resumed + "/metrics.jsonl");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);  // steps 1-2 from the first part, 3-4 from the resumed one
  int compared = 0;
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_EQ(a[i]["step"], b[i]["step"]);
    for (const auto& [key, va] : a[i].items()) {
      if (key == "step" || is_timing(key) || !va.is_number()) continue;
      ASSERT_TRUE(b[i].contains(key)) << key;
      EXPECT_NEAR(va.get<double>(), b[i][key].get<double>(), 1e-6)
          << "step " << a[i]["step"] << ": " << key;
      ++compared;
    }
  }
  EXPECT_GT(compared, 40);
}

INSTANTIATE_TEST_SUITE_P(Estimators, PpoResume, ::testing::Values("gae", "grpo", "gae_kl_loss"));

}  // namespace
}  // namespace verl::trainer

// Role placement (common/role_placement.h): the seed's device mapping, the GPUs a node reserves,
// and the errors that name the key.
#include "common/role_placement.h"

#include <gtest/gtest.h>

#include "common/config.h"
#include "common/error.h"

namespace verl {
namespace {

using config::Json;

Json job(std::vector<std::string> overrides) { return config::load_job("", overrides); }

TEST(RolePlacement, TheSeedsMappingPutsActorAndRefOnFourGpusAndRolloutAndCriticOnTheOtherFour) {
  const auto p = role_placement(job({"trainer.n_gpus_per_node=4", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
                                     "critic.ppo_micro_batch_size_per_gpu=8", "actor_rollout_ref.actor.device=cuda:0,1,2,3",
                                     "actor_rollout_ref.ref.device=cuda:0,1,2,3",
                                     "actor_rollout_ref.rollout.device=cuda:4,5,6,7", "critic.device=cuda:4,5,6,7"}),
                                4);
  EXPECT_TRUE(p.named);
  EXPECT_EQ(p.gpus_per_node, 8);
  ASSERT_EQ(p.rank_gpus.size(), 4u);
  EXPECT_EQ(p.rank_gpus[1], (std::vector<int>{1, 5}));
  EXPECT_EQ(p.summary(), "actor, ref: cuda:0,1,2,3; rollout, critic: cuda:4,5,6,7");
}

TEST(RolePlacement, TheHybridDefaultIsEachRankOnItsOwnGpu) {
  const auto p = role_placement(job({"trainer.n_gpus_per_node=2"}), 2);
  EXPECT_FALSE(p.named);
  EXPECT_EQ(p.gpus_per_node, 2);
  EXPECT_EQ(p.rank_gpus[1], (std::vector<int>{1}));
  EXPECT_EQ(p.summary(), "");
  // One shared GPU for every rank's rollout, the rest on their own: named, and 0 is used.
  const auto q = role_placement(job({"trainer.n_gpus_per_node=2", "actor_rollout_ref.rollout.device=cuda:1"}), 2);
  EXPECT_TRUE(q.named);
  EXPECT_EQ(q.rank_gpus[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(q.summary(), "actor, ref, critic: own GPU; rollout: cuda:1");
}

TEST(RolePlacement, MalformedValuesAndGapsAreErrorsNamingTheKey) {
  EXPECT_EQ(role_gpu("critic.device", "cuda:4,5", 1, 2), 5);
  EXPECT_EQ(role_gpu("critic.device", "auto", 1, 2), -1);
  for (const auto& [spec, part] : std::vector<std::pair<std::string, std::string>>{
           {"cuda:0,1,2", "3 GPUs for 2 ranks"}, {"cuda:0,0", "listed twice"}, {"cuda:x", "'x' is not a GPU number"},
           {"gpu", "not a device"}}) {
    try {
      role_gpu("critic.device", spec, 0, 2);
      ADD_FAILURE() << spec;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
      EXPECT_NE(std::string(e.what()).find("critic.device"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }
  try {  // GPUs 2 and 3 used by no role
    role_placement(job({"trainer.n_gpus_per_node=2", "actor_rollout_ref.actor.device=cuda:0,1", "critic.device=cuda:4,5"}), 2);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("none uses GPU 2"), std::string::npos) << e.what();
  }
  // The config's own check, with the key as the issue's path.
  auto d = config::resolve(config::Kind::kJob, "", {"trainer.n_gpus_per_node=2", "critic.device=cuda:0,1,2"});
  EXPECT_FALSE(d.ok());
  bool named = false;
  for (const auto& i : d.issues) named |= i.path == "critic.device";
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace verl

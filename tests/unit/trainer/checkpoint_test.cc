#include "trainer/checkpoint.h"

#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <thread>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "tests/unit/trainer/rank_harness.h"
#include "trainer/distributed.h"

namespace verl::trainer {
namespace {
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("verl_ckpt_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A tiny actor/critic pair with Adam, one update taken so the optimizer has state.
struct Rig {
  torch::nn::Linear actor{nullptr}, critic{nullptr}, ref{nullptr};
  std::unique_ptr<torch::optim::Adam> actor_opt, critic_opt;
  at::Generator rollout = at::make_generator<at::CPUGeneratorImpl>(/*seed_in=*/7);

  explicit Rig(uint64_t seed) {
    torch::manual_seed(seed);
    actor = torch::nn::Linear(4, 3);
    critic = torch::nn::Linear(4, 1);
    ref = torch::nn::Linear(4, 3);
    actor_opt = std::make_unique<torch::optim::Adam>(actor->parameters(),
                                                     torch::optim::AdamOptions(1e-2));
    critic_opt = std::make_unique<torch::optim::Adam>(critic->parameters(),
                                                      torch::optim::AdamOptions(1e-2));
  }
  void step(double x) {
    auto in = torch::full({2, 4}, x);
    actor_opt->zero_grad();
    actor->forward(in).pow(2).sum().backward();
    actor_opt->step();
    critic_opt->zero_grad();
    critic->forward(in).sum().backward();
    critic_opt->step();
  }
  CheckpointParts parts() {
    CheckpointParts p;
    p.actor = actor.get();
    p.actor_optim = actor_opt.get();
    p.critic = critic.get();
    p.critic_optim = critic_opt.get();
    p.ref = ref.get();
    p.rollout_generator = &rollout;
    return p;
  }
};

TrainerState state_at(int64_t step) {
  TrainerState s;
  s.global_step = step;
  s.data = {/*epoch=*/2, /*position=*/48, /*shuffle_seed=*/11};
  s.kl_coef = 0.0123;
  s.extra = {{"sft_steps_done", 5}};
  return s;
}

TEST(Checkpoint, WritesVerlLayout) {
  TempDir tmp;
  Rig a(1);
  a.step(1.0);
  CheckpointManager m(tmp.path().string(), nullptr);
  const std::string dir = m.save(a.parts(), state_at(3));
  EXPECT_EQ(dir, (tmp.path() / "global_step_3").string());
  for (const char* f : {"actor/model.pt", "actor/optim.pt", "critic/model.pt", "critic/optim.pt",
                        "ref/model.pt", "rng.pt", "trainer_state.json"}) {
    EXPECT_TRUE(fs::exists(tmp.path() / "global_step_3" / f)) << f;
  }
  EXPECT_EQ(read(tmp.path() / "latest_checkpointed_iteration.txt"), "3\n");
  EXPECT_EQ(m.latest_step().value(), 3);
  // Nothing temporary left behind.
  for (const auto& e : fs::directory_iterator(tmp.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

TEST(Checkpoint, ResumedTrainingContinuesBitExactly) {
  TempDir tmp;
  Rig a(1);
  a.step(1.0);
  CheckpointManager m(tmp.path().string(), nullptr);
  m.save(a.parts(), state_at(1));
  // What the uninterrupted run does next: draw from both generators, take another step.
  auto cpu_draw = torch::rand({4});
  auto roll_draw = torch::rand({4}, a.rollout);
  a.step(2.0);

  Rig b(99);  // different initial weights and optimizer state
  b.step(-3.0);
  b.rollout = at::make_generator<at::CPUGeneratorImpl>(/*seed_in=*/12345);
  TrainerState st = m.load((tmp.path() / "global_step_1").string(), b.parts());
  EXPECT_EQ(st.global_step, 1);
  EXPECT_EQ(st.data.epoch, 2);
  EXPECT_EQ(st.data.position, 48);
  EXPECT_EQ(st.data.shuffle_seed, 11);
  EXPECT_DOUBLE_EQ(st.kl_coef, 0.0123);
  EXPECT_EQ(st.extra.at("sft_steps_done").get<int>(), 5);
  EXPECT_TRUE(torch::equal(torch::rand({4}), cpu_draw));
  EXPECT_TRUE(torch::equal(torch::rand({4}, b.rollout), roll_draw));
  b.step(2.0);
  // Same weights after the step: the Adam moments and step count came back too.
  EXPECT_TRUE(torch::equal(b.actor->weight, a.actor->weight));
  EXPECT_TRUE(torch::equal(b.actor->bias, a.actor->bias));
  EXPECT_TRUE(torch::equal(b.critic->weight, a.critic->weight));
  EXPECT_TRUE(torch::equal(b.ref->weight, a.ref->weight));
}

// A module whose save throws halfway through the checkpoint: a crash mid-write.
struct ExplodingModule : torch::nn::Module {
  void save(torch::serialize::OutputArchive&) const override {
    throw std::runtime_error("disk on fire");
  }
};

TEST(Checkpoint, FailedSaveLeavesPreviousCheckpointAndPointerIntact) {
  TempDir tmp;
  Rig a(1);
  a.step(1.0);
  CheckpointManager m(tmp.path().string(), nullptr);
  m.save(a.parts(), state_at(1));
  const auto before = read(tmp.path() / "global_step_1" / "trainer_state.json");

  ExplodingModule boom;
  CheckpointParts broken = a.parts();
  broken.critic = &boom;  // the actor is written, then the critic throws
  try {
    m.save(broken, state_at(2));
    FAIL() << "no throw";
  } catch (const verl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("disk on fire"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp.path() / "global_step_2"));
  EXPECT_EQ(read(tmp.path() / "latest_checkpointed_iteration.txt"), "1\n");
  EXPECT_EQ(read(tmp.path() / "global_step_1" / "trainer_state.json"), before);
  // The half-written directory is removed (a full disk stays usable; issue 16, case 6).
  for (const auto& e : fs::directory_iterator(tmp.path())) {
    EXPECT_NE(e.path().filename().string().rfind("global_step_2.tmp-", 0), 0u) << e.path();
  }
  auto dir = m.resolve_resume(ResumeMode::kAuto, "");
  ASSERT_TRUE(dir.has_value());
  EXPECT_EQ(*dir, (tmp.path() / "global_step_1").string());
  Rig b(5);
  EXPECT_EQ(m.load(*dir, b.parts()).global_step, 1);
  // The next good save cleans the leftover up.
  m.save(a.parts(), state_at(3));
  for (const auto& e : fs::directory_iterator(tmp.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

// Issue 16, case 6: a write that fails for want of space (here RLIMIT_FSIZE: EFBIG, as ENOSPC
// would) made libtorch's writer throw from its destructor and abort the trainer.
TEST(Checkpoint, AFullDiskIsAnErrorNamingThePathAndLeavesNoPartialDirectory) {
  TempDir tmp;
  Rig a(1);
  CheckpointManager m(tmp.path().string(), nullptr);
  m.save(a.parts(), state_at(1));
  struct rlimit before {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &before), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = before;
  small.rlim_cur = 512;  // bytes: smaller than a model archive
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  int code = 0;
  try {
    m.save(a.parts(), state_at(2));
  } catch (const verl::Error& e) {
    message = e.what();
    code = static_cast<int>(e.code());
  }
  ::setrlimit(RLIMIT_FSIZE, &before);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(code, static_cast<int>(ExitCode::kFailure)) << message;
  EXPECT_NE(message.find("checkpoint: cannot write " + (tmp.path() / "global_step_2.tmp-").string()), std::string::npos)
      << message;
  for (const auto& e : fs::directory_iterator(tmp.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path() << " is left behind";
  EXPECT_FALSE(fs::exists(tmp.path() / "global_step_2"));
  EXPECT_EQ(read(tmp.path() / "latest_checkpointed_iteration.txt"), "1\n");
}

TEST(Checkpoint, LeftoverTmpDirectoryFromAnotherProcessIsIgnored) {
  TempDir tmp;
  Rig a(1);
  CheckpointManager m(tmp.path().string(), nullptr);
  m.save(a.parts(), state_at(4));
  fs::create_directories(tmp.path() / "global_step_5.tmp-424242" / "actor");
  std::ofstream(tmp.path() / "global_step_5.tmp-424242" / "actor" / "model.pt") << "torn";
  std::ofstream(tmp.path() / "latest_checkpointed_iteration.txt.tmp-424242") << "5";
  EXPECT_EQ(m.latest_step().value(), 4);
  EXPECT_EQ(m.resolve_resume(ResumeMode::kAuto, "").value(),
            (tmp.path() / "global_step_4").string());
}

TEST(Checkpoint, SavingTheSameStepAgainReplacesIt) {
  TempDir tmp;
  Rig a(1);
  CheckpointManager m(tmp.path().string(), nullptr);
  m.save(a.parts(), state_at(2));
  auto s = state_at(2);
  s.kl_coef = 0.5;
  m.save(a.parts(), s);
  Rig b(2);
  EXPECT_DOUBLE_EQ(m.load(m.step_dir(2), b.parts()).kl_coef, 0.5);
}

TEST(Checkpoint, ResumeModes) {
  TempDir tmp;
  CheckpointManager m(tmp.path().string(), nullptr);
  EXPECT_FALSE(m.resolve_resume(ResumeMode::kAuto, "").has_value());  // nothing saved yet
  Rig a(1);
  m.save(a.parts(), state_at(6));
  EXPECT_FALSE(m.resolve_resume(ResumeMode::kDisable, "").has_value());
  EXPECT_EQ(m.resolve_resume(ResumeMode::kAuto, "").value(), m.step_dir(6));
  EXPECT_EQ(m.resolve_resume(ResumeMode::kResumePath, m.step_dir(6)).value(), m.step_dir(6));
  const std::string missing = (tmp.path() / "global_step_99").string();
  try {
    m.resolve_resume(ResumeMode::kResumePath, missing);
    FAIL() << "no throw";
  } catch (const verl::Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  EXPECT_THROW(m.resolve_resume(ResumeMode::kResumePath, ""), verl::Error);
  EXPECT_EQ(parse_resume_mode("resume_path"), ResumeMode::kResumePath);
  EXPECT_THROW(parse_resume_mode("latest"), verl::Error);
}

TEST(Checkpoint, AutoResumeRefusesPointerToMissingDirectory) {
  TempDir tmp;
  std::ofstream(tmp.path() / "latest_checkpointed_iteration.txt") << "7\n";
  CheckpointManager m(tmp.path().string(), nullptr);
  try {
    m.resolve_resume(ResumeMode::kAuto, "");
    FAIL() << "no throw";
  } catch (const verl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("global_step_7"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, LoadingACriticThatWasNotSavedNamesIt) {
  TempDir tmp;
  Rig a(1);
  CheckpointParts actor_only;
  actor_only.actor = a.actor.get();
  actor_only.actor_optim = a.actor_opt.get();
  CheckpointManager m(tmp.path().string(), nullptr);
  m.save(actor_only, state_at(1));
  Rig b(2);
  try {
    m.load(m.step_dir(1), b.parts());
    FAIL() << "no throw";
  } catch (const verl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("critic"), std::string::npos) << e.what();
  }
}


// Two ranks (threads) save through one manager each: rank 0 writes, both return after it; when
// rank 0's write fails, rank 1 fails too instead of running ahead of a missing checkpoint.
TEST(Checkpoint, RankZeroWritesAndOtherRanksLearnTheOutcome) {
  TempDir tmp;
  Rig rigs[2] = {Rig(1), Rig(2)};
  ExplodingModule boom;
  std::string dirs[2], errors[2];
  testing::run_ranks(2, [&](Distributed& d) {
    const int r = d.rank();
    CheckpointManager m(tmp.path().string(), &d);
    dirs[r] = m.save(rigs[r].parts(), state_at(1));
    CheckpointParts broken = rigs[r].parts();
    broken.critic = &boom;
    try {
      m.save(broken, state_at(2));
    } catch (const verl::Error& e) {
      errors[r] = e.what();
    }
  }, testing::RanksOptions{0, false, std::chrono::seconds(30)});
  EXPECT_EQ(dirs[0], (tmp.path() / "global_step_1").string());
  EXPECT_EQ(dirs[1], dirs[0]);
  EXPECT_NE(errors[0].find("disk on fire"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("rank 0 failed to save step 2"), std::string::npos) << errors[1];
  // Rank 0's weights are the ones on disk.
  Rig check(3);
  CheckpointManager m(tmp.path().string(), nullptr);
  m.load(m.step_dir(1), check.parts());
  EXPECT_TRUE(torch::equal(check.actor->weight, rigs[0].actor->weight));
  EXPECT_FALSE(torch::equal(check.actor->weight, rigs[1].actor->weight));
}

}  // namespace
}  // namespace verl::trainer

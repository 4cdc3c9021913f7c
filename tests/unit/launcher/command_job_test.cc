// Command jobs (`verlctl submit -- CMD`, command_job.h): the submit body's `command` field, the
// job record that says what it runs, and the head's orders for its ranks: the same placement,
// failure and restart as a train job, another argv and environment.
#include "launcher/command_job.h"

#include <gtest/gtest.h>

#include "launcher/job_controller.h"
#include "launcher/wire.h"
#include "tests/testing/controller_fixture.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;

using testing::has_env;

TEST(CommandJob, Base64RoundTripsEveryByteAndLength) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes += static_cast<char>(i);
  for (size_t n : {0u, 1u, 2u, 3u, 4u, 255u, 256u}) EXPECT_EQ(base64_decode(base64_encode(bytes.substr(0, n))), bytes.substr(0, n)) << n;
  EXPECT_EQ(base64_encode("ab"), "YWI=");
  EXPECT_EQ(base64_encode("abc"), "YWJj");
  EXPECT_THROW(base64_decode("YWI"), std::invalid_argument);
  EXPECT_THROW(base64_decode("Y=Jj"), std::invalid_argument);
  EXPECT_THROW(base64_decode("YW!j"), std::invalid_argument);
}

TEST(CommandJob, EnvEntriesMustBeNameEqualsValue) {
  EXPECT_EQ(env_entry_problem("OMP_NUM_THREADS=4"), "");
  EXPECT_EQ(env_entry_problem("EMPTY="), "");
  EXPECT_EQ(env_entry_problem("A=b=c"), "") << "the value may hold '='";
  EXPECT_NE(env_entry_problem("NOVALUE").find("'NOVALUE' is not NAME=value"), std::string::npos);
  EXPECT_NE(env_entry_problem("1X=2").find("'1X'"), std::string::npos);
  EXPECT_NE(env_entry_problem("A-B=2").find("not a variable name"), std::string::npos);
}

TEST(CommandJob, SubmitBodyIsCheckedNamingTheField) {
  const Json ok = {{"kind", "command"},
                   {"command", {{"argv", {"python3", "x.py"}}, {"env", {"A=1"}}, {"ranks_per_node", 1},
                                {"working_dir", {{"source", "/src"}, {"tar_base64", base64_encode("tarbytes")}}}}}};
  const auto c = wire::parse<wire::Submit>(ok).command.value();
  EXPECT_EQ(c.spec.argv, (std::vector<std::string>{"python3", "x.py"}));
  EXPECT_EQ(c.spec.env, (std::vector<std::string>{"A=1"}));
  EXPECT_EQ(c.spec.ranks_per_node, 1);
  EXPECT_EQ(c.spec.working_dir, "/src");
  EXPECT_EQ(c.spec.working_dir_bytes, 8);
  EXPECT_EQ(c.working_dir_tar, "tarbytes");
  auto refused = [](Json body) {
    try {
      body["kind"] = "command";
      (void)wire::parse<wire::Submit>(body);
    } catch (const wire::BadMessage& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refused(Json{{"kind", "command"}}).find("needs 'command'"), std::string::npos);
  EXPECT_NE(refused(Json{{"command", {{"argv", Json::array()}}}}).find("'argv' must be a non-empty array"), std::string::npos);
  EXPECT_NE(refused(Json{{"command", {{"argv", {"x", 1}}}}}).find("jobs: command: argv[1] must be a string"), std::string::npos);
  EXPECT_NE(refused(Json{{"command", {{"argv", {"x"}}, {"env", {"BAD"}}}}}).find("'env[0]': 'BAD'"), std::string::npos);
  EXPECT_NE(refused(Json{{"command", {{"argv", {"x"}}, {"ranks_per_node", -1}}}}).find("'ranks_per_node'"), std::string::npos);
  EXPECT_NE(refused(Json{{"command", {{"argv", {"x"}}, {"working_dir", {{"source", "/s"}, {"tar_base64", "!!!!"}}}}}})
                .find("command.working_dir: 'tar_base64'"),
            std::string::npos);
}

TEST(CommandJob, SpecRoundTripsThroughJson) {
  CommandSpec c;
  c.argv = {"sh", "-c", "echo $RANK"};
  c.env = {"A=1"};
  c.ranks_per_node = 1;
  c.working_dir = "/home/me/proj";
  c.working_dir_bytes = 10240;
  const Json j = c;
  EXPECT_EQ(j["working_dir"]["source"], "/home/me/proj");
  const auto back = j.get<CommandSpec>();
  EXPECT_EQ(back.argv, c.argv);
  EXPECT_EQ(back.env, c.env);
  EXPECT_EQ(back.ranks_per_node, 1);
  EXPECT_EQ(back.working_dir_bytes, 10240);
  EXPECT_EQ(c.display(), "sh -c 'echo $RANK'");
}

// A head's controller over two nodes with two GPUs each.
struct Head : testing::TwoNodeController {
  Head() : TwoNodeController(options(), eight_cpus_two_gpus()) {}
  static ControllerOptions options() {
    ControllerOptions o;
    o.store_port = 29500;
    o.spec_env = {{"NCCL_DEBUG", "WARN"}, {"A", "from-spec"}};
    o.heartbeat_timeout_ms = 1000;
    return o;
  }
  static Resources eight_cpus_two_gpus() {
    Resources r;
    r.cpus = 8;
    r.gpus = 2;
    return r;
  }
  std::optional<JobRecord> submit(Json command, SubmitError* e,
                                  std::vector<std::string> overrides = {"trainer.nnodes=2", "trainer.n_gpus_per_node=2"}) {
    return ctl->submit(Json{{"kind", "command"}, {"overrides", overrides}, {"command", std::move(command)}}, 100, e);
  }
};

TEST(CommandJob, EachRankRunsTheCommandWithTorchrunsVariablesAndEnvLast) {
  Head h;
  SubmitError e;
  const auto j = h.submit({{"argv", {"python3", "allreduce.py"}}, {"env", {"A=mine", "B=2"}}}, &e);
  ASSERT_TRUE(j) << e.error;
  EXPECT_EQ(j->kind, JobKind::kCommand);
  EXPECT_EQ(j->world_size, 4);
  EXPECT_EQ(j->total_steps, 0);
  // The stored record says what it runs.
  const auto stored = *h.store.job(j->id);
  ASSERT_TRUE(stored.command);
  EXPECT_EQ(stored.command->argv, (std::vector<std::string>{"python3", "allreduce.py"}));
  EXPECT_EQ(h.ctl->summary(stored).command, "python3 allreduce.py");
  h.beat(h.n0, Json::array(), 150);
  h.ctl->tick(200);
  const Json o = h.beat(h.n1, Json::array(), 300);
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o[1]["task"], "job-1/3/0");
  EXPECT_EQ(o[1]["kind"], "command");
  EXPECT_EQ(o[1]["argv"], Json::array({"python3", "allreduce.py"}));
  EXPECT_EQ(o[1]["cwd"], "jobs/job-1");
  EXPECT_FALSE(o[1].contains("metrics_file"));
  EXPECT_FALSE(o[1].contains("working_dir"));
  for (const char* v : {"RANK=3", "LOCAL_RANK=1", "WORLD_SIZE=4", "LOCAL_WORLD_SIZE=2", "GROUP_RANK=1",
                        "MASTER_ADDR=10.0.0.1", "MASTER_PORT=29500", "CUDA_VISIBLE_DEVICES=0,1", "VERLCTL_NODE=node-1",
                        "NCCL_DEBUG=WARN", "B=2"})
    EXPECT_TRUE(has_env(o[1], v)) << v << " in " << o[1]["env"].dump();
  // --env comes after the spec's env: the agent applies entries in order, so the last one wins.
  const auto& env = o[1]["env"];
  EXPECT_EQ(env.back(), "B=2");
  size_t spec_at = 0, mine_at = 0;
  for (size_t i = 0; i < env.size(); ++i) {
    if (env[i] == "A=from-spec") spec_at = i;
    if (env[i] == "A=mine") mine_at = i;
  }
  EXPECT_LT(spec_at, mine_at);
}

TEST(CommandJob, RanksPerNodeOneRunsOneProcessHoldingTheNodesGpus) {
  Head h;
  SubmitError e;
  const auto j = h.submit({{"argv", {"torchrun", "t.py"}}, {"ranks_per_node", 1}}, &e);
  ASSERT_TRUE(j) << e.error;
  EXPECT_EQ(j->world_size, 2);
  h.ctl->tick(200);
  const auto placed = h.store.placements(j->id, 0);
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_EQ(placed[1].device, "cuda:0,1");
  const Json o = h.beat(h.n1, Json::array(), 300);
  ASSERT_EQ(o.size(), 1u);
  for (const char* v : {"RANK=1", "LOCAL_RANK=0", "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=1", "GROUP_RANK=1", "CUDA_VISIBLE_DEVICES=0,1"})
    EXPECT_TRUE(has_env(o[0], v)) << v;
  // Its GPUs are taken: a job of one GPU waits.
  const auto other = h.ctl->submit(Json{{"kind", "train"}, {"overrides", {"trainer.nnodes=1", "trainer.n_gpus_per_node=1"}}}, 300, &e);
  ASSERT_TRUE(other);
  h.ctl->tick(400);
  EXPECT_TRUE(h.store.placements(other->id).empty());
}

TEST(CommandJob, ARankExitingNonZeroFailsTheJobNamingRankHostAndCode) {
  Head h;
  SubmitError e;
  const auto j = h.submit({{"argv", {"sh", "-c", "exit 3"}}}, &e, {"trainer.nnodes=2", "trainer.n_gpus_per_node=1"});
  ASSERT_TRUE(j) << e.error;
  h.ctl->tick(200);
  h.beat(h.n0, Json::array(), 300);
  h.beat(h.n1, Json::array(), 300);
  h.beat(h.n0, Json::array({{{"task", "job-1/0/0"}, {"state", "exited"}, {"exit_code", 0}}}), 400);
  h.beat(h.n1, Json::array({{{"task", "job-1/1/0"}, {"state", "exited"}, {"exit_code", 3}}}), 500);
  const auto job = *h.store.job(j->id);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.failure["rank"], 1);
  EXPECT_EQ(job.failure["host"], "host-b");
  EXPECT_EQ(job.failure["exit_code"], 3);
  const std::string reason = job.failure["reason"].get<std::string>();
  EXPECT_NE(reason.find("rank 1 on host-b (node-1) exited with code 3"), std::string::npos) << reason;
  EXPECT_EQ(reason.find("invalid-config"), std::string::npos) << "3 is the program's, not verlctl's exit code";
}

TEST(CommandJob, MaxRestartsRestartsACommandJobWithoutTouchingTheTrainerKeys) {
  Head h;
  SubmitError e;
  const auto j = h.submit({{"argv", {"false"}}}, &e, {"trainer.nnodes=1", "trainer.n_gpus_per_node=1", "trainer.max_restarts=1"});
  ASSERT_TRUE(j) << e.error;
  h.ctl->tick(200);
  h.beat(h.n0, Json::array(), 300);
  h.beat(h.n0, Json::array({{{"task", "job-1/0/0"}, {"state", "exited"}, {"exit_code", 1}}}), 400);
  const auto job = *h.store.job(j->id);
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.attempt, 1);
  h.ctl->tick(500);
  const Json o = h.beat(h.n0, Json::array(), 600);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0]["task"], "job-1/0/1");
  EXPECT_EQ(o[0]["argv"], Json::array({"false"}));
}

TEST(CommandJob, OnlyItsShapeAndRestartsAreReadFromTheConfig) {
  Head h;
  SubmitError e;
  // Three ranks: a trainer's default batch sizes would not split; a command job has none.
  const auto j = h.submit({{"argv", {"x"}}}, &e, {"trainer.nnodes=1", "++trainer.n_gpus_per_node=3", "trainer.max_restarts=2"});
  ASSERT_TRUE(j) << e.error;
  EXPECT_EQ(j->world_size, 3);
  EXPECT_EQ(h.store.job(j->id)->config, (Json{{"trainer", {{"nnodes", 1}, {"n_gpus_per_node", 3}, {"max_restarts", 2}}}}));
  EXPECT_FALSE(h.submit({{"argv", {"x"}}}, &e, {"data.train_batch_size=8"}));
  EXPECT_NE(e.error.find("'data.train_batch_size' does nothing for a command job"), std::string::npos) << e.error;
  EXPECT_FALSE(h.ctl->submit(Json{{"kind", "command"}, {"yaml", "trainer:\n  nnodes: 2\n"}, {"command", {{"argv", {"x"}}}}}, 1, &e));
  EXPECT_NE(e.error.find("takes no job config file"), std::string::npos) << e.error;
}

TEST(CommandJob, TheHeadRefusesWhatItCannotRun) {
  Head h;
  SubmitError e;
  EXPECT_FALSE(h.submit({{"argv", {"x"}}, {"ranks_per_node", 3}}, &e));
  EXPECT_NE(e.error.find("ranks_per_node 3 is neither 1"), std::string::npos) << e.error;
  EXPECT_FALSE(h.submit({{"argv", Json::array()}}, &e));
  EXPECT_NE(e.error.find("'argv'"), std::string::npos);
  EXPECT_FALSE(h.submit({{"argv", {"x"}}}, &e, {"trainer.nnodes=0"}));
  ASSERT_FALSE(e.issues.empty()) << "the overrides are checked as a train job's";
  EXPECT_EQ(e.issues[0].path, "trainer.nnodes");
  EXPECT_FALSE(h.ctl->submit(Json{{"kind", "command"}, {"preflight", true}, {"command", {{"argv", {"x"}}}}}, 1, &e));
  EXPECT_NE(e.error.find("no job preflight"), std::string::npos);
  EXPECT_TRUE(h.store.jobs().empty());
}

TEST(CommandJob, AWorkingDirectoryIsKeptWithTheJobAndNamedInItsOrders) {
  Head h;
  SubmitError e;
  const auto j = h.submit({{"argv", {"./run.sh"}}, {"working_dir", {{"source", "/src/proj"}, {"tar_base64", base64_encode("TAR")}}}},
                          &e, {"trainer.nnodes=1", "trainer.n_gpus_per_node=1"});
  ASSERT_TRUE(j) << e.error;
  EXPECT_EQ(h.store.working_dir(j->id), "TAR");
  EXPECT_EQ(h.store.job(j->id)->command->working_dir, "/src/proj");
  h.ctl->tick(200);
  const Json o = h.beat(h.n0, Json::array(), 300);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0]["working_dir"]["bytes"], 3);
}

}  // namespace
}  // namespace verl::launcher

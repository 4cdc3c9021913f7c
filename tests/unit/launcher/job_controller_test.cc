// The job state machine against a real SQLite store and registry, with time passed in: orders
// in heartbeat answers, SUCCEEDED, FAILED with the rank's host, signal and last lines (others
// told to stop), restarts with resume, node loss, stop, and a head restarted under its jobs.
#include "launcher/job_controller.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "launcher/container.h"
#include "tests/testing/controller_fixture.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;

using testing::has_env;
using testing::reports;

// Two nodes with two CPUs each, registered when the head started.
struct Cluster : testing::TwoNodeController {
  explicit Cluster(int64_t started_ms = 0) : TwoNodeController(options(started_ms), two_cpus(), started_ms) {}
  static ControllerOptions options(int64_t started_ms) {
    ControllerOptions o;
    o.store_port = 29500;
    o.spec_env = {{"NCCL_DEBUG", "WARN"}};
    o.heartbeat_timeout_ms = 1000;
    o.head_started_ms = started_ms;
    return o;
  }
  static Resources two_cpus() {
    Resources r;
    r.cpus = 2;
    return r;
  }
  JobRecord submit(std::vector<std::string> overrides) {
    SubmitError e;
    auto j = ctl->submit(Json{{"kind", "train"}, {"overrides", overrides}}, 100, &e);
    EXPECT_TRUE(j) << e.error;
    return *j;
  }
  // Submitted, placed at 200 and its start orders handed to both nodes at 300.
  JobRecord started(std::vector<std::string> overrides) {
    auto j = submit(std::move(overrides));
    ctl->tick(200);
    beat(n0, Json::array(), 300);
    beat(n1, Json::array(), 300);
    return j;
  }
  JobState state(int64_t id) { return store.job(id)->state; }
};

// A controller over GPU nodes the test registers (placement of GPUs and role devices).
struct GpuNodes {
  JobStore store{":memory:"};
  NodeRegistry registry{":memory:"};
  std::unique_ptr<JobController> ctl;
  GpuNodes() {
    ControllerOptions o;
    o.heartbeat_timeout_ms = 1000;
    ctl = std::make_unique<JobController>(store, registry, o);
  }
  static Resources gpus(int n) {
    Resources r;
    r.cpus = 8 * n;
    r.gpus = n;
    return r;
  }
  NodeRecord add(const std::string& name, const Resources& r) {
    return registry.register_node(name, "host-" + name, static_cast<int64_t>(registry.nodes().size()) + 1, r, 0);
  }
  JobRecord submit(const std::vector<std::string>& overrides, int64_t now_ms = 100) {
    SubmitError e;
    auto j = ctl->submit(Json{{"kind", "train"}, {"overrides", overrides}}, now_ms, &e);
    EXPECT_TRUE(j) << e.error;
    return j ? *j : JobRecord{};
  }
};

Json running(const std::string& task) { return {{"task", task}, {"state", "running"}}; }
Json exited(const std::string& task, int code) { return {{"task", task}, {"state", "exited"}, {"exit_code", code}}; }
Json killed(const std::string& task, int sig) { return {{"task", task}, {"state", "exited"}, {"signal", sig}}; }

const std::vector<std::string> kTwoRanks = {"trainer.nnodes=2", "trainer.n_gpus_per_node=1"};

TEST(JobController, InvalidConfigIsRefusedWithItsKeyPath) {
  Cluster c;
  SubmitError e;
  EXPECT_FALSE(c.ctl->submit(Json{{"kind", "train"}, {"overrides", {"trainer.nnodes=0"}}}, 1, &e));
  EXPECT_EQ(e.status, 400);
  ASSERT_FALSE(e.issues.empty());
  EXPECT_EQ(e.issues[0].path, "trainer.nnodes");
  EXPECT_FALSE(c.ctl->submit(Json{{"kind", "train"}, {"yaml", "trainer:\n  nnodse: 2\n"}, {"file", "job.yaml"}}, 1, &e));
  EXPECT_EQ(e.issues[0].where.file, "job.yaml");
  EXPECT_FALSE(c.ctl->submit(Json{{"kind", "probe"}, {"argv", {"up", "--local", "1"}}}, 1, &e)) << "only train|probe";
  EXPECT_TRUE(c.store.jobs().empty());
}

TEST(JobController, PlacesRanksAndOrdersThemWithTheirRendezvous) {
  Cluster c;
  const auto j = c.submit(kTwoRanks);
  EXPECT_TRUE(j.config["trainer"]["metrics_file"].is_null()) << "the job's own choice is kept";
  c.beat(c.n0, Json::array(), 150);  // the head learns node-0's address
  c.ctl->tick(200);
  EXPECT_EQ(c.state(j.id), JobState::kRunning);
  const Json o0 = c.beat(c.n0, Json::array(), 300);
  ASSERT_EQ(o0.size(), 1u);
  EXPECT_EQ(o0[0]["task"], "job-1/0/0");
  EXPECT_EQ(o0[0]["action"], "start");
  EXPECT_EQ(o0[0]["cwd"], "jobs/job-1");
  EXPECT_TRUE(has_env(o0[0], "RANK=0"));
  EXPECT_TRUE(has_env(o0[0], "WORLD_SIZE=2"));
  EXPECT_TRUE(has_env(o0[0], "MASTER_ADDR=10.0.0.1"));
  EXPECT_TRUE(has_env(o0[0], "MASTER_PORT=29500"));
  EXPECT_TRUE(has_env(o0[0], "NCCL_DEBUG=WARN")) << "the spec's env reaches every rank";
  EXPECT_EQ(o0[0]["metrics_file"], "checkpoints/verlctl/default/metrics.jsonl") << "the trainer's default place";
  const Json o1 = c.beat(c.n1, Json::array(), 300);
  ASSERT_EQ(o1.size(), 1u);
  EXPECT_TRUE(has_env(o1[0], "RANK=1"));
  EXPECT_TRUE(has_env(o1[0], "MASTER_ADDR=10.0.0.1")) << "rank 0's node hosts the store";
  // Reported: no more start orders.
  EXPECT_TRUE(c.beat(c.n0, Json::array({running("job-1/0/0")}), 400).empty());
  const Json d = c.ctl->detail(*c.store.job(j.id), 400);
  EXPECT_EQ(d["placement"][0]["dir"], "/w/node-0/jobs/job-1");
  EXPECT_EQ(d["rendezvous"]["master_port"], 29500);
}

TEST(JobController, RankZeroShipsTheMetricsFileTheJobNames) {
  Cluster c;
  auto ov = kTwoRanks;
  ov.push_back("trainer.metrics_file=/data/run7/metrics.jsonl");
  ov.push_back("trainer.logger=[console]");
  const auto j = c.submit(ov);
  EXPECT_EQ(j.config["trainer"]["metrics_file"], "/data/run7/metrics.jsonl");
  // The trainer writes metrics.jsonl whatever trainer.logger says: the list stays the job's.
  EXPECT_EQ(j.config["trainer"]["logger"], Json::array({"console"}));
  c.beat(c.n0, Json::array(), 150);
  c.ctl->tick(200);
  const Json o0 = c.beat(c.n0, Json::array(), 300);
  const Json o1 = c.beat(c.n1, Json::array(), 300);
  ASSERT_EQ(o0.size(), 1u);
  ASSERT_EQ(o1.size(), 1u);
  EXPECT_EQ(o0[0]["metrics_file"], "/data/run7/metrics.jsonl");
  EXPECT_EQ(o1[0]["metrics_file"], "") << "only rank 0's metrics are shipped";
}

TEST(JobController, OrdersCarryTheSpecsContainerNamedAfterTheClusterAndTask) {
  for (const std::string runtime : {"podman", "none"}) {
    JobStore store{":memory:"};
    NodeRegistry registry{":memory:"};
    ControllerOptions o;
    o.cluster_name = "lab";
    o.container = {{"runtime", runtime}, {"image", "verl:1"}, {"shm_size", "8g"}, {"mounts", {"/d:/d"}}};
    JobController ctl(store, registry, o);
    Resources r;
    r.cpus = 2;
    const auto n0 = registry.register_node("node-0", "host-a", 1, r, 0);
    SubmitError e;
    ASSERT_TRUE(ctl.submit(Json{{"kind", "train"}, {"overrides", {"trainer.nnodes=1", "trainer.n_gpus_per_node=1"}}},
                           100, &e));
    ASSERT_TRUE(ctl.submit(Json{{"kind", "probe"}, {"argv", {"probe", "--only", "shm"}}}, 100, &e));
    ctl.heartbeat(n0, reports(Json::array()), "10.0.0.1", "/w", 150);
    ctl.tick(200);
    const Json orders = ctl.heartbeat(n0, reports(Json::array()), "10.0.0.1", "/w", 300);
    ASSERT_EQ(orders.size(), 2u) << "the train rank and the probe: " << orders.dump();
    for (const auto& order : orders) {
      if (runtime == "none") {
        EXPECT_FALSE(order.contains("container")) << order.dump();
        continue;
      }
      ASSERT_TRUE(order.contains("container")) << "train and probe tasks alike: " << order.dump();
      EXPECT_EQ(order["container"]["runtime"], "podman");
      EXPECT_EQ(order["container"]["image"], "verl:1");
      EXPECT_EQ(order["container"]["mounts"], Json::array({"/d:/d"}));
      const std::string task = order["task"];
      EXPECT_EQ(order["container"]["name"], container_name("lab", task));
    }
  }
}

// The order for `job` in a heartbeat's answer.
Json order_of(const Json& orders, const std::string& job) {
  for (const auto& o : orders)
    if (o.value("job", std::string()) == job) return o;
  return Json();
}

TEST(JobController, AProbeJobsTasksAreRanksOfOneRendezvousOnAFreePort) {
  Cluster c;
  c.beat(c.n0, Json::array(), 150);
  c.beat(c.n1, Json::array(), 150);
  // A training job's rank 0 holds the store port on node-0 ...
  const auto train = c.submit(kTwoRanks);
  c.ctl->tick(200);
  ASSERT_EQ(c.state(train.id), JobState::kRunning);
  // ... so the probe job, whose rank 0 is node-0 too, meets on the next port up.
  SubmitError e;
  const auto probe = c.ctl->submit(Json{{"kind", "probe"}, {"argv", {"probe", "--only", "nccl_inter"}}}, 250, &e);
  ASSERT_TRUE(probe) << e.error;
  c.ctl->tick(300);
  EXPECT_EQ(c.state(probe->id), JobState::kRunning);
  const Json o0 = order_of(c.beat(c.n0, Json::array(), 400), probe->name());
  const Json o1 = order_of(c.beat(c.n1, Json::array(), 400), probe->name());
  ASSERT_TRUE(o0.is_object() && o1.is_object());
  EXPECT_EQ(o0["argv"], Json::array({"verlctl", "probe", "--local", "-o", "json", "--only", "nccl_inter"}));
  for (const auto& [o, rank, node] : {std::tuple{o0, 0, "node-0"}, std::tuple{o1, 1, "node-1"}}) {
    EXPECT_TRUE(has_env(o, "RANK=" + std::to_string(rank))) << o.dump();
    EXPECT_TRUE(has_env(o, "WORLD_SIZE=2")) << o.dump();
    EXPECT_TRUE(has_env(o, "MASTER_ADDR=10.0.0.1")) << "rank 0's node, as its heartbeats come: " << o.dump();
    EXPECT_TRUE(has_env(o, "MASTER_PORT=29501")) << o.dump();
    EXPECT_TRUE(has_env(o, std::string("VERLCTL_NODE=") + node)) << o.dump();
    EXPECT_TRUE(has_env(o, "NCCL_DEBUG=WARN")) << "the spec's env reaches probe ranks too";
  }
  EXPECT_EQ(c.ctl->detail(*c.store.job(probe->id), 400).rendezvous["master_port"], 29501);

  // Once the training job is over, the next probe job gets the store port itself.
  c.ctl->stop(train.id, 1, 500);
  c.beat(c.n0, Json::array({killed(train.name() + "/0/0", 15), exited(probe->name() + "/0/0", 0)}), 600);
  c.beat(c.n1, Json::array({killed(train.name() + "/1/0", 15), exited(probe->name() + "/1/0", 0)}), 600);
  ASSERT_EQ(c.state(probe->id), JobState::kSucceeded);
  const auto next = c.ctl->submit(Json{{"kind", "probe"}}, 700, &e);
  ASSERT_TRUE(next);
  c.ctl->tick(800);
  EXPECT_TRUE(has_env(order_of(c.beat(c.n1, Json::array(), 900), next->name()), "MASTER_PORT=29500"));
}

// Agents register in whatever order they start: under load node-1's came first, and a probe
// job's rank 0 (and a training job's) went to node-1 (issue 16, case 11, seen by
// cluster_probe_test under ctest -j 2). Ranks follow the spec's node order instead.
TEST(JobController, RanksFollowTheSpecsNodeOrderNotTheRegistrationOrder) {
  JobStore store(":memory:");
  NodeRegistry registry(":memory:");
  ControllerOptions o;
  o.store_port = 29500;
  o.node_order = {"node-0", "node-1"};
  JobController ctl(store, registry, o);
  Resources r;
  r.cpus = 2;
  registry.register_node("node-1", "host-b", 2, r, 0);  // first to register
  registry.register_node("node-0", "host-a", 1, r, 0);
  SubmitError e;
  const auto train = ctl.submit(Json{{"kind", "train"}, {"overrides", kTwoRanks}}, 100, &e);
  ASSERT_TRUE(train) << e.error;
  const auto probe = ctl.submit(Json{{"kind", "probe"}}, 100, &e);
  ASSERT_TRUE(probe) << e.error;
  ctl.tick(200);
  for (const auto& job : {*train, *probe}) {
    const auto placed = store.placements(job.id, 0);
    ASSERT_EQ(placed.size(), 2u) << job.name();
    for (const auto& p : placed) EXPECT_EQ(p.node, p.rank == 0 ? "node-0" : "node-1") << job.name() << " rank " << p.rank;
  }
}

TEST(JobController, EveryRankExitingZeroSucceeds) {
  Cluster c;
  const auto j = c.started(kTwoRanks);
  c.beat(c.n0, Json::array({exited("job-1/0/0", 0)}), 400);
  EXPECT_EQ(c.state(j.id), JobState::kRunning) << "rank 1 still runs";
  c.beat(c.n1, Json::array({exited("job-1/1/0", 0)}), 500);
  EXPECT_EQ(c.state(j.id), JobState::kSucceeded);
  EXPECT_EQ(c.store.job(j.id)->ended_ms, 500);
}

TEST(JobController, AKilledRankFailsTheJobAndTheOthersAreStopped) {
  Cluster c;
  const auto j = c.started(kTwoRanks);
  c.beat(c.n0, Json::array({running("job-1/0/0")}), 350);
  c.store.append_log(j.id, 0, 1, "host-b", "stderr", 0, "step 3\nstep 4 half", false);
  c.beat(c.n1, Json::array({killed("job-1/1/0", 9)}), 400);
  const auto job = *c.store.job(j.id);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.failure["rank"], 1);
  EXPECT_EQ(job.failure["host"], "host-b");
  EXPECT_EQ(job.failure["signal"], 9);
  EXPECT_NE(job.failure["reason"].get<std::string>().find("killed by signal 9"), std::string::npos);
  EXPECT_EQ(job.failure["last_lines"], Json::array({"step 3"}));
  const Json o = c.beat(c.n0, Json::array({running("job-1/0/0")}), 500);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0]["action"], "stop");
  EXPECT_EQ(o[0]["task"], "job-1/0/0");
  c.beat(c.n0, Json::array({killed("job-1/0/0", 15)}), 600);
  EXPECT_EQ(c.store.job(j.id)->failure["rank"], 1) << "the stopped rank does not replace the cause";
  // The partial line of the dead rank is there once every rank is gone.
  EXPECT_EQ(c.store.tail_lines(j.id, 1, 1)[0].text, "step 4 half");
}

TEST(JobController, MaxRestartsStartsTheNextAttemptResuming) {
  Cluster c;
  auto ov = kTwoRanks;
  ov.push_back("trainer.max_restarts=1");
  ov.push_back("trainer.resume_mode=disable");
  const auto j = c.started(ov);
  c.beat(c.n1, Json::array({killed("job-1/1/0", 9)}), 400);
  auto job = *c.store.job(j.id);
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.attempt, 1);
  EXPECT_EQ(job.restarts, 1);
  EXPECT_EQ(job.config["trainer"]["resume_mode"], "auto");
  c.ctl->tick(450);
  EXPECT_TRUE(c.store.placements(j.id, 1).empty()) << "rank 0 of attempt 1 still holds node-0's slot";
  const Json stop = c.beat(c.n0, Json::array({running("job-1/0/0")}), 500);
  ASSERT_EQ(stop.size(), 1u);
  EXPECT_EQ(stop[0]["action"], "stop");
  c.beat(c.n0, Json::array({killed("job-1/0/0", 15)}), 600);
  c.ctl->tick(700);
  ASSERT_EQ(c.store.placements(j.id, 1).size(), 2u);
  const Json start = c.beat(c.n0, Json::array(), 800);
  ASSERT_EQ(start.size(), 1u);
  EXPECT_EQ(start[0]["task"], "job-1/0/1");
  EXPECT_NE(start[0]["files"]["job.yaml"].get<std::string>().find("resume_mode: auto"), std::string::npos);
  bool restarting = false;
  for (const auto& e : c.store.events(j.id)) restarting |= e.state == "RESTARTING" && e.detail.find("attempt 2 of 2") == 0;
  EXPECT_TRUE(restarting);
  // The second failure is the last.
  c.beat(c.n1, Json::array(), 800);
  c.beat(c.n1, Json::array({exited("job-1/1/1", 1)}), 900);
  c.ctl->tick(1000);
  EXPECT_EQ(c.state(j.id), JobState::kRunning) << "an exit code waits a quarter of the heartbeat timeout for a cause";
  c.ctl->tick(1150);
  EXPECT_EQ(c.state(j.id), JobState::kFailed);
  EXPECT_EQ(c.store.job(j.id)->failure["rank"], 1);
}

// Rank 0 is killed; rank 1, whose collective broke, exits with code 1 and its agent reports
// first. The job fails naming rank 0 and the signal, not the rank that only reacted.
TEST(JobController, ARankKilledIsTheCauseEvenWhenAPeersErrorArrivesFirst) {
  Cluster c;
  const auto j = c.started(kTwoRanks);
  c.beat(c.n0, Json::array({running("job-1/0/0")}), 400);
  c.beat(c.n1, Json::array({exited("job-1/1/0", 1)}), 500);
  EXPECT_EQ(c.state(j.id), JobState::kRunning);
  c.beat(c.n0, Json::array({killed("job-1/0/0", 9)}), 600);
  const auto job = *c.store.job(j.id);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.failure["rank"], 0);
  EXPECT_EQ(job.failure["signal"], 9);
  EXPECT_NE(job.failure["reason"].get<std::string>().find("killed by signal 9"), std::string::npos) << job.failure.dump();
}

// A restart on a node with GPUs to spare: the next attempt waits until the previous attempt's
// ranks have exited (they hold the rendezvous port and their GPUs through their stop grace),
// then goes back to the same node and port; a job that succeeds after a restart has no failure.
TEST(JobController, ARestartWaitsForThePreviousAttemptsRanksAndReturnsToItsNodes) {
  JobStore store{":memory:"};
  NodeRegistry registry{":memory:"};
  ControllerOptions o;
  o.store_port = 29500;
  o.heartbeat_timeout_ms = 1000;
  JobController ctl(store, registry, o);
  Resources r;
  r.cpus = 64;
  r.gpus = 8;
  const auto big = registry.register_node("node-0", "host-a", 1, r, 0);
  const auto other = registry.register_node("node-1", "host-b", 2, r, 0);
  SubmitError e;
  const auto j = ctl.submit(Json{{"kind", "train"},
                                 {"overrides", {"trainer.nnodes=1", "trainer.n_gpus_per_node=2", "trainer.max_restarts=1"}}},
                            100, &e);
  ASSERT_TRUE(j) << e.error;
  ctl.heartbeat(big, reports(Json::array()), "10.0.0.1", "/w", 150);
  ctl.heartbeat(other, reports(Json::array()), "10.0.0.2", "/w", 150);
  ctl.tick(200);
  ASSERT_EQ(store.placements(j->id, 0).size(), 2u);
  EXPECT_EQ(store.placements(j->id, 0)[0].node, "node-0");
  Json all = Json::array();
  for (int rank = 0; rank < 2; ++rank) all.push_back(running("job-1/" + std::to_string(rank) + "/0"));
  ctl.heartbeat(big, reports(all), "10.0.0.1", "/w", 300);
  all[1] = killed("job-1/1/0", 9);
  ctl.heartbeat(big, reports(all), "10.0.0.1", "/w", 400);
  EXPECT_EQ(store.job(j->id)->attempt, 1);
  ctl.tick(450);
  EXPECT_TRUE(store.placements(j->id, 1).empty()) << "rank 0 of attempt 1 still runs: GPUs 2-7 are free, the port is not";
  for (int rank : {0}) all[rank] = killed("job-1/" + std::to_string(rank) + "/0", 15);
  ctl.heartbeat(big, reports(all), "10.0.0.1", "/w", 500);
  ctl.tick(600);
  const auto next = store.placements(j->id, 1);
  ASSERT_EQ(next.size(), 2u);
  for (const auto& p : next) EXPECT_EQ(p.node, "node-0") << "back where its checkpoints are";
  EXPECT_EQ(store.job(j->id)->rendezvous["master_port"], 29500);
  Json done = Json::array();
  for (int rank = 0; rank < 2; ++rank) done.push_back(exited("job-1/" + std::to_string(rank) + "/1", 0));
  ctl.heartbeat(big, reports(Json::array()), "10.0.0.1", "/w", 700);
  ctl.heartbeat(big, reports(done), "10.0.0.1", "/w", 800);
  const auto fin = *store.job(j->id);
  EXPECT_EQ(fin.state, JobState::kSucceeded);
  EXPECT_TRUE(fin.failure.is_null()) << "the restart's cause is an event, not the job's failure: " << fin.failure.dump();
  bool restarting = false;
  std::string events;
  for (const auto& ev : store.events(j->id)) {
    restarting |= ev.state == "RESTARTING" && ev.detail.find("signal 9") != std::string::npos;
    events += ev.state + ": " + ev.detail + "\n";
  }
  EXPECT_TRUE(restarting) << events;
}

TEST(JobController, ALostNodeFailsItsJobNamingTheNode) {
  Cluster c;
  const auto j = c.started(kTwoRanks);
  c.beat(c.n1, Json::array({running("job-1/1/0")}), 400);
  c.registry.heartbeat(c.n0.id, 5000);
  c.registry.mark_lost(5000, 1000);  // node-1 has been silent since 400
  c.ctl->tick(5000);
  const auto job = *c.store.job(j.id);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.failure["node"], "node-1");
  EXPECT_NE(job.failure["reason"].get<std::string>().find("node node-1 (host-b) lost"), std::string::npos);
}

TEST(JobController, StopEndsInStoppedOnceTheRanksAreGone) {
  Cluster c;
  const auto j = c.started(kTwoRanks);
  c.ctl->stop(j.id, 3, 400);
  EXPECT_EQ(c.state(j.id), JobState::kRunning);
  const Json o = c.beat(c.n0, Json::array({running("job-1/0/0")}), 500);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0]["grace_s"], 3.0);
  c.beat(c.n0, Json::array({killed("job-1/0/0", 15)}), 600);
  c.beat(c.n1, Json::array({exited("job-1/1/0", 0)}), 600);
  EXPECT_EQ(c.state(j.id), JobState::kStopped);
  // A pending job stops at once.
  const auto k = c.submit(kTwoRanks);  // not placed: no tick
  c.ctl->stop(k.id, 1, 700);
  EXPECT_EQ(c.state(k.id), JobState::kStopped);
}

// Issue 16, case 4: the jobs placed in one pass count against the slots of the next one.
TEST(JobController, JobsPlacedInOnePassDoNotShareANode) {
  Cluster c;  // two CPU nodes
  const std::vector<std::string> one = {"trainer.nnodes=1", "trainer.n_gpus_per_node=1"};
  const auto a = c.submit(one), b = c.submit(one), third = c.submit(one);
  c.ctl->tick(200);
  const auto pa = c.store.placements(a.id), pb = c.store.placements(b.id);
  ASSERT_EQ(pa.size(), 1u);
  ASSERT_EQ(pb.size(), 1u);
  EXPECT_EQ(pa[0].node, "node-0");
  EXPECT_EQ(pb[0].node, "node-1") << "node-0 already runs the first job";
  EXPECT_TRUE(c.store.placements(third.id).empty()) << "no node is free for a third job";
  EXPECT_EQ(c.state(third.id), JobState::kPending);
}

TEST(JobController, JobsPlacedInOnePassGetDistinctGpus) {
  GpuNodes c;
  c.add("node-0", GpuNodes::gpus(2));
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(c.submit({"trainer.nnodes=1", "trainer.n_gpus_per_node=1"}).id);
  c.ctl->tick(200);
  const auto p0 = c.store.placements(ids[0]), p1 = c.store.placements(ids[1]);
  ASSERT_EQ(p0.size(), 1u);
  ASSERT_EQ(p1.size(), 1u);
  EXPECT_EQ(p0[0].device, "cuda:0");
  EXPECT_EQ(p1[0].device, "cuda:1") << "GPU 0 is the first job's";
  EXPECT_TRUE(c.store.placements(ids[2]).empty()) << "both GPUs are taken";
}

// The seed's device mapping: actor and reference on GPUs 0-3, rollout and critic on 4-7, four
// ranks on an 8-GPU node: each rank gets its actor's and its critic's GPU, and all see the 8.
TEST(JobController, RolePlacementGivesEachRankTheGpusOfItsRoles) {
  GpuNodes c;
  const auto node = c.add("node-0", GpuNodes::gpus(8));
  const auto j = c.submit({"trainer.nnodes=1", "trainer.n_gpus_per_node=4", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
                           "critic.ppo_micro_batch_size_per_gpu=8", "actor_rollout_ref.actor.device=cuda:0,1,2,3",
                           "actor_rollout_ref.ref.device=cuda:0,1,2,3", "actor_rollout_ref.rollout.device=cuda:4,5,6,7",
                           "critic.device=cuda:4,5,6,7"});
  c.ctl->tick(200);
  const auto p = c.store.placements(j.id);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].device, "cuda:0,4");
  EXPECT_EQ(p[3].device, "cuda:3,7");
  c.registry.heartbeat(node.id, 300);
  const Json orders = Json(c.ctl->heartbeat(node, {}, "10.0.0.1", "/w", 300));
  ASSERT_EQ(orders.size(), 4u);
  EXPECT_TRUE(has_env(orders[1], "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7")) << orders[1].dump();
  EXPECT_TRUE(has_env(orders[1], "LOCAL_RANK=1"));
  // A second such job does not fit beside it: the GPUs are all the first job's.
  const auto k = c.submit({"trainer.nnodes=1", "trainer.n_gpus_per_node=1"}, 400);
  c.ctl->tick(500);
  EXPECT_TRUE(c.store.placements(k.id).empty());
}

TEST(JobController, ARoleGpuListOfTheWrongLengthIsRefusedNamingTheKey) {
  Cluster c;
  SubmitError e;
  auto j = c.ctl->submit(Json{{"kind", "train"},
                              {"overrides", {"trainer.n_gpus_per_node=2", "critic.device=cuda:0,1,2"}}},
                         100, &e);
  ASSERT_FALSE(j);
  bool named = false;
  for (const auto& i : e.issues) named |= i.path == "critic.device";
  EXPECT_TRUE(named) << e.error;
}

Json preflight_ended(const std::string& task, Json report) {
  return {{"task", task}, {"state", "exited"}, {"exit_code", 0}, {"result", std::move(report)}};
}
Json check(const std::string& key, const std::string& path, bool ok, const std::string& detail) {
  return {{"check", "data"}, {"key", key}, {"path", path}, {"ok", ok}, {"detail", detail}};
}

TEST(JobController, PreflightRunsOnEveryNodeBeforeAnyRankStarts) {
  Cluster c;
  SubmitError e;
  auto j = c.ctl->submit(Json{{"kind", "train"}, {"overrides", kTwoRanks}, {"preflight", true}}, 100, &e);
  ASSERT_TRUE(j) << e.error;
  c.ctl->tick(200);
  const Json o0 = c.beat(c.n0, Json::array(), 300), o1 = c.beat(c.n1, Json::array(), 300);
  ASSERT_EQ(o0.size(), 1u);
  EXPECT_EQ(o0[0]["task"], "job-1/preflight/0");
  EXPECT_EQ(o0[0]["kind"], "preflight");
  EXPECT_EQ(o0[0]["cwd"], "jobs/job-1") << "paths resolve in the job directory, as the ranks'";
  EXPECT_EQ(o0[0]["argv"][1], "job-preflight");
  EXPECT_TRUE(o0[0]["files"].contains("job.yaml"));
  ASSERT_EQ(o1.size(), 1u);
  EXPECT_EQ(o1[0]["task"], "job-1/preflight/0");
  // node-0 passes; node-1 is still checking: no rank starts anywhere.
  const Json ok = {{"ok", true}, {"checks", Json::array({check("data.train_files", "train.jsonl", true, "JSON")})}};
  EXPECT_TRUE(c.beat(c.n0, Json::array({preflight_ended("job-1/preflight/0", ok)}), 400).empty());
  EXPECT_TRUE(c.beat(c.n1, Json::array({running("job-1/preflight/0")}), 400).empty());
  EXPECT_TRUE(c.beat(c.n0, Json::array(), 450).empty()) << "node-0 waits for node-1's preflight";
  // node-1 passes: its rank starts now, node-0's at its next heartbeat.
  const Json s1 = c.beat(c.n1, Json::array({preflight_ended("job-1/preflight/0", ok)}), 500);
  ASSERT_EQ(s1.size(), 1u);
  EXPECT_EQ(s1[0]["task"], "job-1/1/0");
  const Json s0 = c.beat(c.n0, Json::array(), 600);
  ASSERT_EQ(s0.size(), 1u);
  EXPECT_EQ(s0[0]["task"], "job-1/0/0");
  bool passed = false;
  for (const auto& ev : c.store.events(j->id)) passed = passed || (ev.state == "PREFLIGHT" && ev.detail.find("passed on node-0, node-1") == 0);
  EXPECT_TRUE(passed);
  if (!passed)
    for (const auto& ev : c.store.events(j->id)) ADD_FAILURE() << ev.state << ": " << ev.detail;
}

TEST(JobController, AFailedPreflightFailsTheJobBeforeStartNamingNodeAndFile) {
  Cluster c;
  SubmitError e;
  auto j = c.ctl->submit(Json{{"kind", "train"}, {"overrides", kTwoRanks}, {"preflight", true}}, 100, &e);
  ASSERT_TRUE(j) << e.error;
  c.ctl->tick(200);
  c.beat(c.n0, Json::array(), 300);
  c.beat(c.n1, Json::array(), 300);
  const Json bad = {{"ok", false},
                    {"checks", Json::array({check("data.train_files", "data/train.jsonl", false,
                                                  "data/train.jsonl: no such file")})}};
  c.beat(c.n1, Json::array({preflight_ended("job-1/preflight/0", bad)}), 400);
  EXPECT_EQ(c.state(j->id), JobState::kFailed);
  const auto job = *c.store.job(j->id);
  EXPECT_EQ(job.failure["node"], "node-1");
  const std::string reason = job.failure["reason"];
  EXPECT_NE(reason.find("node-1 (host-b)"), std::string::npos) << reason;
  EXPECT_NE(reason.find("data/train.jsonl"), std::string::npos) << reason;
  EXPECT_EQ(job.restarts, 0) << "a preflight failure is not retried";
  // No rank was ever ordered to start, and node-0's preflight is told to stop.
  const Json o0 = c.beat(c.n0, Json::array({running("job-1/preflight/0")}), 500);
  for (const auto& o : o0) EXPECT_NE(o["action"], "start") << o.dump();
  ASSERT_EQ(o0.size(), 1u);
  EXPECT_EQ(o0[0]["action"], "stop");
  for (const auto& p : c.store.placements(j->id)) EXPECT_EQ(p.state, TaskState::kExited);
}

TEST(JobController, APreflightThatCouldNotRunFailsWithItsOutput) {
  Cluster c;
  SubmitError e;
  auto j = c.ctl->submit(Json{{"kind", "train"}, {"overrides", kTwoRanks}, {"preflight", true}}, 100, &e);
  ASSERT_TRUE(j) << e.error;
  c.ctl->tick(200);
  c.beat(c.n0, Json::array(), 300);
  c.beat(c.n0, Json::array({Json{{"task", "job-1/preflight/0"}, {"state", "exited"}, {"exit_code", 125},
                                 {"output", "Unable to find image 'nope:1' locally"}}}),
         400);
  EXPECT_EQ(c.state(j->id), JobState::kFailed);
  const std::string reason = c.store.job(j->id)->failure["reason"];
  EXPECT_NE(reason.find("exited with code 125"), std::string::npos) << reason;
  EXPECT_NE(reason.find("Unable to find image"), std::string::npos) << reason;
}

TEST(JobController, NcclDebugSetsNcclsInfoVariablesOverTheSpecs) {
  Cluster c;
  SubmitError e;
  auto j = c.ctl->submit(Json{{"kind", "train"}, {"overrides", kTwoRanks}, {"nccl_debug", true}}, 100, &e);
  ASSERT_TRUE(j) << e.error;
  EXPECT_TRUE(c.store.job(j->id)->nccl_debug) << "kept in the store";
  c.ctl->tick(200);
  const Json o0 = c.beat(c.n0, Json::array(), 300);
  ASSERT_EQ(o0.size(), 1u);
  EXPECT_TRUE(has_env(o0[0], "NCCL_DEBUG=INFO"));
  EXPECT_TRUE(has_env(o0[0], "NCCL_DEBUG_SUBSYS=INIT,NET"));
  std::vector<std::string> env = o0[0]["env"];
  EXPECT_GT(std::find(env.begin(), env.end(), "NCCL_DEBUG=INFO") - env.begin(),
            std::find(env.begin(), env.end(), "NCCL_DEBUG=WARN") - env.begin())
      << "after the spec's NCCL_DEBUG=WARN, so that it wins";
  EXPECT_FALSE(c.ctl->submit(Json{{"kind", "train"}, {"nccl_debug", "yes"}}, 100, &e));
}

TEST(JobController, DeclaredResourcesChangePlacement) {
  // Two 8-GPU nodes; the first declares only GPU 7 (nodes[0].resources.gpu_ids: [7]), so a job of
  // 2 ranks per node skips it, and a job of 1 rank there gets cuda:7, not cuda:0.
  GpuNodes c;
  const Resources detected = GpuNodes::gpus(8);
  DeclaredResources d;
  d.gpu_ids = std::vector<int>{7};
  c.add("node-0", declare(detected, d, "node-0"));
  c.add("node-1", detected);
  const auto two = c.submit({"trainer.nnodes=1", "trainer.n_gpus_per_node=2"});
  const auto one = c.submit({"trainer.nnodes=1", "trainer.n_gpus_per_node=1"});
  c.ctl->tick(200);
  const auto p2 = c.store.placements(two.id), p1 = c.store.placements(one.id);
  ASSERT_EQ(p2.size(), 2u);
  EXPECT_EQ(p2[0].node, "node-1") << "node-0 offers one GPU only";
  ASSERT_EQ(p1.size(), 1u);
  EXPECT_EQ(p1[0].node, "node-0");
  EXPECT_EQ(p1[0].device, "cuda:7");
}

TEST(JobController, AHeadRestartedUnderItsJobsTakesBackWhatIsStillRunning) {
  JobStore store(":memory:");
  Cluster before;
  const auto j = before.submit(kTwoRanks);
  before.ctl->tick(200);
  before.beat(before.n0, Json::array(), 300);
  before.beat(before.n1, Json::array(), 300);
  before.beat(before.n0, Json::array({running("job-1/0/0")}), 400);
  before.beat(before.n1, Json::array({running("job-1/1/0")}), 400);
  // A new controller over the same store (the head restarted at 10000); only node-0 registers again.
  NodeRegistry fresh(":memory:");
  ControllerOptions o;
  o.heartbeat_timeout_ms = 1000;
  o.head_started_ms = 10000;
  JobController after(before.store, fresh, o);
  const auto n0 = fresh.register_node("node-0", "host-a", 1, Resources{}, 10100);
  EXPECT_TRUE(after.heartbeat(n0, reports(Json::array({running("job-1/0/0")})), "", "", 10200).empty());
  after.tick(10500);
  EXPECT_EQ(before.state(j.id), JobState::kRunning) << "node-1 still has time to come back";
  after.tick(11100);
  const auto job = *before.store.job(j.id);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_NE(job.failure["reason"].get<std::string>().find("head restarted"), std::string::npos);
  EXPECT_EQ(job.failure["node"], "node-1");
}

}  // namespace
}  // namespace verl::launcher

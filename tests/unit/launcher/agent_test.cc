// The agent against an in-process head: it registers and heartbeats, leaves when the head says
// shutdown, registers again with a head that forgot it, leaves on stop, and exits when the head
// is gone for exit_after.
#include "launcher/agent.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "common/error.h"
#include "launcher/head.h"
#include "launcher/wire.h"
#include "tests/testing/eventually.h"
#include "tests/testing/head_fixture.h"
#include "tests/testing/temp_dir.h"

namespace verl::launcher {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

using testing::AgentRun;
using testing::eventually;
using testing::fast_agent_options;
using testing::find_node;
using testing::kTestToken;

HeadOptions head_options() { return testing::fast_head_options(2000ms, 3000ms); }

TEST(Agent, RegistersHeartbeatsAndLeavesOnShutdown) {
  Head head(head_options());
  head.start();
  AgentRun agent(fast_agent_options(head.port()));
  ASSERT_TRUE(eventually([&] {
    auto n = find_node(head, "node-0");
    return n && n->heartbeats >= 3;
  })) << "the agent must register and heartbeat";
  EXPECT_EQ(find_node(head, "node-0")->resources.cpus, 3);
  testing::client_of(head).post("/api/shutdown", Json::object());
  ASSERT_EQ(agent.wait_for(3s), std::future_status::ready) << "the agent must end after shutdown";
  EXPECT_EQ(agent.get(), AgentExit::kShutdown);
  EXPECT_EQ(find_node(head, "node-0")->state, NodeState::kLeft);
}

TEST(Agent, StopFlagMakesItLeave) {
  Head head(head_options());
  head.start();
  AgentRun agent(fast_agent_options(head.port()));
  ASSERT_TRUE(eventually([&] { return find_node(head, "node-0").has_value(); }));
  agent.stop();
  ASSERT_EQ(agent.wait_for(3s), std::future_status::ready);
  EXPECT_EQ(agent.get(), AgentExit::kStopped);
  const auto n = find_node(head, "node-0");
  EXPECT_EQ(n->state, NodeState::kLeft);
  EXPECT_NE(n->reason.find("signal"), std::string::npos) << n->reason;
}

TEST(Agent, RegistersAgainWithAHeadThatForgotIt) {
  Head head(head_options());
  head.start();
  AgentRun agent(fast_agent_options(head.port()));
  ASSERT_TRUE(eventually([&] { return find_node(head, "node-0").has_value(); }));
  head.registry().clear();  // what a restarted head looks like: heartbeats get 404
  EXPECT_TRUE(eventually([&] { return find_node(head, "node-0").has_value(); })) << "the agent must register again";
  agent.stop();
  ASSERT_EQ(agent.wait_for(3s), std::future_status::ready);
}

TEST(Agent, ExitsWhenTheHeadIsGoneForExitAfter) {
  int port = 0;
  auto head = std::make_unique<Head>(head_options());
  head->start();
  port = head->port();
  AgentRun agent(fast_agent_options(port));
  ASSERT_TRUE(eventually([&] { return find_node(*head, "node-0").has_value(); }));
  head.reset();  // the head is gone
  const auto t0 = Clock::now();
  ASSERT_EQ(agent.wait_for(5s), std::future_status::ready) << "exit_after is 1 s";
  EXPECT_EQ(agent.get(), AgentExit::kHeadLost);
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - t0).count(), 0.8);
}

TEST(Agent, WrongTokenIsAnErrorNotARetryLoop) {
  Head head(head_options());
  head.start();
  auto o = fast_agent_options(head.port());
  o.token = "not-the-token";
  AgentRun agent(o);
  ASSERT_EQ(agent.wait_for(3s), std::future_status::ready);
  EXPECT_THROW(agent.get(), Error);
  EXPECT_TRUE(head.registry().nodes().empty());
}

// A probe task runs `exe probe ...`: here a script that prints what it is given, so that the
// tests choose the report.
class ProbeTasks : public ::testing::Test {
 protected:
  ProbeTasks() { fs::create_directories(dir_ / "work"); }
  std::string script(const std::string& body) { return dir_.script("fake-verlctl", body); }
  AgentOptions options(int port, const std::string& name, const std::string& exe) {
    auto o = fast_agent_options(port, name);
    o.work_dir = (dir_ / "work").string();
    o.exe = exe;
    o.sample_gpus = false;
    o.exit_after = 5000ms;
    return o;
  }
  // Submits a probe job and waits for it to end; returns its detail.
  Json run_probe(Head& head) {
    HeadClient client = testing::client_of(head);
    const std::string id = client.post("/api/jobs", Json{{"kind", "probe"}, {"argv", {"probe"}}}).at("id");
    Json job;
    eventually([&] {
      job = client.get("/api/jobs/" + id);
      return job.value("state", "") == "SUCCEEDED" || job.value("state", "") == "FAILED";
    }, 10000ms);
    return job;
  }
  testing::TempDir dir_{"agent"};
};

// Two reports in one stdout (what appending to an earlier job's log gave): the head gets the
// agent's reason as the rank's result, where it used to get nothing (issue 16, case 12).
TEST_F(ProbeTasks, AReportThatDoesNotParseIsSentAsAnErrorWithItsReason) {
  Head head(head_options());
  head.start();
  const auto exe = script("echo '{\"rows\": []}'; echo '{\"rows\": []}'");
  std::optional<AgentRun> agent(std::in_place, options(head.port(), "node-0", exe));
  const Json job = run_probe(head);
  agent.reset();
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump();
  const Json results = job.value("results", Json::object());
  ASSERT_TRUE(results.contains("0")) << "no result sent for rank 0: " << job.dump();
  const std::string why = results["0"].value("error", "");
  EXPECT_NE(why.find("rank-0.attempt-0.out (26 bytes) is not one JSON document"), std::string::npos) << why;
}

// A job directory of the same name from another store (another cluster's head, whose job ids
// also started at job-1) is moved aside whole; this job's ranks on agents sharing the work
// directory (the local backend) share the new one.
TEST_F(ProbeTasks, AnotherHeadsJobDirectoryIsMovedAsideAndRanksShareTheirOwn) {
  const fs::path old = dir_ / "work" / "jobs" / "job-1";
  fs::create_directories(old / "logs");
  fs::create_directories(old / "checkpoints");
  std::ofstream(old / ".verlctl-owner") << "0123456789abcdef/job-1\n";
  std::ofstream(old / "logs" / "rank-0.attempt-0.out") << "{\"rows\": [\"old\"]}\n";
  std::ofstream(old / "checkpoints" / "latest") << "old run's step 300\n";

  Head head(head_options());
  head.start();
  const auto exe = script("echo '{\"rows\": []}'");
  std::optional<AgentRun> a0(std::in_place, options(head.port(), "node-0", exe));
  std::optional<AgentRun> a1(std::in_place, options(head.port(), "node-1", exe));
  ASSERT_TRUE(eventually([&] { return head.registry().nodes().size() == 2; }));
  const Json job = run_probe(head);
  a0->stop();
  a1->stop();
  a0.reset();
  a1.reset();
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump();
  EXPECT_EQ(job.value("results", Json::object()).size(), 2u) << job.dump();

  std::ifstream owner(old / ".verlctl-owner");
  std::string line;
  std::getline(owner, line);
  EXPECT_EQ(line, head.jobs().incarnation() + "/job-1");
  EXPECT_EQ(head.jobs().incarnation().size(), 16u);
  EXPECT_FALSE(fs::exists(old / "checkpoints")) << "the old run's checkpoints would be resumed as this job's";
  for (const char* f : {"rank-0.attempt-0.out", "rank-1.attempt-0.out"}) {
    std::ifstream in(old / "logs" / f);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, "{\"rows\": []}\n") << f;
  }
  int aside = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "work" / "jobs")) {
    if (e.path().filename().string().rfind("job-1.replaced-", 0) != 0) continue;
    ++aside;
    std::ifstream in(e.path() / "checkpoints" / "latest");
    std::getline(in, line);
    EXPECT_EQ(line, "old run's step 300");
  }
  EXPECT_EQ(aside, 1) << "the old directory is moved aside once, whole";
}

// The agent's stop of a task is the stop protocol (process::EscalatingStop) polled on its ticks:
// SIGTERM, and SIGKILL once the stop's grace has passed, for a task that ignores SIGTERM.
TEST_F(ProbeTasks, AStoppedTaskThatIgnoresSigtermIsKilledOnceItsGraceHasPassed) {
  Head head(head_options());
  head.start();
  const auto exe = script("trap '' TERM; echo ready; while :; do sleep 0.05; done");
  std::optional<AgentRun> agent(std::in_place, options(head.port(), "node-0", exe));
  HeadClient client = testing::client_of(head);
  const std::string id = client.post("/api/jobs", Json{{"kind", "probe"}, {"argv", {"probe"}}}).at("id");
  auto job = [&] { return wire::parse<wire::Job>(client.get("/api/jobs/" + id)); };
  auto log_has_ready = [&] {
    const auto page = wire::parse<wire::LogsPage>(client.get("/api/jobs/" + id + "/logs"));
    for (const auto& l : page.lines)
      if (l.text == "ready") return true;
    return false;
  };
  ASSERT_TRUE(eventually(log_has_ready, 10000ms)) << "the task must start";
  const auto t0 = Clock::now();
  client.post("/api/jobs/" + id + "/stop", wire::Stop{0.5});
  ASSERT_TRUE(eventually([&] { return job().summary.state == JobState::kStopped; }, 10000ms));
  const auto took = Clock::now() - t0;
  agent.reset();
  const auto stopped = job();
  ASSERT_EQ(stopped.placement.size(), 1u);
  EXPECT_EQ(stopped.placement[0].signal, SIGKILL) << Json(stopped).dump();
  EXPECT_GE(took, 500ms) << "SIGKILL only once the grace has passed";
}

}  // namespace
}  // namespace verl::launcher

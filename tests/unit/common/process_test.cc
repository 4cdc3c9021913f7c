#include "common/process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "common/error.h"

namespace verl::process {
namespace {

using namespace std::chrono_literals;

// Alive and not a zombie waiting for a reaper that may never come in a container.
bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_s, comm, state;
  stat >> pid_s >> comm >> state;
  return state != "Z";
}

TEST(Process, CapturesOutputAndExitCode) {
  auto r = run({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_FALSE(r.timed_out);
}

TEST(Process, ArgumentsAreNotShellSplit) {
  auto r = run({"printf", "%s|", "a b", "$HOME", "it's"});
  EXPECT_EQ(r.out, "a b|$HOME|it's|");
}

TEST(Process, FeedsStdin) {
  std::string big(1 << 20, 'x');
  Options o;
  o.stdin_data = big;
  auto r = run({"wc", "-c"}, o);
  EXPECT_EQ(std::stoul(r.out), big.size());
}

TEST(Process, EnvOverrides) {
  Options o;
  o.env = {"VERL_TEST_VAR=hello"};
  EXPECT_EQ(run({"sh", "-c", "printf %s \"$VERL_TEST_VAR\""}, o).out, "hello");
}

TEST(Process, MissingProgramIsAnErrorNamingIt) {
  try {
    run({"/no/such/program"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/no/such/program"), std::string::npos);
  }
}

TEST(Process, TimeoutKillsTheWholeGroup) {
  // The shell starts a grandchild that would outlive it; the timeout must take both.
  Options o;
  o.timeout = 300ms;
  o.grace = 200ms;
  auto t0 = std::chrono::steady_clock::now();
  auto r = run({"sh", "-c", "sleep 30 & echo $!; wait"}, o);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  pid_t grandchild = std::stoi(r.out);
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(alive(grandchild));
}

TEST(Process, ChildStopEscalatesToSigkill) {
  auto c = Child::spawn({"sh", "-c", "trap '' TERM; sleep 30"});
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(c.running());
  auto r = c.stop(200ms);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_FALSE(alive(c.pid()));
}

// The stop protocol's steps (EscalatingStop), polled with injected times: SIGTERM at once,
// SIGKILL once the grace has passed, then "still there" once kill_wait has passed too.
TEST(EscalatingStop, TermThenKillAfterTheGraceThenStillThereAfterKillWait) {
  using Step = EscalatingStop::Step;
  EscalatingStop s(1000ms, 500ms);
  const auto t0 = EscalatingStop::Clock::time_point() + 1h;
  EXPECT_EQ(s.wait_left(t0), 0ms);
  EXPECT_EQ(s.poll(t0), Step::kTerm);
  EXPECT_EQ(s.wait_left(t0 + 200ms), 800ms);
  EXPECT_EQ(s.poll(t0 + 200ms), Step::kWait);
  EXPECT_EQ(s.poll(t0 + 999ms), Step::kWait);
  EXPECT_EQ(s.poll(t0 + 1000ms), Step::kKill);  // once
  EXPECT_EQ(s.poll(t0 + 1000ms), Step::kWait);
  EXPECT_EQ(s.wait_left(t0 + 1100ms), 400ms);
  EXPECT_EQ(s.poll(t0 + 1499ms), Step::kWait);
  EXPECT_EQ(s.poll(t0 + 1500ms), Step::kStillThere);
  EXPECT_EQ(s.poll(t0 + 9000ms), Step::kStillThere);
  EXPECT_EQ(s.wait_left(t0 + 9000ms), 0ms);
}

// A late poll (the agent's tick came after the grace) sends SIGKILL then, and kill_wait counts
// from that SIGKILL, not from when it was due.
TEST(EscalatingStop, KillWaitCountsFromTheSigkillSent) {
  using Step = EscalatingStop::Step;
  EscalatingStop s(100ms, 200ms);
  const auto t0 = EscalatingStop::Clock::time_point() + 1h;
  EXPECT_EQ(s.poll(t0), Step::kTerm);
  EXPECT_EQ(s.poll(t0 + 5s), Step::kKill);
  EXPECT_EQ(s.poll(t0 + 5s + 199ms), Step::kWait);
  EXPECT_EQ(s.poll(t0 + 5s + 200ms), Step::kStillThere);
}

// No kill_wait (Child::stop, the agent's tasks): after SIGKILL it waits for the end forever.
TEST(EscalatingStop, WithoutKillWaitItWaitsForeverAfterSigkill) {
  using Step = EscalatingStop::Step;
  EscalatingStop s(0ms, std::nullopt);
  const auto t0 = EscalatingStop::Clock::time_point() + 1h;
  EXPECT_EQ(s.poll(t0), Step::kTerm);
  EXPECT_EQ(s.wait_left(t0), 0ms);
  EXPECT_EQ(s.poll(t0), Step::kKill);  // a zero grace: SIGKILL on the next poll
  EXPECT_EQ(s.wait_left(t0), std::nullopt);
  EXPECT_EQ(s.poll(t0 + 24h), Step::kWait);
}

// stop_escalating is those steps, blocking: the signals it sends and the waits it asks for.
TEST(EscalatingStop, StopEscalatingSendsTheStepsAndWaitsTheirTimes) {
  std::vector<int> sent;
  std::vector<std::optional<std::chrono::milliseconds>> waits;
  auto signal = [&](int sig) { sent.push_back(sig); };
  auto never_gone = [&](std::optional<std::chrono::milliseconds> t) {
    waits.push_back(t);
    if (t) std::this_thread::sleep_for(*t);
    return false;
  };
  EXPECT_FALSE(stop_escalating(signal, never_gone, 30ms, 20ms));
  EXPECT_EQ(sent, (std::vector<int>{SIGTERM, SIGKILL}));
  ASSERT_GE(waits.size(), 2u);
  EXPECT_LE(waits.front(), 30ms);
  EXPECT_GT(waits.front(), 20ms);
  sent.clear();
  waits.clear();
  auto gone_after_term = [&](std::optional<std::chrono::milliseconds> t) {
    waits.push_back(t);
    return true;
  };
  EXPECT_TRUE(stop_escalating(signal, gone_after_term, 30ms, std::nullopt));
  EXPECT_EQ(sent, (std::vector<int>{SIGTERM}));
  EXPECT_EQ(waits.size(), 1u);
}

TEST(Process, ChildWritesToLogFile) {
  std::string log = ::testing::TempDir() + "/verl_child.log";
  std::remove(log.c_str());
  auto c = Child::spawn({"sh", "-c", "echo one; echo two >&2"}, {}, log, log);
  auto r = c.wait(5000ms);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 0);
  std::ifstream in(log);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(all.find("one"), std::string::npos);
  EXPECT_NE(all.find("two"), std::string::npos);
}

TEST(Process, NewSessionChildLeadsItsOwnSessionAndGroup) {
  Options o;
  o.group = Options::Group::kNewSession;
  auto c = Child::spawn({"sleep", "30"}, o);
  EXPECT_EQ(getsid(c.pid()), c.pid());
  EXPECT_EQ(getpgid(c.pid()), c.pid());
  EXPECT_NE(getsid(c.pid()), getsid(0));
  auto r = c.stop(std::chrono::milliseconds(500));  // stop() reaches it as a group leader too
  EXPECT_EQ(r.signal, SIGTERM);
}

TEST(Process, ReleasedChildOutlivesItsChildObject) {
  pid_t pid = -1;
  {
    auto c = Child::spawn({"sleep", "30"});
    pid = c.release();
    EXPECT_FALSE(c.running());
  }  // the destructor of a released Child stops nothing
  EXPECT_EQ(::kill(pid, 0), 0) << "a released child must keep running";
  ::kill(-pid, SIGKILL);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
}

// kTerm: the child gets SIGTERM (which a container client passes on) when the thread that
// spawned it ends, not SIGKILL.
TEST(Process, ParentDeathTermSendsSigtermWhenTheSpawningThreadEnds) {
  const std::string marker = ::testing::TempDir() + "/pdeath-term-" + std::to_string(getpid());
  ::unlink(marker.c_str());
  pid_t pid = -1;
  std::thread([&] {
    Options o;
    o.parent_death = Options::ParentDeath::kTerm;
    auto c = Child::spawn({"sh", "-c", "trap 'echo term > " + marker + "; exit 0' TERM; echo ready > " + marker +
                                           ".ready; while :; do sleep 0.05; done"},
                          o);
    pid = c.release();
    // The thread ends once the trap is set: a SIGTERM before that would end the shell anyway.
    for (int i = 0; i < 200 && ::access((marker + ".ready").c_str(), F_OK) != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }).join();
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "it ended by its TERM trap, not by SIGKILL";
  std::ifstream in(marker);
  std::string word;
  in >> word;
  EXPECT_EQ(word, "term");
  ::unlink(marker.c_str());
  ::unlink((marker + ".ready").c_str());
}

// A verlctl replaced while it runs (up copying to two nodes that share a directory, an upgrade)
// still names a file it can start again: the one now in its place, not "<path> (deleted)".
// The test runs a copy of this binary, replaces the copy, then asks the copy for self_exe().
TEST(Process, SelfExeNamesTheFileThatReplacedIt) {
  if (const char* go = std::getenv("VERL_SELF_EXE_PROBE")) {  // the copy, running
    std::ofstream(std::string(go) + ".ready") << "";
    for (int i = 0; i < 2000 && ::access(go, F_OK) != 0; ++i) std::this_thread::sleep_for(10ms);
    std::cout << "self_exe=" << self_exe() << "\n" << std::flush;
    return;
  }
  const std::string dir = ::testing::TempDir() + "self_exe_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string copy = dir + "/verl_probe";
  std::filesystem::copy_file(self_exe(), copy, std::filesystem::copy_options::overwrite_existing);
  Options o;
  o.env = {"VERL_SELF_EXE_PROBE=" + dir + "/go"};
  auto child = Child::spawn({copy, "--gtest_filter=Process.SelfExeNamesTheFileThatReplacedIt"}, o, dir + "/out",
                            dir + "/err");
  // Replaced the way up's copy replaces it: a new file renamed over the running one (once it
  // runs: its /proc/self/exe is the file it was started from).
  for (int i = 0; i < 3000 && ::access((dir + "/go.ready").c_str(), F_OK) != 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(::access((dir + "/go.ready").c_str(), F_OK), 0) << "the copy did not start";
  std::filesystem::copy_file(copy, copy + ".new", std::filesystem::copy_options::overwrite_existing);
  std::filesystem::rename(copy + ".new", copy);
  std::ofstream(dir + "/go") << "";
  const auto r = child.wait(30s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 0);
  std::ifstream in(dir + "/out");
  const std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(out.find("self_exe=" + copy + "\n"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

TEST(Quote, RoundTripsThroughAShell) {
  std::vector<std::string> argv = {"printf", "%s|", "plain", "with space", "it's", "$(touch /tmp/pwned)", "", "a\"b"};
  auto r = run({"sh", "-c", quote_argv(argv)});
  EXPECT_EQ(r.out, "plain|with space|it's|$(touch /tmp/pwned)||a\"b|");
}

}  // namespace
}  // namespace verl::process

// The state directory's files and the process identity that down relies on.
#include "launcher/cluster_state.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "common/error.h"
#include "common/files.h"
#include "common/process.h"
#include "tests/testing/temp_dir.h"

namespace verl::launcher {
namespace {
namespace fs = std::filesystem;

TEST(ClusterState, TokenIs64HexCharsAndDiffersEachTime) {
  const auto a = generate_token();
  const auto b = generate_token();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
}

TEST(ClusterState, StateRoundTripsAtomicallyWith0600) {
  const testing::TempDir tmp("state");
  const fs::path dir = tmp.path();
  const StatePaths paths(dir.string());
  EXPECT_FALSE(read_state(paths)) << "no state.json: no state";
  ClusterState s;
  s.name = "c1";
  s.backend = "local";
  s.status = ClusterStatus::kUp;
  s.head_host = "127.0.0.1";
  s.head_port = 18265;
  s.processes = {{ProcessRole::kHead, "", "localhost", 100, 555, "/x/head.log"},
                 {ProcessRole::kAgent, "node-0", "localhost", 101, 556, "/x/a.log"}};
  write_state(paths, s);
  struct stat st {};
  ASSERT_EQ(stat(paths.state().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  const auto back = read_state(paths);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->name, "c1");
  EXPECT_EQ(back->head_port, 18265);
  ASSERT_EQ(back->processes.size(), 2u);
  EXPECT_EQ(back->processes[1].node, "node-0");
  EXPECT_EQ(back->processes[1].start_ticks, 556);
  EXPECT_EQ(back->status, ClusterStatus::kUp);
  EXPECT_EQ(back->processes[1].role, ProcessRole::kAgent);
  EXPECT_NE(files::read_file(paths.state()).find("\"status\": \"up\""), std::string::npos) << "the names, not numbers";
  files::write_atomic(paths.state(), "{not json", 0600);
  EXPECT_THROW(read_state(paths), Error);
  // A status this verlctl does not know is a corrupt state naming the value, not a crash.
  auto j = to_json(s);
  j["status"] = "paused";
  files::write_atomic(paths.state(), j.dump(), 0600);
  try {
    read_state(paths);
    ADD_FAILURE() << "an unknown status was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown cluster status 'paused'"), std::string::npos) << e.what();
  }
}

TEST(ClusterState, EmptyTokenFileIsAnError) {
  const fs::path f = fs::temp_directory_path() / ("verl_token_" + std::to_string(::getpid()));
  files::write_atomic(f.string(), "\n", 0600);
  EXPECT_THROW(read_token(f.string()), Error);
  files::write_atomic(f.string(), "abc\n", 0600);
  EXPECT_EQ(read_token(f.string()), "abc");
  fs::remove(f);
}

TEST(ProcessIdentity, SelfIsTheSameProcessAndAnotherStartTimeIsNot) {
  const auto ticks = process_start_ticks(::getpid());
  ASSERT_TRUE(ticks);
  ProcessRecord me;
  me.pid = ::getpid();
  me.start_ticks = *ticks;
  EXPECT_TRUE(is_same_process(me));
  me.start_ticks = *ticks + 1;  // a reused pid looks like this
  EXPECT_FALSE(is_same_process(me));
}

TEST(ProcessIdentity, EndedProcessIsNotAlive) {
  auto child = process::Child::spawn({"sleep", "30"});
  ProcessRecord p;
  p.pid = child.pid();
  p.start_ticks = process_start_ticks(p.pid).value_or(-1);
  ASSERT_TRUE(is_same_process(p));
  ::kill(p.pid, SIGKILL);
  // Until it is reaped it is a zombie, which counts as ended too.
  for (int i = 0; i < 200 && is_same_process(p); ++i) usleep(10000);
  EXPECT_FALSE(is_same_process(p));
  child.wait(std::chrono::milliseconds(2000));
  EXPECT_FALSE(process_start_ticks(-1));
}

TEST(ProcessIdentity, FindsClusterProcessesByTheirCommandLine) {
  // A real agent of a cluster whose state directory is dir, trying a head that is not there.
  const std::string exe = std::string(VERL_BINARY_DIR) + "/verlctl";
  if (!fs::exists(exe)) GTEST_SKIP() << exe << " is not built";
  const testing::TempDir tmp("find");
  const fs::path dir = tmp.path();
  files::write_atomic((dir / "token").string(), "t\n", 0600);
  auto agent = process::Child::spawn({exe, "agent", "--head", "127.0.0.1:1", "--token-file", (dir / "token").string(),
                                      "--node", "node-0", "--exit-after", "30", "--log-level", "off"});
  auto found_in = [&](const std::string& d) {
    for (pid_t p : find_cluster_processes(d))
      if (p == agent.pid()) return true;
    return false;
  };
  bool seen = false;
  for (int i = 0; i < 200 && !(seen = found_in(dir.string())); ++i) usleep(10000);
  EXPECT_TRUE(seen) << "the agent names " << dir << "/token on its command line";
  EXPECT_FALSE(found_in(dir.string() + "-other")) << "another cluster's directory";
  EXPECT_FALSE(found_in(dir.string().substr(0, dir.string().size() - 1))) << "a prefix of the directory is not it";
  agent.stop();
  EXPECT_FALSE(found_in(dir.string()));
}

}  // namespace
}  // namespace verl::launcher

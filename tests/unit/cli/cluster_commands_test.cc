// up/down/status/head/agent as the command line parses them, in-process: what needs no running
// cluster (dry run, usage errors, exit codes). The live run is tests/integration/local_cluster_test.sh.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "cli/app.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace verl::cli {
namespace {
namespace fs = std::filesystem;

// Each test with a VERLCTL_HOME of its own.
class ClusterCommands : public ::testing::Test {
 protected:
  static testing::CliRun verlctl(std::vector<std::string> args) { return testing::run_cli(std::move(args)); }
  testing::TempHome temp_home_;
  const fs::path home_ = temp_home_.path();
};

TEST_F(ClusterCommands, DryRunJsonListsTheHeadAndEachAgent) {
  const auto r = verlctl({"up", "--local", "2", "--name", "c", "--dry-run", "-o", "json", "head.dashboard_port=18001",
                          "head.store_port=18002"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["dry_run"], true);
  EXPECT_EQ(j["name"], "c");
  ASSERT_EQ(j["daemons"].size(), 3u);
  EXPECT_EQ(j["daemons"][0]["role"], "head");
  EXPECT_EQ(j["daemons"][2]["node"], "node-1");
  EXPECT_EQ(j["daemons"][1]["argv"][1], "agent");
  EXPECT_FALSE(fs::exists(home_ / "c")) << "a dry run writes nothing";
}

TEST_F(ClusterCommands, DryRunTextIsRunnableCommandLines) {
  const auto r = verlctl({"up", "--local", "1", "--dry-run"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(" head --state-dir " + (home_ / "local").string()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" agent --head 127.0.0.1:8265 --token-file "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("environment"), std::string::npos);
}

TEST_F(ClusterCommands, LocalZeroIsAUsageError) {
  EXPECT_EQ(verlctl({"up", "--local", "0", "--dry-run"}).code, 2);
}

TEST_F(ClusterCommands, SshDryRunShowsTheRemoteAgentCommandAndConnectsNowhere) {
  // 10.0.0.2 is unreachable from here: a dry run that tried to connect would fail.
  const auto r = verlctl({"up", "--dry-run", "backend=ssh", "nodes=[{host: 10.0.0.2}]", "head.host=10.0.0.1", "head.bind_host=0.0.0.0"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("10.0.0.2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" agent --head 10.0.0.1:8265 "), std::string::npos) << r.out;
  // The head's defaults (listening on 127.0.0.1) would leave that node's agent outside: exit 3
  // naming the key, in a dry run as in up.
  const auto loopback = verlctl({"up", "--dry-run", "backend=ssh", "nodes=[{host: 10.0.0.2}]"});
  EXPECT_EQ(loopback.code, 3) << loopback.err;
  EXPECT_NE(loopback.err.find("head.bind_host is 127.0.0.1"), std::string::npos) << loopback.err;
  EXPECT_NE(loopback.err.find("hint: set head.bind_host=0.0.0.0"), std::string::npos) << loopback.err;
}

TEST_F(ClusterCommands, StatusWithoutAClusterExits4WithAHint) {
  const auto r = verlctl({"status", "--name", "ghost"});
  EXPECT_EQ(r.code, 4);
  EXPECT_NE(r.err.find("ghost"), std::string::npos);
  EXPECT_NE(r.err.find("hint: "), std::string::npos);
}

TEST_F(ClusterCommands, DownWithoutAClusterIsAFailureNamingIt) {
  const auto r = verlctl({"down", "--name", "ghost"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no cluster 'ghost'"), std::string::npos) << r.err;
}

TEST_F(ClusterCommands, InternalCommandsNeedTheirFlags) {
  EXPECT_EQ(verlctl({"head"}).code, 2);
  EXPECT_EQ(verlctl({"agent", "--head", "127.0.0.1:1"}).code, 2);
  const auto help = verlctl({"--help"});
  EXPECT_EQ(testing::listed_commands(help.out, "Internal:"), (std::vector<std::string>{"head", "agent"}))
      << "head/agent are listed as internal: " << help.out;
}

}  // namespace
}  // namespace verl::cli

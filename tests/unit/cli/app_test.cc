#include "cli/app.h"
#include "tests/testing/cli.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

namespace verl::cli {
namespace {

using testing::listed_commands;
using testing::run_cli;

TEST(Cli, UnknownCommandIsUsageError) {
  auto r = run_cli({"frobnicate"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("verlctl: error:"), std::string::npos);
}

TEST(Cli, UnknownOptionIsUsageError) {
  EXPECT_EQ(run_cli({"config", "show", "--no-such-flag"}).code, 2);
}

TEST(Cli, ConfigShowSaysWhichLossNormalisationIsInEffect) {
  auto dp = run_cli({"config", "show"});
  ASSERT_EQ(dp.code, 0) << dp.err;
  EXPECT_NE(dp.out.find("# loss normalisation: per micro-batch"), std::string::npos) << dp.out.substr(0, 600);
  auto global = run_cli({"config", "show", "trainer.use_legacy_worker_impl=disable", "actor_rollout_ref.actor.loss_scale_factor=512"});
  ASSERT_EQ(global.code, 0) << global.err;
  EXPECT_NE(global.out.find("# loss normalisation: global batch"), std::string::npos);
  EXPECT_NE(global.out.find("loss_scale_factor = 512"), std::string::npos);
}

TEST(Cli, HelpListsCommands) {
  auto r = run_cli({"--help"});
  ASSERT_EQ(r.code, 0) << r.err;
  // The names in the commands list itself, not words that the description happens to contain.
  const std::vector<std::string> user = {"version", "help", "config", "train",  "up",       "down",
                                         "status",  "submit", "jobs", "logs",   "stop",     "smoke",
                                         "env",     "probe", "tokenize", "job-preflight"};
  EXPECT_EQ(listed_commands(r.out, "Subcommands:"), user) << r.out;
  const std::vector<std::string> internal = {"head", "agent"};
  EXPECT_EQ(listed_commands(r.out, "Internal:"), internal) << r.out;
}

TEST(Cli, ExitCodesTableHasEveryDocumentedCode) {
  auto r = run_cli({"help", "exit-codes"});
  ASSERT_EQ(r.code, 0);
  for (const char* code : {"0 ", "1 ", "2 ", "3 ", "4 ", "5 ", "6 ", "124", "130"})
    EXPECT_NE(r.out.find(std::string("\n") + code), std::string::npos) << code;
}

TEST(Cli, ExitCodesAsJson) {
  auto r = run_cli({"help", "exit-codes", "-o", "json"});
  ASSERT_EQ(r.code, 0);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.size(), 9u);
  EXPECT_EQ(j[3]["code"], 3);
}

TEST(Cli, VersionNamesWhatIsCompiledIn) {
  auto r = run_cli({"--version"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("verlctl 0."), std::string::npos);
  EXPECT_NE(r.out.find("libtorch:"), std::string::npos);
  EXPECT_NE(r.out.find("CUDA:"), std::string::npos);
}

}  // namespace
}  // namespace verl::cli

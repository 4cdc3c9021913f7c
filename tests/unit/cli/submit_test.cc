// `verlctl submit [options] -- CMD [ARGS...]`'s command line (cmd_submit.cc, app.cc's split at
// "--"): what is verlctl's is parsed, what follows "--" is the command's, and mistakes are
// usage errors before any head is asked.
#include <gtest/gtest.h>

#include <sstream>

#include "cli/app.h"
#include "tests/testing/cli.h"

namespace verl::cli {
namespace {

using testing::run_cli;

TEST(SubmitCommand, AnUnknownOptionBeforeTheDashesIsAnErrorNamingIt) {
  const auto r = run_cli({"submit", "--frobnicate", "--", "python3", "train.py"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--frobnicate"), std::string::npos) << r.err;
}

TEST(SubmitCommand, WordsAfterTheDashesAreTheCommandsNotVerlctls) {
  // --bogus after "--" is the program's; the error is about --env, which is verlctl's.
  const auto r = run_cli({"submit", "--env", "NOT_AN_ASSIGNMENT", "--", "python3", "--bogus", "-f", "x"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--env 'NOT_AN_ASSIGNMENT' is not NAME=value"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--bogus"), std::string::npos) << r.err;
}

TEST(SubmitCommand, EachEnvTakesOneValueAndTheOverridesAfterItStayOverrides) {
  // Were trainer.nnodes=2 taken as a second --env value, it would be the error ('.' in a name).
  const auto r = run_cli({"submit", "--env", "A=1", "trainer.nnodes=2", "--env", "1B=2", "--", "true"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("'1B'"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("trainer.nnodes"), std::string::npos) << r.err;
}

TEST(SubmitCommand, NoCommandAfterTheDashesIsAnErrorWithAHint) {
  const auto r = run_cli({"submit", "trainer.nnodes=2", "--"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no command after '--'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hint: name the program each rank runs: verlctl submit trainer.nnodes=2 -- python3 train.py"),
            std::string::npos)
      << r.err;
}

TEST(SubmitCommand, CommandOptionsWithoutACommandAreAnError) {
  const auto r = run_cli({"submit", "--ranks-per-node", "1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("belong to a command job"), std::string::npos) << r.err;
}

TEST(SubmitCommand, AWorkingDirThatIsNoDirectoryIsAnError) {
  const auto r = run_cli({"submit", "--working-dir", "/no/such/dir", "--", "true"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--working-dir /no/such/dir is not a directory"), std::string::npos) << r.err;
}

TEST(SubmitCommand, TheDashesOfAnotherCommandAreLeftToIt) {
  // Only submit takes a command: `config show -- x` goes to CLI11 as before (x: an override).
  const auto r = run_cli({"config", "show", "-o", "json", "--", "trainer.total_training_steps=7"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"total_training_steps\": 7"), std::string::npos) << r.out.substr(0, 300);
}

}  // namespace
}  // namespace verl::cli

// `verlctl ARGS...` in-process (cli/app.h's run), its exit code and what it printed.
#pragma once

#include <string>
#include <vector>

namespace verl::testing {

struct CliRun {
  int code;
  std::string out, err;
};

// args without the program name: run_cli({"up", "--dry-run"}).
CliRun run_cli(std::vector<std::string> args);

// The command names of one section of --help ("Subcommands:", "Internal:"): the first word of
// each line after the heading, up to the blank line that ends the section (a line without a
// summary after its name is a test failure). Empty when the heading is missing.
std::vector<std::string> listed_commands(const std::string& help, const std::string& heading);

}  // namespace verl::testing

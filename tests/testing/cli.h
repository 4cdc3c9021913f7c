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

}  // namespace verl::testing

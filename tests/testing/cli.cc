#include "tests/testing/cli.h"

#include <sstream>

#include "cli/app.h"

namespace verl::testing {

CliRun run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), "verlctl");
  std::ostringstream out, err;
  const int code = cli::run(args, out, err);
  return {code, out.str(), err.str()};
}

}  // namespace verl::testing

#include "tests/testing/cli.h"

#include <gtest/gtest.h>

#include <sstream>

#include "cli/app.h"

namespace verl::testing {

CliRun run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), "verlctl");
  std::ostringstream out, err;
  const int code = cli::run(args, out, err);
  return {code, out.str(), err.str()};
}

std::vector<std::string> listed_commands(const std::string& help, const std::string& heading) {
  std::istringstream in(help);
  std::string line;
  while (std::getline(in, line) && line != heading) {
  }
  std::vector<std::string> names;
  while (std::getline(in, line) && !line.empty()) {
    std::istringstream words(line);
    std::string name, summary;
    words >> name;
    std::getline(words, summary);
    EXPECT_FALSE(summary.empty()) << "no summary for " << name;
    names.push_back(name);
  }
  return names;
}

}  // namespace verl::testing

// verl::Error is the one exception type that crosses module boundaries. It carries the exit
// code the process should end with, a message that names the thing (key path, host, file:line)
// and a hint saying what to try. Adapters turn third-party errors into it; cli/main.cc has the
// one catch that prints it.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace verl {

// The one exit-code table (DESIGN.md); `verlctl help exit-codes` prints it.
enum class ExitCode : int {
  kOk = 0,
  kFailure = 1,
  kUsage = 2,
  kInvalidConfig = 3,
  kUnreachable = 4,
  kCheckFailed = 5,
  kNotCompiledIn = 6,
  kTimedOut = 124,
  kInterrupted = 130,
};

struct ExitCodeInfo {
  ExitCode code;
  std::string_view name;
  std::string_view meaning;
};
const std::vector<ExitCodeInfo>& exit_code_table();

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, std::string message, std::string hint = {})
      : std::runtime_error(message), code_(code), hint_(std::move(hint)) {}
  ExitCode code() const { return code_; }
  const std::string& hint() const { return hint_; }

 private:
  ExitCode code_;
  std::string hint_;
};

}  // namespace verl

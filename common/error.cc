#include "common/error.h"

namespace verl {

const std::vector<ExitCodeInfo>& exit_code_table() {
  static const std::vector<ExitCodeInfo> kTable = {
      {ExitCode::kOk, "ok", "success"},
      {ExitCode::kFailure, "failure", "the command or the job failed"},
      {ExitCode::kUsage, "usage", "bad command line: unknown command or option, missing argument"},
      {ExitCode::kInvalidConfig, "invalid-config", "the job config or cluster spec is invalid"},
      {ExitCode::kUnreachable, "unreachable", "a node, the head or the scheduler cannot be reached"},
      {ExitCode::kCheckFailed, "check-failed", "a probe, lint --strict or smoke check failed"},
      {ExitCode::kNotCompiledIn, "not-compiled-in", "the feature is not compiled into this build"},
      {ExitCode::kTimedOut, "timed-out", "a wait ran past its timeout"},
      {ExitCode::kInterrupted, "interrupted", "interrupted by SIGINT/SIGTERM"},
  };
  return kTable;
}

}  // namespace verl

// `verlctl job-preflight`: checks on this machine what a job's ranks will read and write (its
// data files, model directories, checkpoint directory; cli/job_preflight.h), relative to the
// working directory. The head's agents run it in the job's directory on every node a job is
// placed on, before the ranks start (`-o json --exit-zero`: the head judges the report); run by
// hand it prints one row per check and exits 5 when one failed.
#include "cli/app.h"
#include "cli/job_preflight.h"
#include "cli/output.h"
#include "common/config.h"
#include "common/error.h"

namespace verl::cli {
namespace {

struct JobPreflightArgs {
  JobFileArgs job;
  bool exit_zero = false;
};

}  // namespace

void register_job_preflight(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<JobPreflightArgs>();
  auto* cmd = app.add_subcommand(
      "job-preflight", "Check a job's data files, model directories and checkpoint directory on this machine");
  add_job_file_options(cmd, a->job);
  cmd->add_flag("--exit-zero", a->exit_zero, "Exit 0 even when a check fails (the report says it)");
  cmd->footer("Runs on every node of a submitted job before its ranks start ('submit --skip-job-preflight' turns "
              "that off). Examples:\n  verlctl job-preflight -f job.yaml\n  verlctl job-preflight -f job.yaml -o json");
  cmd->callback([&ctx, a] {
    const auto job = config::load_job(a->job.primary(), a->job.overrides);
    const PreflightReport r = run_job_preflight(job);
    if (ctx.output == OutputFormat::kJson) {
      print_json(*ctx.out, to_json(r));
    } else {
      std::vector<std::vector<std::string>> rows;
      for (const auto& c : r.checks)
        rows.push_back({c.check, c.key, c.path, c.ok ? "ok" : "FAIL", c.ok ? c.detail : c.detail + "; " + c.hint});
      print_table(*ctx.out, {"CHECK", "KEY", "PATH", "STATUS", "DETAIL"}, rows);
    }
    if (!r.ok() && !a->exit_zero)
      throw Error(ExitCode::kCheckFailed, "job preflight failed", "fix what the failed rows name");
  });
}

}  // namespace verl::cli

// `verlctl stop JOB [--grace S]`: stops a job: its ranks get SIGTERM, then SIGKILL after the
// grace; waits until the head has seen every rank end (STOPPED), so that nothing of it is left.
#include <thread>

#include "cli/app.h"
#include "cli/head_target.h"
#include "cli/job_view.h"
#include "cli/output.h"
#include "common/error.h"
#include "launcher/wire.h"

namespace verl::cli {
namespace {

struct StopArgs {
  std::string job;
  double grace_s = 10;
  TargetArgs target;
};

}  // namespace

void register_stop(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<StopArgs>();
  auto* cmd = app.add_subcommand("stop", "Stop a job: SIGTERM to its ranks, SIGKILL after a grace period");
  cmd->add_option("job", a->job, "The job id (job-N)")->required();
  cmd->add_option("--grace", a->grace_s, "Seconds between SIGTERM and SIGKILL")->check(CLI::Range(0.0, 3600.0))->default_str("10");
  add_target_options(cmd, a->target);
  cmd->footer("Examples:\n  verlctl stop job-3\n  verlctl stop job-3 --grace 30 -o json");
  cmd->callback([&ctx, a] {
    auto client = connect(find_head(a->target));
    client->post("/api/jobs/" + a->job + "/stop", launcher::wire::Stop{a->grace_s});
    // The head needs a heartbeat to order the stop and one to hear of the end; the grace on top.
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(a->grace_s * 1000)) +
                       std::chrono::seconds(60);
    launcher::wire::Job job;
    for (;;) {
      job = get_job(*client, a->job);
      const auto state = job.summary.state;
      bool ranks_gone = true;
      for (const auto& p : job.placement)
        if (p.state != launcher::TaskState::kExited) ranks_gone = false;
      if (launcher::is_terminal(state) && ranks_gone) break;
      if (std::chrono::steady_clock::now() >= until)
        throw Error(ExitCode::kTimedOut, a->job + " is still " + to_string(state) + ": its ranks did not report their end",
                    "'verlctl status " + a->job + "' shows which rank; its node may be lost");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (ctx.output == OutputFormat::kJson) {
      print_json(*ctx.out, {{"id", job.summary.id}, {"state", to_string(job.summary.state)}});
      return;
    }
    *ctx.out << job.summary.id << " " << to_string(job.summary.state) << "\n";
  });
}

}  // namespace verl::cli

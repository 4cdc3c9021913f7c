// `verlctl jobs`: every job of a cluster, newest first: state, step (a command job: its command), ranks,
// restarts, times.
#include <ctime>

#include "cli/app.h"
#include "cli/head_target.h"
#include "cli/job_view.h"
#include "cli/output.h"
#include "common/strings.h"
#include "launcher/wire.h"

namespace verl::cli {

void register_jobs(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<TargetArgs>();
  auto* cmd = app.add_subcommand("jobs", "List a cluster's jobs, newest first, with state and progress");
  add_target_options(cmd, *a);
  cmd->footer("Examples:\n  verlctl jobs\n  verlctl jobs --name dev -o json");
  cmd->callback([&ctx, a] {
    auto client = connect(find_head(*a));
    const auto list = list_jobs(*client);
    if (ctx.output == OutputFormat::kJson) {
      print_json(*ctx.out, {{"jobs", list}});
      return;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& j : list) {
      std::string submitted;
      {
        const std::time_t t = static_cast<std::time_t>(j.submitted_ms / 1000);
        std::tm tm{};
        localtime_r(&t, &tm);
        char buf[32];
        std::strftime(buf, sizeof buf, "%m-%d %H:%M:%S", &tm);
        submitted = buf;
      }
      // A command job has no trainer steps: what it runs instead (cut, the table stays readable).
      std::string progress = std::to_string(j.step) + (j.total_steps > 0 ? "/" + std::to_string(j.total_steps) : "");
      if (j.command) {
        progress = *j.command;
        if (progress.size() > 48) progress = progress.substr(0, 45) + "...";
      }
      std::string took = "-";
      if (j.started_ms && j.ended_ms) took = format_duration((*j.ended_ms - *j.started_ms) / 1000.0);
      rows.push_back({j.id, to_string(j.kind), to_string(j.state), progress,
                      std::to_string(j.nnodes) + "x" + std::to_string(j.n_gpus_per_node), std::to_string(j.restarts),
                      submitted, took});
    }
    print_table(*ctx.out, {"JOB", "KIND", "STATE", "STEP/COMMAND", "RANKS", "RESTARTS", "SUBMITTED", "DURATION"}, rows);
  });
}

}  // namespace verl::cli

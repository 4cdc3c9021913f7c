// `verlctl logs JOB [-f] [--rank R] [--tail N]`: a job's logs, all ranks merged in the order the
// head received them, every line prefixed with its rank and host. -f follows until the job ends.
#include "cli/app.h"
#include "cli/head_target.h"
#include "cli/job_view.h"
#include "cli/output.h"
#include "launcher/signals.h"

namespace verl::cli {
namespace {

struct LogsArgs {
  std::string job;
  bool follow = false;
  int rank = -1;
  int tail = -1;
  TargetArgs target;
};

}  // namespace

void register_logs(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<LogsArgs>();
  auto* cmd = app.add_subcommand("logs", "Print a job's logs, all ranks merged, each line with its rank and host");
  cmd->add_option("job", a->job, "The job id (job-N)")->required();
  cmd->add_flag("-f,--follow", a->follow, "Keep printing new lines until the job ends");
  cmd->add_option("--rank", a->rank, "Only this rank's lines")->check(CLI::NonNegativeNumber);
  cmd->add_option("--tail", a->tail, "Start with the last N lines")->check(CLI::NonNegativeNumber);
  add_target_options(cmd, a->target);
  cmd->footer("Examples:\n  verlctl logs job-1\n  verlctl logs job-1 -f\n  verlctl logs job-2 --rank 1 --tail 50\n"
              "  verlctl logs job-1 -o json");
  cmd->callback([&ctx, a] {
    auto client = connect(find_head(a->target));
    if (ctx.output == OutputFormat::kJson && !a->follow) {
      std::string path = "/api/jobs/" + a->job + "/logs?" + (a->tail >= 0 ? "tail=" + std::to_string(a->tail) : "limit=10000");
      if (a->rank >= 0) path += "&rank=" + std::to_string(a->rank);
      using launcher::wire::LogsPage;
      auto page = launcher::wire::parse<LogsPage>(client->get(path));
      std::vector<launcher::wire::LogLineView> lines = page.lines;
      // Everything, not one page: follow next until a page comes back short.
      while (a->tail < 0 && page.lines.size() == 10000) {
        page = launcher::wire::parse<LogsPage>(client->get("/api/jobs/" + a->job + "/logs?limit=10000&after=" +
                                                           std::to_string(page.next) +
                                                           (a->rank >= 0 ? "&rank=" + std::to_string(a->rank) : "")));
        lines.insert(lines.end(), page.lines.begin(), page.lines.end());
      }
      print_json(*ctx.out, {{"job", a->job}, {"lines", lines}});
      return;
    }
    FollowOptions fo;
    fo.rank = a->rank;
    fo.tail = a->tail;
    fo.follow = a->follow;
    fo.interrupted = &launcher::install_stop_flag();
    fo.json_lines = ctx.output == OutputFormat::kJson;  // -f -o json: one object per line, as they come
    if (!a->follow && a->tail < 0) {
      // Everything there is now, page by page.
      int64_t next = 0;
      for (;;) {
        const auto page = launcher::wire::parse<launcher::wire::LogsPage>(
            client->get("/api/jobs/" + a->job + "/logs?limit=10000&after=" + std::to_string(next) +
                        (a->rank >= 0 ? "&rank=" + std::to_string(a->rank) : "")));
        for (const auto& l : page.lines) *ctx.out << log_prefix(l) << l.text << "\n";
        next = page.next;
        if (page.lines.size() < 10000) break;
      }
      return;
    }
    follow_logs(*client, a->job, *ctx.out, fo);
  });
}

}  // namespace verl::cli

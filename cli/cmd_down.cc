// `verlctl down`: ask the head to shut the cluster down (agents first, then itself), signal what
// does not stop, and mark the state down. The work is launcher::tear_down.
#include "cli/app.h"
#include "cli/output.h"
#include "common/process.h"
#include "launcher/cluster.h"

namespace verl::cli {
namespace {

struct DownArgs {
  std::string name = "local";
  double timeout_s = 15;
};

}  // namespace

void register_down(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<DownArgs>();
  auto* cmd = app.add_subcommand("down", "Stop a cluster: its agents, then its head; signal whatever is left");
  cmd->add_option("--name", a->name, "Cluster name")->default_str("local");
  cmd->add_option("--timeout", a->timeout_s, "Seconds to wait for the head's own shutdown before signalling")
      ->check(CLI::NonNegativeNumber)
      ->default_str("15");
  cmd->footer("Examples:\n  verlctl down\n  verlctl down --name dev");
  cmd->callback([&ctx, a] {
    const auto r = launcher::tear_down(a->name, std::chrono::milliseconds(static_cast<int64_t>(a->timeout_s * 1000)),
                                       *ctx.err, process::self_exe());
    if (ctx.output == OutputFormat::kJson) {
      print_json(*ctx.out, {{"name", a->name}, {"was_down", r.was_down}, {"stopped", r.stopped}, {"signalled", r.signalled}});
      return;
    }
    if (r.was_down) *ctx.out << "cluster " << a->name << " was already down\n";
    else *ctx.out << "cluster " << a->name << " is down (" << r.stopped << " processes stopped, " << r.signalled
                  << " of them by signal)\n";
  });
}

}  // namespace verl::cli

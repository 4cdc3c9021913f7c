// `verlctl status`: the cluster as its head sees it: every node with its resources and health
// (alive, lost, left; the age of its last heartbeat). Exit 4 when the head does not answer.
// `verlctl status JOB`: one job: state, step/total, ETA, placement, the score's trend, the
// latest metrics, its events and failure.
#include <cstdio>
#include <ctime>

#include "cli/app.h"
#include "cli/head_target.h"
#include "cli/job_view.h"
#include "cli/output.h"
#include "common/error.h"
#include "launcher/cluster.h"
#include "launcher/resources.h"

namespace verl::cli {
namespace {

using Json = nlohmann::ordered_json;

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

std::string clock_time(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

}  // namespace

void register_status(CLI::App& app, Context& ctx) {
  auto target = std::make_shared<TargetArgs>();
  auto job = std::make_shared<std::string>();
  auto name = std::shared_ptr<std::string>(target, &target->name);
  auto* cmd = app.add_subcommand("status", "Show a cluster's head and nodes, or one job's state, progress and metrics");
  cmd->add_option("job", *job, "A job id (job-N): show that job instead of the cluster");
  add_target_options(cmd, *target);
  cmd->footer("Examples:\n  verlctl status\n  verlctl status --name dev -o json\n  verlctl status job-1");
  cmd->callback([&ctx, name, job, target] {
    if (!job->empty()) {
      auto client = connect(find_head(*target));
      const auto j = client->get("/api/jobs/" + *job);
      if (ctx.output == OutputFormat::kJson) print_json(*ctx.out, j);
      else print_job(*ctx.out, j);
      return;
    }
    if (!target->address.empty())
      throw Error(ExitCode::kUsage, "cluster status reads the cluster's state directory; --address is for a job",
                  "'verlctl status --name NAME', or 'verlctl status JOB --address HOST:PORT'");
    const auto r = launcher::query_status(*name);
    if (ctx.output == OutputFormat::kJson) {
      Json j = {{"cluster", r.cluster}, {"nodes", r.nodes}};
      if (!r.allocation.empty()) j["allocation"] = r.allocation;
      print_json(*ctx.out, j);
      return;
    }
    const Json& c = r.cluster;
    const Json counts = c.value("counts", Json::object());
    const auto expected = c.value("expected_nodes", std::vector<std::string>{});
    *ctx.out << "cluster " << c.value("name", *name) << " (backend " << c.value("backend", "?") << "): "
             << c.value("state", "?") << "; head http://" << r.state.head_host << ":" << r.state.head_port << " (pid "
             << c.at("head").value("pid", 0) << ", up " << seconds(c.at("head").value("uptime_s", 0.0)) << "); "
             << counts.value("alive", 0) << "/" << expected.size() << " nodes alive\n";
    if (r.allocation.contains("summary")) *ctx.out << "allocation: " << r.allocation.value("summary", "") << "\n";
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> seen;
    for (const auto& n : r.nodes) {
      const auto res = launcher::resources_from_json(n.at("resources"));
      std::string note;
      const std::string state = n.value("state", "?");
      if (state != "alive" && n.contains("lost_ms") && n["lost_ms"].is_number())
        note = state + " at " + clock_time(n["lost_ms"].get<int64_t>()) + ": " + n.value("reason", "");
      rows.push_back({n.value("name", "?"), state, n.value("host", "?"), std::to_string(n.value("pid", 0)),
                      std::to_string(res.cpus), launcher::format_bytes(res.memory_bytes), std::to_string(res.gpus),
                      std::to_string(res.ib_ports.size()), seconds(n.value("heartbeat_age_s", 0.0)) + " ago", note});
      seen.push_back(n.value("name", ""));
    }
    for (const auto& e : expected)
      if (std::find(seen.begin(), seen.end(), e) == seen.end())
        rows.push_back({e, "missing", "-", "-", "-", "-", "-", "-", "-", "never registered"});
    print_table(*ctx.out, {"NODE", "STATE", "HOST", "PID", "CPUS", "MEMORY", "GPUS", "IB", "HEARTBEAT", "NOTE"}, rows);
  });
}

}  // namespace verl::cli

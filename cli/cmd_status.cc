// `verlctl status`: the cluster as its head sees it: every node with its resources and health
// (alive, lost, left; the age of its last heartbeat). Exit 4 when the head does not answer.
#include <cstdio>
#include <ctime>

#include "cli/app.h"
#include "cli/output.h"
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
  auto name = std::make_shared<std::string>("local");
  auto* cmd = app.add_subcommand("status", "Show a cluster's head and nodes: resources, alive or lost, last heartbeat");
  cmd->add_option("--name", *name, "Cluster name")->default_str("local");
  cmd->footer("Examples:\n  verlctl status\n  verlctl status --name dev -o json");
  cmd->callback([&ctx, name] {
    const auto r = launcher::query_status(*name);
    if (ctx.output == OutputFormat::kJson) {
      print_json(*ctx.out, {{"cluster", r.cluster}, {"nodes", r.nodes}});
      return;
    }
    const Json& c = r.cluster;
    const Json counts = c.value("counts", Json::object());
    const auto expected = c.value("expected_nodes", std::vector<std::string>{});
    *ctx.out << "cluster " << c.value("name", *name) << " (backend " << c.value("backend", "?") << "): "
             << c.value("state", "?") << "; head http://" << r.state.head_host << ":" << r.state.head_port << " (pid "
             << c.at("head").value("pid", 0) << ", up " << seconds(c.at("head").value("uptime_s", 0.0)) << "); "
             << counts.value("alive", 0) << "/" << expected.size() << " nodes alive\n";
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

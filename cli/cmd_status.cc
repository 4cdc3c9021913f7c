// `verlctl status`: the cluster as its head sees it: every node with its resources and health
// (alive, lost, left; the age of its last heartbeat) and the latest probe run (up's preflight or
// `verlctl probe`): per node how many rows passed, warned, failed, and every row that did not
// pass. Exit 4 when the head does not answer.
// `verlctl status JOB`: one job: state, step/total, ETA, placement, the score's trend, the
// latest metrics, its events and failure.
#include <cstdio>
#include <map>

#include "cli/app.h"
#include "cli/cluster_probe.h"
#include "cli/head_target.h"
#include "cli/job_view.h"
#include "cli/output.h"
#include "common/error.h"
#include "common/strings.h"
#include "launcher/cluster.h"
#include "launcher/resources.h"
#include "launcher/wire.h"
#include "probes/harness.h"

namespace verl::cli {
namespace {

using Json = nlohmann::ordered_json;

// The latest probe job the head keeps, as {job, state, ended_ms, rows}; null when it has none.
Json latest_probes(const HeadTarget& target) {
  auto client = connect(target);
  std::string latest;
  for (const auto& j : list_jobs(*client)) {  // newest first
    if (j.kind == launcher::JobKind::kProbe && launcher::is_terminal(j.state)) {
      latest = j.id;
      break;
    }
  }
  if (latest.empty()) return nullptr;
  const launcher::wire::Job job = get_job(*client, latest);
  Json out = {{"job", latest}, {"state", to_string(job.summary.state)}};
  if (job.summary.ended_ms) out["ended_ms"] = *job.summary.ended_ms;
  out["rows"] = probes::to_json(probe_job_rows(job))["rows"];
  return out;
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
      const launcher::wire::Job j = get_job(*client, *job);
      if (ctx.output == OutputFormat::kJson) print_json(*ctx.out, j);  // the body, read and written by one definition (wire.h)
      else print_job(*ctx.out, j);
      return;
    }
    launcher::StatusReport r;
    HeadTarget head;
    if (targets_address(*target)) {  // a head on another machine: what it says, without this machine's state
      head = find_head(*target);
      auto client = connect(head, std::chrono::milliseconds(3000));
      r.cluster = launcher::wire::parse<launcher::wire::ClusterView>(client->get("/api/cluster"));
      r.nodes = client->get("/api/nodes").value("nodes", Json::array());
      r.state.head_host = head.address.host;
      r.state.head_port = head.address.port;
    } else {
      r = launcher::query_status(*name);  // its errors name the cluster's state and head address
      head = find_head(*target);
    }
    const Json probe_run = latest_probes(head);
    if (ctx.output == OutputFormat::kJson) {
      Json j = {{"cluster", Json(r.cluster)}, {"nodes", r.nodes}};
      if (!r.allocation.empty()) j["allocation"] = r.allocation;
      j["probes"] = probe_run;
      print_json(*ctx.out, j);
      return;
    }
    const launcher::wire::ClusterView& c = r.cluster;
    const auto& expected = c.expected_nodes;
    *ctx.out << "cluster " << c.name << " (backend " << c.backend << "): " << c.state()
             << "; head http://" << r.state.head_host << ":" << r.state.head_port << " (pid " << c.head.pid << ", up "
             << format_seconds(c.head.uptime_s, 1) << "); " << c.alive << "/" << expected.size() << " nodes alive\n";
    if (r.allocation.contains("summary")) *ctx.out << "allocation: " << r.allocation.value("summary", "") << "\n";
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> seen;
    for (const auto& entry : r.nodes) {
      const auto n = launcher::wire::parse<launcher::wire::NodeView>(entry);
      const auto& res = n.resources;
      std::string note;
      const std::string state = to_string(n.state);
      if (n.state != launcher::NodeState::kAlive && n.lost_ms)
        note = state + " at " + clock_time(*n.lost_ms) + ": " + n.reason;
      // Declared resources (nodes[].resources) show what was detected beside them: "2/8*".
      std::string cpus = std::to_string(res.cpus), gpus = std::to_string(res.gpus);
      if (res.declared) {
        if (res.cpus != res.detected_cpus) cpus += "/" + std::to_string(res.detected_cpus) + "*";
        if (res.gpus != res.detected_gpus || !res.gpu_ids.empty()) {
          gpus += "/" + std::to_string(res.detected_gpus) + "*";
          if (!res.gpu_ids.empty()) {
            std::string ids;
            for (int id : res.gpu_ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
            gpus += " [" + ids + "]";
          }
        }
        note = "*declared/detected" + (note.empty() ? "" : "; " + note);
      }
      rows.push_back({n.name, state, n.host, std::to_string(n.pid), cpus, launcher::format_bytes(res.memory_bytes), gpus,
                      std::to_string(res.ib_ports.size()), format_seconds(n.heartbeat_age_s, 1) + " ago", note});
      seen.push_back(n.name);
    }
    for (const auto& e : expected)
      if (std::find(seen.begin(), seen.end(), e) == seen.end())
        rows.push_back({e, "missing", "-", "-", "-", "-", "-", "-", "-", "never registered"});
    print_table(*ctx.out, {"NODE", "STATE", "HOST", "PID", "CPUS", "MEMORY", "GPUS", "IB", "HEARTBEAT", "NOTE"}, rows);
    if (probe_run.is_null()) {
      *ctx.out << "\nprobes: none run yet ('verlctl probe --name " << *name << "' runs them on every node)\n";
      return;
    }
    *ctx.out << "\nprobes: " << probe_run.value("job", "") << " " << probe_run.value("state", "");
    if (probe_run.contains("ended_ms")) *ctx.out << " at " << clock_time(probe_run["ended_ms"].get<int64_t>());
    *ctx.out << "\n";
    std::map<std::string, std::map<std::string, int>> per_node;  // node -> status -> rows
    std::vector<std::vector<std::string>> bad;
    for (const auto& row : probe_run.at("rows")) {
      const std::string node = row.value("node", "?"), st = row.value("status", "?");
      ++per_node[node][st];
      if (st == "warn" || st == "fail")
        bad.push_back({node, row.value("probe", "") + " " + row.value("metric", ""), st, row.value("detail", "")});
    }
    std::vector<std::vector<std::string>> per_node_rows;
    for (auto& [node, by] : per_node)
      per_node_rows.push_back({node, std::to_string(by["pass"]), std::to_string(by["warn"]), std::to_string(by["fail"]),
                        std::to_string(by["skipped"])});
    print_table(*ctx.out, {"NODE", "PASS", "WARN", "FAIL", "SKIPPED"}, per_node_rows);
    if (!bad.empty()) {
      *ctx.out << "\n";
      print_table(*ctx.out, {"NODE", "PROBE", "STATUS", "DETAIL"}, bad);
    }
  });
}

}  // namespace verl::cli

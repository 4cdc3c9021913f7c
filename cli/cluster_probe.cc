#include "cli/cluster_probe.h"

#include <cstdio>
#include <map>
#include <sstream>

#include "cli/job_view.h"
#include "cli/output.h"
#include "common/error.h"
#include "launcher/wire.h"
#include "probes/gpu_bench.h"
#include "probes/harness.h"
#include "probes/probes.h"

namespace verl::cli {

using Json = nlohmann::ordered_json;

std::vector<std::string> spec_overrides_for_nodes(const Json& spec, int dashboard_port, int store_port) {
  std::vector<std::string> out;
  if (spec.contains("probes") && spec.at("probes").is_object())
    for (const auto& [k, v] : spec.at("probes").items()) out.push_back("probes." + k + "=" + v.dump());
  // The node's own spec is the embedded default: what the cluster's spec promises must travel.
  if (const int gpus = probes::expected_gpus(spec); gpus > 0) out.push_back("slurm.gpus_per_node=" + std::to_string(gpus));
  out.push_back("head.dashboard_port=" + std::to_string(dashboard_port));
  out.push_back("head.store_port=" + std::to_string(store_port));
  return out;
}

std::vector<probes::Row> probe_job_rows(const launcher::wire::Job& job) {
  const std::string& job_id = job.summary.id;
  std::vector<probes::Row> rows;
  const Json results = job.results.value_or(Json::object());
  for (const auto& p : job.placement) {
    const std::string rank = std::to_string(p.rank);
    const std::string& node = p.node;
    if (!results.contains(rank)) {
      probes::Row r;
      r.node = node;
      r.probe = "report";
      r.status = probes::Status::kFail;
      r.detail = "no report from " + node + " (" + p.host + ", rank " + rank +
                 "): 'verlctl logs " + job_id + " --rank " + rank + "' shows why";
      rows.push_back(r);
      continue;
    }
    // The agent could not read the node's report: its reason, instead of rows (agent.cc).
    if (results.at(rank).is_object() && results.at(rank).contains("error")) {
      const Json& why = results.at(rank).at("error");
      probes::Row r;
      r.node = node;
      r.probe = "report";
      r.status = probes::Status::kFail;
      r.detail = "the report from " + node + " (rank " + rank + ") is unreadable: " +
                 (why.is_string() ? why.get<std::string>() : why.dump());
      rows.push_back(r);
      continue;
    }
    try {
      for (auto& r : probes::rows_from_json(results.at(rank))) {
        r.node = node;  // the cluster's name for it: two agents on one machine share a hostname
        rows.push_back(std::move(r));
      }
    } catch (const Error& e) {
      probes::Row r;
      r.node = node;
      r.probe = "report";
      r.status = probes::Status::kFail;
      r.detail = e.what();
      rows.push_back(r);
    }
  }
  if (rows.empty()) {
    probes::Row r;
    r.node = "*";
    r.probe = "report";
    r.status = probes::Status::kFail;
    r.detail = job_id + " " + to_string(job.summary.state) + " without placing a task: no alive node";
    rows.push_back(r);
  }
  for (auto& r : probes::compare_versions(rows)) rows.push_back(std::move(r));
  return rows;
}

ClusterProbeReport run_cluster_probe(launcher::HeadClient& client, const std::string& head_host, const Json& spec,
                                     const std::vector<std::string>& node_args, std::ostream& progress,
                                     const std::atomic<bool>* interrupted) {
  const auto cluster = launcher::wire::parse<launcher::wire::ClusterView>(client.get("/api/cluster"));
  if (!cluster.probe_ports)
    throw Error(ExitCode::kFailure,
                "the head at " + client.address().str() + " runs no probe servers (GET /api/cluster has no probe_ports)",
                "restart the cluster with this verlctl ('verlctl down && verlctl up ...'); an older head lacks them");
  // --exit-zero: a node's failed row is data for this side to judge; a task that exits 5 would
  // end the job and stop the nodes still probing.
  std::vector<std::string> argv = {"probe", "--exit-zero", "--head", head_host, "--probe-ports",
                                   std::to_string(cluster.probe_ports->tcp) + ":" + std::to_string(cluster.probe_ports->time)};
  const int store_port = cluster.store_port != 0 ? cluster.store_port : spec.at("head").at("store_port").get<int>();
  for (const auto& o : spec_overrides_for_nodes(spec, client.address().port, store_port)) argv.push_back(o);
  argv.insert(argv.end(), node_args.begin(), node_args.end());

  const Json submitted = client.post("/api/jobs", Json{{"kind", "probe"}, {"argv", argv}});
  ClusterProbeReport rep;
  rep.job = launcher::wire::parse<launcher::wire::JobRef>(submitted).id;
  progress << "probe: " << rep.job << " runs the probes on every node (results kept at the head)\n";
  FollowOptions fo;
  fo.interrupted = interrupted;
  std::string last;
  fo.on_job = [&](const launcher::wire::Job& job) {
    const std::string line = "probe: " + rep.job + " " + to_string(job.summary.state) + ", " +
                             std::to_string(job.results ? job.results->size() : 0) + " of " +
                             std::to_string(job.placement.size()) + " nodes reported";
    if (line != last) progress << line << "\n";
    last = line;
  };
  std::ostringstream logs;  // the nodes' stdout is the JSON that comes back as results
  const launcher::wire::Job job = follow_logs(client, rep.job, logs, fo);
  rep.state = to_string(job.summary.state);

  rep.rows = probe_job_rows(job);
  return rep;
}

namespace {

std::string fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

void print_probe_report(std::ostream& out, bool json, const std::vector<probes::Row>& rows, const Json& extra) {
  if (json) {
    Json j = probes::to_json(rows);
    for (const auto& [k, v] : extra.items()) j[k] = v;
    print_json(out, j);
    return;
  }
  std::vector<std::string> no_device;
  print_table(out, probes::table_header(), probes::table_cells(probes::fold_no_device_rows(rows, &no_device)));
  for (const auto& line : no_device) out << line << "\n";
  // nccl-tests' own layout for each sweep: size, count, time, algbw, busbw, data check.
  for (const auto& r : rows) {
    if (!r.data.is_object() || !r.data.contains("sweep") || r.data.at("sweep").empty()) continue;
    out << "\n" << r.node << " " << r.probe << " " << r.metric << ": " << r.data.value("scope", std::string()) << ", "
        << r.data.value("nranks", 0) << " ranks, busbw = algbw x " << r.data.value("factor", std::string()) << ", "
        << r.data.value("algo", std::string()) << "\n";
    std::vector<std::vector<std::string>> cells;
    for (const auto& p : r.data.at("sweep"))
      cells.push_back({probes::format_bytes(p.value("bytes", uint64_t{0})), std::to_string(p.value("count", uint64_t{0})),
                       fixed(p.value("time_us", 0.0), 1), fixed(p.value("algbw_gbps", 0.0), 2),
                       fixed(p.value("busbw_gbps", 0.0), 2), p.value("ok", false) ? "ok" : "WRONG"});
    print_table(out, {"SIZE", "COUNT [float]", "TIME [us]", "ALGBW [GB/s]", "BUSBW [GB/s]", "DATA"}, cells);
  }
}

void check_probe_rows(const std::vector<probes::Row>& rows, const std::string& hint) {
  if (probes::exit_code(rows) != ExitCode::kOk)
    throw Error(ExitCode::kCheckFailed, "probe check failed: " + probes::failed_names(rows), hint);
}

}  // namespace verl::cli

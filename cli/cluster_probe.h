// The preflight probes across a running cluster, for `verlctl probe` (without --local) and for
// `verlctl up` after every node registered: a job of kind "probe" is submitted to the head; in
// it every node runs
//
//   verlctl probe --local -o json --exit-zero --head HOST --probe-ports TCP:TIME <probes.* thresholds> ...
//
// so that the tcp, clock and ports probes measure each node against the head (its probe servers,
// GET /api/cluster's probe_ports) and every node is judged by the same thresholds. The head starts
// those tasks as the ranks of the job, one per node (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT:
// launcher/job_controller.h), so nccl_inter meets across all nodes as a training job's ranks would. Each node's
// JSON report is that node's result, kept with the job at the head (GET /api/jobs/<id>).
// Here the reports become one set of rows, the node column set to the node's name; versions are
// compared across nodes (probes::compare_versions); a node that sent no report is a fail row.
// Also the one printer of a probe report (table + the NCCL sweeps, or JSON) for both modes.
#pragma once

#include <atomic>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "cli/app.h"
#include "launcher/head_client.h"
#include "launcher/wire.h"
#include "probes/probe.h"

namespace verl::cli {

struct ClusterProbeReport {
  std::string job;    // job-N: its results stay at the head
  std::string state;  // the job's end state
  std::vector<probes::Row> rows;
};

// The node-side arguments that carry the spec's judgement: probes.* thresholds, the GPUs the
// spec gives a node (slurm.gpus_per_node), and the head's ports as the head itself reports them.
std::vector<std::string> spec_overrides_for_nodes(const nlohmann::ordered_json& spec, int dashboard_port,
                                                  int store_port);

// A probe job's rows (GET /api/jobs/<id>): each node's report with the node column set to the
// node's name, a fail row for a node that sent none, then the cross-node version comparison.
std::vector<probes::Row> probe_job_rows(const launcher::wire::Job& job);

// Submits the probe job, waits for its end (progress on `progress`), merges the reports.
// node_args are added to every node's `verlctl probe --local` (e.g. --tcp-mib 64, --only ...).
// Throws verl::Error: unreachable when the head cannot be reached, failure when it refuses the
// job or advertises no probe servers, interrupted on *interrupted.
ClusterProbeReport run_cluster_probe(launcher::HeadClient& client, const std::string& head_host,
                                     const nlohmann::ordered_json& spec, const std::vector<std::string>& node_args,
                                     std::ostream& progress, const std::atomic<bool>* interrupted);

// The report: a table (then one nccl-tests-like sweep table per NCCL row that has one) or, for
// json, to_json(rows) with `extra`'s keys added (e.g. the job id).
void print_probe_report(std::ostream& out, bool json, const std::vector<probes::Row>& rows,
                        const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());

// Throws verl::Error(check failed) naming the failed rows when any failed.
void check_probe_rows(const std::vector<probes::Row>& rows, const std::string& hint);

}  // namespace verl::cli

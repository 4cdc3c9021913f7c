// The one harness: runs probes in order, judges every measurement against the cluster spec's
// probes.* thresholds, and renders the one report format (a table whose METRIC column carries
// each value's unit, or JSON). The judging rule is written once, in judge():
//
//   at least T:  value < T -> fail,  T <= value < T * 1.1 -> warn,  otherwise pass
//   at most T:   |value| > T -> fail,  |value| > T * 0.9 -> warn,  otherwise pass
//
// so "warn" means "passes, but within 10% of its threshold". A metric without a threshold
// passes. Pure except for the probes' own run functions; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "common/error.h"
#include "probes/probe.h"

namespace verl::probes {

constexpr double kWarnMargin = 0.10;

Status judge(double value, Bound bound, double threshold);

// Every probe `verlctl probe --local` runs, in report order.
std::vector<Probe> local_probes();

// Runs each probe and judges its measurements. A probe that throws yields one fail row whose
// detail is the error; a measurement naming a metric its descriptor lacks is a bug (fail row).
std::vector<Row> run_probes(const std::vector<Probe>& probes, const Context& ctx);

// The rows of several nodes' reports: each versions metric must read the same on every node
// that reports it (skipped rows aside). One fail row (node "*") per metric that differs, naming
// each value and the nodes that have it.
std::vector<Row> compare_versions(const std::vector<Row>& rows);

// kCheckFailed when any row failed, else kOk.
ExitCode exit_code(const std::vector<Row>& rows);
// "shm.size, tcp.bandwidth": the failed rows, for the error message ("node-1 shm.size" when
// the rows come from several nodes).
std::string failed_names(const std::vector<Row>& rows);

// The report: a table (header, cells) and JSON {rows: [...], summary: {pass, warn, fail, skipped}}.
std::vector<std::string> table_header();
std::vector<std::vector<std::string>> table_cells(const std::vector<Row>& rows);
// On a node without a CUDA device every GPU probe is one "skipped: no CUDA device (<cause>)"
// row per metric (15 of them, the same long cause in each): the table shows them as one line
// per node instead, "node-0: no CUDA device: gpu, h2d, ... skipped — <cause>" (nodes with the same
// probes and cause share it). Returns the rows the table keeps; `lines` gets the folded lines.
// JSON keeps every row.
std::vector<Row> fold_no_device_rows(const std::vector<Row>& rows, std::vector<std::string>* lines);
Json to_json(const std::vector<Row>& rows);
// The rows of a to_json() report (another node's, sent through the head). Throws
// verl::Error(failure) naming what is missing when it is not one.
std::vector<Row> rows_from_json(const Json& report);

// A value as the table shows it: 3 significant digits, no exponent ("23.5", "0.125", "1234"),
// a whole number without decimals ("1", "24").
std::string format_value(double v);

}  // namespace verl::probes

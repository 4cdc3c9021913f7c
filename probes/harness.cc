#include "probes/harness.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <set>

#include "common/error.h"
#include "probes/probes.h"

namespace verl::probes {

const char* status_name(Status s) {
  switch (s) {
    case Status::kPass: return "pass";
    case Status::kWarn: return "warn";
    case Status::kFail: return "fail";
    case Status::kSkipped: return "skipped";
  }
  return "?";
}

const Metric* Descriptor::metric(const std::string& wanted) const {
  for (const auto& m : metrics)
    if (m.name == wanted) return &m;
  return nullptr;
}

std::string Endpoint::str() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Status judge(double value, Bound bound, double threshold) {
  switch (bound) {
    case Bound::kNone:
      return Status::kPass;
    case Bound::kAtLeast:
      if (value < threshold) return Status::kFail;
      return value < threshold * (1 + kWarnMargin) ? Status::kWarn : Status::kPass;
    case Bound::kAtMost:
      if (std::fabs(value) > threshold) return Status::kFail;
      return std::fabs(value) > threshold * (1 - kWarnMargin) ? Status::kWarn : Status::kPass;
  }
  return Status::kFail;
}

std::vector<Probe> local_probes() {
  return {shm_probe(), disk_probe(), clock_probe(), ports_probe(), tcp_probe(),
          versions_probe(), gpu_probe(), h2d_probe(), d2h_probe(), d2d_probe(), matmul_probe(),
          nccl_intra_probe(), nccl_inter_probe(), ib_probe()};
}

namespace {

std::optional<double> threshold_of(const Json& spec, const std::string& key) {
  if (key.empty() || !spec.contains("probes")) return std::nullopt;
  const Json& p = spec.at("probes");
  if (!p.contains(key) || !p.at(key).is_number()) return std::nullopt;
  return p.at(key).get<double>();
}

}  // namespace

std::vector<Row> run_probes(const std::vector<Probe>& probes, const Context& ctx) {
  std::vector<Row> rows;
  for (const auto& probe : probes) {
    const Descriptor& d = probe.descriptor;
    std::vector<Measurement> got;
    try {
      got = probe.run(ctx);
    } catch (const std::exception& e) {
      Row r;
      r.node = ctx.node;
      r.probe = d.name;
      r.metric = d.metrics.empty() ? "" : d.metrics.front().name;
      r.unit = d.metrics.empty() ? "" : d.metrics.front().unit;
      r.status = Status::kFail;
      r.detail = e.what();
      // What to try travels with the row: the node's report is all the asking side sees.
      if (const auto* err = dynamic_cast<const Error*>(&e); err && !err->hint().empty())
        r.detail += " (try: " + err->hint() + ")";
      rows.push_back(r);
      continue;
    }
    for (const auto& m : got) {
      Row r;
      r.node = ctx.node;
      r.probe = d.name;
      r.metric = m.metric;
      r.value = m.value;
      r.detail = m.detail;
      r.data = m.data;
      const Metric* spec = d.metric(m.metric);
      if (!spec) {
        r.status = Status::kFail;
        r.detail = "probe " + d.name + " reported metric '" + m.metric + "' its descriptor lacks (a bug)";
        rows.push_back(r);
        continue;
      }
      r.unit = spec->unit;
      r.bound = spec->bound;
      r.threshold_key = spec->threshold_key;
      r.threshold = threshold_of(ctx.spec, spec->threshold_key);
      if (m.verdict) {
        r.status = *m.verdict;
      } else if (r.value && r.threshold && spec->bound != Bound::kNone) {
        r.status = judge(*r.value, spec->bound, *r.threshold);
      } else {
        r.status = Status::kPass;
      }
      rows.push_back(r);
    }
  }
  return rows;
}

std::vector<Row> compare_versions(const std::vector<Row>& rows) {
  std::map<std::string, std::map<std::string, std::vector<std::string>>> seen;  // metric -> value -> nodes
  std::vector<std::string> order;
  for (const auto& r : rows) {
    if (r.probe != "versions" || r.status == Status::kSkipped) continue;
    if (!seen.count(r.metric)) order.push_back(r.metric);
    seen[r.metric][r.detail].push_back(r.node);
  }
  std::vector<Row> out;
  for (const auto& metric : order) {
    const auto& values = seen.at(metric);
    if (values.size() < 2) continue;
    Row r;
    r.node = "*";
    r.probe = "versions";
    r.metric = metric;
    r.status = Status::kFail;
    r.detail = "differs across nodes:";
    std::string sep = " ";
    for (const auto& [value, nodes] : values) {
      std::string names;
      for (const auto& n : nodes) names += (names.empty() ? "" : ", ") + n;
      r.detail += sep + names + " " + (nodes.size() == 1 ? "has" : "have") + " '" + value + "'";
      sep = "; ";
    }
    out.push_back(r);
  }
  return out;
}

ExitCode exit_code(const std::vector<Row>& rows) {
  for (const auto& r : rows)
    if (r.status == Status::kFail) return ExitCode::kCheckFailed;
  return ExitCode::kOk;
}

std::string failed_names(const std::vector<Row>& rows) {
  std::set<std::string> distinct;
  for (const auto& r : rows) distinct.insert(r.node);
  const size_t nodes = distinct.size();
  std::string out;
  for (const auto& r : rows)
    if (r.status == Status::kFail)
      out += (out.empty() ? "" : ", ") + (nodes > 1 ? r.node + " " : std::string()) + r.probe + "." + r.metric;
  return out;
}

std::string format_value(double v) {
  char buf[64];
  const double a = std::fabs(v);
  if (a >= 100 || v == std::floor(v)) std::snprintf(buf, sizeof buf, "%.0f", v);  // counts stay counts
  else if (a >= 10) std::snprintf(buf, sizeof buf, "%.1f", v);
  else if (a >= 1) std::snprintf(buf, sizeof buf, "%.2f", v);
  else std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::vector<std::string> table_header() {
  return {"NODE", "PROBE", "METRIC [UNIT]", "VALUE", "LIMIT", "STATUS", "DETAIL"};
}

std::vector<std::vector<std::string>> table_cells(const std::vector<Row>& rows) {
  std::vector<std::vector<std::string>> out;
  for (const auto& r : rows) {
    std::string limit;
    if (r.threshold && r.bound != Bound::kNone)
      limit = std::string(r.bound == Bound::kAtLeast ? ">= " : "<= ") + format_value(*r.threshold);
    out.push_back({r.node, r.probe, r.unit.empty() ? r.metric : r.metric + " [" + r.unit + "]",
                   r.value ? format_value(*r.value) : "-", limit.empty() ? "-" : limit, status_name(r.status),
                   r.detail});
  }
  return out;
}

std::vector<Row> fold_no_device_rows(const std::vector<Row>& rows, std::vector<std::string>* lines) {
  static const std::string kPrefix = "skipped: no CUDA device";
  struct Folded {
    std::vector<std::string> probes;
    std::string cause;
  };
  std::vector<std::string> order;  // nodes, as they first come
  std::map<std::string, Folded> by_node;
  std::vector<Row> kept;
  for (const auto& r : rows) {
    if (r.status != Status::kSkipped || r.detail.rfind(kPrefix, 0) != 0) {
      kept.push_back(r);
      continue;
    }
    auto [it, fresh] = by_node.try_emplace(r.node);
    if (fresh) order.push_back(r.node);
    Folded& f = it->second;
    if (std::find(f.probes.begin(), f.probes.end(), r.probe) == f.probes.end()) f.probes.push_back(r.probe);
    // The cause is the first row's parenthesis ("(cudaGetDeviceCount: ...)"); nccl rows add
    // their rendezvous after it, which their JSON keeps.
    if (f.cause.empty()) {
      std::string c = r.detail.substr(kPrefix.size());
      if (c.rfind(" (", 0) == 0) {
        int depth = 0;
        size_t end = 1;
        for (; end < c.size(); ++end) {
          if (c[end] == '(') ++depth;
          else if (c[end] == ')' && --depth == 0) break;
        }
        c = c.substr(2, end - 2);
      } else {
        c.erase(0, c.find_first_not_of(":; "));
      }
      f.cause = c;
    }
  }
  // Nodes with the same probes and cause share one line.
  std::vector<bool> done(order.size(), false);
  for (size_t i = 0; i < order.size(); ++i) {
    if (done[i]) continue;
    const Folded& f = by_node[order[i]];
    std::string nodes = order[i];
    for (size_t j = i + 1; j < order.size(); ++j) {
      const Folded& g = by_node[order[j]];
      if (!done[j] && g.probes == f.probes && g.cause == f.cause) {
        nodes += ", " + order[j];
        done[j] = true;
      }
    }
    std::string probes;
    for (const auto& p : f.probes) probes += (probes.empty() ? "" : ", ") + p;
    lines->push_back((nodes.empty() ? "" : nodes + ": ") + "no CUDA device: " + probes + " skipped" +
                     (f.cause.empty() ? "" : " \u2014 " + f.cause));
  }
  return kept;
}

Json to_json(const std::vector<Row>& rows) {
  Json list = Json::array();
  int counts[4] = {0, 0, 0, 0};
  for (const auto& r : rows) {
    ++counts[static_cast<int>(r.status)];
    Json threshold = nullptr;
    if (r.threshold && r.bound != Bound::kNone)
      threshold = {{"key", "probes." + r.threshold_key},
                   {"bound", r.bound == Bound::kAtLeast ? "at_least" : "at_most"},
                   {"value", *r.threshold}};
    Json row = {{"node", r.node}, {"probe", r.probe}, {"metric", r.metric},
                {"value", r.value ? Json(*r.value) : Json(nullptr)}, {"unit", r.unit},
                {"threshold", threshold}, {"status", status_name(r.status)}, {"detail", r.detail}};
    if (!r.data.is_null()) row["data"] = r.data;
    list.push_back(row);
  }
  return {{"rows", list},
          {"summary", {{"pass", counts[0]}, {"warn", counts[1]}, {"fail", counts[2]}, {"skipped", counts[3]}}}};
}

std::vector<Row> rows_from_json(const Json& report) {
  if (!report.is_object() || !report.contains("rows") || !report.at("rows").is_array())
    throw Error(ExitCode::kFailure, "not a probe report: no rows[] (" + report.dump().substr(0, 80) + ")");
  std::vector<Row> out;
  for (const auto& j : report.at("rows")) {
    Row r;
    r.node = j.value("node", std::string());
    r.probe = j.value("probe", std::string());
    r.metric = j.value("metric", std::string());
    if (j.contains("value") && j.at("value").is_number()) r.value = j.at("value").get<double>();
    r.unit = j.value("unit", std::string());
    if (j.contains("threshold") && j.at("threshold").is_object()) {
      const Json& t = j.at("threshold");
      std::string key = t.value("key", std::string());
      if (key.rfind("probes.", 0) == 0) key = key.substr(7);
      r.threshold_key = key;
      r.bound = t.value("bound", std::string()) == "at_most" ? Bound::kAtMost : Bound::kAtLeast;
      if (t.contains("value") && t.at("value").is_number()) r.threshold = t.at("value").get<double>();
    }
    const std::string status = j.value("status", std::string("fail"));
    r.status = Status::kFail;
    for (Status s : {Status::kPass, Status::kWarn, Status::kFail, Status::kSkipped})
      if (status == status_name(s)) r.status = s;
    r.detail = j.value("detail", std::string());
    if (j.contains("data")) r.data = j.at("data");
    out.push_back(r);
  }
  return out;
}

}  // namespace verl::probes

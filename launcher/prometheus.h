// GET /metrics: the head's state in the Prometheus text exposition format (version 0.0.4), so
// that a Prometheus server (or anything that scrapes it) can chart and alert on jobs and nodes.
//
// A pure function of the same JSON the API answers (docs/API.md shapes); for a running job the
// head passes each metric's newest value over its recent rows (a validation row comes only
// every test_freq steps), where `status` shows the last row:
//   cluster: GET /api/cluster ({name, backend, head: {uptime_s}, ...})
//   nodes:   GET /api/nodes's list; a node's last entry of gpu_samples (or its gpus) gives the
//            per-GPU utilisation and memory
//   jobs:    JobSummary objects, each optionally with latest_metrics ({verl metric name: value};
//            the newest value of each metric)
// Every family has its HELP and TYPE lines; label values are escaped (\\, \", \n); metrics
// that are absent or not numbers are left out, never written as 0.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace verl::launcher {

inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

std::string prometheus_text(const nlohmann::ordered_json& cluster, const nlohmann::ordered_json& nodes,
                            const nlohmann::ordered_json& jobs);

// A label value as the format needs it: a\"b\\c\nd.
std::string prometheus_escape_label(const std::string& value);

}  // namespace verl::launcher

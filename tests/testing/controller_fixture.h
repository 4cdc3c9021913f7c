// A head's job controller with time passed in, over a real (in-memory) SQLite store and node
// registry, without HTTP: the job state machine's tests (job_controller_test, command_job_test)
// drive it with heartbeats as agents send them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/job_controller.h"
#include "launcher/wire.h"

namespace verl::testing {

// Task reports written as the agent sends them, as JSON.
std::vector<launcher::wire::TaskReport> reports(const nlohmann::ordered_json& tasks);

// Whether a start order's env holds the entry "NAME=value".
bool has_env(const nlohmann::ordered_json& order, const std::string& entry);

// Two nodes, registered at registered_ms with the resources given: node-0 on host-a (its
// heartbeats come from 10.0.0.1, work dir /w/node-0) and node-1 on host-b (10.0.0.2, /w/node-1).
struct TwoNodeController {
  launcher::JobStore store{":memory:"};
  launcher::NodeRegistry registry{":memory:"};
  std::unique_ptr<launcher::JobController> ctl;
  launcher::NodeRecord n0, n1;

  TwoNodeController(const launcher::ControllerOptions& options, const launcher::Resources& each,
                    int64_t registered_ms = 0);
  // A heartbeat of node n at now with these task reports; the controller's orders for it.
  nlohmann::ordered_json beat(const launcher::NodeRecord& n, nlohmann::ordered_json tasks, int64_t now);
};

}  // namespace verl::testing

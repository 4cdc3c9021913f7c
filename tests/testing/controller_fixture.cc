#include "tests/testing/controller_fixture.h"

namespace verl::testing {

using Json = nlohmann::ordered_json;

std::vector<launcher::wire::TaskReport> reports(const Json& tasks) {
  return tasks.get<std::vector<launcher::wire::TaskReport>>();
}

bool has_env(const Json& order, const std::string& entry) {
  for (const auto& e : order["env"])
    if (e == entry) return true;
  return false;
}

TwoNodeController::TwoNodeController(const launcher::ControllerOptions& options, const launcher::Resources& each,
                                     int64_t registered_ms)
    : ctl(std::make_unique<launcher::JobController>(store, registry, options)) {
  n0 = registry.register_node("node-0", "host-a", 1, each, registered_ms);
  n1 = registry.register_node("node-1", "host-b", 2, each, registered_ms);
}

Json TwoNodeController::beat(const launcher::NodeRecord& n, Json tasks, int64_t now) {
  registry.heartbeat(n.id, now);
  return Json(ctl->heartbeat(n, reports(tasks), n.name == "node-0" ? "10.0.0.1" : "10.0.0.2", "/w/" + n.name, now));
}

}  // namespace verl::testing

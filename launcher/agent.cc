#include "launcher/agent.h"

#include <unistd.h>

#include <thread>

#include "common/error.h"
#include "common/log.h"

namespace verl::launcher {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

// Sleeps up to d, returning early (true) when *stop is set.
bool sleep_or_stop(std::chrono::milliseconds d, const std::atomic<bool>& stop) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
    if (stop) return true;
    std::this_thread::sleep_for(std::min<Clock::duration>(std::chrono::milliseconds(20), until - Clock::now()));
  }
  return stop.load();
}

std::string hostname() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return host;
}

[[noreturn]] void rejected(const AgentOptions& o) {
  throw Error(ExitCode::kFailure,
              "the head at " + o.head.url() + " rejected node " + o.node_name + "'s token (HTTP 401)",
              "the cluster was brought up again with a new token; this agent is left over");
}

}  // namespace

const char* agent_exit_name(AgentExit e) {
  switch (e) {
    case AgentExit::kShutdown: return "shutdown";
    case AgentExit::kStopped: return "stopped";
    case AgentExit::kHeadLost: return "head lost";
  }
  return "?";
}

AgentExit run_agent(const AgentOptions& o, const std::atomic<bool>& stop) {
  const auto timeout = std::max(std::chrono::milliseconds(500), std::min(o.heartbeat_interval * 2, std::chrono::milliseconds(5000)));
  HeadClient client(o.head, o.token, timeout);
  const Json registration = {{"name", o.node_name},
                             {"host", hostname()},
                             {"pid", static_cast<int64_t>(getpid())},
                             {"resources", to_json(o.resources)}};
  int64_t id = -1;
  auto last_contact = Clock::now();
  std::string last_error;
  for (;;) {
    if (stop) break;
    std::string error;
    std::optional<HeadResponse> r;
    if (id < 0) {
      r = client.try_request("POST", "/api/nodes/register", &registration, &error);
      if (r && r->status == 409) {
        log::Info() << "the head is shutting down; node " << o.node_name << " does not register";
        return AgentExit::kShutdown;
      }
      if (r && r->status == 200 && r->body.is_object() && r->body.contains("id")) {
        id = r->body["id"].get<int64_t>();
        log::Info() << "node " << o.node_name << " registered with the head at " << o.head.url() << " as id " << id;
      }
    } else {
      const Json empty = Json::object();
      r = client.try_request("POST", "/api/nodes/" + std::to_string(id) + "/heartbeat", &empty, &error);
      if (r && r->status == 404) {
        log::Warn() << "the head does not know node id " << id << " any more; registering again";
        id = -1;
        continue;
      }
      if (r && r->status == 200 && r->body.is_object() && r->body.value("shutdown", false)) {
        log::Info() << "the head asked for shutdown; node " << o.node_name << " leaves";
        const Json leave = {{"reason", "shutdown requested by the head"}};
        client.try_request("POST", "/api/nodes/" + std::to_string(id) + "/leave", &leave, nullptr);
        return AgentExit::kShutdown;
      }
    }
    if (r && r->status == 401) rejected(o);
    if (r && r->status >= 200 && r->status < 300) {
      last_contact = Clock::now();
      last_error.clear();
    } else {
      const std::string why = r ? "HTTP " + std::to_string(r->status) : error;
      if (why != last_error) log::Warn() << "head at " << o.head.url() << ": " << why << " (retrying)";
      last_error = why;
      if (Clock::now() - last_contact >= o.exit_after) {
        log::Err() << "the head at " << o.head.url() << " has been unreachable for "
                   << std::chrono::duration_cast<std::chrono::seconds>(o.exit_after).count() << " s; node "
                   << o.node_name << " exits";
        return AgentExit::kHeadLost;
      }
    }
    if (sleep_or_stop(o.heartbeat_interval, stop)) break;
  }
  if (id >= 0) {
    const Json leave = {{"reason", "agent stopped by a signal"}};
    client.try_request("POST", "/api/nodes/" + std::to_string(id) + "/leave", &leave, nullptr);
  }
  log::Info() << "node " << o.node_name << " stopped";
  return AgentExit::kStopped;
}

}  // namespace verl::launcher

// ports: the head's dashboard (HTTP API) port accepts TCP connections from here, and its store
// (rendezvous) port is reachable: accepting (a job's rank 0 holds it now, the cluster probe's own
// nccl_inter rank 0 among them: it drops this connect-and-close), or refusing because none does.
// A firewall or a head bound to 127.0.0.1 shows up now instead of as an agent that never
// registers or a rank that hangs in rendezvous.
#include <cstdio>

#include "probes/net.h"
#include "probes/probes.h"

namespace verl::probes {

namespace {

// kListening: the port must accept. kBetweenJobs: nothing need listen now (a job's rank 0 binds
// the store port while the job runs), so a refusal passes: the host answered with a reset, so
// the path is open and no firewall drops it; a timeout still fails.
enum class Expect { kListening, kBetweenJobs };

Measurement check(const std::string& metric, const Endpoint& to, std::chrono::milliseconds timeout, Expect expect) {
  const auto start = std::chrono::steady_clock::now();
  std::string why;
  auto s = try_connect(to, timeout, &why);
  const auto ms = [&] { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(); };
  if (!s && expect == Expect::kBetweenJobs && why.size() > 8 && why.compare(why.size() - 8, 8, " refused") == 0)
    return {metric, ms(), why + ": nothing listens between jobs (a job's rank 0 binds it), and the host answered, so "
                          "no firewall drops it", {}};
  if (!s) return {metric, std::nullopt, why, Status::kFail};
  return {metric, ms(),
          to.str() + " accepts connections" +
              (expect == Expect::kBetweenJobs ? ": a job's rank 0 listens on it now (a cluster probe's own nccl_inter too)" : ""),
          {}};
}

}  // namespace

Probe ports_probe() {
  Probe p;
  p.descriptor = {"ports", "the head's dashboard and store ports accept a TCP connection (time to connect)",
                  {{"dashboard", "ms", Bound::kNone, ""}, {"store", "ms", Bound::kNone, ""}}};
  p.run = [](const Context& ctx) {
    std::vector<Measurement> out;
    if (!ctx.dashboard && !ctx.store) {
      out.push_back({"dashboard", std::nullopt, "no head: skipped", Status::kSkipped});
      out.push_back({"store", std::nullopt, "no head: skipped", Status::kSkipped});
      return out;
    }
    if (ctx.dashboard) out.push_back(check("dashboard", *ctx.dashboard, ctx.connect_timeout, Expect::kListening));
    if (ctx.store) out.push_back(check("store", *ctx.store, ctx.connect_timeout, Expect::kBetweenJobs));
    return out;
  };
  return p;
}

}  // namespace verl::probes

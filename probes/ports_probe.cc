// ports: the head's dashboard (HTTP API) and store (rendezvous) ports accept TCP connections
// from here. A firewall or a head bound to 127.0.0.1 shows up now instead of as an agent that
// never registers or a rank that hangs in rendezvous.
#include <cstdio>

#include "probes/net.h"
#include "probes/probes.h"

namespace verl::probes {

namespace {

Measurement check(const std::string& metric, const Endpoint& to, std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  std::string why;
  auto s = try_connect(to, timeout, &why);
  if (!s) return {metric, std::nullopt, why, Status::kFail};
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return {metric, ms, to.str() + " accepts connections", {}};
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
    if (ctx.dashboard) out.push_back(check("dashboard", *ctx.dashboard, ctx.connect_timeout));
    if (ctx.store) out.push_back(check("store", *ctx.store, ctx.connect_timeout));
    return out;
  };
  return p;
}

}  // namespace verl::probes

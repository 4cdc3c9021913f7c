// ib: the InfiniBand/RoCE ports and their rates. A port that is not ACTIVE is left out of
// NCCL_IB_HCA (launcher/nccl_env.cc), so it warns here: the node runs, slower than it should.
#include <cstdlib>

#include "probes/probes.h"

namespace verl::probes {

std::optional<double> parse_ib_rate_gbps(const std::string& rate) {
  const char* s = rate.c_str();
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s) return std::nullopt;
  return v;
}

Probe ib_probe() {
  Probe p;
  p.descriptor = {"ib", "InfiniBand/RoCE ports under /sys/class/infiniband: state, link layer, rate",
                  {{"rate", "Gbit/s", Bound::kNone, ""}}};
  p.run = [](const Context& ctx) {
    std::vector<Measurement> out;
    if (ctx.ib_ports.empty()) {
      out.push_back({"rate", std::nullopt, "skipped: no InfiniBand/RoCE port", Status::kSkipped});
      return out;
    }
    for (const auto& port : ctx.ib_ports) {
      const bool active = port.state.find("ACTIVE") != std::string::npos;
      std::string detail = port.name + " " + port.state + ", " + port.link_layer + ", " + port.rate;
      if (!active) detail += " (not ACTIVE: left out of NCCL_IB_HCA)";
      out.push_back({"rate", parse_ib_rate_gbps(port.rate), detail,
                     active ? std::optional<Status>() : std::optional<Status>(Status::kWarn)});
    }
    return out;
  };
  return p;
}

}  // namespace verl::probes

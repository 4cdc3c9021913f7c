#include "launcher/nccl_env.h"

#include <algorithm>
#include <regex>

#include "common/error.h"

namespace verl::launcher {
namespace {

constexpr const char* kIpv4MappedPrefix = "0000:0000:0000:0000:0000:ffff:";

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

// "0000:...:ffff:0a00:0005" -> "10.0.0.5"
std::string ipv4_of_gid(const std::string& gid) {
  const std::string tail = gid.substr(std::string(kIpv4MappedPrefix).size());  // "0a00:0005"
  if (tail.size() != 9 || tail[4] != ':') return gid;
  try {
    const unsigned hi = std::stoul(tail.substr(0, 4), nullptr, 16);
    const unsigned lo = std::stoul(tail.substr(5, 4), nullptr, 16);
    return std::to_string(hi >> 8) + "." + std::to_string(hi & 0xff) + "." + std::to_string(lo >> 8) + "." +
           std::to_string(lo & 0xff);
  } catch (const std::exception&) {
    return gid;
  }
}

std::string describe(const HcaPort& p) {
  std::string d = p.name() + " (" + (p.link_layer.empty() ? "link layer unknown" : p.link_layer);
  if (!p.rate.empty()) d += ", " + p.rate;
  return d + ")";
}

std::string state_of(const HcaPort& p) { return p.name() + " is " + (p.state.empty() ? "in no readable state" : p.state); }

void add(EnvPlan& plan, std::string name, std::string value, std::string reason, EnvSource source) {
  plan.vars.push_back({std::move(name), std::move(value), std::move(reason), source});
}

void add_ib(EnvPlan& plan, const NodeFacts& facts) {
  const std::string where = facts.sysfs_root + "/class/infiniband";
  std::vector<const HcaPort*> active, inactive;
  for (const auto& p : facts.hca_ports) (p.active() ? active : inactive).push_back(&p);

  if (active.empty()) {
    std::string why;
    if (facts.hca_ports.empty()) {
      why = "no InfiniBand or RoCE device under " + where;
    } else {
      std::vector<std::string> states;
      for (const auto* p : inactive) states.push_back(state_of(*p));
      why = "no ACTIVE port under " + where + " (" + join(states, ", ") + ")";
    }
    add(plan, "NCCL_IB_DISABLE", "1",
        why + ": NCCL uses TCP sockets instead of failing to open a device that cannot carry traffic",
        EnvSource::kDetected);
    return;
  }

  std::vector<std::string> names, described, left_out;
  for (const auto* p : active) {
    names.push_back(p->name());
    described.push_back(describe(*p));
  }
  for (const auto* p : inactive) left_out.push_back(state_of(*p));
  std::string reason = "the ACTIVE ports under " + where + ": " + join(described, ", ");
  if (!left_out.empty()) reason += "; left out: " + join(left_out, ", ");
  reason += "; the leading '=' makes NCCL match the names exactly, not as prefixes (mlx5_1 would also match mlx5_10)";
  add(plan, "NCCL_IB_HCA", "=" + join(names, ","), reason, EnvSource::kDetected);

  std::vector<const HcaPort*> roce;
  for (const auto* p : active)
    if (p->roce()) roce.push_back(p);
  if (roce.empty()) return;

  // NCCL takes one GID index for every port, so the first port that has a RoCE v2 IPv4 GID
  // decides; the others are named when they disagree or have none.
  std::optional<int> chosen;
  std::string chosen_on;
  std::vector<std::string> disagree, lacking;
  for (const auto* p : roce) {
    const auto idx = roce_v2_ipv4_gid_index(*p);
    if (!idx) {
      lacking.push_back(p->name());
      continue;
    }
    if (!chosen) {
      chosen = idx;
      std::string address;
      for (const auto& g : p->gids)
        if (g.index == *idx) address = ipv4_of_gid(g.gid);
      chosen_on = p->name() + " (" + address + ")";
    } else if (*idx != *chosen) {
      disagree.push_back(p->name() + " has it at " + std::to_string(*idx));
    }
  }
  const std::string why_v2 =
      "RoCE v2 runs over UDP/IP and routes across subnets, where a RoCE v1 or IPv6 link-local GID fails";
  if (!chosen) {
    std::vector<std::string> ports;
    for (const auto* p : roce) ports.push_back(p->name());
    add(plan, "NCCL_IB_GID_INDEX", "3",
        "RoCE ports " + join(ports, ", ") +
            ": no RoCE v2 GID with an IPv4-mapped address readable in ports/N/gids and gid_attrs/types; 3 is "
            "where mlx5 NICs put it once their interface has an IPv4 address (" + why_v2 +
            "); set env.NCCL_IB_GID_INDEX if `show_gids` says otherwise",
        EnvSource::kDetected);
    return;
  }
  std::string reason_gid = "the RoCE v2 GID with an IPv4-mapped address on " + chosen_on + " is at index " +
                           std::to_string(*chosen) + ": " + why_v2;
  if (!disagree.empty())
    reason_gid += "; NCCL takes one index for every port, but " + join(disagree, ", ") +
                  ": set env.NCCL_IB_GID_INDEX or give the NICs the same GID layout";
  if (!lacking.empty()) reason_gid += "; " + join(lacking, ", ") + " show no such GID";
  add(plan, "NCCL_IB_GID_INDEX", std::to_string(*chosen), reason_gid, EnvSource::kDetected);
}

void add_socket(EnvPlan& plan, const NodeFacts& facts) {
  const HeadInterface iface = head_interface(facts);
  if (!iface.known()) {
    plan.notes.push_back("NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME are not set: " + iface.reason +
                         "; NCCL and Gloo then pick an interface themselves, which may be one the other nodes "
                         "cannot reach (set env.NCCL_SOCKET_IFNAME and env.GLOO_SOCKET_IFNAME in the spec)");
    return;
  }
  add(plan, "NCCL_SOCKET_IFNAME", "=" + iface.name,
      iface.reason + "; NCCL's bootstrap and socket transport use it; '=' matches the name exactly",
      EnvSource::kDetected);
  add(plan, "GLOO_SOCKET_IFNAME", iface.name,
      iface.reason + "; Gloo (CPU collectives) otherwise binds the address the hostname resolves to, which "
                      "may be one the other nodes cannot reach",
      EnvSource::kDetected);
}

void add_defaults(EnvPlan& plan) {
  add(plan, "CUDA_DEVICE_MAX_CONNECTIONS", "1",
      "one hardware queue per GPU keeps kernels in the order they were issued, which tensor/sequence parallel "
      "relies on to overlap communication with compute (verl's and Megatron's launch scripts set it)",
      EnvSource::kDefault);
  add(plan, "NCCL_CUMEM_ENABLE", "0",
      "NCCL's cuMem-backed buffers do not mix with the memory pools of a rollout engine in the same process "
      "(vLLM sets the same; verl's runtime env does too)",
      EnvSource::kDefault);
  add(plan, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1",
      "a failed or timed-out collective aborts the rank instead of hanging it, so the agent sees the rank end and "
      "the job fails instead of stalling",
      EnvSource::kDefault);
  add(plan, "TOKENIZERS_PARALLELISM", "false",
      "tokenizer threads inside forked data workers deadlock; false keeps them off", EnvSource::kDefault);
}

std::optional<std::string> spec_value(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return std::string(v.get<bool>() ? "true" : "false");
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number_float()) return v.dump();
  return std::nullopt;
}

}  // namespace

const char* source_name(EnvSource source) {
  switch (source) {
    case EnvSource::kDetected: return "detected";
    case EnvSource::kDefault: return "default";
    case EnvSource::kSpec: return "spec";
  }
  return "?";
}

std::optional<int> roce_v2_ipv4_gid_index(const HcaPort& port) {
  for (const auto& g : port.gids)  // sorted by index
    if (g.type == "RoCE v2" && g.gid.rfind(kIpv4MappedPrefix, 0) == 0) return g.index;
  return std::nullopt;
}

HeadInterface head_interface(const NodeFacts& facts) {
  auto fail = [](std::string why) { return HeadInterface{"", std::move(why)}; };
  if (facts.head.empty()) return fail("no head address");
  if (is_loopback_address(facts.head)) {
    std::string lo = "lo";
    for (const auto& i : facts.interfaces)
      if (i.loopback && i.up) {
        lo = i.name;
        break;
      }
    return HeadInterface{lo, "the head (" + facts.head + ") is on this machine's loopback interface"};
  }
  if (facts.head_source_address.empty()) {
    std::string w = "the interface that reaches the head " + facts.head + " is unknown";
    for (const auto& n : facts.notes)
      if (n.find(facts.head) != std::string::npos) w = n;
    return fail(w);
  }
  for (const auto& i : facts.interfaces)
    if (i.address == facts.head_source_address)
      return HeadInterface{i.name, "this machine reaches the head " + facts.head + " from " + i.address + " on " +
                                       i.name + " (the kernel's route to it)"};
  return fail("the local address " + facts.head_source_address + " that reaches the head " + facts.head +
              " is on no interface that getifaddrs() lists");
}

EnvPlan compute_env(const NodeFacts& facts, const nlohmann::ordered_json& spec_env) {
  EnvPlan plan;
  add_ib(plan, facts);
  add_socket(plan, facts);
  add_defaults(plan);

  if (!spec_env.is_object()) return plan;
  static const std::regex kName("[A-Za-z_][A-Za-z0-9_]*");
  std::vector<std::string> errors;
  for (auto it = spec_env.begin(); it != spec_env.end(); ++it) {
    const std::string& name = it.key();
    const std::string key = "env." + name;
    if (!std::regex_match(name, kName)) {
      errors.push_back(key + ": not a valid environment variable name (letters, digits and _, not starting with a digit)");
      continue;
    }
    auto existing = std::find_if(plan.vars.begin(), plan.vars.end(), [&](const EnvVar& v) { return v.name == name; });
    if (it.value().is_null()) {
      if (existing != plan.vars.end()) {
        plan.notes.push_back(name + " is not set: " + key + " is null in the cluster spec (verlctl would set " +
                             existing->value + ")");
        plan.vars.erase(existing);
      } else {
        plan.notes.push_back(key + " is null in the cluster spec, and verlctl does not set " + name + " here anyway");
      }
      continue;
    }
    const auto value = spec_value(it.value());
    if (!value) {
      errors.push_back(key + ": expected a string, number or boolean, got " +
                       std::string(it.value().is_array() ? "a list" : "a mapping"));
      continue;
    }
    if (existing != plan.vars.end()) {
      existing->reason = "from the cluster spec (" + key + "), which wins over the " +
                         source_name(existing->source) + " value " + existing->value;
      existing->value = *value;
      existing->source = EnvSource::kSpec;
    } else {
      add(plan, name, *value, "from the cluster spec (" + key + ")", EnvSource::kSpec);
    }
  }
  if (!errors.empty())
    throw Error(ExitCode::kInvalidConfig, "invalid env in the cluster spec:\n  " + join(errors, "\n  "),
                "env maps variable names to strings, numbers or booleans (null unsets one verlctl sets)");
  return plan;
}

std::vector<std::string> assignments(const std::vector<EnvVar>& vars) {
  std::vector<std::string> out;
  out.reserve(vars.size());
  for (const auto& v : vars) out.push_back(v.name + "=" + v.value);
  return out;
}

}  // namespace verl::launcher

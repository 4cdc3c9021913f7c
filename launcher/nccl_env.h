// The environment a node's trainer ranks run with: NCCL's InfiniBand/RoCE and socket settings
// computed from what the node has (NodeFacts), verlctl's fixed defaults, and the cluster
// spec's `env`, which always wins. Every variable carries the reason for its value, so that
// `verlctl env` can show why each one is what it is and an operator can disagree with it in
// the spec.
//
// compute_env() is pure: the facts are read elsewhere (node_facts.h). Thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "launcher/node_facts.h"

namespace verl::launcher {

enum class EnvSource {
  kDetected,  // computed from this node's ports, GPUs and routes
  kDefault,   // verlctl's fixed value for every node
  kSpec,      // the cluster spec's env
};
const char* source_name(EnvSource source);  // "detected" | "default" | "spec"

struct EnvVar {
  std::string name;
  std::string value;
  std::string reason;
  EnvSource source = EnvSource::kDefault;
};

struct EnvPlan {
  std::vector<EnvVar> vars;        // in the order they are set; names unique
  std::vector<std::string> notes;  // what was not set, and why (no route to the head, ...)
};

// facts: the node's (facts.head is the head address ranks will reach); spec_env: the resolved
// spec's `env` mapping (a string, number or boolean per name; null removes a variable that
// verlctl would set). Throws verl::Error (invalid config) naming env.NAME for a value that is
// a list or mapping, or a name that is not a valid variable name.
EnvPlan compute_env(const NodeFacts& facts, const nlohmann::ordered_json& spec_env);

// "NAME=value" entries, for process::Options::env and the container run lines.
std::vector<std::string> assignments(const std::vector<EnvVar>& vars);

// The parts of compute_env(), exposed for tests.
// The index of a RoCE v2 GID holding an IPv4-mapped address (::ffff:a.b.c.d), lowest first.
std::optional<int> roce_v2_ipv4_gid_index(const HcaPort& port);
// The interface ranks should use to reach the head, and the reason it is that one; an empty name
// when it is unknown, the reason then saying why (an outcome the env plan notes, not an error).
struct HeadInterface {
  std::string name;
  std::string reason;
  bool known() const { return !name.empty(); }
};
HeadInterface head_interface(const NodeFacts& facts);

}  // namespace verl::launcher

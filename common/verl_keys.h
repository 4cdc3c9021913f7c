// verl's catalogue: every key of verl's PPO trainer config (templates/verl/ppo_trainer.yaml, verl's
// own generated file) and what verlctl does with the ones job.yaml lacks
// (templates/verl/keys.yaml). config.cc asks this file when a key is not in verlctl's schema, so
// that a verl user's file or command line is never met with "unknown key" for a key verl has:
// each such key is silent (Hydra metadata), ignored with a reason, or unsupported (an error
// unless left at verl's default or off). Keys under a catalogued empty mapping (engine_kwargs.*)
// are free-form. Pure; the tables are built once, thread-safe after that.
#pragma once

#include <string>
#include <vector>

#include "common/config.h"

namespace verl::config::verl_keys {

enum class Status { kSilent, kIgnored, kUnsupported };

struct Verdict {
  Status status = Status::kUnsupported;
  std::string reason;
  std::string hint;
  std::vector<Json> allow;  // values of an unsupported key that are accepted besides the default
};

enum class Lookup {
  kAbsent,   // not a key of verl's
  kLeaf,     // a leaf key (or a list) of verl's, with a default
  kMapping,  // a mapping of verl's with keys of its own (walk into it)
  kFree,     // inside (or equal to) a mapping verl leaves free-form, such as engine_kwargs.vllm
};
Lookup lookup(const std::string& path);

// verl's default for a kLeaf path (null Json otherwise).
Json verl_default(const std::string& path);

// The rule that governs a catalogued path.
const Verdict& classify(const std::string& path);

// Whether value at path leaves verl's behaviour where verlctl's is: verl's default, an off value
// (null, false, 0, "", [], {}) or one of the rule's allowed values.
bool inert(const std::string& path, const Json& value);

// Every leaf path of the catalogue, in file order.
const std::vector<std::string>& leaves();

}  // namespace verl::config::verl_keys

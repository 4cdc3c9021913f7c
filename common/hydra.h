// Hydra's defaults-list composition, for verl's config folder layout: a primary YAML whose
// `defaults:` list names configs in folders beside it (`- actor@actor_rollout_ref.actor: dp_actor`
// loads actor/dp_actor.yaml into actor_rollout_ref.actor; `- reward_manager@reward_manager` loads
// reward_manager.yaml; `- _self_` marks where the file's own keys apply), recursively, with group
// paths and packages relative to the config that lists them, as Hydra 1.3 does. Entries whose
// option is null are skipped; `override`/`optional` prefixes are understood. The result is one YAML
// document that config::resolve_text() takes like any other file.
// Pure but for reading files; throws verl::Error (kInvalidConfig) naming the file and entry.
#pragma once

#include <string>

namespace verl::config {

// True when the YAML text has a top-level `defaults:` list.
bool has_defaults_list(const std::string& yaml_text);

// The composed document of the primary config `file` (its defaults resolved from its folder).
std::string compose_hydra(const std::string& file);

// Hydra's --config-path/--config-name: the primary config file they name (".yaml" added when
// the name has none; a relative path is taken from the current directory).
std::string hydra_primary(const std::string& config_path, const std::string& config_name);

}  // namespace verl::config

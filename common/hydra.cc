#include "common/hydra.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace verl::config {
namespace {

namespace fs = std::filesystem;

YAML::Node load_file(const fs::path& file, const std::string& wanted_by) {
  std::ifstream in(file);
  if (!in)
    throw Error(ExitCode::kInvalidConfig, "cannot read config '" + file.string() + "'" + wanted_by,
                "Hydra looks for <group>/<option>.yaml beside the config that lists it in `defaults:`");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    throw Error(ExitCode::kInvalidConfig,
                file.string() + ":" + std::to_string(e.mark.line + 1) + ": YAML syntax error: " + e.msg,
                "check indentation and quoting near that position");
  }
}

// Deep merge: mappings merge key by key, anything else replaces.
void merge_into(YAML::Node target, const YAML::Node& src) {
  for (const auto& kv : src) {
    const std::string key = kv.first.Scalar();
    if (kv.second.IsMap() && target[key] && target[key].IsMap()) {
      merge_into(target[key], kv.second);
    } else {
      target[key] = YAML::Clone(kv.second);
    }
  }
}

// The node at a dotted package path under root, created as mappings on the way.
YAML::Node at_package(YAML::Node root, const std::string& package) {
  if (package.empty()) return root;
  YAML::Node node = root;
  std::stringstream parts(package);
  std::string part;
  while (std::getline(parts, part, '.')) {
    if (!node[part] || !node[part].IsMap()) node[part] = YAML::Node(YAML::NodeType::Map);
    node.reset(node[part]);  // rebind: Node's operator= would overwrite the parent's content
  }
  return node;
}

std::string join_package(const std::string& base, const std::string& rel) {
  if (rel == "_global_") return "";
  if (rel.rfind("_global_.", 0) == 0) return rel.substr(9);
  if (base.empty()) return rel;
  if (rel.empty()) return base;
  return base + "." + rel;
}

// Composes `file` (found in `dir`) at `package` into `root`.
void compose(YAML::Node root, const fs::path& file, const std::string& package, int depth) {
  if (depth > 32) throw Error(ExitCode::kInvalidConfig, "defaults lists nest too deeply at " + file.string(), "look for a cycle");
  YAML::Node doc = load_file(file, "");
  if (doc.IsNull()) return;
  if (!doc.IsMap()) throw Error(ExitCode::kInvalidConfig, file.string() + ": a config must be a mapping", "");
  const fs::path dir = file.parent_path();
  YAML::Node self(YAML::NodeType::Map);
  for (const auto& kv : doc)
    if (kv.first.Scalar() != "defaults") self[kv.first.Scalar()] = kv.second;
  bool self_done = false;
  auto apply_self = [&] {
    merge_into(at_package(root, package), self);
    self_done = true;
  };
  const YAML::Node defaults = doc["defaults"];
  if (defaults && !defaults.IsSequence())
    throw Error(ExitCode::kInvalidConfig, file.string() + ": `defaults` must be a list", "");
  if (defaults) {
    for (const auto& entry : defaults) {
      const std::string where = " (listed in " + file.string() + ":" + std::to_string(entry.Mark().line + 1) + ")";
      std::string key, option;
      bool has_option = false;
      if (entry.IsScalar()) {
        key = entry.Scalar();
      } else if (entry.IsMap() && entry.size() == 1) {
        key = entry.begin()->first.Scalar();
        const YAML::Node value = entry.begin()->second;
        if (value.IsNull()) continue;  // group: null selects nothing
        if (!value.IsScalar())
          throw Error(ExitCode::kInvalidConfig, "defaults entry '" + key + "': only one option per group is supported" + where, "");
        option = value.Scalar();
        has_option = true;
      } else {
        throw Error(ExitCode::kInvalidConfig, "unreadable defaults entry" + where, "entries look like `- group@package: option`");
      }
      if (key == "_self_") {
        apply_self();
        continue;
      }
      bool optional = false;
      for (const std::string prefix : {"override ", "optional "}) {
        if (key.rfind(prefix, 0) == 0) {
          optional = optional || prefix == "optional ";
          key = key.substr(prefix.size());
        }
      }
      std::string group = key, pkg;
      bool explicit_pkg = false;
      if (auto at = key.find('@'); at != std::string::npos) {
        group = key.substr(0, at);
        pkg = key.substr(at + 1);
        explicit_pkg = true;
      }
      fs::path target = has_option ? dir / group / (option + ".yaml") : dir / (group + ".yaml");
      if (!fs::exists(target)) {
        if (optional) continue;
        throw Error(ExitCode::kInvalidConfig, "defaults entry '" + key + (has_option ? ": " + option : "") +
                    "': no file " + target.lexically_normal().string() + where,
                    "copy verl's whole config folder (verl/trainer/config) so the files beside the primary config are there");
      }
      std::string child_package = package;
      if (explicit_pkg) {
        child_package = join_package(package, pkg);
      } else if (has_option) {
        // A group's default package is its path (relative groups: their last folders).
        std::string g = fs::path(group).lexically_normal().generic_string();
        while (g.rfind("../", 0) == 0) g = g.substr(3);
        for (auto& c : g)
          if (c == '/') c = '.';
        child_package = join_package(package, g);
      }
      compose(root, target.lexically_normal(), child_package, depth + 1);
    }
  }
  if (!self_done) apply_self();
}

}  // namespace

bool has_defaults_list(const std::string& yaml_text) {
  try {
    const YAML::Node doc = YAML::Load(yaml_text);
    return doc.IsMap() && doc["defaults"] && doc["defaults"].IsSequence();
  } catch (const YAML::Exception&) {
    return false;  // resolve() reports the syntax error with its position
  }
}

std::string compose_hydra(const std::string& file) {
  YAML::Node root(YAML::NodeType::Map);
  compose(root, fs::path(file), "", 0);
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

std::string hydra_primary(const std::string& config_path, const std::string& config_name) {
  std::string name = config_name.empty() ? "config" : config_name;
  if (fs::path(name).extension() != ".yaml" && fs::path(name).extension() != ".yml") name += ".yaml";
  return (fs::path(config_path.empty() ? "." : config_path) / name).string();
}

}  // namespace verl::config

// What a default value cannot say about a key: its type when the default is null or a list,
// its range, its choices, the shape of list items, and the checks that span several keys
// (batch sizes that must divide, a resume path that must be set). config.cc asks this file;
// nothing else does.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/config.h"

namespace verl::config::schema {

enum class Type {
  kAny,        // no default and no rule: any scalar
  kBool,
  kInt,
  kFloat,      // ints are accepted
  kString,     // a plain YAML scalar is taken as its text (experiment_name: 2024 is "2024")
  kStrings,    // one string or a list of strings (data.train_files)
  kList,       // a list of scalars; element type in Rule::element
  kMap,        // keys from the schema only
  kFreeMap,    // any keys, scalar values (env)
  kObjects,    // a list of maps shaped like Rule::item (cluster nodes)
};
const char* type_name(Type type);  // "an integer", "a list", ...

struct Rule {
  std::string path;
  std::optional<Type> type;          // overrides the type of the default
  Type element = Type::kAny;         // for kList
  bool nullable = false;             // null is a legal value
  std::optional<double> min, max;    // inclusive
  std::vector<std::string> choices;  // for strings
  // verl's names for this key that verlctl rejects, each with the reason (said instead of
  // "is not one of").
  std::map<std::string, std::string> refused;
  Json item;                         // for kObjects: the item's defaults; required keys are null
  std::vector<std::string> required; // for kObjects: keys an item must set
};

// The rule for a key path ("nodes" for the list itself), or nullptr.
const Rule* find_rule(Kind kind, const std::string& path);

// Checks that involve several keys, on a fully resolved tree; appends errors to issues.
void check_consistency(Kind kind, const Json& root, const std::map<std::string, Location>& where,
                       std::vector<Issue>& issues);

}  // namespace verl::config::schema

#include "common/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <cstdio>
#include <regex>
#include <set>
#include <sstream>

#include "common/config_schema.h"
#include "common/embedded.h"
#include "common/error.h"
#include "common/hydra.h"
#include "common/strings.h"
#include "common/verl_keys.h"

namespace verl::config {

using schema::Type;

const char* kind_name(Kind kind) { return kind == Kind::kJob ? "job config" : "cluster spec"; }

std::string Location::str() const {
  if (file.empty()) return "command line";
  if (line == 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

bool Document::ok() const {
  return std::none_of(issues.begin(), issues.end(),
                      [](const Issue& i) { return i.severity == Severity::kError; });
}

namespace {

std::string join(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : path) {
    if (c == '.') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

// ---- YAML -> Json, guided by the schema ------------------------------------------------------

// A key of verl's that verlctl's schema lacks, as the user wrote it (verl_keys.h says what
// becomes of it once everything is merged).
struct Foreign {
  std::string path;
  Json value;
  Location where;
};

struct Builder {
  Kind kind;
  std::vector<Issue>* issues;
  std::map<std::string, Location>* locations;
  std::vector<Foreign>* foreign = nullptr;

  void error(const std::string& path, std::string message, std::string hint, Location where) {
    issues->push_back({Severity::kError, path, std::move(message), std::move(hint), std::move(where)});
  }
};

Location mark_location(const std::string& file, const YAML::Mark& m) {
  if (file.empty() || m.line < 0) return {file, 0, 0};
  return {file, m.line + 1, m.column + 1};
}

bool is_null_text(const std::string& s) { return s == "null" || s == "~" || s == "Null" || s == "NULL"; }

std::optional<bool> parse_bool(const std::string& s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  return std::nullopt;
}

// Hand-written scanners, not std::regex: libstdc++'s matcher recurses once per character and
// overflowed the stack on a 100k-character override (issue 16, case 2).
size_t scan_digits(const std::string& s, size_t i) {
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  return i;
}

size_t scan_sign(const std::string& s, size_t i) { return i < s.size() && (s[i] == '-' || s[i] == '+') ? i + 1 : i; }

// [-+]?[0-9]+
bool is_int_text(const std::string& s) {
  const size_t start = scan_sign(s, 0);
  const size_t end = scan_digits(s, start);
  return end > start && end == s.size();
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool is_float_text(const std::string& s) {
  size_t i = scan_sign(s, 0);
  if (i < s.size() && s[i] == '.') {
    const size_t end = scan_digits(s, i + 1);
    if (end == i + 1) return false;
    i = end;
  } else {
    const size_t end = scan_digits(s, i);
    if (end == i) return false;
    i = end;
    if (i < s.size() && s[i] == '.') i = scan_digits(s, i + 1);
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    const size_t digits = scan_sign(s, i + 1);
    const size_t end = scan_digits(s, digits);
    if (end == digits) return false;
    i = end;
  }
  return i == s.size();
}

// [A-Za-z_][A-Za-z0-9_\-]*(\.[A-Za-z_0-9][A-Za-z0-9_\-]*)*
bool is_key_path(const std::string& s) {
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (s.empty() || !alpha(s[0])) return false;
  bool segment_start = false;
  for (size_t i = 1; i < s.size(); ++i) {
    const char c = s[i];
    if (segment_start) {
      if (!alpha(c) && !digit(c)) return false;
      segment_start = false;
    } else if (c == '.') {
      segment_start = true;
    } else if (!alpha(c) && !digit(c) && c != '-') {
      return false;
    }
  }
  return !segment_start;
}

std::optional<long long> parse_int(const std::string& s) {
  if (!is_int_text(s)) return std::nullopt;
  errno = 0;
  long long v = std::strtoll(s.c_str(), nullptr, 10);
  if (errno == ERANGE) return std::nullopt;
  return v;
}

std::optional<double> parse_float(const std::string& s) {
  if (s == ".inf" || s == "+.inf") return HUGE_VAL;
  if (s == "-.inf") return -HUGE_VAL;
  if (!is_float_text(s)) return std::nullopt;
  // Past a double's range (1e999): not a number, rather than an infinity that JSON writes as null.
  errno = 0;
  const double v = std::strtod(s.c_str(), nullptr);
  if (errno == ERANGE && std::isinf(v)) return std::nullopt;
  return v;
}

// A scalar with no schema to guide it: YAML 1.2 core schema inference.
Json infer_scalar(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;  // quoted: always a string
  if (is_null_text(s) || s.empty()) return nullptr;
  if (auto b = parse_bool(s)) return *b;
  if (auto i = parse_int(s)) return *i;
  if (auto f = parse_float(s)) return *f;
  return s;
}

Json infer(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return infer_scalar(node);
    case YAML::NodeType::Sequence: {
      Json a = Json::array();
      for (const auto& e : node) a.push_back(infer(e));
      return a;
    }
    case YAML::NodeType::Map: {
      Json o = Json::object();
      for (const auto& kv : node) o[kv.first.Scalar()] = infer(kv.second);
      return o;
    }
  }
  return nullptr;
}

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Scalar: return "'" + node.Scalar() + "'";
    default: return "null";
  }
}

Type type_of_default(const Json& d) {
  if (d.is_boolean()) return Type::kBool;
  if (d.is_number_integer()) return Type::kInt;
  if (d.is_number_float()) return Type::kFloat;
  if (d.is_string()) return Type::kString;
  if (d.is_array()) return Type::kList;
  if (d.is_object()) return d.empty() ? Type::kFreeMap : Type::kMap;
  return Type::kAny;
}

struct KeyInfo {
  Type type = Type::kAny;
  bool nullable = false;
  const schema::Rule* rule = nullptr;
};

KeyInfo key_info(Kind kind, const std::string& path, const Json* dflt) {
  KeyInfo k;
  k.rule = schema::find_rule(kind, path);
  if (dflt) {
    k.type = type_of_default(*dflt);
    k.nullable = dflt->is_null();
  }
  if (k.rule) {
    if (k.rule->type) k.type = *k.rule->type;
    k.nullable = k.nullable || k.rule->nullable;
  }
  return k;
}

// Converts a scalar for a known type; nullopt (and an issue) when it does not fit.
std::optional<Json> convert_scalar(Builder& b, const std::string& path, const YAML::Node& node,
                                   Type type, bool nullable, const Location& where) {
  const std::string& s = node.Scalar();
  const bool plain = node.Tag() != "!";
  // An interpolation is resolved (and its result typed) once the whole tree is merged.
  if (s.find("${") != std::string::npos) return Json(s);
  if (plain && (is_null_text(s) || s.empty()) && type != Type::kString) {
    if (nullable || type == Type::kAny) return Json(nullptr);
    b.error(path, "must not be null: expected " + std::string(schema::type_name(type)),
            "set a value, or remove the key to keep the default", where);
    return std::nullopt;
  }
  if (plain && is_null_text(s) && nullable) return Json(nullptr);
  auto fail = [&]() -> std::optional<Json> {
    b.error(path, "expected " + std::string(schema::type_name(type)) + ", got " + describe(node),
            "", where);
    return std::nullopt;
  };
  switch (type) {
    case Type::kAny: return infer_scalar(node);
    case Type::kString:
    case Type::kStrings: return Json(s);
    case Type::kBool:
      if (auto v = parse_bool(s); v && plain) return Json(*v);
      return fail();
    case Type::kInt:
      if (auto v = parse_int(s); v && plain) return Json(*v);
      if (auto f = parse_float(s); f && plain && std::floor(*f) == *f && std::fabs(*f) < 9e15)
        return Json(static_cast<long long>(*f));  // 1e3 is an integer
      return fail();
    case Type::kFloat:
      if (auto v = parse_float(s); v && plain) return Json(*v);
      if (plain && is_float_text(s)) {
        b.error(path, "value " + s + " is past the range of a float (about 1.8e308)", "write a smaller number", where);
        return std::nullopt;
      }
      return fail();
    default: return fail();
  }
}

std::string closest(const std::vector<std::string>& candidates, const std::string& word);
std::string suggest_key(Kind kind, const std::string& path);

// Merges `node` into `target` (which holds the default or an earlier layer) at `path`.
void merge(Builder& b, Json& target, const YAML::Node& node, const std::string& path,
           const Json* dflt, const std::string& file);

// Records the leaves of a node written at a verl key that verlctl's schema lacks; keys inside it
// that verl does not have either are unknown.
void collect_foreign(Builder& b, const YAML::Node& node, const std::string& path, const std::string& file,
                     const Location& where) {
  if (node.IsMap() && verl_keys::lookup(path) == verl_keys::Lookup::kMapping) {
    for (const auto& kv : node) {
      const std::string child = join(path, kv.first.Scalar());
      const Location w = mark_location(file, kv.first.Mark());
      if (verl_keys::lookup(child) == verl_keys::Lookup::kAbsent) {
        const std::string guess = suggest_key(b.kind, child);
        b.error(child, "unknown key (neither verlctl nor verl has it)",
                guess.empty() ? "'verlctl config show' lists verlctl's keys" : "did you mean '" + guess + "'?", w);
        continue;
      }
      collect_foreign(b, kv.second, child, file, w);
    }
    return;
  }
  b.foreign->push_back({path, infer(node), where});
}

void merge_map(Builder& b, Json& target, const YAML::Node& node, const std::string& path,
               const Json* dflt, const std::string& file, bool free_keys) {
  if (!target.is_object()) target = Json::object();
  std::map<std::string, Location> seen;
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    const std::string child = join(path, key);
    const Location where = mark_location(file, kv.first.Mark());
    if (auto [it, fresh] = seen.emplace(key, where); !fresh) {
      b.error(child, "duplicate key: also at " + it->second.str() + "; YAML keeps only one of them",
              "delete one of the two", where);
      continue;
    }
    // Hydra's ??? (MISSING) sets nothing: the key keeps what the layers below gave it.
    if (kv.second.IsScalar() && kv.second.Tag() != "!" && kv.second.Scalar() == "???") continue;
    (*b.locations)[child] = where;
    const Json* child_default = (dflt && dflt->is_object() && dflt->contains(key)) ? &(*dflt)[key] : nullptr;
    if (!child_default && !free_keys && b.foreign && b.kind == Kind::kJob &&
        verl_keys::lookup(child) != verl_keys::Lookup::kAbsent) {
      collect_foreign(b, kv.second, child, file, where);
      continue;
    }
    if (!child_default && !free_keys) {
      const std::string guess = suggest_key(b.kind, child);
      b.error(child, "unknown key in " + std::string(kind_name(b.kind)),
              guess.empty() ? "to add a key the schema lacks, use +" + child + "=VALUE on the command line"
                            : "did you mean '" + guess + "'?",
              where);
      continue;
    }
    if (free_keys && !kv.second.IsScalar() && !kv.second.IsNull()) {
      b.error(child, "expected a scalar value, got " + describe(kv.second), "", where);
      continue;
    }
    Json& slot = target[key];
    merge(b, slot, kv.second, child, child_default, file);
  }
}

void merge(Builder& b, Json& target, const YAML::Node& node, const std::string& path,
           const Json* dflt, const std::string& file) {
  const KeyInfo k = key_info(b.kind, path, dflt);
  const Location where = b.locations->count(path) ? (*b.locations)[path] : mark_location(file, node.Mark());
  if (node.IsNull()) {
    if (k.nullable || k.type == Type::kAny || k.type == Type::kFreeMap || k.type == Type::kList ||
        k.type == Type::kObjects) {
      target = (k.type == Type::kFreeMap) ? Json::object()
               : (k.type == Type::kList || k.type == Type::kObjects) && !k.nullable ? Json::array()
                                                                                    : Json(nullptr);
    } else {
      b.error(path, "must not be null: expected " + std::string(schema::type_name(k.type)),
              "set a value, or remove the key to keep the default", where);
    }
    return;
  }
  switch (k.type) {
    case Type::kMap:
    case Type::kFreeMap:
      if (!node.IsMap()) {
        b.error(path, "expected a mapping, got " + describe(node), "", where);
        return;
      }
      merge_map(b, target, node, path, dflt, file, k.type == Type::kFreeMap);
      return;
    case Type::kList:
    case Type::kStrings:
    case Type::kObjects: {
      if (node.IsScalar() && k.type == Type::kStrings) {
        target = node.Scalar();
        return;
      }
      if (!node.IsSequence()) {
        b.error(path, "expected " + std::string(schema::type_name(k.type)) + ", got " + describe(node), "", where);
        return;
      }
      Json out = Json::array();
      int i = 0;
      for (const auto& e : node) {
        const std::string ep = path + "[" + std::to_string(i++) + "]";
        const Location ew = mark_location(file, e.Mark());
        if (k.type == Type::kObjects) {
          if (!e.IsMap()) {
            b.error(ep, "expected a mapping, got " + describe(e), "", ew);
            continue;
          }
          Json item = k.rule ? k.rule->item : Json::object();
          const Json item_default = item;
          merge_map(b, item, e, ep, &item_default, file, /*free_keys=*/false);
          if (k.rule)
            for (const auto& req : k.rule->required)
              if (item[req].is_null())
                b.error(ep + "." + req, "missing required key", "each entry of " + path + " needs '" + req + "'", ew);
          out.push_back(item);
          continue;
        }
        if (!e.IsScalar()) {
          b.error(ep, "expected a scalar, got " + describe(e), "", ew);
          continue;
        }
        Type et = k.type == Type::kStrings ? Type::kString : (k.rule ? k.rule->element : Type::kAny);
        if (et == Type::kAny && dflt && dflt->is_array() && !dflt->empty()) et = type_of_default((*dflt)[0]);
        if (auto v = convert_scalar(b, ep, e, et, false, ew)) out.push_back(*v);
      }
      target = out;
      return;
    }
    default:
      if (!node.IsScalar()) {
        if (k.type == Type::kAny) {
          target = infer(node);
          return;
        }
        b.error(path, "expected " + std::string(schema::type_name(k.type)) + ", got " + describe(node), "", where);
        return;
      }
      if (auto v = convert_scalar(b, path, node, k.type, k.nullable, where)) target = *v;
  }
}

// ---- did you mean --------------------------------------------------------------------------

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest(const std::vector<std::string>& candidates, const std::string& word) {
  std::string best;
  size_t best_d = std::max<size_t>(2, split_path(word).back().size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = edit_distance(c, word);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

// "Did you mean": a sibling spelled alike, else the same key name elsewhere in the same
// top-level section, else any key of that section spelled alike; verlctl's keys and (for jobs)
// verl's. Another section only for a name found in one place alone: critic.x is not a typo of
// actor_rollout_ref.x just because both sections have an x. "" if none.
std::string suggest_key(Kind kind, const std::string& path) {
  const auto parts = split_path(path);
  std::vector<std::string> all;
  std::function<void(const Json&, const std::string&)> walk = [&](const Json& j, const std::string& p) {
    if (!j.is_object()) return;
    for (auto it = j.begin(); it != j.end(); ++it) {
      all.push_back(join(p, it.key()));
      walk(it.value(), join(p, it.key()));
    }
  };
  walk(defaults(kind), "");
  if (kind == Kind::kJob)
    for (const auto& leaf : verl_keys::leaves())
      if (split_path(leaf).back() != "_target_" && std::find(all.begin(), all.end(), leaf) == all.end())
        all.push_back(leaf);
  std::vector<std::string> section;
  for (const auto& a : all)
    if (split_path(a).front() == parts.front() && a != path) section.push_back(a);
  const std::string parent = path.substr(0, path.size() - parts.back().size() - (parts.size() > 1 ? 1 : 0));
  std::vector<std::string> siblings;
  for (const auto& a : section)
    if (split_path(a).size() == parts.size() && a.compare(0, parent.size(), parent) == 0) siblings.push_back(a);
  if (std::string g = closest(siblings, path); !g.empty()) return g;
  if (parts.size() > 1)
    for (const auto& a : section)
      if (split_path(a).back() == parts.back()) return a;
  if (std::string g = closest(section, path); !g.empty()) return g;
  // Another section only when the key's name lives in exactly one place there
  // (trainer.train_batch_size -> data.train_batch_size).
  std::vector<std::string> same_name;
  for (const auto& a : all)
    if (split_path(a).back() == parts.back()) same_name.push_back(a);
  return same_name.size() == 1 ? same_name[0] : "";
}

// ---- overrides -----------------------------------------------------------------------------

struct Override {
  enum class Op { kSet, kAdd, kRemove } op = Op::kSet;
  std::string path;
  std::string value;
  std::string text;
};

std::optional<Override> parse_override(const std::string& arg, std::vector<Issue>& issues) {
  Override o;
  o.text = arg;
  std::string s = arg;
  if (!s.empty() && s[0] == '+') {
    o.op = Override::Op::kAdd;
    s = s.substr(s.size() > 1 && s[1] == '+' ? 2 : 1);
  } else if (!s.empty() && s[0] == '~') {
    o.op = Override::Op::kRemove;
    s = s.substr(1);
  }
  auto eq = s.find('=');
  if (eq == std::string::npos && o.op != Override::Op::kRemove) {
    issues.push_back({Severity::kError, s, "override '" + arg + "' has no '='",
                      "write overrides as key.path=value, +new.key=value or ~key.path", {}});
    return std::nullopt;
  }
  o.path = s.substr(0, eq);
  if (eq != std::string::npos) o.value = s.substr(eq + 1);
  // A key longer than any schema has is refused before it is looked up or quoted whole.
  constexpr size_t kMaxKeyPath = 1024;
  if (o.path.size() > kMaxKeyPath) {
    issues.push_back({Severity::kError, o.path.substr(0, 40) + "...",
                      "override '" + arg.substr(0, 40) + "...': the key path is " + std::to_string(o.path.size()) +
                          " characters long, more than " + std::to_string(kMaxKeyPath),
                      "write overrides as key.path=value", {}});
    return std::nullopt;
  }
  if (!is_key_path(o.path)) {
    issues.push_back({Severity::kError, o.path, "override '" + arg + "': '" + o.path + "' is not a dotted key path",
                      "write overrides as key.path=value", {}});
    return std::nullopt;
  }
  return o;
}

void apply_override(Builder& b, Json& root, const Override& o) {
  const auto parts = split_path(o.path);
  const Location where{};
  const Json& dflt_root = defaults(b.kind);
  if (b.kind == Kind::kJob && b.foreign && o.op != Override::Op::kRemove && !find(dflt_root, o.path) &&
      verl_keys::lookup(o.path) != verl_keys::Lookup::kAbsent) {
    YAML::Node value;
    try {
      value = YAML::Load(o.value);
    } catch (const YAML::Exception& e) {
      b.error(o.path, "override '" + o.text + "': value is not valid YAML: " + e.msg,
              "quote lists for the shell: key='[a,b]'", where);
      return;
    }
    if (!(value.IsScalar() && value.Scalar() == "???")) collect_foreign(b, value, o.path, "", where);
    return;
  }
  // Walk the schema alongside the tree to know whether the key exists there.
  const Json* dflt = &dflt_root;
  Json* node = &root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    dflt = (dflt && dflt->is_object() && dflt->contains(parts[i])) ? &(*dflt)[parts[i]] : nullptr;
    if (!node->is_object()) {
      b.error(o.path, "override '" + o.text + "': '" + parts[i] + "' is not a mapping", "", where);
      return;
    }
    if (!node->contains(parts[i])) {
      if (o.op != Override::Op::kAdd) break;
      (*node)[parts[i]] = Json::object();
    }
    node = &(*node)[parts[i]];
  }
  const std::string& leaf = parts.back();
  const bool in_tree = node->is_object() && node->contains(leaf);
  if (o.op == Override::Op::kRemove) {
    if (!in_tree) {
      b.error(o.path, "override '" + o.text + "': no such key to remove", "", where);
      return;
    }
    if (dflt && dflt->is_object() && dflt->contains(leaf)) {
      b.error(o.path, "override '" + o.text + "': '" + o.path + "' is part of the schema and cannot be removed",
              "set it instead (" + o.path + "=VALUE, or =null where it is nullable); ~ removes keys added with +",
              where);
      return;
    }
    node->erase(leaf);
    return;
  }
  const bool free_parent = dflt && dflt->is_object() && dflt->empty();  // env: any key goes
  if (o.op == Override::Op::kSet && !in_tree && !free_parent) {
    const std::string guess = suggest_key(b.kind, o.path);
    b.error(o.path, "override '" + o.text + "': unknown key in " + kind_name(b.kind),
            guess.empty() ? "use +" + o.path + "=" + o.value + " to add a key the schema lacks"
                          : "did you mean '" + guess + "'? (or +" + o.path + "=... to add a new key)",
            where);
    return;
  }
  if (!node->is_object()) {
    b.error(o.path, "override '" + o.text + "': parent is not a mapping", "", where);
    return;
  }
  YAML::Node value;
  try {
    value = YAML::Load(o.value);
  } catch (const YAML::Exception& e) {
    b.error(o.path, "override '" + o.text + "': value is not valid YAML: " + e.msg,
            "quote lists for the shell: key='[a,b]'", where);
    return;
  }
  const Json* leaf_default = (dflt && dflt->is_object() && dflt->contains(leaf)) ? &(*dflt)[leaf] : nullptr;
  (*b.locations)[o.path] = where;
  if ((o.op == Override::Op::kAdd || free_parent) && !leaf_default) {
    (*node)[leaf] = infer(value);
    if (!free_parent)
      b.issues->push_back({Severity::kWarning, o.path, "added with + but read by nothing: neither verlctl nor verl has this key",
                           "remove it, or check its spelling against 'verlctl config show'", where});
    return;
  }
  Json& slot = (*node)[leaf];
  if (slot.is_object() && value.IsMap()) {
    merge(b, slot, value, o.path, leaf_default, "");
  } else {
    Json fresh = slot.is_object() ? Json::object() : slot;
    merge(b, fresh, value, o.path, leaf_default, "");
    if (b.issues->empty() || b.issues->back().path != o.path) slot = fresh;
  }
}

// ---- interpolation -------------------------------------------------------------------------
// OmegaConf's forms, as verl's configs use them: ${a.b} (absolute), ${.x} / ${..x} (relative to
// the key's own mapping), ${oc.select:a.b,default} (default when a.b is absent) and
// ${oc.env:VAR[,default]}. A value that is one interpolation takes the referenced value's type;
// text around interpolations makes a string. Results are typed by the schema afterwards.

std::string scalar_text(const Json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_null()) return "null";
  if (j.is_number_float() && !std::isfinite(j.get<double>()))
    return std::isnan(j.get<double>()) ? ".nan" : (j.get<double>() > 0 ? ".inf" : "-.inf");
  return j.dump();
}

class Interpolator {
 public:
  static constexpr size_t kMaxResolvedBytes = size_t{1} << 20;

  Interpolator(Kind kind, Json& root, const std::map<std::string, Location>& where, std::vector<Issue>& issues)
      : kind_(kind), root_(root), where_(where), issues_(issues) {}

  void walk(Json& node, const std::string& path) {
    if (node.is_object()) {
      for (auto it = node.begin(); it != node.end(); ++it) walk(it.value(), join(path, it.key()));
    } else if (node.is_array()) {
      for (auto& e : node) walk(e, path);
    } else if (node.is_string() && node.get<std::string>().find("${") != std::string::npos) {
      resolve(node, path);
    }
  }

 private:
  Location loc(const std::string& path) const {
    auto w = where_.find(path);
    return w == where_.end() ? Location{} : w->second;
  }
  void fail(const std::string& path, std::string message, std::string hint) {
    issues_.push_back({Severity::kError, path, std::move(message), std::move(hint), loc(path)});
  }

  // Resolves node (the value at path) in place; false after reporting a problem.
  bool resolve(Json& node, const std::string& path) {
    if (!active_.insert(path).second) {
      fail(path, "interpolation cycle through '" + path + "'", "make the ${...} references end at a plain value");
      return false;
    }
    const std::string text = node.get<std::string>();
    std::optional<Json> out;
    std::string joined;
    size_t pos = 0, pieces = 0;
    bool ok = true;
    while (ok && pos < text.size()) {
      const size_t open = text.find("${", pos);
      if (open == std::string::npos) {
        joined += text.substr(pos);
        break;
      }
      joined += text.substr(pos, open - pos);
      size_t depth = 0, close = open + 1;
      for (; close < text.size(); ++close) {
        if (text[close] == '{') ++depth;
        else if (text[close] == '}' && --depth == 0) break;
      }
      if (close >= text.size()) {
        fail(path, "unterminated '${' in '" + (text.size() > 80 ? text.substr(0, 80) + "...'" : text + "'"), "close it with '}'");
        ok = false;
        break;
      }
      auto v = evaluate(trim(text.substr(open + 2, close - open - 2)), path);
      if (!v) {
        ok = false;
        break;
      }
      ++pieces;
      if (open == 0 && close + 1 == text.size()) out = *v;
      joined += scalar_text(*v);
      pos = close + 1;
      // References of references multiply: five ${a} in b, five ${b} in c, ... grew a config to
      // 195 MB (issue 16, case 3). No real value comes near this bound.
      if (joined.size() > kMaxResolvedBytes) {
        fail(path, "the interpolation gives a value longer than " + std::to_string(kMaxResolvedBytes >> 10) + " KiB",
             "a value that repeats ${...} references of references grows with each level; reference fewer times");
        ok = false;
        break;
      }
    }
    active_.erase(path);
    if (!ok) return false;
    node = (out && pieces == 1) ? *out : Json(joined);
    return retype(node, path);
  }

  std::optional<Json> evaluate(const std::string& expr, const std::string& path) {
    static const std::string kSelect = "oc.select:", kEnv = "oc.env:";
    if (expr.rfind(kSelect, 0) == 0) {
      const std::string rest = expr.substr(kSelect.size());
      const size_t comma = top_level_comma(rest);
      const std::string key = trim(rest.substr(0, comma));
      if (Json* ref = lookup(absolute(key, path))) return value_of(*ref, absolute(key, path));
      if (comma == std::string::npos) return Json(nullptr);
      return parse_default(trim(rest.substr(comma + 1)));
    }
    if (expr.rfind(kEnv, 0) == 0) {
      const std::string rest = expr.substr(kEnv.size());
      const size_t comma = top_level_comma(rest);
      const std::string var = trim(rest.substr(0, comma));
      if (const char* v = std::getenv(var.c_str())) return Json(std::string(v));
      if (comma != std::string::npos) return parse_default(trim(rest.substr(comma + 1)));
      fail(path, "${oc.env:" + var + "}: the environment variable " + var + " is not set",
           "export " + var + "=..., or give a default: ${oc.env:" + var + ",VALUE}");
      return std::nullopt;
    }
    if (expr.find(':') != std::string::npos) {
      fail(path, "'${" + expr + "}': resolver '" + expr.substr(0, expr.find(':')) + "' is not supported",
           "verlctl resolves ${key}, ${.relative}, ${oc.select:key,default} and ${oc.env:VAR,default}");
      return std::nullopt;
    }
    const std::string key = absolute(expr, path);
    Json* ref = lookup(key);
    if (!ref || ref->is_object() || ref->is_array()) {
      fail(path, "'${" + expr + "}' does not name a scalar key" + (key != expr ? " (" + key + ")" : ""),
           "references look like ${trainer.project_name} or ${.sibling}; ${oc.select:key,default} tolerates an absent key");
      return std::nullopt;
    }
    return value_of(*ref, key);
  }

  Json value_of(Json& ref, const std::string& key) {
    if (ref.is_string() && ref.get<std::string>().find("${") != std::string::npos && !resolve(ref, key)) return nullptr;
    return ref;
  }

  Json* lookup(const std::string& key) {
    Json* node = &root_;
    for (const auto& part : split_path(key)) {
      if (!node->is_object() || !node->contains(part)) return nullptr;
      node = &(*node)[part];
    }
    return node;
  }

  // ".x" is a sibling of path's key, "..x" a sibling of its parent; others are absolute.
  static std::string absolute(const std::string& key, const std::string& path) {
    if (key.empty() || key[0] != '.') return key;
    size_t dots = 0;
    while (dots < key.size() && key[dots] == '.') ++dots;
    auto parts = split_path(path);
    for (size_t i = 0; i < dots && !parts.empty(); ++i) parts.pop_back();
    std::string base;
    for (const auto& p : parts) base = join(base, p);
    return join(base, key.substr(dots));
  }

  static size_t top_level_comma(const std::string& s) {
    int depth = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '[' || s[i] == '{') ++depth;
      else if (s[i] == ']' || s[i] == '}') --depth;
      else if (s[i] == ',' && depth == 0) return i;
    }
    return std::string::npos;
  }

  static Json parse_default(const std::string& text) {
    try {
      return infer(YAML::Load(text));
    } catch (const YAML::Exception&) {
      return Json(text);
    }
  }

  // Gives an interpolated value the type the schema wants (a "${...}" default of an int key).
  bool retype(Json& node, const std::string& path) {
    const KeyInfo k = key_info(kind_, path, find(defaults(kind_), path));
    if (node.is_null()) {
      if (k.nullable || k.type == Type::kAny || k.type == Type::kString) return true;
      fail(path, "must not be null: its interpolation gave null", "set a value");
      return false;
    }
    const std::string text = scalar_text(node);
    auto bad = [&] {
      fail(path, "expected " + std::string(schema::type_name(k.type)) + ", its interpolation gave '" + text + "'", "");
      return false;
    };
    switch (k.type) {
      case Type::kInt:
        if (node.is_number_integer()) return true;
        if (auto v = parse_int(text)) return node = *v, true;
        return bad();
      case Type::kFloat:
        if (node.is_number()) return true;
        if (auto v = parse_float(text)) return node = *v, true;
        return bad();
      case Type::kBool:
        if (node.is_boolean()) return true;
        if (auto v = parse_bool(text)) return node = *v, true;
        return bad();
      case Type::kString:
        if (!node.is_string()) node = text;
        return true;
      default:
        return true;
    }
  }

  Kind kind_;
  Json& root_;
  const std::map<std::string, Location>& where_;
  std::vector<Issue>& issues_;
  std::set<std::string> active_;
};

// ---- per-key rules -------------------------------------------------------------------------

void check_rules(Kind kind, const Json& node, const std::string& path,
                 const std::map<std::string, Location>& where, std::vector<Issue>& issues) {
  if (node.is_object()) {
    for (auto it = node.begin(); it != node.end(); ++it)
      check_rules(kind, it.value(), join(path, it.key()), where, issues);
    return;
  }
  const schema::Rule* r = schema::find_rule(kind, path);
  auto loc = [&] {
    auto w = where.find(path);
    return w == where.end() ? Location{} : w->second;
  };
  if (node.is_array()) {
    for (size_t i = 0; i < node.size(); ++i) {
      if (node[i].is_object()) check_rules(kind, node[i], path + "[" + std::to_string(i) + "]", where, issues);
      // A list of names (trainer.logger): each one must be a choice.
      if (r && node[i].is_string() && !r->choices.empty() &&
          std::find(r->choices.begin(), r->choices.end(), node[i].get<std::string>()) == r->choices.end()) {
        std::string list;
        for (const auto& c : r->choices) list += (list.empty() ? "" : ", ") + c;
        std::string guess = closest(r->choices, node[i].get<std::string>());
        issues.push_back({Severity::kError, path + "[" + std::to_string(i) + "]",
                          "'" + node[i].get<std::string>() + "' is not one of: " + list,
                          guess.empty() ? "" : "did you mean '" + guess + "'?", loc()});
      }
    }
    return;
  }
  if (node.is_string()) {
    const auto& s = node.get_ref<const std::string&>();
    // A NUL ends the text where it is passed on (argv, env, a path): the job would fail later.
    if (s.find('\0') != std::string::npos)
      issues.push_back({Severity::kError, path, "contains a NUL character (\\0)", "remove it from the value", loc()});
    if (kind == Kind::kCluster && path == "name" &&
        (s.empty() || s.find('/') != std::string::npos || s == "." || s == ".."))
      issues.push_back({Severity::kError, path, "'" + s + "' is not a cluster name: it names the state directory ~/.verlctl/<name>",
                        "use a single path component, like 'local'", loc()});
  }
  if (!r) return;
  if (node.is_number()) {
    const double v = node.get<double>();
    if ((r->min && v < *r->min) || (r->max && v > *r->max)) {
      std::ostringstream range;
      range << "[" << (r->min ? std::to_string(*r->min) : "-inf") << ", "
            << (r->max ? std::to_string(*r->max) : "inf") << "]";
      auto trim = [](std::string s) {
        std::regex z(R"(\.0+\b|(\.[0-9]*?)0+\b)");
        return std::regex_replace(s, z, "$1");
      };
      issues.push_back({Severity::kError, path, "value " + scalar_text(node) + " is out of range " + trim(range.str()), "", loc()});
    }
  }
  if (node.is_string() && !r->choices.empty() &&
      std::find(r->choices.begin(), r->choices.end(), node.get<std::string>()) == r->choices.end()) {
    std::string list;
    for (const auto& c : r->choices) list += (list.empty() ? "" : ", ") + c;
    auto refused = r->refused.find(node.get<std::string>());
    if (refused != r->refused.end()) {
      issues.push_back({Severity::kError, path, "'" + node.get<std::string>() + "' is not supported: " + refused->second,
                        "use one of: " + list, loc()});
      return;
    }
    std::string guess = closest(r->choices, node.get<std::string>());
    issues.push_back({Severity::kError, path, "'" + node.get<std::string>() + "' is not one of: " + list,
                      guess.empty() ? "" : "did you mean '" + guess + "'?", loc()});
  }
}

// verl's keys that verlctl lacks, once every layer is merged (the last write of a key counts):
// an error for each unsupported feature switched on, and one warning per reason for the rest.
void judge_foreign(const std::vector<Foreign>& foreign, std::vector<Issue>& issues) {
  std::map<std::string, const Foreign*> last;
  std::vector<std::string> order;
  for (const auto& f : foreign) {
    if (!last.count(f.path)) order.push_back(f.path);
    last[f.path] = &f;
  }
  std::vector<std::string> reasons;
  std::map<std::string, std::vector<const Foreign*>> groups;
  for (const auto& path : order) {
    const Foreign& f = *last[path];
    const auto& v = verl_keys::classify(path);
    if (v.status == verl_keys::Status::kSilent) continue;
    std::string reason;
    if (v.status == verl_keys::Status::kUnsupported) {
      if (!verl_keys::inert(path, f.value)) {
        const Json d = verl_keys::verl_default(path);
        issues.push_back({Severity::kError, path,
                          "not supported: " + v.reason + " (set to " + f.value.dump() + ")",
                          v.hint.empty() ? "remove the key, or set it to verl's default " + d.dump() : v.hint, f.where});
        continue;
      }
      reason = "left at verl's default or off, which is what verlctl does (" + v.reason + " is not supported)";
    } else {
      reason = "accepted and ignored: " + v.reason;
    }
    if (!groups.count(reason)) reasons.push_back(reason);
    groups[reason].push_back(&f);
  }
  for (const auto& reason : reasons) {
    const auto& g = groups[reason];
    if (g.size() == 1) {
      issues.push_back({Severity::kWarning, g[0]->path, reason, "", g[0]->where});
      continue;
    }
    std::string list;
    for (size_t i = 0; i < g.size() && i < 6; ++i) list += (i ? ", " : "") + g[i]->path;
    if (g.size() > 6) list += " and " + std::to_string(g.size() - 6) + " more";
    issues.push_back({Severity::kWarning, "", std::to_string(g.size()) + " keys " + reason + ": " + list, "", g[0]->where});
  }
}

YAML::Node to_yaml_node(const Json& j) {
  YAML::Node n;
  if (j.is_object()) {
    n = YAML::Node(YAML::NodeType::Map);
    for (auto it = j.begin(); it != j.end(); ++it) n[it.key()] = to_yaml_node(it.value());
  } else if (j.is_array()) {
    n = YAML::Node(YAML::NodeType::Sequence);
    for (const auto& e : j) n.push_back(to_yaml_node(e));
  } else if (j.is_null()) {
    n = YAML::Node(YAML::NodeType::Null);
  } else if (j.is_string()) {
    n = j.get<std::string>();
  } else {
    n = j.dump();
  }
  return n;
}

}  // namespace

Json parse_yaml_json(const std::string& text) { return infer(YAML::Load(text)); }

namespace {

Json parse_embedded(const char* name) {
  const embedded::File* f = embedded::find(name);
  if (!f) throw Error(ExitCode::kFailure, std::string("embedded template ") + name + " is missing", "rebuild verlctl");
  YAML::Node node = YAML::Load(std::string(f->view()));
  return infer(node);
}

// With no model path (the built-in model), presets/builtin.yaml's tuned values replace the
// defaults of every key that no layer set.
void apply_builtin_preset(Document& doc) {
  const Json* path = find(doc.value, "actor_rollout_ref.model.path");
  if (!path || !path->is_null()) return;
  std::function<void(const Json&, const std::string&)> walk = [&](const Json& j, const std::string& p) {
    if (j.is_object()) {
      for (auto it = j.begin(); it != j.end(); ++it) walk(it.value(), join(p, it.key()));
      return;
    }
    if (doc.locations.count(p)) return;
    Json* node = &doc.value;
    for (const auto& part : split_path(p)) {
      // A layer that made a section a scalar (trainer: 3): validation names it; no preset there.
      if (!node->is_object() && !node->is_null()) return;
      node = &(*node)[part];
    }
    *node = j;
    doc.preset.push_back(p);
  };
  walk(builtin_preset(), "");
}

}  // namespace

const Json& builtin_preset() {
  static const Json kPreset = parse_embedded("presets/builtin.yaml");
  return kPreset;
}

const Json& defaults(Kind kind) {
  static const Json kJob = parse_embedded("job.yaml");
  static const Json kCluster = parse_embedded("cluster.yaml");
  return kind == Kind::kJob ? kJob : kCluster;
}

const Json& item_defaults(Kind kind, const std::string& list_path) {
  const schema::Rule* rule = schema::find_rule(kind, list_path);
  if (!rule || rule->type != schema::Type::kObjects)
    throw Error(ExitCode::kFailure, std::string(kind_name(kind)) + ": '" + list_path + "' is not a list of maps");
  return rule->item;
}

const Json* find(const Json& root, std::string_view path) {
  const Json* node = &root;
  for (const auto& part : split_path(path)) {
    if (!node->is_object() || !node->contains(part)) return nullptr;
    node = &(*node)[part];
  }
  return node;
}

Document resolve(Kind kind, const std::string& file, const std::vector<std::string>& overrides) {
  if (file.empty()) return resolve_text(kind, "", "", overrides);
  std::ifstream in(file);
  if (!in) {
    throw Error(ExitCode::kInvalidConfig, "cannot read " + std::string(kind_name(kind)) + " '" + file + "'",
                "check the path given with -f");
  }
  std::stringstream text;
  text << in.rdbuf();
  if (kind == Kind::kJob && has_defaults_list(text.str())) return resolve_text(kind, compose_hydra(file), file, overrides);
  return resolve_text(kind, text.str(), file, overrides);
}

Document resolve_text(Kind kind, const std::string& yaml, const std::string& file,
                      const std::vector<std::string>& overrides) {
  Document doc;
  doc.value = defaults(kind);
  std::vector<Foreign> foreign;
  Builder b{kind, &doc.issues, &doc.locations, &foreign};
  // Bytes that are not UTF-8 would be kept in the config and throw where it is written out as
  // JSON (exit 1, "a bug"; issue 16, case 9): an invalid config, at its line and column.
  if (const size_t bad = invalid_utf8_at(yaml); bad != std::string::npos) {
    Location where{file, 1, 1};
    for (size_t i = 0; i < bad; ++i) {
      if (yaml[i] == '\n') {
        ++where.line;
        where.column = 1;
      } else {
        ++where.column;
      }
    }
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(yaml[bad]));
    doc.issues.push_back({Severity::kError, "", std::string("the text is not valid UTF-8 (byte ") + byte + ")",
                          "save the file as UTF-8", where});
    return doc;
  }
  for (const auto& arg : overrides) {
    if (invalid_utf8_at(arg) != std::string::npos) {
      doc.issues.push_back({Severity::kError, "", "override is not valid UTF-8", "pass overrides as UTF-8 text", {}});
      return doc;
    }
  }
  if (!yaml.empty()) {
    try {
      YAML::Node node = YAML::Load(yaml);
      if (!node.IsNull()) {
        if (!node.IsMap()) {
          b.error("", "the document must be a mapping of keys, got " + describe(node), "see 'verlctl config show' for the shape",
                  mark_location(file, node.Mark()));
        } else {
          const Json& d = defaults(kind);
          merge_map(b, doc.value, node, "", &d, file, /*free_keys=*/false);
        }
      }
    } catch (const YAML::Exception& e) {
      doc.issues.push_back({Severity::kError, "", "YAML syntax error: " + e.msg,
                            "check indentation and quoting near that position", mark_location(file, e.mark)});
      return doc;
    }
  }
  std::vector<Override> parsed;
  for (const auto& arg : overrides)
    if (auto o = parse_override(arg, doc.issues)) apply_override(b, doc.value, *o);
  if (kind == Kind::kJob) apply_builtin_preset(doc);
  Interpolator(kind, doc.value, doc.locations, doc.issues).walk(doc.value, "");
  check_rules(kind, doc.value, "", doc.locations, doc.issues);
  judge_foreign(foreign, doc.issues);
  schema::check_consistency(kind, doc.value, doc.locations, doc.issues);
  return doc;
}

std::string format_issues(const std::vector<Issue>& issues) {
  std::ostringstream out;
  for (const auto& i : issues) {
    out << (i.severity == Severity::kError ? "error: " : "warning: ");
    if (!i.path.empty()) out << i.path << ": ";
    out << i.message;
    if (!i.where.file.empty() || i.where.line) out << " (" << i.where.str() << ")";
    else if (!i.path.empty() && i.where.file.empty() && i.severity == Severity::kError && i.message.rfind("override", 0) == 0)
      out << " (command line)";
    out << "\n";
    if (!i.hint.empty()) out << "  hint: " << i.hint << "\n";
  }
  return out.str();
}

Json load(Kind kind, const std::string& file, const std::vector<std::string>& overrides,
          std::vector<Issue>* warnings) {
  Document doc = resolve(kind, file, overrides);
  if (warnings)
    for (const auto& i : doc.issues)
      if (i.severity == Severity::kWarning) warnings->push_back(i);
  if (!doc.ok()) {
    size_t n = std::count_if(doc.issues.begin(), doc.issues.end(),
                             [](const Issue& i) { return i.severity == Severity::kError; });
    std::string where = file.empty() ? "the command line" : "'" + file + "'";
    throw Error(ExitCode::kInvalidConfig,
                std::to_string(n) + " problem" + (n == 1 ? "" : "s") + " in the " + kind_name(kind) + " from " +
                    where + ":\n" + format_issues(doc.issues),
                "fix the keys named above; 'verlctl config show' prints every key with its default");
  }
  return doc.value;
}

Json default_job() { return load(Kind::kJob, "", {}); }

std::string to_yaml(const Json& value) {
  YAML::Emitter out;
  out.SetNullFormat(YAML::LowerNull);
  out << to_yaml_node(value);
  return std::string(out.c_str()) + "\n";
}

}  // namespace verl::config

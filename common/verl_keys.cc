#include "common/verl_keys.h"

#include <cctype>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "common/embedded.h"
#include "common/error.h"

namespace verl::config::verl_keys {
namespace {

struct Rule {
  std::vector<std::vector<std::string>> patterns;  // split on '.'
  Verdict verdict;
};

std::string embedded_text(const char* name) {
  const embedded::File* f = embedded::find(name);
  if (!f) throw Error(ExitCode::kFailure, std::string("embedded template ") + name + " is missing", "rebuild verlctl");
  return std::string(f->view());
}

const Json& catalogue() {
  static const Json kCatalogue = parse_yaml_json(embedded_text("verl/ppo_trainer.yaml"));
  return kCatalogue;
}

std::vector<std::string> segments(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    out.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) return out;
    start = dot + 1;
  }
}

bool matches(const std::vector<std::string>& pat, size_t p, const std::vector<std::string>& path, size_t i) {
  if (p == pat.size()) return i == path.size();
  if (pat[p] == "**") {
    for (size_t k = i; k <= path.size(); ++k)
      if (matches(pat, p + 1, path, k)) return true;
    return false;
  }
  if (i == path.size()) return false;
  return (pat[p] == "*" || pat[p] == path[i]) && matches(pat, p + 1, path, i + 1);
}

const std::vector<Rule>& rules() {
  static const std::vector<Rule> kRules = [] {
    std::vector<Rule> out;
    const Json doc = parse_yaml_json(embedded_text("verl/keys.yaml"));
    for (const auto& r : doc) {
      Rule rule;
      for (const auto& m : r.at("match")) rule.patterns.push_back(segments(m.get<std::string>()));
      const std::string status = r.at("status").get<std::string>();
      rule.verdict.status = status == "silent" ? Status::kSilent : status == "ignored" ? Status::kIgnored : Status::kUnsupported;
      rule.verdict.reason = r.value("reason", std::string());
      rule.verdict.hint = r.value("hint", std::string());
      if (r.contains("allow"))
        for (const auto& a : r["allow"]) rule.verdict.allow.push_back(a);
      out.push_back(std::move(rule));
    }
    return out;
  }();
  return kRules;
}

bool off(const Json& v) {
  if (v.is_null()) return true;
  if (v.is_boolean()) return !v.get<bool>();
  if (v.is_number()) return v.get<double>() == 0;
  if (v.is_string()) return v.get<std::string>().empty();
  return v.empty();
}

// A scalar's value as text that YAML's spellings agree on: true/True/"true", 100_000/100000.
std::string canonical(const Json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number()) {
    std::ostringstream out;
    out << v.get<double>();
    return out.str();
  }
  if (!v.is_string()) return v.dump();
  std::string s = v.get<std::string>();
  std::string lower;
  for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "true" || lower == "false") return lower;
  std::string digits;
  for (char c : s)
    if (c != '_') digits += c;
  char* end = nullptr;
  const double d = std::strtod(digits.c_str(), &end);
  if (!digits.empty() && end && *end == '\0') return canonical(Json(d));
  return s;
}

bool same(const Json& a, const Json& b) {
  if (!a.is_structured() && !b.is_structured()) return canonical(a) == canonical(b);
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!same(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}

}  // namespace

Lookup lookup(const std::string& path) {
  const Json* node = &catalogue();
  for (const auto& part : segments(path)) {
    if (!node->is_object()) return Lookup::kAbsent;
    if (node->empty()) return Lookup::kFree;
    auto it = node->find(part);
    if (it == node->end()) return Lookup::kAbsent;
    node = &*it;
  }
  if (node->is_object()) return node->empty() ? Lookup::kFree : Lookup::kMapping;
  return Lookup::kLeaf;
}

Json verl_default(const std::string& path) {
  const Json* node = find(catalogue(), path);
  return node && !node->is_object() ? *node : Json(nullptr);
}

const Verdict& classify(const std::string& path) {
  static const Verdict kUnmatched{Status::kUnsupported, "not implemented in verlctl", "", {}};
  const auto parts = segments(path);
  for (const auto& r : rules())
    for (const auto& p : r.patterns)
      if (matches(p, 0, parts, 0)) return r.verdict;
  return kUnmatched;
}

bool inert(const std::string& path, const Json& value) {
  if (off(value) || (lookup(path) == Lookup::kLeaf && same(value, verl_default(path)))) return true;
  for (const auto& a : classify(path).allow)
    if (same(value, a)) return true;
  return false;
}

const std::vector<std::string>& leaves() {
  static const std::vector<std::string> kLeaves = [] {
    std::vector<std::string> out;
    std::function<void(const Json&, const std::string&)> walk = [&](const Json& j, const std::string& p) {
      if (j.is_object() && !j.empty()) {
        for (auto it = j.begin(); it != j.end(); ++it) walk(it.value(), p.empty() ? it.key() : p + "." + it.key());
        return;
      }
      out.push_back(p);
    };
    walk(catalogue(), "");
    return out;
  }();
  return kLeaves;
}

}  // namespace verl::config::verl_keys

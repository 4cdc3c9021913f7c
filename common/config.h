// Configuration: the job config and the cluster spec, both YAML, both with dotted overrides.
//
// A document is resolved in one order: the embedded default (templates/job.yaml or
// templates/cluster.yaml, which is also the schema) <- the user's file <- the command-line
// overrides (`a.b=v` sets a key the schema has, `+a.b=v` adds one it lacks, `~a.b` removes one),
// then `${a.b}` references are interpolated and the whole tree is validated. Validation never
// stops at the first problem: resolve() collects every issue, each naming its key path and,
// where the value came from a file, file:line:column. load_job()/load_cluster() throw one
// verl::Error (exit 3) listing them all.
//
// Values are nlohmann::ordered_json so that `config show` keeps the schema's key order.
// Everything here is pure (no I/O but reading the named file) and thread-compatible.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace verl::config {

using Json = nlohmann::ordered_json;

enum class Kind { kJob, kCluster };
const char* kind_name(Kind kind);  // "job config" | "cluster spec"

struct Location {
  std::string file;  // empty: the value came from the command line or the default
  int line = 0;      // 1-based; 0 when unknown
  int column = 0;
  std::string str() const;  // "file:line:column" (or "command line")
};

enum class Severity { kError, kWarning };

struct Issue {
  Severity severity = Severity::kError;
  std::string path;     // dotted key path, "" for the document itself
  std::string message;
  std::string hint;
  Location where;
};

struct Document {
  Json value;
  std::map<std::string, Location> locations;  // key path -> where it was written
  std::vector<Issue> issues;                  // errors and warnings from resolution
  std::vector<std::string> preset;            // keys presets/builtin.yaml set (built-in model only)
  bool ok() const;
};

// The built-in model's tuned values (templates/presets/builtin.yaml): with
// actor_rollout_ref.model.path null they replace the defaults of the keys no layer sets.
const Json& builtin_preset();

// The embedded defaults (= the schema) of a kind.
const Json& defaults(Kind kind);

// The defaults of one item of a list of maps (the cluster spec's "nodes"): what an item that
// sets only its required keys resolves to; those keys are null here. Throws verl::Error
// (failure) for a path that is no such list: a bug of the caller.
const Json& item_defaults(Kind kind, const std::string& list_path);

// Resolves defaults <- file (empty: none) <- overrides, interpolates and validates. Does not
// throw for problems in the input: they are returned in Document::issues. Throws verl::Error
// (exit 3) only when the file cannot be read at all.
Document resolve(Kind kind, const std::string& file, const std::vector<std::string>& overrides);

// resolve() of YAML text already read (the head gets the submitter's file in a request); file
// names it in issue locations. Empty text: defaults <- overrides only.
Document resolve_text(Kind kind, const std::string& yaml, const std::string& file,
                      const std::vector<std::string>& overrides);

// resolve() that throws verl::Error(kInvalidConfig) listing every error; warnings (verl keys
// accepted and ignored, ...) are appended to *warnings when given.
Json load(Kind kind, const std::string& file, const std::vector<std::string>& overrides,
          std::vector<Issue>* warnings = nullptr);
inline Json load_job(const std::string& file, const std::vector<std::string>& overrides,
                     std::vector<Issue>* warnings = nullptr) {
  return load(Kind::kJob, file, overrides, warnings);
}
inline Json load_cluster(const std::string& file, const std::vector<std::string>& overrides) {
  return load(Kind::kCluster, file, overrides);
}
// The embedded default job, resolved (interpolated), as the trainer receives it.
Json default_job();

// YAML text to a tree by YAML 1.2 core-schema inference (no schema): embedded tables use it.
Json parse_yaml_json(const std::string& text);

// "a.b.c" lookups into a tree; nullptr when absent.
const Json* find(const Json& root, std::string_view path);

// Renders issues one per line: "error: trainer.nnodes: expected ... (job.yaml:3:11)\n  hint: ...".
std::string format_issues(const std::vector<Issue>& issues);

// Renders a tree as YAML (block style, keys in order).
std::string to_yaml(const Json& value);

// Scale-out advice for a resolved job (and, when given, the cluster it will run on) on GPUs of
// gpu_memory_gib each: warnings with the reason for each. Empty when there is nothing to say.
std::vector<Issue> lint_job(const Json& job, const Json* cluster, double gpu_memory_gib);

}  // namespace verl::config

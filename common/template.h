// Templates: real files under templates/ (the sbatch script, ...), embedded into the binary at
// build time and overridable from a directory, so that a site can change what verlctl writes
// without rebuilding it; `verlctl up --dry-run` shows what they render to.
//
// The syntax is the smallest that the files need:
//   {{name}}                 the value of name (a string as it is; a number or bool printed)
//   {{#name}}...{{/name}}    the text between, kept only when name is set: not null, false, 0
//                            or "" (an #SBATCH line that only some specs have); sections nest.
//                            When name is a list: the text once per element, in which {{.}}
//                            is the element (a container run line's -v per mount)
// A name is [A-Za-z0-9_.]+. Anything else between {{ and }}, a name that vars lacks, a
// placeholder whose value is null, an object or an array, an unclosed or stray section: each is
// an error naming origin:line and the name, raised before any text is returned. Values are
// inserted verbatim: the caller quotes what needs quoting (process::quote for shell text).
//
// Functions only; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace verl::tmpl {

struct Template {
  std::string origin;  // what errors name: the file overriding it, or "templates/<name> (embedded)"
  std::string text;
};

// The directory that overrides the embedded templates: $VERLCTL_TEMPLATE_DIR; empty when unset.
std::string override_dir();

// Template name (a path relative to templates/, e.g. "sbatch.sh"): <override_dir>/name when that
// file exists, else the embedded copy. Throws verl::Error (invalid config, 3) when neither exists
// or the override cannot be read.
Template load(const std::string& name);

// Renders t with vars (a JSON object). Throws verl::Error (invalid config, 3) as described above.
std::string render(const Template& t, const nlohmann::ordered_json& vars);

// Renders t into an argv for the process module (templates/container/*.argv): one argument
// per line of the result, no shell in between. Lines of the template that begin with '#' are
// comments; empty lines are dropped, so a section tag may stand on a line of its own. Throws
// verl::Error (invalid config, 3) as render() does, and for a string value that holds a newline
// (it would split into two arguments), naming the value.
std::vector<std::string> render_argv(const Template& t, const nlohmann::ordered_json& vars);

// Renders t into one line, a shell program that goes on one command line (templates/ssh/*.sh,
// the ssh backend's remote programs): lines of the template that begin with '#' are comments;
// the others are joined, each without its leading blanks, with one space between (a section tag
// at the end of a line keeps the space that follows it inside the section). Values are inserted
// after the join, so a value's own newline stays as it is. Errors name the template's own lines
// (it is checked as written first). Throws verl::Error (invalid config, 3) as render() does.
std::string render_line(const Template& t, const nlohmann::ordered_json& vars);

}  // namespace verl::tmpl

#include "common/template.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "common/embedded.h"
#include "common/error.h"
#include "common/files.h"

namespace verl::tmpl {
namespace {

using Json = nlohmann::ordered_json;

bool valid_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  return true;
}

bool is_set(const Json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  return !v.empty();
}

class Renderer {
 public:
  Renderer(const Template& t, const Json& vars) : t_(t), vars_(vars) {
    for (size_t i = 0; i < t_.text.size(); ++i)
      if (t_.text[i] == '\n') newlines_.push_back(i);
  }

  std::string run() { return run(0, t_.text.size(), true, vars_); }

 private:
  // Renders text [begin, end) with scope; emit false checks it without producing text (a
  // skipped section's names must exist too).
  std::string run(size_t begin, size_t end, bool emit, const Json& scope) const {
    const std::string& s = t_.text;
    std::string out;
    struct Open {
      std::string name;
      size_t line;
      bool keep;
    };
    std::vector<Open> open;
    auto emitting = [&] { return emit && (open.empty() || open.back().keep); };
    size_t pos = begin;
    while (pos < end) {
      size_t start = s.find("{{", pos);
      if (start >= end) start = std::string::npos;
      if (start == std::string::npos) {
        if (emitting()) out.append(s, pos, end - pos);
        break;
      }
      if (emitting()) out.append(s, pos, start - pos);
      const Tag tag = read_tag(start);
      pos = tag.end;
      // List sections nested in list sections multiply: 30 levels of a two-element list are 2^30
      // passes (found by tests/fuzz/template_fuzz.cc). No real template comes near the bound.
      if (++tags_seen_ > kMaxTags)
        fail(tag.line, "the template expands to more than " + std::to_string(kMaxTags) + " placeholders (nested list sections?)");
      const Json* value = lookup(scope, tag.name);
      if (!value) fail(tag.line, "unknown placeholder '" + tag.name + "'" + known_names(scope));
      if (tag.kind == '#' && value->is_array()) {
        // A list: the text up to its {{/name}} once per element, {{.}} being the element.
        const Tag close = matching_close(tag, end);
        Json inner = scope;
        if (value->empty() || !emitting()) {
          inner["."] = "";
          run(tag.end, close.start, false, inner);
        }
        if (emitting())
          for (const auto& element : *value) {
            inner["."] = element;
            out += run(tag.end, close.start, true, inner);
          }
        pos = close.end;
      } else if (tag.kind == '#') {
        open.push_back({tag.name, tag.line, emitting() && is_set(*value)});
      } else if (tag.kind == '/') {
        if (open.empty() || open.back().name != tag.name)
          fail(tag.line, "'{{/" + tag.name + "}}' closes " +
                             (open.empty() ? std::string("no open section")
                                           : "nothing: the open section is '" + open.back().name + "'"));
        open.pop_back();
      } else if (emitting()) {
        out += text_of(tag.name, *value, tag.line);
      }
    }
    if (!open.empty()) fail(open.back().line, "section '" + open.back().name + "' is never closed ('{{/" + open.back().name + "}}')");
    return out;
  }

  struct Tag {
    size_t start = 0, end = 0, line = 0;
    char kind = 0;  // '#', '/' or 0
    std::string name;
  };

  Tag read_tag(size_t start) const {
    const std::string& s = t_.text;
    Tag tag;
    tag.start = start;
    tag.line = line_of(start);
    const size_t close = s.find("}}", start + 2);
    const size_t eol = s.find('\n', start);
    if (close == std::string::npos || (eol != std::string::npos && eol < close))
      fail(tag.line, "'{{' without '}}' on the same line");
    tag.name = s.substr(start + 2, close - start - 2);
    tag.end = close + 2;
    if (!tag.name.empty() && (tag.name[0] == '#' || tag.name[0] == '/')) {
      tag.kind = tag.name[0];
      tag.name.erase(0, 1);
    }
    if (!valid_name(tag.name)) fail(tag.line, "'{{" + s.substr(start + 2, close - start - 2) + "}}' is not a placeholder name");
    return tag;
  }

  // The {{/name}} that closes the list section open, before end (sections of the same name nest).
  Tag matching_close(const Tag& open, size_t end) const {
    int depth = 0;
    for (size_t pos = open.end; pos < end;) {
      const size_t start = t_.text.find("{{", pos);
      if (start == std::string::npos || start >= end) break;
      const Tag tag = read_tag(start);
      pos = tag.end;
      if (tag.name != open.name) continue;
      if (tag.kind == '#') ++depth;
      if (tag.kind == '/' && depth-- == 0) return tag;
    }
    fail(open.line, "section '" + open.name + "' is never closed ('{{/" + open.name + "}}')");
  }

  // 1 + the newlines before offset. Counting them from the start for every tag was quadratic:
  // 10000 nested sections took 115 s (found by tests/fuzz/template_fuzz.cc).
  size_t line_of(size_t offset) const {
    return 1 + static_cast<size_t>(std::lower_bound(newlines_.begin(), newlines_.end(), offset) - newlines_.begin());
  }

  [[noreturn]] void fail(size_t line, const std::string& what) const {
    throw Error(ExitCode::kInvalidConfig, t_.origin + ":" + std::to_string(line) + ": " + what,
                "fix the template, or unset VERLCTL_TEMPLATE_DIR to use the embedded one");
  }

  static const Json* lookup(const Json& scope, const std::string& name) {
    auto it = scope.find(name);
    return it == scope.end() ? nullptr : &*it;
  }

  static std::string known_names(const Json& scope) {
    std::string names;
    for (auto it = scope.begin(); it != scope.end(); ++it) names += (names.empty() ? "" : ", ") + it.key();
    return names.empty() ? std::string(" (there are no values)") : " (the values are " + names + ")";
  }

  std::string text_of(const std::string& name, const Json& v, size_t line) const {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
    if (v.is_number()) return v.dump();
    fail(line, "placeholder '" + name + "' has no value (" + (v.is_null() ? "null" : v.type_name()) +
                   "); put it inside {{#" + name + "}}...{{/" + name + "}} if it is optional");
  }

  static constexpr size_t kMaxTags = 100000;
  const Template& t_;
  const Json& vars_;
  std::vector<size_t> newlines_;  // offsets of '\n' in the text
  mutable size_t tags_seen_ = 0;  // over every pass of run(), list sections included
};

}  // namespace

std::string override_dir() {
  const char* d = std::getenv("VERLCTL_TEMPLATE_DIR");
  return d && *d ? std::string(d) : std::string();
}

Template load(const std::string& name) {
  const std::string dir = override_dir();
  if (!dir.empty()) {
    const std::string path = dir + "/" + name;
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) {
      try {
        return {path, files::read_file(path)};
      } catch (const Error& e) {
        throw Error(ExitCode::kInvalidConfig, e.what(), "VERLCTL_TEMPLATE_DIR=" + dir + " overrides templates/" + name);
      }
    }
  }
  const embedded::File* f = embedded::find(name);
  if (!f)
    throw Error(ExitCode::kInvalidConfig, "no template '" + name + "'" +
                    (dir.empty() ? std::string(" embedded in verlctl") : " in " + dir + " nor embedded in verlctl"),
                "the templates are the files under templates/ of the source tree");
  return {"templates/" + name + " (embedded)", std::string(f->view())};
}

std::string render(const Template& t, const Json& vars) {
  if (!vars.is_object()) throw Error(ExitCode::kFailure, "rendering " + t.origin + ": the values are not an object");
  // Section tags alone on a line ("{{#x}}\n") would leave blank lines; the templates put them
  // at the start of the line they guard instead (see templates/sbatch.sh), so nothing is trimmed.
  return Renderer(t, vars).run();
}

namespace {

// The first string under v (a value, or an element of a list) that holds a newline; "" if none.
bool has_newline(const Json& v) {
  if (v.is_string()) return v.get_ref<const std::string&>().find('\n') != std::string::npos;
  if (v.is_array())
    for (const auto& e : v)
      if (has_newline(e)) return true;
  return false;
}

}  // namespace

std::vector<std::string> render_argv(const Template& t, const Json& vars) {
  if (!vars.is_object()) throw Error(ExitCode::kFailure, "rendering " + t.origin + ": the values are not an object");
  for (auto it = vars.begin(); it != vars.end(); ++it)
    if (has_newline(*it))
      throw Error(ExitCode::kInvalidConfig,
                  "rendering " + t.origin + ": the value of '" + it.key() + "' holds a newline, which would split one "
                  "argument of the command line into two",
                  "remove the newline from the value (a mount, an env value, the image) in the cluster spec");
  // Comments become empty lines, so that errors still name the template's own line numbers.
  Template bare{t.origin, {}};
  size_t pos = 0;
  while (pos < t.text.size()) {
    size_t eol = t.text.find('\n', pos);
    if (eol == std::string::npos) eol = t.text.size();
    if (t.text[pos] != '#') bare.text.append(t.text, pos, eol - pos);
    bare.text += '\n';
    pos = eol + 1;
  }
  const std::string text = render(bare, vars);
  std::vector<std::string> argv;
  pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    if (eol > pos) argv.push_back(text.substr(pos, eol - pos));
    pos = eol + 1;
  }
  return argv;
}

std::string render_line(const Template& t, const Json& vars) {
  // Comments blanked (the line numbers stay), for the check; then the lines joined.
  Template lines{t.origin, {}}, joined{t.origin + " (joined into one line)", {}};
  size_t pos = 0;
  while (pos < t.text.size()) {
    size_t eol = t.text.find('\n', pos);
    if (eol == std::string::npos) eol = t.text.size();
    if (t.text[pos] != '#') {
      lines.text.append(t.text, pos, eol - pos);
      const size_t first = t.text.find_first_not_of(" \t", pos);
      if (first < eol) {
        if (!joined.text.empty()) joined.text += ' ';
        joined.text.append(t.text, first, eol - first);
      }
    }
    lines.text += '\n';
    pos = eol + 1;
  }
  render(lines, vars);  // errors with the template's line numbers
  return render(joined, vars);
}

}  // namespace verl::tmpl

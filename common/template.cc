#include "common/template.h"

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
  Renderer(const Template& t, const Json& vars) : t_(t), vars_(vars) {}

  std::string run() {
    const std::string& s = t_.text;
    std::string out;
    struct Open {
      std::string name;
      size_t line;
      bool keep;
    };
    std::vector<Open> open;
    auto emitting = [&] { return open.empty() || open.back().keep; };
    size_t pos = 0;
    while (pos < s.size()) {
      const size_t start = s.find("{{", pos);
      if (start == std::string::npos) {
        if (emitting()) out.append(s, pos, std::string::npos);
        break;
      }
      if (emitting()) out.append(s, pos, start - pos);
      const size_t line = line_of(start);
      const size_t close = s.find("}}", start + 2);
      const size_t eol = s.find('\n', start);
      if (close == std::string::npos || (eol != std::string::npos && eol < close))
        fail(line, "'{{' without '}}' on the same line");
      std::string tag = s.substr(start + 2, close - start - 2);
      pos = close + 2;
      char kind = 0;
      if (!tag.empty() && (tag[0] == '#' || tag[0] == '/')) {
        kind = tag[0];
        tag.erase(0, 1);
      }
      if (!valid_name(tag)) fail(line, "'{{" + s.substr(start + 2, close - start - 2) + "}}' is not a placeholder name");
      const Json* value = lookup(tag);
      if (!value) fail(line, "unknown placeholder '" + tag + "'" + known_names());
      if (kind == '#') {
        open.push_back({tag, line, emitting() && is_set(*value)});
      } else if (kind == '/') {
        if (open.empty() || open.back().name != tag)
          fail(line, "'{{/" + tag + "}}' closes " + (open.empty() ? std::string("no open section")
                                                                  : "nothing: the open section is '" + open.back().name + "'"));
        open.pop_back();
      } else if (emitting()) {
        out += text_of(tag, *value, line);
      }
    }
    if (!open.empty()) fail(open.back().line, "section '" + open.back().name + "' is never closed ('{{/" + open.back().name + "}}')");
    return out;
  }

 private:
  size_t line_of(size_t offset) const {
    size_t line = 1;
    for (size_t i = 0; i < offset && i < t_.text.size(); ++i) line += t_.text[i] == '\n';
    return line;
  }

  [[noreturn]] void fail(size_t line, const std::string& what) const {
    throw Error(ExitCode::kInvalidConfig, t_.origin + ":" + std::to_string(line) + ": " + what,
                "fix the template, or unset VERLCTL_TEMPLATE_DIR to use the embedded one");
  }

  const Json* lookup(const std::string& name) const {
    auto it = vars_.find(name);
    return it == vars_.end() ? nullptr : &*it;
  }

  std::string known_names() const {
    std::string names;
    for (auto it = vars_.begin(); it != vars_.end(); ++it) names += (names.empty() ? "" : ", ") + it.key();
    return names.empty() ? std::string(" (there are no values)") : " (the values are " + names + ")";
  }

  std::string text_of(const std::string& name, const Json& v, size_t line) const {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
    if (v.is_number()) return v.dump();
    fail(line, "placeholder '" + name + "' has no value (" + (v.is_null() ? "null" : v.type_name()) +
                   "); put it inside {{#" + name + "}}...{{/" + name + "}} if it is optional");
  }

  const Template& t_;
  const Json& vars_;
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

}  // namespace verl::tmpl

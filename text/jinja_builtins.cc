// Python semantics for text/jinja.h: operators, attribute and item access, slicing, the string
// and dict methods, and jinja2's filters and tests (transformers' tojson). Strings are UTF-8;
// lengths, indexes and slices count code points as Python's do.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "text/jinja_internal.h"

namespace verl::text::jinja::internal {

namespace {

// ---------------------------------------------------------------------------------------------
// UTF-8

std::u32string decode(const std::string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    char32_t cp;
    size_t n;
    if (c < 0x80) { cp = c; n = 1; }
    else if ((c >> 5) == 6) { cp = c & 0x1f; n = 2; }
    else if ((c >> 4) == 14) { cp = c & 0x0f; n = 3; }
    else if ((c >> 3) == 30) { cp = c & 0x07; n = 4; }
    else { cp = 0xfffd; n = 1; }
    if (i + n > s.size()) { cp = 0xfffd; n = 1; }
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out.push_back(cp);
    i += n;
  }
  return out;
}

std::string encode(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) append_utf8(out, cp);
  return out;
}

// Python's str.isspace().
bool is_space(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

bool is_alpha(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= 0xc0 && c != 0xd7 && c != 0xf7 && c < 0x2000); }
// Case mapping for ASCII, Latin-1, Greek and Cyrillic (one to one; ß, final sigma and the rest of
// Unicode are left as they are).
char32_t upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xe0 && c <= 0xfe && c != 0xf7) || (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) || (c >= 0x430 && c <= 0x44f))
    return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  return c;
}
char32_t lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xc0 && c <= 0xde && c != 0xd7) || (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) || (c >= 0x410 && c <= 0x42f))
    return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  return c;
}

std::string map_chars(const std::string& s, char32_t (*f)(char32_t)) {
  std::u32string u = decode(s);
  for (auto& c : u) c = f(c);
  return encode(u);
}

// Python's str.strip/lstrip/rstrip(chars): whitespace when chars is None.
std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
  std::u32string u = decode(s);
  std::u32string set;
  bool ws = chars.is_undefined() || chars.is_none();
  if (!ws) {
    if (!chars.is_string()) throw_failure("strip arg must be None or str, not " + chars.type_name());
    set = decode(chars.as_string());
  }
  auto drop = [&](char32_t c) { return ws ? is_space(c) : set.find(c) != std::u32string::npos; };
  size_t b = 0, e = u.size();
  if (left) while (b < e && drop(u[b])) ++b;
  if (right) while (e > b && drop(u[e - 1])) --e;
  return encode(u.substr(b, e - b));
}

Array split(const std::string& s, const Value& sep, int64_t maxsplit) {
  Array out;
  if (sep.is_undefined() || sep.is_none()) {
    std::u32string u = decode(s);
    size_t i = 0;
    while (true) {
      while (i < u.size() && is_space(u[i])) ++i;
      if (i >= u.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        std::u32string rest = u.substr(i);
        while (!rest.empty() && is_space(rest.back())) rest.pop_back();
        out.push_back(Value(encode(rest)));
        break;
      }
      size_t j = i;
      while (j < u.size() && !is_space(u[j])) ++j;
      out.push_back(Value(encode(u.substr(i, j - i))));
      i = j;
    }
    return out;
  }
  if (!sep.is_string()) throw_failure("must be str or None, not " + sep.type_name());
  const std::string& d = sep.as_string();
  if (d.empty()) throw_failure("empty separator");
  size_t pos = 0;
  while (true) {
    size_t hit = s.find(d, pos);
    if (hit == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit)) {
      out.push_back(Value(s.substr(pos)));
      break;
    }
    out.push_back(Value(s.substr(pos, hit - pos)));
    pos = hit + d.size();
  }
  return out;
}

std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (count == 0) return s;
  std::string out;
  if (from.empty()) {  // Python inserts `to` between every character and at both ends
    std::u32string u = decode(s);
    int64_t done = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (i < u.size()) append_utf8(out, u[i]);
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
    ++done;
  }
  return out + s.substr(pos);
}

// Python's str.title(): a cased letter after an uncased character starts a word.
std::string title_method(const std::string& s) {
  std::u32string u = decode(s);
  bool prev_cased = false;
  for (auto& c : u) {
    c = prev_cased ? lower(c) : upper(c);
    prev_cased = is_alpha(c);
  }
  return encode(u);
}

// jinja2's title filter: words begin after whitespace, '-', '(', '{', '[' or '<'.
std::string title_filter(const std::string& s) {
  std::u32string u = decode(s);
  bool start = true;
  for (auto& c : u) {
    bool sep = is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      start = true;
      continue;
    }
    c = start ? upper(c) : lower(c);
    start = false;
  }
  return encode(u);
}

std::string capitalize(const std::string& s) {
  std::u32string u = decode(s);
  for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? upper(u[i]) : lower(u[i]);
  return encode(u);
}

// ---------------------------------------------------------------------------------------------
// Arguments

// The i-th positional argument, else the keyword `name`, else undefined.
const Value& arg(const Args& a, size_t i, const char* name) {
  static const Value kUndefined;
  if (i < a.positional.size()) return a.positional[i];
  for (const auto& [k, v] : a.keyword)
    if (k == name) return v;
  return kUndefined;
}

void check_args(const Args& a, size_t max_positional, std::initializer_list<const char*> keywords, const std::string& what) {
  if (a.positional.size() > max_positional)
    throw_failure(what + " takes at most " + std::to_string(max_positional) + " argument(s), got " +
                  std::to_string(a.positional.size()));
  for (const auto& kv : a.keyword) {
    bool ok = false;
    for (const char* k : keywords) ok = ok || kv.first == k;
    if (!ok) throw_failure(what + " got an unexpected keyword argument '" + kv.first + "'");
  }
}

int64_t int_arg(const Value& v, int64_t def, const char* what) {
  if (v.is_undefined() || v.is_none()) return def;
  if (v.kind() == Value::Kind::kBool) return v.as_bool();
  if (!v.is_int()) throw_failure(std::string(what) + " must be an integer, not " + v.type_name());
  return v.as_int();
}

bool bool_arg(const Value& v, bool def) { return v.is_undefined() ? def : v.truthy(); }

std::string str_arg(const Value& v, const char* what) {
  if (!v.is_string()) throw_failure(std::string(what) + " must be a string, not " + v.type_name());
  return v.as_string();
}

double number(const Value& v) {
  if (v.kind() == Value::Kind::kBool) return v.as_bool();
  return v.as_double();
}
bool numeric(const Value& v) { return v.is_number() || v.kind() == Value::Kind::kBool; }

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString: return static_cast<int64_t>(decode(v.as_string()).size());
    case Value::Kind::kArray: return static_cast<int64_t>(v.as_array().size());
    case Value::Kind::kObject: return static_cast<int64_t>(v.as_object().items.size());
    case Value::Kind::kUndefined: return 0;
    default: throw_failure("object of type '" + v.type_name() + "' has no len()");
  }
}

bool equal(const Value& a, const Value& b);

// Python's `<` for the types a template can order.
int order(const Value& a, const Value& b) {
  if (numeric(a) && numeric(b)) {
    if (a.is_int() && b.is_int()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int();
    double x = number(a), y = number(b);
    return x < y ? -1 : x > y;
  }
  if (a.is_string() && b.is_string()) return a.as_string().compare(b.as_string()) < 0 ? -1 : a.as_string() > b.as_string();
  if (a.is_array() && b.is_array()) {
    const Array &x = a.as_array(), &y = b.as_array();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equal(x[i], y[i])) return order(x[i], y[i]);
    return x.size() < y.size() ? -1 : x.size() > y.size();
  }
  throw_failure("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

bool equal(const Value& a, const Value& b) {
  if (numeric(a) && numeric(b)) {
    if (a.is_int() && b.is_int()) return a.as_int() == b.as_int();
    return number(a) == number(b);
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kArray: {
      const Array &x = a.as_array(), &y = b.as_array();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equal(x[i], y[i])) return false;
      return true;
    }
    case Value::Kind::kObject: {
      const Object &x = a.as_object(), &y = b.as_object();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* w = y.find(k);
        if (!w || !equal(v, *w)) return false;
      }
      return true;
    }
    default: return &a.as_object() == &b.as_object();  // namespaces, functions: identity (approximate)
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string()) throw_failure("'in <string>' requires string as left operand, not " + item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kArray:
      for (const auto& v : container.as_array())
        if (equal(v, item)) return true;
      return false;
    case Value::Kind::kObject:
    case Value::Kind::kNamespace:
      return item.is_string() && container.as_object().find(item.as_string()) != nullptr;
    case Value::Kind::kUndefined: return false;
    default: throw_failure("argument of type '" + container.type_name() + "' is not iterable");
  }
}

Value items_of(const Value& v) {
  if (v.is_undefined()) return Value::array();
  if (!v.is_object()) throw_failure("items() needs a dict, got " + v.type_name());
  Array out;
  for (const auto& [k, val] : v.as_object().items) out.push_back(Value::tuple({Value(k), val}));
  return Value::array(std::move(out));
}

Value py_int(const Value& v, const Value& def) {
  switch (v.kind()) {
    case Value::Kind::kInt: return v;
    case Value::Kind::kBool: return Value(static_cast<int64_t>(v.as_bool()));
    case Value::Kind::kFloat: return Value(static_cast<int64_t>(std::trunc(v.as_double())));
    case Value::Kind::kString: {
      std::string s = strip(v.as_string(), Value(), true, true);
      try {
        size_t used = 0;
        long long n = std::stoll(s, &used, 10);
        if (used == s.size()) return Value(static_cast<int64_t>(n));
        double d = std::stod(s, &used);  // jinja2 falls back to int(float(value))
        if (used == s.size()) return Value(static_cast<int64_t>(std::trunc(d)));
      } catch (const std::exception&) {
      }
      return def;
    }
    default: return def;
  }
}

Value py_float(const Value& v, const Value& def) {
  switch (v.kind()) {
    case Value::Kind::kInt:
    case Value::Kind::kFloat: return Value(v.as_double());
    case Value::Kind::kBool: return Value(v.as_bool() ? 1.0 : 0.0);
    case Value::Kind::kString: {
      std::string s = strip(v.as_string(), Value(), true, true);
      try {
        size_t used = 0;
        double d = std::stod(s, &used);
        if (used == s.size()) return Value(d);
      } catch (const std::exception&) {
      }
      return def;
    }
    default: return def;
  }
}

// jinja2's round: 'common' is Python's round(x, n), half to even on the exact binary value
// (round(2.5) == 2.0, round(2.675, 2) == 2.67); 'ceil' and 'floor' as named. Always a float.
Value do_round(const Value& v, int64_t precision, const std::string& method) {
  if (!numeric(v)) throw_failure("round needs a number, got " + v.type_name());
  double x = number(v), scale = std::pow(10.0, static_cast<double>(precision));
  double r;
  if (method == "common" && precision >= 0) {
    // glibc's printf rounds the exact binary value half to even, as Python's round() does.
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(precision, 300)), x);
    r = std::strtod(buf, nullptr);
  } else if (method == "common") r = std::nearbyint(x * scale) / scale;
  else if (method == "ceil") r = std::ceil(x * scale) / scale;
  else if (method == "floor") r = std::floor(x * scale) / scale;
  else throw_failure("method must be common, ceil or floor");
  return Value(r);
}

Value getattr_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t pos = 0;
  while (true) {
    size_t dot = path.find('.', pos);
    std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = digits && v.is_array() ? get_item(v, Value(static_cast<int64_t>(std::stoll(part)))) : get_item(v, Value(part));
    if (dot == std::string::npos) return v;
    pos = dot + 1;
  }
}

Args rest_args(const Args& a, size_t from) {
  Args out;
  for (size_t i = from; i < a.positional.size(); ++i) out.positional.push_back(a.positional[i]);
  out.keyword = a.keyword;
  return out;
}

// select/reject/selectattr/rejectattr.
Value select(const Value& seq, const Args& a, bool by_attr, bool keep) {
  Array out;
  std::string attr;
  size_t test_at = 0;
  if (by_attr) {
    attr = str_arg(arg(a, 0, "attribute"), "attribute");
    test_at = 1;
  }
  std::string test;
  if (test_at < a.positional.size()) test = str_arg(a.positional[test_at], "test name");
  if (!test.empty() && !is_known_test(test)) throw_failure("unknown test '" + test + "'");
  Args test_args;
  for (size_t i = test_at + 1; i < a.positional.size(); ++i) test_args.positional.push_back(a.positional[i]);
  for (const auto& item : iterate(seq)) {
    Value v = by_attr ? getattr_path(item, attr) : item;
    bool r = test.empty() ? v.truthy() : call_test(test, v, test_args);
    if (r == keep) out.push_back(item);
  }
  return Value::array(std::move(out));
}

Value sort(const Value& seq, const Args& a) {
  check_args(a, 3, {"reverse", "case_sensitive", "attribute"}, "sort");
  bool reverse = bool_arg(arg(a, 0, "reverse"), false);
  bool case_sensitive = bool_arg(arg(a, 1, "case_sensitive"), false);
  const Value& attribute = arg(a, 2, "attribute");
  Array items = iterate(seq);
  auto key = [&](const Value& v) {
    Value k = attribute.is_undefined() || attribute.is_none() ? v : getattr_path(v, attribute.to_string());
    if (!case_sensitive && k.is_string()) return Value(map_chars(k.as_string(), lower));
    return k;
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    int c = order(key(x), key(y));
    return reverse ? c > 0 : c < 0;
  });
  return Value::array(std::move(items));
}

std::string indent(const std::string& s, const Value& width, bool first, bool blank) {
  std::string pad = width.is_string() ? width.as_string() : std::string(static_cast<size_t>(std::max<int64_t>(0, int_arg(width, 4, "width"))), ' ');
  std::string out;
  size_t pos = 0;
  bool first_line = true;
  while (true) {
    size_t nl = s.find('\n', pos);
    std::string line = s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    bool do_indent = first_line ? first : (blank || !strip(line, Value(), true, true).empty());
    if (do_indent && (!line.empty() || blank || first_line)) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    pos = nl + 1;
    first_line = false;
  }
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

const std::set<std::string>& filter_names() {
  static const std::set<std::string> k = {
      "abs", "capitalize", "count", "d", "default", "dictsort", "e", "escape", "first", "float", "indent", "int",
      "items", "join", "last", "length", "list", "lower", "map", "max", "min", "reject", "rejectattr", "replace",
      "reverse", "round", "safe", "select", "selectattr", "sort", "string", "sum", "title", "tojson", "trim",
      "unique", "upper", "wordcount"};
  return k;
}

const std::set<std::string>& test_names() {
  static const std::set<std::string> k = {
      "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "even", "false", "float", "ge", "gt",
      "in", "integer", "iterable", "le", "lower", "lt", "mapping", "ne", "none", "number", "odd", "sameas",
      "sequence", "string", "true", "undefined", "upper"};
  return k;
}

Value string_method(const std::string& s, const std::string& name, const Args& a) {
  std::string what = "str." + name + "()";
  if (name == "startswith" || name == "endswith") {
    check_args(a, 1, {}, what);
    const Value& p = arg(a, 0, "prefix");
    Array options = p.is_array() ? p.as_array() : Array{p};
    for (const auto& o : options) {
      std::string x = str_arg(o, what.c_str());
      bool hit = x.size() <= s.size() &&
                 (name == "startswith" ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0);
      if (hit) return Value(true);
    }
    return Value(false);
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    check_args(a, 1, {"chars"}, what);
    return Value(strip(s, arg(a, 0, "chars"), name != "rstrip", name != "lstrip"));
  }
  if (name == "split") {
    check_args(a, 2, {"sep", "maxsplit"}, what);
    return Value::array(split(s, arg(a, 0, "sep"), int_arg(arg(a, 1, "maxsplit"), -1, "maxsplit")));
  }
  if (name == "upper") return Value(map_chars(s, upper));
  if (name == "lower") return Value(map_chars(s, lower));
  if (name == "title") return Value(title_method(s));
  if (name == "capitalize") return Value(capitalize(s));
  if (name == "replace") {
    check_args(a, 3, {"count"}, what);
    return Value(replace(s, str_arg(arg(a, 0, "old"), what.c_str()), str_arg(arg(a, 1, "new"), what.c_str()),
                         int_arg(arg(a, 2, "count"), -1, "count")));
  }
  if (name == "find" || name == "count") {
    std::string x = str_arg(arg(a, 0, "sub"), what.c_str());
    if (name == "find") {
      size_t hit = s.find(x);
      return Value(hit == std::string::npos ? int64_t{-1} : static_cast<int64_t>(decode(s.substr(0, hit)).size()));
    }
    if (x.empty()) return Value(static_cast<int64_t>(decode(s).size() + 1));
    int64_t n = 0;
    for (size_t p = s.find(x); p != std::string::npos; p = s.find(x, p + x.size())) ++n;
    return Value(n);
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const auto& v : iterate(arg(a, 0, "iterable"))) {
      if (!first) out += s;
      out += str_arg(v, what.c_str());
      first = false;
    }
    return Value(out);
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha") {
    std::u32string u = decode(s);
    if (u.empty()) return Value(false);
    for (char32_t c : u) {
      bool ok = name == "isdigit" ? (c >= '0' && c <= '9') : name == "isspace" ? is_space(c) : is_alpha(c);
      if (!ok) return Value(false);
    }
    return Value(true);
  }
  throw_failure("unknown method '" + name + "' of str");
}

const std::set<std::string>& string_methods() {
  static const std::set<std::string> k = {"startswith", "endswith", "strip", "lstrip", "rstrip", "split", "upper",
                                          "lower", "title", "capitalize", "replace", "find", "count", "join",
                                          "isdigit", "isspace", "isalpha"};
  return k;
}

}  // namespace

void throw_failure(const std::string& message) {
  Failure f;
  f.message = message;
  throw f;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

bool is_known_filter(const std::string& name) { return filter_names().count(name) > 0; }
bool is_known_test(const std::string& name) { return test_names().count(name) > 0; }

Array iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kArray: return v.as_array();
    case Value::Kind::kObject: {
      Array keys;
      for (const auto& kv : v.as_object().items) keys.push_back(Value(kv.first));
      return keys;
    }
    case Value::Kind::kString: {
      Array chars;
      for (char32_t c : decode(v.as_string())) {
        std::string s;
        append_utf8(s, c);
        chars.push_back(Value(s));
      }
      return chars;
    }
    case Value::Kind::kUndefined: return {};
    default: throw_failure("'" + v.type_name() + "' object is not iterable");
  }
}

Value get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::kObject: {
      if (name == "get" || name == "items" || name == "keys" || name == "values") {
        return Value::function([obj, name](const Args& a) -> Value {
          if (name == "get") {
            check_args(a, 2, {}, "dict.get()");
            const Value& key = arg(a, 0, "key");
            const Value* v = key.is_string() ? obj.as_object().find(key.as_string()) : nullptr;
            if (v) return *v;
            return a.positional.size() > 1 ? a.positional[1] : Value::none();
          }
          check_args(a, 0, {}, "dict." + name + "()");
          if (name == "items") return items_of(obj);
          Array out;
          for (const auto& [k, v] : obj.as_object().items) out.push_back(name == "keys" ? Value(k) : v);
          return Value::array(std::move(out));
        });
      }
      const Value* v = obj.as_object().find(name);
      return v ? *v : Value();
    }
    case Value::Kind::kNamespace: {
      const Value* v = obj.as_object().find(name);
      return v ? *v : Value();
    }
    case Value::Kind::kString:
      if (string_methods().count(name)) {
        std::string s = obj.as_string();
        return Value::function([s, name](const Args& a) { return string_method(s, name, a); });
      }
      return Value();
    default:
      return Value();
  }
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kObject:
    case Value::Kind::kNamespace: {
      if (!key.is_string()) return Value();
      const Value* v = obj.as_object().find(key.as_string());
      return v ? *v : (obj.is_object() ? get_attr(obj, key.as_string()) : Value());
    }
    case Value::Kind::kArray:
    case Value::Kind::kString: {
      if (key.is_string()) return get_attr(obj, key.as_string());
      if (!key.is_int() && key.kind() != Value::Kind::kBool) return Value();
      int64_t i = key.is_int() ? key.as_int() : key.as_bool();
      if (obj.is_array()) {
        int64_t n = static_cast<int64_t>(obj.as_array().size());
        if (i < 0) i += n;
        return i >= 0 && i < n ? obj.as_array()[static_cast<size_t>(i)] : Value();
      }
      std::u32string u = decode(obj.as_string());
      int64_t n = static_cast<int64_t>(u.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();
      std::string s;
      append_utf8(s, u[static_cast<size_t>(i)]);
      return Value(s);
    }
    default:
      return Value();
  }
}

Value slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  int64_t step = int_arg(step_v, 1, "slice step");
  if (step == 0) throw_failure("slice step cannot be zero");
  auto run = [&](int64_t n, auto&& take) {
    auto norm = [&](const Value& v, int64_t def) {
      if (v.is_undefined() || v.is_none()) return def;
      int64_t i = int_arg(v, 0, "slice index");
      if (i < 0) i += n;
      if (step > 0) return std::clamp<int64_t>(i, 0, n);
      return std::clamp<int64_t>(i, -1, n - 1);
    };
    int64_t start = norm(start_v, step > 0 ? 0 : n - 1);
    int64_t stop = norm(stop_v, step > 0 ? n : -1);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) take(static_cast<size_t>(i));
  };
  if (obj.is_array()) {
    const Array& a = obj.as_array();
    Array out;
    run(static_cast<int64_t>(a.size()), [&](size_t i) { out.push_back(a[i]); });
    return Value::array(std::move(out));
  }
  if (obj.is_string()) {
    std::u32string u = decode(obj.as_string()), out;
    run(static_cast<int64_t>(u.size()), [&](size_t i) { out.push_back(u[i]); });
    return Value(encode(out));
  }
  if (obj.is_undefined()) return Value();
  throw_failure("'" + obj.type_name() + "' object is not subscriptable");
}

Value unary_op(const std::string& op, const Value& v) {
  if (v.is_int()) return Value(op == "-" ? -v.as_int() : v.as_int());
  if (v.kind() == Value::Kind::kBool) return Value(static_cast<int64_t>(op == "-" ? -int64_t{v.as_bool()} : v.as_bool()));
  if (v.is_number()) return Value(op == "-" ? -v.as_double() : v.as_double());
  throw_failure("bad operand type for unary " + op + ": '" + v.type_name() + "'");
}

Value binary_op(const std::string& op, const Value& l, const Value& r) {
  if (op == "~") return Value(l.to_string() + r.to_string());
  if (op == "in" || op == "not in") return Value(contains(r, l) == (op == "in"));
  if (l.is_undefined() || r.is_undefined())
    throw_failure("unsupported operand for " + op + ": a value is undefined (" + l.type_name() + " " + op + " " + r.type_name() + ")");
  if (numeric(l) && numeric(r)) {
    bool ints = l.kind() != Value::Kind::kFloat && r.kind() != Value::Kind::kFloat;
    if (ints) {
      int64_t a = l.is_int() ? l.as_int() : l.as_bool(), b = r.is_int() ? r.as_int() : r.as_bool();
      if (op == "+") return Value(a + b);
      if (op == "-") return Value(a - b);
      if (op == "*") return Value(a * b);
      if (op == "/") {
        if (b == 0) throw_failure("division by zero");
        return Value(static_cast<double>(a) / static_cast<double>(b));
      }
      if (op == "//" || op == "%") {
        if (b == 0) throw_failure("integer division or modulo by zero");
        int64_t q = a / b, m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) {
          --q;
          m += b;
        }
        return Value(op == "//" ? q : m);
      }
      if (op == "**") {
        if (b < 0) return Value(std::pow(static_cast<double>(a), static_cast<double>(b)));
        int64_t out = 1;
        for (int64_t i = 0; i < b; ++i) out *= a;
        return Value(out);
      }
    } else {
      double a = number(l), b = number(r);
      if (op == "+") return Value(a + b);
      if (op == "-") return Value(a - b);
      if (op == "*") return Value(a * b);
      if (op == "/" || op == "//" || op == "%") {
        if (b == 0) throw_failure("float division by zero");
        if (op == "/") return Value(a / b);
        if (op == "//") return Value(std::floor(a / b));
        double m = std::fmod(a, b);
        if (m != 0 && ((m < 0) != (b < 0))) m += b;
        return Value(m);
      }
      if (op == "**") return Value(std::pow(a, b));
    }
  }
  if (op == "+" && l.is_string() && r.is_string()) return Value(l.as_string() + r.as_string());
  if (op == "+" && l.is_array() && r.is_array()) {
    Array out = l.as_array();
    out.insert(out.end(), r.as_array().begin(), r.as_array().end());
    return Value::array(std::move(out));
  }
  if (op == "*" && (l.is_string() || l.is_array()) && r.is_int()) {
    size_t unit = l.is_string() ? l.as_string().size() : l.as_array().size();
    if (r.as_int() > 0 && unit > 0 && static_cast<uint64_t>(r.as_int()) > (uint64_t{1} << 28) / unit)
      throw_failure("repetition too large");
    if (l.is_string()) {
      std::string out;
      for (int64_t i = 0; i < r.as_int(); ++i) out += l.as_string();
      return Value(out);
    }
    Array out;
    for (int64_t i = 0; i < r.as_int(); ++i) out.insert(out.end(), l.as_array().begin(), l.as_array().end());
    return Value::array(std::move(out));
  }
  throw_failure("unsupported operand type(s) for " + op + ": '" + l.type_name() + "' and '" + r.type_name() + "'");
}

bool compare_op(const std::string& op, const Value& l, const Value& r) {
  if (op == "==") return equal(l, r);
  if (op == "!=") return !equal(l, r);
  if (op == "in") return contains(r, l);
  if (op == "not in") return !contains(r, l);
  int c = order(l, r);
  if (op == "<") return c < 0;
  if (op == ">") return c > 0;
  if (op == "<=") return c <= 0;
  return c >= 0;
}

bool call_test(const std::string& name, const Value& v, const Args& a) {
  using K = Value::Kind;
  static const std::set<std::string> kOneArgument = {"divisibleby", "eq", "equalto", "ne", "lt", "le",
                                                      "gt", "ge", "in", "sameas"};
  size_t want = kOneArgument.count(name) ? 1 : 0;
  if (a.positional.size() + a.keyword.size() != want)
    throw_failure("test '" + name + "' takes " + std::to_string(want) + " argument(s), got " +
                  std::to_string(a.positional.size() + a.keyword.size()));
  const Value& other = arg(a, 0, "other");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_object();
  if (name == "iterable") return v.is_string() || v.is_array() || v.is_object() || v.is_undefined();
  if (name == "sequence") return v.is_string() || v.is_array() || v.is_object();
  if (name == "number") return v.is_number() || v.kind() == K::kBool;
  if (name == "integer") return v.is_int();
  if (name == "float") return v.kind() == K::kFloat;
  if (name == "boolean") return v.kind() == K::kBool;
  if (name == "true") return v.kind() == K::kBool && v.as_bool();
  if (name == "false") return v.kind() == K::kBool && !v.as_bool();
  if (name == "callable") return v.is_function();
  if (name == "lower") return v.is_string() && map_chars(v.as_string(), lower) == v.as_string();
  if (name == "upper") return v.is_string() && map_chars(v.as_string(), upper) == v.as_string();
  if (name == "odd" || name == "even") {
    if (!v.is_int()) throw_failure("test '" + name + "' needs an integer, got " + v.type_name());
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    int64_t d = int_arg(other, 0, "divisibleby");
    if (d == 0 || !v.is_int()) throw_failure("divisibleby needs integers and a non-zero divisor");
    return v.as_int() % d == 0;
  }
  if (name == "eq" || name == "equalto") return equal(v, other);
  if (name == "ne") return !equal(v, other);
  if (name == "lt") return order(v, other) < 0;
  if (name == "le") return order(v, other) <= 0;
  if (name == "gt") return order(v, other) > 0;
  if (name == "ge") return order(v, other) >= 0;
  if (name == "in") return contains(other, v);
  if (name == "sameas") {
    if (v.kind() != other.kind()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.kind() == K::kBool) return v.as_bool() == other.as_bool();
    return equal(v, other);
  }
  throw_failure("unknown test '" + name + "'");
}

Value call_filter(const std::string& name, const Value& v, const Args& a) {
  if (name == "safe") return v;
  if (name == "string") return Value(v.to_string());
  if (name == "tojson") {
    check_args(a, 1, {"indent", "ensure_ascii", "separators", "sort_keys"}, "tojson");
    const Value& ind = arg(a, 0, "indent");
    int indent = ind.is_undefined() || ind.is_none() ? -1 : static_cast<int>(int_arg(ind, -1, "indent"));
    const Value& seps = arg(a, 99, "separators");
    std::string item_sep, key_sep;
    bool custom = seps.is_array();
    if (custom) {
      if (seps.as_array().size() != 2) throw_failure("separators must be a pair of strings");
      item_sep = str_arg(seps.as_array()[0], "separator");
      key_sep = str_arg(seps.as_array()[1], "separator");
    }
    try {
      return Value(to_json(v, indent, bool_arg(arg(a, 99, "sort_keys"), false), custom ? &item_sep : nullptr,
                           custom ? &key_sep : nullptr));
    } catch (const std::exception& e) {
      throw_failure(e.what());
    }
  }
  if (name == "trim") {
    check_args(a, 1, {"chars"}, "trim");
    return Value(strip(v.to_string(), arg(a, 0, "chars"), true, true));
  }
  if (name == "length" || name == "count") return Value(length(v));
  if (name == "upper") return Value(map_chars(v.to_string(), upper));
  if (name == "lower") return Value(map_chars(v.to_string(), lower));
  if (name == "capitalize") return Value(capitalize(v.to_string()));
  if (name == "title") return Value(title_filter(v.to_string()));
  if (name == "e" || name == "escape") return Value(html_escape(v.to_string()));
  if (name == "default" || name == "d") {
    check_args(a, 2, {"default_value", "boolean"}, name);
    bool boolean = bool_arg(arg(a, 1, "boolean"), false);
    if (v.is_undefined() || (boolean && !v.truthy())) {
      const Value& d = arg(a, 0, "default_value");
      return d.is_undefined() ? Value("") : d;
    }
    return v;
  }
  if (name == "first" || name == "last") {
    Array items = iterate(v);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value::array(iterate(v));
  if (name == "items") return items_of(v);
  if (name == "join") {
    check_args(a, 2, {"d", "attribute"}, "join");
    const Value& sep = arg(a, 0, "d");
    const Value& attr = arg(a, 1, "attribute");
    std::string d = sep.is_undefined() ? "" : sep.to_string();
    std::string out;
    bool first = true;
    for (const auto& item : iterate(v)) {
      if (!first) out += d;
      out += (attr.is_undefined() ? item : getattr_path(item, attr.to_string())).to_string();
      first = false;
    }
    return Value(out);
  }
  if (name == "int") {
    check_args(a, 2, {"default", "base"}, "int");
    const Value& d = arg(a, 0, "default");
    return py_int(v, d.is_undefined() ? Value(int64_t{0}) : d);
  }
  if (name == "float") {
    check_args(a, 1, {"default"}, "float");
    const Value& d = arg(a, 0, "default");
    return py_float(v, d.is_undefined() ? Value(0.0) : d);
  }
  if (name == "abs") {
    if (v.is_int()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
    if (v.is_number()) return Value(std::fabs(v.as_double()));
    throw_failure("bad operand type for abs(): '" + v.type_name() + "'");
  }
  if (name == "round") {
    check_args(a, 2, {"precision", "method"}, "round");
    const Value& m = arg(a, 1, "method");
    return do_round(v, int_arg(arg(a, 0, "precision"), 0, "precision"), m.is_undefined() ? "common" : m.to_string());
  }
  if (name == "replace") {
    check_args(a, 3, {"count"}, "replace");
    return Value(replace(v.to_string(), arg(a, 0, "old").to_string(), arg(a, 1, "new").to_string(),
                         int_arg(arg(a, 2, "count"), -1, "count")));
  }
  if (name == "reverse") {
    if (v.is_string()) return slice(v, Value(), Value(), Value(int64_t{-1}));
    Array items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::array(std::move(items));
  }
  if (name == "unique") {
    Array out;
    for (const auto& item : iterate(v)) {
      bool seen = false;
      for (const auto& o : out) seen = seen || equal(o, item);
      if (!seen) out.push_back(item);
    }
    return Value::array(std::move(out));
  }
  if (name == "sort") return sort(v, a);
  if (name == "dictsort") {
    if (!v.is_object()) throw_failure("dictsort needs a dict, got " + v.type_name());
    Args sa;
    sa.keyword = {{"attribute", Value(arg(a, 1, "by").is_string() && arg(a, 1, "by").as_string() == "value" ? "1" : "0")},
                  {"case_sensitive", arg(a, 0, "case_sensitive")},
                  {"reverse", arg(a, 2, "reverse")}};
    return sort(items_of(v), sa);
  }
  if (name == "select" || name == "reject") return select(v, a, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") return select(v, a, true, name == "selectattr");
  if (name == "map") {
    Array out;
    const Value& attr = arg(a, 99, "attribute");
    if (!attr.is_undefined()) {
      Value def = arg(a, 99, "default");
      for (const auto& item : iterate(v)) {
        Value x = getattr_path(item, attr.to_string());
        out.push_back(x.is_undefined() && !def.is_undefined() ? def : x);
      }
    } else {
      std::string f = str_arg(arg(a, 0, "filter"), "map filter name");
      if (!is_known_filter(f)) throw_failure("unknown filter '" + f + "'");
      Args fa = rest_args(a, 1);
      for (const auto& item : iterate(v)) out.push_back(call_filter(f, item, fa));
    }
    return Value::array(std::move(out));
  }
  if (name == "sum") {
    const Value& attr = arg(a, 0, "attribute");
    Value total = arg(a, 1, "start");
    if (total.is_undefined()) total = Value(int64_t{0});
    for (const auto& item : iterate(v))
      total = binary_op("+", total, attr.is_undefined() ? item : getattr_path(item, attr.to_string()));
    return total;
  }
  if (name == "max" || name == "min") {
    Array items = iterate(v);
    if (items.empty()) return Value();
    Value best = items[0];
    for (const auto& item : items) {
      int c = order(item, best);
      if (name == "max" ? c > 0 : c < 0) best = item;
    }
    return best;
  }
  if (name == "indent") {
    check_args(a, 3, {"width", "first", "blank"}, "indent");
    const Value& w = arg(a, 0, "width");
    return Value(indent(v.to_string(), w.is_undefined() ? Value(int64_t{4}) : w, bool_arg(arg(a, 1, "first"), false),
                        bool_arg(arg(a, 2, "blank"), false)));
  }
  if (name == "wordcount") {  // jinja2 counts runs of \w
    int64_t words = 0;
    bool in_word = false;
    for (char32_t c : decode(v.to_string())) {
      bool w = is_alpha(c) || (c >= '0' && c <= '9') || c == '_';
      if (w && !in_word) ++words;
      in_word = w;
    }
    return Value(words);
  }
  throw_failure("unknown filter '" + name + "'");
}

}  // namespace verl::text::jinja::internal

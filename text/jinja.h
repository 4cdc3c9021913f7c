// A Jinja2 template engine, as much of it as the chat templates of Hugging Face models use
// (Qwen2.5, Qwen3, Llama 3.x, Gemma 3 and their kin): text, {{ }}, {% %}, {# #}, whitespace
// control, if/elif/else, for (loop.*, else, an `if` filter, tuple unpacking, break/continue), set
// (names, tuples, namespace attributes, blocks), macros, the common filters, tests, string and dict
// methods. Semantics follow Python's jinja2 as transformers configures it for apply_chat_template
// (trim_blocks and lstrip_blocks on, no trailing newline, \r\n read as \n, an Undefined that prints
// empty, a tojson that does not escape HTML or non-ASCII): None prints "None", a for-loop iteration
// has its own scope, round() is half to even. One departure, shared with Hugging Face's JS port
// (@huggingface/jinja): an attribute or item of an undefined value is undefined again, where
// jinja2's default Undefined raises (so `messages[0].role` with no messages renders on).
//
// A Template is parsed once and immutable; render() is const and may run on several threads at
// once. Errors (syntax or at render time) are verl::Error (invalid config) whose message starts
// "<name> line L:C:" and names the token, filter, method or test at fault (text/chat_template.h's
// raise_exception() throws one that carries the template's own message).
//
// Not here: autoescape, template inheritance ({% extends %}, {% block %}, {% include %}),
// {% raw %}, call blocks, recursive loops, loop.changed, `%` and str.format string formatting,
// custom filters; case mapping beyond ASCII, Latin-1, Greek and Cyrillic. An unknown tag, filter
// or test is a syntax error that names it; an unknown method fails when called.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace verl::text::jinja {

class Value;
struct Object;
using Array = std::vector<Value>;

// The arguments of a call from a template: positional, then keyword in source order.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};
using Function = std::function<Value(const Args&)>;

// A template value: Python's None, bool, int, float, str, list, dict, jinja2's Undefined and
// namespace, or a callable. Lists, dicts and namespaces are shared on copy (as Python
// references are); the rest are copied.
class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kNamespace, kFunction };

  Value() = default;  // undefined
  Value(bool b) : kind_(Kind::kBool), b_(b) {}
  Value(int v) : kind_(Kind::kInt), i_(v) {}
  Value(int64_t v) : kind_(Kind::kInt), i_(v) {}
  Value(double v) : kind_(Kind::kFloat), f_(v) {}
  Value(std::string s) : kind_(Kind::kString), s_(std::move(s)) {}
  Value(const char* s) : kind_(Kind::kString), s_(s) {}
  static Value none();
  static Value array(Array items = {});
  static Value tuple(Array items);  // a list that prints as Python's tuple: (1, 2)
  static Value object(Object o);
  static Value object();
  static Value ns(Object o);  // jinja2's namespace(): an object whose attributes `set` may assign
  static Value function(Function fn);
  static Value from_json(const nlohmann::json& j);          // dicts in nlohmann::json's (sorted) key order
  static Value from_json(const nlohmann::ordered_json& j);  // dicts in the order given, as Python keeps them

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_function() const { return kind_ == Kind::kFunction; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_double() const { return kind_ == Kind::kInt ? static_cast<double>(i_) : f_; }
  const std::string& as_string() const { return s_; }
  const Array& as_array() const { return *a_; }
  Array& mutable_array() const { return *a_; }
  const Object& as_object() const { return *o_; }  // objects and namespaces
  Object& mutable_object() const { return *o_; }
  const Function& as_function() const { return *fn_; }

  bool truthy() const;
  std::string type_name() const;  // Python's name for the type: 'str', 'dict', 'undefined', ...
  std::string to_string() const;  // Python's str(): None, True, 1.5, ['a', 1], {'k': 'v'}
  std::string repr() const;       // Python's repr()

 private:
  Kind kind_ = Kind::kUndefined;
  bool tuple_ = false;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<Array> a_;
  std::shared_ptr<Object> o_;
  std::shared_ptr<Function> fn_;
};

// A dict that keeps insertion order (as Python's does). Lookup is linear: template dicts are small.
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
};

// Python's json.dumps(v, ensure_ascii=False, indent=indent, separators=..., sort_keys=...), what
// transformers' tojson filter calls. indent < 0: none.
std::string to_json(const Value& v, int indent = -1, bool sort_keys = false,
                    const std::string* item_separator = nullptr, const std::string* key_separator = nullptr);

struct Options {
  bool trim_blocks = true;            // drop the first newline after a block or comment tag
  bool lstrip_blocks = true;          // drop spaces and tabs before a block or comment tag on its line
  bool keep_trailing_newline = false;
};

class Template {
 public:
  // Parses `source`; throws verl::Error naming "<name> line L:C" and the token on a syntax error.
  explicit Template(const std::string& source, Options options = {}, std::string name = "template");
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with these globals (on top of the built-ins: range, namespace, dict, true/false/none).
  std::string render(const std::map<std::string, Value>& globals) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace verl::text::jinja

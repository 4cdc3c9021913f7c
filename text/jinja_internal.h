// The parts of text/jinja.h's engine that its .cc files share and nothing else includes: the AST,
// the failure a filter or operator throws (the renderer adds the template position), and the
// Python semantics of operators, attributes, filters and tests (jinja_builtins.cc).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja.h"

namespace verl::text::jinja::internal {

enum class ExprKind { kLiteral, kName, kAttr, kItem, kSlice, kCall, kFilter, kTest, kUnary, kBinary, kCompare, kCond, kList, kDict };

// One node; which fields mean what depends on kind:
//   kAttr: children[0].name   kItem: children[0][children[1]]   kSlice: children[0][1:2:3] (null = omitted)
//   kCall: children[0](children[1..], kwargs)   kFilter: children[0] | name(children[1..], kwargs)
//   kTest: children[0] is [not] name children[1]?   kUnary: name children[0]   kBinary: children[0] name children[1]
//   kCompare: children[0] ops[0] children[1] ops[1] ...   kCond: children[0] if children[1] else children[2]
//   kList: [children...] (name "tuple" for (a, b))   kDict: {children[0]: children[1], ...}
struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
struct Expr {
  Expr(ExprKind k, int l, int c) : kind(k), line(l), col(c) {}
  ExprKind kind;
  int line;
  int col;
  Value literal;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

enum class StmtKind { kText, kPrint, kIf, kFor, kSet, kSetAttr, kSetBlock, kMacro, kBreak, kContinue, kScope, kFilterBlock };

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;
struct Stmt {
  Stmt(StmtKind k, int l, int c) : kind(k), line(l), col(c) {}
  StmtKind kind;
  int line;
  int col;
  std::string text;                                   // kText
  ExprPtr expr;                                       // kPrint, kSet*, kFor's iterable, kFilterBlock's filter
  std::vector<std::pair<ExprPtr, Body>> branches;     // kIf: if and elifs
  Body body;                                          // kFor, kSetBlock, kMacro, kScope, kFilterBlock
  Body else_body;                                     // kIf, kFor
  std::vector<std::string> targets;                   // kFor, kSet (names); kSetAttr: the namespace
  std::string attr;                                   // kSetAttr: the attribute; kMacro: its name
  ExprPtr filter;                                     // kFor: `if` condition
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro
};

// What a filter, test, method or operator throws; the renderer fills in the position.
struct Failure {
  std::string message;
  int line = 0;
  int col = 0;
  bool raised = false;  // from raise_exception(): the template's own message
};
[[noreturn]] void throw_failure(const std::string& message);

bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);
Value call_filter(const std::string& name, const Value& operand, const Args& args);
bool call_test(const std::string& name, const Value& operand, const Args& args);

Value get_attr(const Value& obj, const std::string& name);  // obj.name: a dict's methods, then its keys
Value get_item(const Value& obj, const Value& key);         // obj[key]
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
Value unary_op(const std::string& op, const Value& v);
Value binary_op(const std::string& op, const Value& l, const Value& r);
bool compare_op(const std::string& op, const Value& l, const Value& r);
Array iterate(const Value& v);  // what `for` walks: list items, dict keys, string characters

void append_utf8(std::string& out, char32_t cp);

}  // namespace verl::text::jinja::internal

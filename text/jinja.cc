// Template of text/jinja.h: a lexer (whitespace control applied to the text tokens), a recursive
// descent parser after jinja2's parser.py (same precedence: `~` binds tighter than `+`, filters and
// tests bind to the unary operand), and a tree-walking renderer. Filters, tests and methods live in
// jinja_builtins.cc.
#include "text/jinja.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <unordered_map>

#include "common/error.h"
#include "text/jinja_internal.h"

namespace verl::text::jinja {

using namespace internal;  // NOLINT: the one internal header of this unit

namespace {

// ---------------------------------------------------------------------------------------------
// Lexer

enum class Tok { kText, kBlockBegin, kBlockEnd, kVarBegin, kVarEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok type;
  std::string value;
  int line = 0;
  int col = 0;
};

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::kText: return "text";
    case Tok::kBlockBegin: return "'{%'";
    case Tok::kBlockEnd: return "'%}'";
    case Tok::kVarBegin: return "'{{'";
    case Tok::kVarEnd: return "'}}'";
    case Tok::kString: return "string '" + t.value + "'";
    case Tok::kEof: return "end of template";
    default: return "'" + t.value + "'";
  }
}

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

class Lexer {
 public:
  Lexer(const std::string& src, const Options& opt, const std::string& name) : src_(src), opt_(opt), name_(name) {
    // jinja2 reads \r\n and \r as \n (newline_sequence), in text and string literals alike.
    if (src_.find('\r') != std::string::npos) {
      std::string normalized;
      for (size_t i = 0; i < src_.size(); ++i) {
        if (src_[i] != '\r') normalized += src_[i];
        else if (i + 1 >= src_.size() || src_[i + 1] != '\n') normalized += '\n';
      }
      src_ = std::move(normalized);
    }
    if (!opt_.keep_trailing_newline && !src_.empty() && src_.back() == '\n') {
      src_.pop_back();
    }
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    enum class Lead { kNone, kNewline, kAll } lead = Lead::kNone;
    while (pos <= src_.size()) {
      size_t start = find_tag(pos);
      std::string text = src_.substr(pos, (start == std::string::npos ? src_.size() : start) - pos);
      size_t begin = 0;
      if (lead == Lead::kAll) {
        while (begin < text.size() && is_ascii_space(text[begin])) ++begin;
      } else if (lead == Lead::kNewline) {
        if (text.compare(0, 1, "\n") == 0) begin = 1;
      }
      size_t end = text.size();
      if (start != std::string::npos) {
        char kind = src_[start + 1];
        char modifier = start + 2 < src_.size() ? src_[start + 2] : '\0';
        if (modifier == '-') {
          while (end > begin && is_ascii_space(text[end - 1])) --end;
        } else if (opt_.lstrip_blocks && (kind == '%' || kind == '#') && modifier != '+') {
          size_t l_pos = text.rfind('\n');
          l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
          bool line_start = l_pos > 0 || pos == 0 || src_[pos - 1] == '\n';
          if (line_start && text.find_first_not_of(" \t", l_pos) == std::string::npos) end = std::max(begin, l_pos);
        }
      }
      if (end > begin) emit(Tok::kText, text.substr(begin, end - begin), pos + begin);
      if (start == std::string::npos) break;
      lead = Lead::kNone;

      char kind = src_[start + 1];
      char modifier = start + 2 < src_.size() ? src_[start + 2] : '\0';
      pos = start + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
      if (kind == '#') {
        size_t close = src_.find("#}", pos);
        if (close == std::string::npos) fail(start, "unclosed comment '{#'");
        bool strip = close > pos && src_[close - 1] == '-';
        pos = close + 2;
        lead = strip ? Lead::kAll : (opt_.trim_blocks ? Lead::kNewline : Lead::kNone);
        continue;
      }
      bool block = kind == '%';
      emit(block ? Tok::kBlockBegin : Tok::kVarBegin, block ? "{%" : "{{", start);
      char closing = lex_tag(pos, block, start);
      if (closing == '-') lead = Lead::kAll;
      else if (block && closing != '+' && opt_.trim_blocks) lead = Lead::kNewline;
    }
    emit(Tok::kEof, "", src_.size());
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos && i + 1 < src_.size(); i = src_.find('{', i + 1)) {
      char c = src_[i + 1];
      if (c == '{' || c == '%' || c == '#') return i;
    }
    return std::string::npos;
  }

  void emit(Tok type, std::string value, size_t at) {
    auto [line, col] = where(at);
    tokens_.push_back(Token{type, std::move(value), line, col});
  }

  std::pair<int, int> where(size_t at) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), at);
    size_t line = static_cast<size_t>(it - line_starts_.begin());
    return {static_cast<int>(line), static_cast<int>(at - line_starts_[line - 1] + 1)};
  }

  [[noreturn]] void fail(size_t at, const std::string& what) const {
    auto [line, col] = where(at);
    throw Error(ExitCode::kInvalidConfig, name_ + " line " + std::to_string(line) + ":" + std::to_string(col) + ": " + what,
                "the template has a Jinja syntax error there");
  }

  // Lexes the inside of a tag from pos up to its end; returns the end's modifier ('-', '+' or 0).
  char lex_tag(size_t& pos, bool block, size_t opened_at) {
    int depth = 0;
    const char* close = block ? "%}" : "}}";
    while (true) {
      while (pos < src_.size() && is_ascii_space(src_[pos])) ++pos;
      if (pos >= src_.size()) fail(opened_at, std::string("unclosed tag '") + (block ? "{%" : "{{") + "'");
      if (depth == 0) {
        for (char mod : {'-', '+'}) {
          if (src_[pos] == mod && src_.compare(pos + 1, 2, close) == 0 && (mod == '-' || block)) {
            emit(block ? Tok::kBlockEnd : Tok::kVarEnd, close, pos);
            pos += 3;
            return mod;
          }
        }
        if (src_.compare(pos, 2, close) == 0) {
          emit(block ? Tok::kBlockEnd : Tok::kVarEnd, close, pos);
          pos += 2;
          return '\0';
        }
      }
      char c = src_[pos];
      if (c == '\'' || c == '"') {
        lex_string(pos);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        lex_number(pos);
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t s = pos;
        while (pos < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[pos])) || src_[pos] == '_')) ++pos;
        emit(Tok::kName, src_.substr(s, pos - s), s);
      } else {
        static const char* kTwo[] = {"**", "//", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* t : kTwo)
          if (src_.compare(pos, 2, t) == 0) op = t;
        if (op.empty() && std::string("+-*/%~<>=()[]{}.,:|").find(c) != std::string::npos) op = std::string(1, c);
        if (op.empty()) fail(pos, std::string("unexpected character '") + c + "'");
        if (op == "(" || op == "[" || op == "{") ++depth;
        if (op == ")" || op == "]" || op == "}") --depth;
        emit(Tok::kOp, op, pos);
        pos += op.size();
      }
    }
  }

  void lex_string(size_t& pos) {
    size_t start = pos;
    char quote = src_[pos++];
    std::string out;
    while (true) {
      if (pos >= src_.size()) fail(start, "unterminated string literal");
      char c = src_[pos++];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= src_.size()) fail(start, "unterminated string literal");
      char e = src_[pos++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '0': out += '\0'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;  // a line continuation
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          std::string hex = src_.substr(pos, n);
          if (hex.size() != n || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
            fail(pos - 2, std::string("invalid escape '\\") + e + hex + "'");
          append_utf8(out, static_cast<char32_t>(std::stoul(hex, nullptr, 16)));
          pos += n;
          break;
        }
        default:  // Python keeps an unknown escape as written
          out += '\\';
          out += e;
      }
    }
    emit(Tok::kString, out, start);
  }

  void lex_number(size_t& pos) {
    size_t start = pos;
    auto digits = [&] {
      while (pos < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[pos])) || src_[pos] == '_')) ++pos;
    };
    digits();
    bool is_float = false;
    if (pos + 1 < src_.size() && src_[pos] == '.' && std::isdigit(static_cast<unsigned char>(src_[pos + 1]))) {
      is_float = true;
      ++pos;
      digits();
    }
    if (pos < src_.size() && (src_[pos] == 'e' || src_[pos] == 'E')) {
      size_t save = pos++;
      if (pos < src_.size() && (src_[pos] == '+' || src_[pos] == '-')) ++pos;
      if (pos < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos]))) {
        is_float = true;
        digits();
      } else {
        pos = save;
      }
    }
    std::string text = src_.substr(start, pos - start);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    emit(is_float ? Tok::kFloat : Tok::kInt, text, start);
  }

  std::string src_;
  const Options& opt_;
  const std::string& name_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

// ---------------------------------------------------------------------------------------------
// Parser

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& name) : t_(std::move(tokens)), name_(name) {}

  // The parser, the renderer and the tree's destructor recurse once per level of nesting, so a
  // template nested deeper than a real one ever is would overflow the stack (a SIGSEGV found by
  // tests/fuzz/chat_template_fuzz.cc: 3000 '(' or 'not' or nested {% if %}). A tag of more than
  // kMaxTagTokens tokens (an expression's depth is at most its token count) and blocks nested
  // deeper than kMaxBlockDepth are syntax errors. Real templates stay far below both (the
  // largest tag of Qwen3's, Llama 3's and Gemma 3's has under 100 tokens; jinja2 itself, compiled to
  // Python, stops at 20 nested loops).
  static constexpr size_t kMaxTagTokens = 1000;
  static constexpr int kMaxBlockDepth = 100;

  Body parse_template() {
    size_t open = 0;
    for (size_t i = 0; i < t_.size(); ++i) {
      if (t_[i].type == Tok::kVarBegin || t_[i].type == Tok::kBlockBegin) open = i;
      if ((t_[i].type == Tok::kVarEnd || t_[i].type == Tok::kBlockEnd || t_[i].type == Tok::kEof) &&
          i - open > kMaxTagTokens && (t_[open].type == Tok::kVarBegin || t_[open].type == Tok::kBlockBegin))
        fail(t_[open], "a tag of " + std::to_string(i - open - 1) + " tokens (at most " + std::to_string(kMaxTagTokens) +
                           ": nesting that deep would overflow the renderer)");
      if (t_[i].type == Tok::kVarEnd || t_[i].type == Tok::kBlockEnd) open = i;
    }
    Body body = parse_body({});
    if (peek().type != Tok::kEof) {
      // parse_body stops only at an end tag it was asked for; here none was: name it.
      fail(peek(1), "unexpected '" + peek(1).value + "'");
    }
    return body;
  }

 private:
  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool at_op(const char* op) const { return peek().type == Tok::kOp && peek().value == op; }
  bool at_name(const char* n, size_t ahead = 0) const { return peek(ahead).type == Tok::kName && peek(ahead).value == n; }
  bool skip_op(const char* op) {
    if (!at_op(op)) return false;
    ++i_;
    return true;
  }
  bool skip_name(const char* n) {
    if (!at_name(n)) return false;
    ++i_;
    return true;
  }

  [[noreturn]] void fail(const Token& at, const std::string& what) const {
    throw Error(ExitCode::kInvalidConfig,
                name_ + " line " + std::to_string(at.line) + ":" + std::to_string(at.col) + ": " + what,
                "the template has a Jinja syntax error there");
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(peek(), std::string("expected '") + op + "', got " + describe(peek()));
  }
  void expect(Tok type, const char* what) {
    if (peek().type != type) fail(peek(), std::string("expected ") + what + ", got " + describe(peek()));
    ++i_;
  }
  std::string expect_name() {
    if (peek().type != Tok::kName) fail(peek(), "expected a name, got " + describe(peek()));
    return next().value;
  }

  // Parses statements until `{% <one of end_tags>` (left unconsumed) or the end of the template.
  Body parse_body(const std::set<std::string>& end_tags) {
    struct Nest {
      int& depth;
      ~Nest() { --depth; }
    } nest{++body_depth_};
    if (body_depth_ > kMaxBlockDepth)
      fail(peek(), "blocks nested deeper than " + std::to_string(kMaxBlockDepth) + " levels");
    Body body;
    while (true) {
      const Token& tok = peek();
      if (tok.type == Tok::kEof) {
        if (!end_tags.empty()) fail(tok, "unexpected end of template, expected '" + *end_tags.begin() + "'");
        return body;
      }
      if (tok.type == Tok::kText) {
        auto s = std::make_unique<Stmt>(StmtKind::kText, tok.line, tok.col);
        s->text = next().value;
        body.push_back(std::move(s));
      } else if (tok.type == Tok::kVarBegin) {
        next();
        auto s = std::make_unique<Stmt>(StmtKind::kPrint, tok.line, tok.col);
        s->expr = parse_tuple();
        expect(Tok::kVarEnd, "'}}'");
        body.push_back(std::move(s));
      } else if (tok.type == Tok::kBlockBegin) {
        const Token& name = peek(1);
        if (name.type == Tok::kName && end_tags.count(name.value)) return body;
        next();
        body.push_back(parse_statement());
      } else {
        fail(tok, "unexpected " + describe(tok));
      }
    }
  }

  // Consumes `{% name` ... `%}` of an end or middle tag.
  void end_tag(const char* name) {
    expect(Tok::kBlockBegin, "'{%'");
    if (!skip_name(name)) fail(peek(), std::string("expected '") + name + "', got " + describe(peek()));
    expect(Tok::kBlockEnd, "'%}'");
  }

  StmtPtr parse_statement() {
    const Token& kw = peek();
    if (kw.type != Tok::kName) fail(kw, "expected a tag name, got " + describe(kw));
    std::string tag = next().value;
    auto s = std::make_unique<Stmt>(StmtKind::kText, kw.line, kw.col);
    if (tag == "if") {
      s->kind = StmtKind::kIf;
      ExprPtr cond = parse_expression();
      expect(Tok::kBlockEnd, "'%}'");
      while (true) {
        Body body = parse_body({"elif", "else", "endif"});
        s->branches.emplace_back(std::move(cond), std::move(body));
        next();  // {%
        std::string which = next().value;
        if (which == "elif") {
          cond = parse_expression();
          expect(Tok::kBlockEnd, "'%}'");
          continue;
        }
        expect(Tok::kBlockEnd, "'%}'");
        if (which == "else") {
          s->else_body = parse_body({"endif"});
          end_tag("endif");
        }
        break;
      }
    } else if (tag == "for") {
      s->kind = StmtKind::kFor;
      bool paren = skip_op("(");
      s->targets.push_back(expect_name());
      while (skip_op(",")) {
        if (peek().type != Tok::kName) break;
        s->targets.push_back(expect_name());
      }
      if (paren) expect_op(")");
      if (!skip_name("in")) fail(peek(), "expected 'in', got " + describe(peek()));
      s->expr = parse_tuple(/*with_condexpr=*/false);
      if (skip_name("if")) s->filter = parse_expression();
      if (at_name("recursive")) fail(peek(), "recursive for loops are not supported");
      expect(Tok::kBlockEnd, "'%}'");
      s->body = parse_body({"else", "endfor"});
      if (at_name("else", 1)) {
        end_tag("else");
        s->else_body = parse_body({"endfor"});
      }
      end_tag("endfor");
    } else if (tag == "set") {
      s->targets.push_back(expect_name());
      if (skip_op(".")) {
        s->kind = StmtKind::kSetAttr;
        s->attr = expect_name();
      } else {
        s->kind = StmtKind::kSet;
        while (skip_op(",")) s->targets.push_back(expect_name());
      }
      if (skip_op("=")) {
        s->expr = parse_tuple();
        expect(Tok::kBlockEnd, "'%}'");
      } else {
        if (s->kind != StmtKind::kSet || s->targets.size() != 1) fail(peek(), "expected '=', got " + describe(peek()));
        s->kind = StmtKind::kSetBlock;
        expect(Tok::kBlockEnd, "'%}'");
        s->body = parse_body({"endset"});
        end_tag("endset");
      }
    } else if (tag == "macro") {
      s->kind = StmtKind::kMacro;
      s->attr = expect_name();
      expect_op("(");
      while (!at_op(")")) {
        std::string param = expect_name();
        ExprPtr def;
        if (skip_op("=")) def = parse_expression();
        s->params.emplace_back(param, std::move(def));
        if (!skip_op(",")) break;
      }
      expect_op(")");
      expect(Tok::kBlockEnd, "'%}'");
      s->body = parse_body({"endmacro"});
      end_tag("endmacro");
    } else if (tag == "break" || tag == "continue") {
      s->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      expect(Tok::kBlockEnd, "'%}'");
    } else if (tag == "generation") {
      // transformers' AssistantTracker tag: marks assistant text; renders its body as is.
      s->kind = StmtKind::kScope;
      expect(Tok::kBlockEnd, "'%}'");
      s->body = parse_body({"endgeneration"});
      end_tag("endgeneration");
    } else if (tag == "filter") {
      s->kind = StmtKind::kFilterBlock;
      auto f = std::make_unique<Expr>(ExprKind::kFilter, kw.line, kw.col);
      f->children.push_back(nullptr);  // the body's text
      parse_filter_call(*f);
      s->expr = std::move(f);
      expect(Tok::kBlockEnd, "'%}'");
      s->body = parse_body({"endfilter"});
      end_tag("endfilter");
    } else {
      fail(kw, "unknown tag '" + tag + "'");
    }
    return s;
  }

  // jinja2's parse_tuple: `a, b` without parentheses is a tuple (in {{ }}, set and for).
  ExprPtr parse_tuple(bool with_condexpr = true) {
    const Token& at = peek();
    ExprPtr first = with_condexpr ? parse_expression() : parse_or();
    if (!at_op(",")) return first;
    auto tuple = std::make_unique<Expr>(ExprKind::kList, at.line, at.col);
    tuple->name = "tuple";
    tuple->children.push_back(std::move(first));
    while (skip_op(",")) {
      if (peek().type == Tok::kBlockEnd || peek().type == Tok::kVarEnd || at_op(")") || at_name("if")) break;
      tuple->children.push_back(with_condexpr ? parse_expression() : parse_or());
    }
    return tuple;
  }

  ExprPtr parse_expression() {
    ExprPtr expr = parse_or();
    while (at_name("if")) {
      const Token& at = next();
      auto cond = std::make_unique<Expr>(ExprKind::kCond, at.line, at.col);
      cond->children.push_back(std::move(expr));
      cond->children.push_back(parse_or());
      cond->children.push_back(skip_name("else") ? parse_expression() : nullptr);
      expr = std::move(cond);
    }
    return expr;
  }

  ExprPtr binary(const Token& at, std::string op, ExprPtr l, ExprPtr r) {
    auto e = std::make_unique<Expr>(ExprKind::kBinary, at.line, at.col);
    e->name = std::move(op);
    e->children.push_back(std::move(l));
    e->children.push_back(std::move(r));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (at_name("or")) {
      const Token& at = next();
      l = binary(at, "or", std::move(l), parse_and());
    }
    return l;
  }

  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (at_name("and")) {
      const Token& at = next();
      l = binary(at, "and", std::move(l), parse_not());
    }
    return l;
  }

  ExprPtr parse_not() {
    if (at_name("not")) {
      const Token& at = next();
      auto e = std::make_unique<Expr>(ExprKind::kUnary, at.line, at.col);
      e->name = "not";
      e->children.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const Token& at = peek();
    ExprPtr first = parse_math1();
    std::unique_ptr<Expr> cmp;
    while (true) {
      std::string op;
      if (peek().type == Tok::kOp &&
          (peek().value == "==" || peek().value == "!=" || peek().value == "<" || peek().value == ">" ||
           peek().value == "<=" || peek().value == ">=")) {
        op = next().value;
      } else if (at_name("in")) {
        next();
        op = "in";
      } else if (at_name("not") && at_name("in", 1)) {
        i_ += 2;
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = std::make_unique<Expr>(ExprKind::kCompare, at.line, at.col);
        cmp->children.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->children.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (at_op("+") || at_op("-")) {
      const Token& at = next();
      l = binary(at, at.value, std::move(l), parse_concat());
    }
    return l;
  }

  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (at_op("~")) {
      const Token& at = next();
      l = binary(at, "~", std::move(l), parse_math2());
    }
    return l;
  }

  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const Token& at = next();
      l = binary(at, at.value, std::move(l), parse_pow());
    }
    return l;
  }

  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (at_op("**")) {
      const Token& at = next();
      l = binary(at, "**", std::move(l), parse_unary(true));
    }
    return l;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr node;
    if (at_op("-") || at_op("+")) {
      const Token& at = next();
      node = std::make_unique<Expr>(ExprKind::kUnary, at.line, at.col);
      node->name = at.value;
      node->children.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& tok = next();
    switch (tok.type) {
      case Tok::kName: {
        const std::string& n = tok.value;
        if (n == "true" || n == "True") return literal(tok, Value(true));
        if (n == "false" || n == "False") return literal(tok, Value(false));
        if (n == "none" || n == "None") return literal(tok, Value::none());
        auto e = std::make_unique<Expr>(ExprKind::kName, tok.line, tok.col);
        e->name = n;
        return e;
      }
      case Tok::kString: {
        std::string s = tok.value;
        while (peek().type == Tok::kString) s += next().value;
        return literal(tok, Value(s));
      }
      case Tok::kInt:
        try {
          return literal(tok, Value(static_cast<int64_t>(std::stoll(tok.value))));
        } catch (const std::out_of_range&) {
          fail(tok, "integer literal out of range: " + tok.value);
        }
      case Tok::kFloat:
        return literal(tok, Value(std::stod(tok.value)));
      case Tok::kOp:
        if (tok.value == "(") {
          if (skip_op(")")) {
            auto empty = std::make_unique<Expr>(ExprKind::kList, tok.line, tok.col);
            empty->name = "tuple";
            return empty;
          }
          ExprPtr e = parse_expression();
          if (at_op(",")) {
            auto tuple = std::make_unique<Expr>(ExprKind::kList, tok.line, tok.col);
            tuple->name = "tuple";
            tuple->children.push_back(std::move(e));
            while (skip_op(",") && !at_op(")")) tuple->children.push_back(parse_expression());
            e = std::move(tuple);
          }
          expect_op(")");
          return e;
        }
        if (tok.value == "[") {
          auto list = std::make_unique<Expr>(ExprKind::kList, tok.line, tok.col);
          while (!at_op("]")) {
            list->children.push_back(parse_expression());
            if (!skip_op(",")) break;
          }
          expect_op("]");
          return list;
        }
        if (tok.value == "{") {
          auto dict = std::make_unique<Expr>(ExprKind::kDict, tok.line, tok.col);
          while (!at_op("}")) {
            dict->children.push_back(parse_expression());
            expect_op(":");
            dict->children.push_back(parse_expression());
            if (!skip_op(",")) break;
          }
          expect_op("}");
          return dict;
        }
        break;
      default:
        break;
    }
    fail(tok, "unexpected " + describe(tok));
  }

  ExprPtr literal(const Token& tok, Value v) {
    auto e = std::make_unique<Expr>(ExprKind::kLiteral, tok.line, tok.col);
    e->literal = std::move(v);
    return e;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      const Token& at = peek();
      if (skip_op(".")) {
        const Token& attr = next();
        if (attr.type == Tok::kName) {
          auto e = std::make_unique<Expr>(ExprKind::kAttr, attr.line, attr.col);
          e->name = attr.value;
          e->children.push_back(std::move(node));
          node = std::move(e);
        } else if (attr.type == Tok::kInt) {
          auto e = std::make_unique<Expr>(ExprKind::kItem, attr.line, attr.col);
          e->children.push_back(std::move(node));
          e->children.push_back(literal(attr, Value(static_cast<int64_t>(std::stoll(attr.value)))));
          node = std::move(e);
        } else {
          fail(attr, "expected an attribute name after '.', got " + describe(attr));
        }
      } else if (skip_op("[")) {
        node = parse_subscript(at, std::move(node));
      } else if (at_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(const Token& at, ExprPtr obj) {
    ExprPtr parts[3];
    bool slice = false;
    int part = 0;
    while (true) {
      if (at_op("]")) break;
      if (skip_op(":")) {
        slice = true;
        if (++part > 2) fail(peek(), "too many ':' in a slice");
        continue;
      }
      if (parts[part]) fail(peek(), "expected ']' or ':', got " + describe(peek()));
      parts[part] = parse_expression();
    }
    expect_op("]");
    if (!slice && !parts[0]) fail(at, "empty subscript");
    auto e = std::make_unique<Expr>(slice ? ExprKind::kSlice : ExprKind::kItem, at.line, at.col);
    e->children.push_back(std::move(obj));
    if (slice) {
      for (auto& p : parts) e->children.push_back(std::move(p));
    } else {
      e->children.push_back(std::move(parts[0]));
    }
    return e;
  }

  // `(` args `)` into e->children (after what is already there) and e->kwargs.
  void parse_args(Expr& e) {
    expect_op("(");
    while (!at_op(")")) {
      if (peek().type == Tok::kName && peek(1).type == Tok::kOp && peek(1).value == "=") {
        std::string key = next().value;
        next();
        e.kwargs.emplace_back(key, parse_expression());
      } else {
        if (!e.kwargs.empty()) fail(peek(), "positional argument follows keyword argument");
        e.children.push_back(parse_expression());
      }
      if (!skip_op(",")) break;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = std::make_unique<Expr>(ExprKind::kCall, callee->line, callee->col);
    e->children.push_back(std::move(callee));
    parse_args(*e);
    return e;
  }

  void parse_filter_call(Expr& f) {
    const Token& name = peek();
    f.name = expect_name();
    while (skip_op(".")) f.name += "." + expect_name();
    if (!is_known_filter(f.name)) fail(name, "unknown filter '" + f.name + "'");
    f.line = name.line;
    f.col = name.col;
    if (at_op("(")) parse_args(f);
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (at_op("|")) {
        next();
        auto f = std::make_unique<Expr>(ExprKind::kFilter, 0, 0);
        f->children.push_back(std::move(node));
        parse_filter_call(*f);
        node = std::move(f);
      } else if (at_name("is")) {
        next();
        bool negated = skip_name("not");
        const Token& name = peek();
        auto t = std::make_unique<Expr>(ExprKind::kTest, name.line, name.col);
        t->negated = negated;
        t->name = expect_name();
        if (!is_known_test(t->name)) fail(name, "unknown test '" + t->name + "'");
        t->children.push_back(std::move(node));
        const Token& c = peek();
        bool arg = c.type == Tok::kName || c.type == Tok::kString || c.type == Tok::kInt || c.type == Tok::kFloat ||
                   (c.type == Tok::kOp && (c.value == "(" || c.value == "[" || c.value == "{"));
        if (arg && !(c.type == Tok::kName && (c.value == "else" || c.value == "or" || c.value == "and" ||
                                              c.value == "if" || c.value == "in" || c.value == "is" ||
                                              c.value == "not"))) {
          t->children.push_back(parse_postfix(parse_primary()));
        }
        node = std::move(t);
      } else if (at_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int body_depth_ = 0;
  const std::string& name_;
};

// ---------------------------------------------------------------------------------------------
// Renderer

struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
};
using FramePtr = std::shared_ptr<Frame>;

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  explicit Renderer(const std::string& name) : name_(name) {}
  // A macro holds the frame it was defined in, and that frame holds the macro: a cycle of
  // shared_ptrs. Once the render is over nothing can call a macro, so emptying those frames frees
  // them (LeakSanitizer found the leak, one per macro definition).
  ~Renderer() {
    for (const auto& f : macro_frames_) f->vars.clear();
  }
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  void run(const Body& body, const FramePtr& frame, std::string& out) {
    try {
      if (exec(body, frame, out) != Flow::kNormal) fail_at(0, 0, "'break' or 'continue' outside a loop");
    } catch (const Failure& f) {
      std::string where = name_ + " line " + std::to_string(f.line) + ":" + std::to_string(f.col);
      if (f.raised)
        throw Error(ExitCode::kInvalidConfig, name_ + " raised an exception: " + f.message + " (" + where + ")",
                    "the template rejects these messages (see its raise_exception calls)");
      throw Error(ExitCode::kInvalidConfig, where + ": " + f.message,
                  "the template cannot render these messages there");
    }
  }

 private:
  [[noreturn]] static void fail_at(int line, int col, const std::string& msg) {
    Failure f;
    f.message = msg;
    f.line = line;
    f.col = col;
    throw f;
  }

  static Value lookup(const FramePtr& frame, const std::string& name) {
    for (Frame* f = frame.get(); f; f = f->parent.get()) {
      auto it = f->vars.find(name);
      if (it != f->vars.end()) return it->second;
    }
    return Value();
  }

  Flow exec(const Body& body, const FramePtr& frame, std::string& out) {
    for (const auto& s : body) {
      Flow flow;
      try {
        flow = exec_one(*s, frame, out);
      } catch (Failure& f) {
        if (f.line == 0) {
          f.line = s->line;
          f.col = s->col;
        }
        throw;
      }
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow exec_one(const Stmt& s, const FramePtr& frame, std::string& out) {
    switch (s.kind) {
      case StmtKind::kText:
        out += s.text;
        return Flow::kNormal;
      case StmtKind::kPrint:
        out += eval(*s.expr, frame).to_string();
        return Flow::kNormal;
      case StmtKind::kIf:
        for (const auto& [cond, body] : s.branches)
          if (eval(*cond, frame).truthy()) return exec(body, frame, out);
        return exec(s.else_body, frame, out);
      case StmtKind::kFor:
        return exec_for(s, frame, out);
      case StmtKind::kSet:
        assign(s.targets, eval(*s.expr, frame), *frame);
        return Flow::kNormal;
      case StmtKind::kSetAttr: {
        Value target = lookup(frame, s.targets[0]);
        if (!target.is_namespace()) fail_at(s.line, s.col, "cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
        target.mutable_object().set(s.attr, eval(*s.expr, frame));
        return Flow::kNormal;
      }
      case StmtKind::kSetBlock: {
        std::string text;
        auto inner = std::make_shared<Frame>(Frame{{}, frame});
        exec(s.body, inner, text);
        frame->vars[s.targets[0]] = Value(text);
        return Flow::kNormal;
      }
      case StmtKind::kMacro:
        frame->vars[s.attr] = make_macro(s, frame);
        return Flow::kNormal;
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
      case StmtKind::kScope:
        return exec(s.body, frame, out);
      case StmtKind::kFilterBlock: {
        std::string text;
        Flow flow = exec(s.body, frame, text);
        out += apply_filter(*s.expr, Value(text), frame).to_string();
        return flow;
      }
    }
    return Flow::kNormal;
  }

  static void assign(const std::vector<std::string>& targets, const Value& v, Frame& frame) {
    if (targets.size() == 1) {
      frame.vars[targets[0]] = v;
      return;
    }
    Array items = iterate(v);
    if (items.size() != targets.size())
      fail_at(0, 0, std::string("too ") + (items.size() < targets.size() ? "few" : "many") + " values to unpack (expected " +
                        std::to_string(targets.size()) + ", got " + std::to_string(items.size()) + ")");
    for (size_t i = 0; i < targets.size(); ++i) frame.vars[targets[i]] = items[i];
  }

  // Each iteration gets a fresh scope, as in jinja2: a `set` in the body is gone by the next
  // iteration and after the loop (a namespace carries state across).
  Flow exec_for(const Stmt& s, const FramePtr& frame, std::string& out) {
    Array candidates = iterate(eval(*s.expr, frame));
    Array items;
    if (s.filter) {
      for (const auto& c : candidates) {
        auto scope = std::make_shared<Frame>(Frame{{}, frame});
        assign(s.targets, c, *scope);
        if (eval(*s.filter, scope).truthy()) items.push_back(c);
      }
    } else {
      items = std::move(candidates);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      auto scope = std::make_shared<Frame>(Frame{{}, frame});
      Object loop;
      loop.items = {{"index", Value(i + 1)},
                    {"index0", Value(i)},
                    {"revindex", Value(n - i)},
                    {"revindex0", Value(n - i - 1)},
                    {"first", Value(i == 0)},
                    {"last", Value(i == n - 1)},
                    {"length", Value(n)},
                    {"depth", Value(1)},
                    {"depth0", Value(0)},
                    {"previtem", i > 0 ? items[i - 1] : Value()},
                    {"nextitem", i + 1 < n ? items[i + 1] : Value()}};
      loop.items.emplace_back("cycle", Value::function([i](const Args& a) {
                                if (a.positional.empty()) throw_failure("no items for cycling given");
                                return a.positional[static_cast<size_t>(i) % a.positional.size()];
                              }));
      scope->vars["loop"] = Value::object(std::move(loop));
      assign(s.targets, items[i], *scope);
      if (exec(s.body, scope, out) == Flow::kBreak) break;
    }
    if (items.empty()) return exec(s.else_body, std::make_shared<Frame>(Frame{{}, frame}), out);
    return Flow::kNormal;
  }

  Value make_macro(const Stmt& s, const FramePtr& defined_in) {
    const Stmt* macro = &s;
    macro_frames_.push_back(defined_in);
    return Value::function([this, macro, defined_in](const Args& args) {
      constexpr int kMaxDepth = 100;  // Python's recursion limit would stop a runaway macro too
      if (macro_depth_ >= kMaxDepth) throw_failure("macro '" + macro->attr + "' recursed too deep");
      struct Depth {
        int& d;
        explicit Depth(int& x) : d(++x) {}
        ~Depth() { --d; }
      } depth(macro_depth_);
      auto scope = std::make_shared<Frame>(Frame{{}, defined_in});
      const auto& params = macro->params;
      if (args.positional.size() > params.size())
        throw_failure("macro '" + macro->attr + "' takes not more than " + std::to_string(params.size()) + " argument(s)");
      for (size_t i = 0; i < params.size(); ++i) {
        if (i < args.positional.size()) scope->vars[params[i].first] = args.positional[i];
      }
      for (const auto& [key, v] : args.keyword) {
        bool known = false;
        for (const auto& p : params) known = known || p.first == key;
        if (!known) throw_failure("macro '" + macro->attr + "' takes no keyword argument '" + key + "'");
        scope->vars[key] = v;
      }
      for (const auto& [param, def] : params) {
        if (scope->vars.count(param)) continue;
        scope->vars[param] = def ? eval(*def, scope) : Value();
      }
      std::string text;
      exec(macro->body, scope, text);
      return Value(text);
    });
  }

  Value eval(const Expr& e, const FramePtr& frame) {
    try {
      return eval_inner(e, frame);
    } catch (Failure& f) {
      if (f.line == 0) {
        f.line = e.line;
        f.col = e.col;
      }
      throw;
    }
  }

  Args eval_args(const Expr& e, size_t first, const FramePtr& frame) {
    Args args;
    for (size_t i = first; i < e.children.size(); ++i) args.positional.push_back(eval(*e.children[i], frame));
    for (const auto& [k, v] : e.kwargs) args.keyword.emplace_back(k, eval(*v, frame));
    return args;
  }

  Value apply_filter(const Expr& f, const Value& operand, const FramePtr& frame) {
    Args args = eval_args(f, 1, frame);
    return call_filter(f.name, operand, args);
  }

  Value eval_inner(const Expr& e, const FramePtr& frame) {
    switch (e.kind) {
      case ExprKind::kLiteral:
        return e.literal;
      case ExprKind::kName:
        return lookup(frame, e.name);
      case ExprKind::kAttr:
        return get_attr(eval(*e.children[0], frame), e.name);
      case ExprKind::kItem:
        return get_item(eval(*e.children[0], frame), eval(*e.children[1], frame));
      case ExprKind::kSlice: {
        Value obj = eval(*e.children[0], frame);
        Value parts[3];
        for (int i = 0; i < 3; ++i)
          if (e.children[1 + i]) parts[i] = eval(*e.children[1 + i], frame);
        return slice(obj, parts[0], parts[1], parts[2]);
      }
      case ExprKind::kCall: {
        const Expr& callee = *e.children[0];
        Value fn = eval(callee, frame);
        Args args = eval_args(e, 1, frame);
        if (!fn.is_function()) {
          if (fn.is_undefined()) {
            if (callee.kind == ExprKind::kName) fail_at(e.line, e.col, "'" + callee.name + "' is undefined");
            if (callee.kind == ExprKind::kAttr) {
              Value obj = eval(*callee.children[0], frame);
              fail_at(callee.line, callee.col, "unknown method '" + callee.name + "' of " + obj.type_name());
            }
          }
          fail_at(e.line, e.col, "'" + fn.type_name() + "' object is not callable");
        }
        return fn.as_function()(args);
      }
      case ExprKind::kFilter:
        return apply_filter(e, eval(*e.children[0], frame), frame);
      case ExprKind::kTest: {
        Value operand = eval(*e.children[0], frame);
        Args args = eval_args(e, 1, frame);
        bool r = call_test(e.name, operand, args);
        return Value(e.negated ? !r : r);
      }
      case ExprKind::kUnary: {
        Value v = eval(*e.children[0], frame);
        if (e.name == "not") return Value(!v.truthy());
        return unary_op(e.name, v);
      }
      case ExprKind::kBinary: {
        Value l = eval(*e.children[0], frame);
        if (e.name == "and") return l.truthy() ? eval(*e.children[1], frame) : l;
        if (e.name == "or") return l.truthy() ? l : eval(*e.children[1], frame);
        return binary_op(e.name, l, eval(*e.children[1], frame));
      }
      case ExprKind::kCompare: {
        Value l = eval(*e.children[0], frame);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value r = eval(*e.children[i + 1], frame);
          if (!compare_op(e.ops[i], l, r)) return Value(false);
          l = std::move(r);
        }
        return Value(true);
      }
      case ExprKind::kCond: {
        if (eval(*e.children[1], frame).truthy()) return eval(*e.children[0], frame);
        return e.children[2] ? eval(*e.children[2], frame) : Value();
      }
      case ExprKind::kList: {
        Array items;
        for (const auto& c : e.children) items.push_back(eval(*c, frame));
        return e.name == "tuple" ? Value::tuple(std::move(items)) : Value::array(std::move(items));
      }
      case ExprKind::kDict: {
        Object o;
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
          Value k = eval(*e.children[i], frame);
          if (!k.is_string()) fail_at(e.children[i]->line, e.children[i]->col, "dict keys must be strings here");
          o.set(k.as_string(), eval(*e.children[i + 1], frame));
        }
        return Value::object(std::move(o));
      }
    }
    return Value();
  }

  const std::string& name_;
  int macro_depth_ = 0;
  std::vector<FramePtr> macro_frames_;  // frames that hold a macro (see ~Renderer)
};

Value builtin_range(const Args& a) {
  if (a.positional.empty() || a.positional.size() > 3) throw_failure("range expected 1 to 3 arguments");
  for (const auto& v : a.positional)
    if (!v.is_int()) throw_failure("range() arguments must be integers, got " + v.type_name());
  int64_t start = 0, stop, step = 1;
  if (a.positional.size() == 1) {
    stop = a.positional[0].as_int();
  } else {
    start = a.positional[0].as_int();
    stop = a.positional[1].as_int();
    if (a.positional.size() == 3) step = a.positional[2].as_int();
  }
  if (step == 0) throw_failure("range() arg 3 must not be zero");
  Array out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    out.push_back(Value(i));
    if (out.size() > 1000000) throw_failure("range() too large");
  }
  return Value::array(std::move(out));
}

Value builtin_namespace(const Args& a) {
  Object o;
  if (a.positional.size() > 1) throw_failure("namespace() takes at most 1 positional argument");
  if (!a.positional.empty()) {
    if (!a.positional[0].is_object()) throw_failure("namespace() argument must be a dict");
    o = a.positional[0].as_object();
  }
  for (const auto& [k, v] : a.keyword) o.set(k, v);
  return Value::ns(std::move(o));
}

Value builtin_dict(const Args& a) {
  Object o;
  if (!a.positional.empty()) {
    if (!a.positional[0].is_object()) throw_failure("dict() argument must be a dict");
    o = a.positional[0].as_object();
  }
  for (const auto& [k, v] : a.keyword) o.set(k, v);
  return Value::object(std::move(o));
}

}  // namespace

struct Template::Impl {
  std::string name;
  Body body;
};

Template::Template(const std::string& source, Options options, std::string name) : impl_(std::make_unique<Impl>()) {
  impl_->name = std::move(name);
  Lexer lexer(source, options, impl_->name);
  Parser parser(lexer.run(), impl_->name);
  impl_->body = parser.parse_template();
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const std::map<std::string, Value>& globals) const {
  auto builtins = std::make_shared<Frame>();
  builtins->vars["range"] = Value::function(builtin_range);
  builtins->vars["namespace"] = Value::function(builtin_namespace);
  builtins->vars["dict"] = Value::function(builtin_dict);
  auto top = std::make_shared<Frame>(Frame{{}, builtins});
  for (const auto& [k, v] : globals) top->vars[k] = v;
  std::string out;
  Renderer(impl_->name).run(impl_->body, top, out);
  return out;
}

}  // namespace verl::text::jinja

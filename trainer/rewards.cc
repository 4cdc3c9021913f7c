#include "trainer/rewards.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <regex>
#include <stdexcept>

#include "common/error.h"
#include "common/strings.h"
#include "trainer/pystr.h"

namespace verl::trainer::rewards {
namespace {

using pystr::Str;

// Ground truths are strings in verl's data; a number is taken as its text.
std::string gt_string(const nlohmann::json& gt) {
  if (gt.is_string()) return gt.get<std::string>();
  if (gt.is_number_integer()) return std::to_string(gt.get<int64_t>());
  return gt.dump();
}

bool is_ascii_digit(char32_t c) { return c >= U'0' && c <= U'9'; }

// ---------------------------------------------------------------- gsm8k.py

constexpr size_t kSolutionClipChars = 300;  // gsm8k.py's _SOLUTION_CLIP_CHARS

bool gsm8k_number_char(char32_t c) { return is_ascii_digit(c) || c == U'.' || c == U','; }

// re.findall("(\\-?[0-9\\.\\,]+)", s) with an optional literal prefix ("#### " for strict).
std::vector<Str> find_numbers(const Str& s, const Str& prefix) {
  std::vector<Str> out;
  size_t i = 0;
  while (i < s.size()) {
    if (!pystr::starts_with(s, i, prefix)) {
      ++i;
      continue;
    }
    size_t b = i + prefix.size();
    if (b < s.size() && s[b] == U'-' && b + 1 < s.size() && gsm8k_number_char(s[b + 1])) {
      // the optional '-' is taken
    } else if (b < s.size() && gsm8k_number_char(s[b])) {
    } else {
      ++i;
      continue;
    }
    size_t e = b + 1;
    while (e < s.size() && gsm8k_number_char(s[e])) ++e;
    out.push_back(s.substr(b, e - b));
    i = e;
  }
  return out;
}

// ---------------------------------------------------------------- math_reward.py

const Str kBoxed = U"\\boxed";
const Str kBoxedSpace = U"\\boxed ";
const Str kBoxedBrace = U"\\boxed{";

// verl's `assert` and IndexError inside strip_string: is_equiv falls back to raw equality.
struct PyException : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::optional<Str> last_boxed(const Str& s) {
  size_t idx = s.rfind(kBoxed);
  if (pystr::contains(s, kBoxedSpace)) {
    return kBoxedSpace + pystr::split(pystr::split(s, kBoxedSpace).back(), U"$").front();
  }
  if (idx == Str::npos) {
    idx = s.rfind(U"\\fbox");
    if (idx == Str::npos) return std::nullopt;
  }
  int open = 0;
  for (size_t i = idx; i < s.size(); ++i) {
    if (s[i] == U'{') ++open;
    if (s[i] == U'}') {
      --open;
      if (open == 0) return s.substr(idx, i + 1 - idx);
    }
  }
  return std::nullopt;
}

Str remove_boxed(const Str& s) {
  if (pystr::contains(s, kBoxedSpace)) {
    if (!pystr::starts_with(s, 0, kBoxedSpace)) throw PyException("box error");
    return s.substr(kBoxedSpace.size());
  }
  // "\fbox{...}" fails here in verl too: math_reward scores it 0.
  if (!pystr::starts_with(s, 0, kBoxedBrace) || s.back() != U'}') throw PyException("box error");
  return s.substr(kBoxedBrace.size(), s.size() - kBoxedBrace.size() - 1);
}

Str fix_fracs(const Str& string) {
  const auto substrs = pystr::split(string, U"\\frac");
  Str out = substrs[0];
  for (size_t k = 1; k < substrs.size(); ++k) {
    const Str& sub = substrs[k];
    out += U"\\frac";
    if (sub.empty()) throw PyException("IndexError: string index out of range");
    if (sub[0] == U'{') {
      out += sub;
      continue;
    }
    if (sub.size() < 2) return string;
    const char32_t a = sub[0], b = sub[1];
    if (b != U'{') {
      out += Str(U"{") + a + U"}{" + b + U"}" + sub.substr(2);
    } else {
      out += Str(U"{") + a + U"}" + b + sub.substr(2);
    }
  }
  return out;
}

// `str(int(x)) == x`: the only strings fix_a_slash_b's assert lets through. CPython refuses
// int() of more than 4300 digits (sys.get_int_max_str_digits), which the except catches.
bool canonical_int(const Str& x) {
  const size_t b = !x.empty() && x[0] == U'-' ? 1 : 0;
  const size_t digits = x.size() - b;
  if (digits == 0 || digits > 4300) return false;
  if (!std::all_of(x.begin() + static_cast<long>(b), x.end(), is_ascii_digit)) return false;
  if (x[b] == U'0') return digits == 1 && b == 0;  // "0"; not "007" nor "-0"
  return true;
}

Str fix_a_slash_b(const Str& string) {
  const auto parts = pystr::split(string, U"/");
  if (parts.size() != 2) return string;
  if (!canonical_int(parts[0]) || !canonical_int(parts[1])) return string;
  return U"\\frac{" + parts[0] + U"}{" + parts[1] + U"}";
}

Str remove_right_units(const Str& string) {
  if (!pystr::contains(string, U"\\text{ ")) return string;
  const auto splits = pystr::split(string, U"\\text{ ");
  if (splits.size() != 2) throw PyException("AssertionError");
  return splits[0];
}

Str fix_sqrt(const Str& string) {
  if (!pystr::contains(string, U"\\sqrt")) return string;
  const auto splits = pystr::split(string, U"\\sqrt");
  Str out = splits[0];
  for (size_t k = 1; k < splits.size(); ++k) {
    const Str& sp = splits[k];
    if (sp.empty()) throw PyException("IndexError: string index out of range");
    if (sp[0] != U'{') {
      out += Str(U"\\sqrt{") + sp[0] + U"}" + sp.substr(1);
    } else {
      out += U"\\sqrt" + sp;
    }
  }
  return out;
}

Str strip_string_u(Str s) {
  using pystr::replace;
  s = replace(s, U"\n", U"");
  s = replace(s, U"\\!", U"");
  s = replace(s, U"\\\\", U"\\");
  s = replace(s, U"tfrac", U"frac");
  s = replace(s, U"dfrac", U"frac");
  s = replace(s, U"\\left", U"");
  s = replace(s, U"\\right", U"");
  s = replace(s, U"^{\\circ}", U"");
  s = replace(s, U"^\\circ", U"");
  s = replace(s, U"\\$", U"");
  s = remove_right_units(s);
  s = replace(s, U"\\\\%", U"");
  s = replace(s, U"\\%", U"");
  s = replace(s, U" .", U" 0.");
  s = replace(s, U"{.", U"{0.");
  if (s.empty()) return s;
  if (s[0] == U'.') s = U"0" + s;
  const auto eq = pystr::split(s, U"=");
  if (eq.size() == 2 && eq[0].size() <= 2) s = eq[1];
  s = fix_sqrt(s);
  s = replace(s, U" ", U"");
  s = fix_fracs(s);
  if (s == U"0.5") s = U"\\frac{1}{2}";
  return fix_a_slash_b(s);
}

bool is_equiv_u(const Str& a, const Str& b) {
  try {
    return strip_string_u(a) == strip_string_u(b);
  } catch (const PyException&) {
    return a == b;
  }
}

// ---------------------------------------------------------------- math_dapo.py

// re.sub(r"(\\<cmd>\{)(.*?)(\})", "\\2", s): each "\cmd{...}" up to the first '}' on its line
// becomes its content.
Str unwrap_lazy(const Str& s, const Str& open) {
  Str out;
  size_t i = 0;
  while (i < s.size()) {
    if (pystr::starts_with(s, i, open)) {
      size_t j = i + open.size();
      while (j < s.size() && s[j] != U'}' && s[j] != U'\n') ++j;
      if (j < s.size() && s[j] == U'}') {
        out.append(s, i + open.size(), j - i - open.size());
        i = j + 1;
        continue;
      }
    }
    out.push_back(s[i++]);
  }
  return out;
}

// re.sub(r"(\\boxed\{)(.*)(\})", "\\2", s): greedy, up to the last '}' on the line.
Str unwrap_boxed_greedy(const Str& s) {
  Str out;
  size_t i = 0;
  while (i < s.size()) {
    if (pystr::starts_with(s, i, kBoxedBrace)) {
      const size_t b = i + kBoxedBrace.size();
      size_t eol = b;
      while (eol < s.size() && s[eol] != U'\n') ++eol;
      size_t close = Str::npos;
      for (size_t j = b; j < eol; ++j) {
        if (s[j] == U'}') close = j;
      }
      if (close != Str::npos) {
        out.append(s, b, close - b);
        i = close + 1;
        continue;
      }
    }
    out.push_back(s[i++]);
  }
  return out;
}

// re.sub(r"(.*?)(\$)(.*?)(\$)(.*)", "$\\3$", s): a line holding two '$' becomes "$<between>$".
Str dollar_lines(const Str& s) {
  Str out;
  for (const Str& line : pystr::split(s, U"\n")) {
    const size_t a = line.find(U'$');
    const size_t b = a == Str::npos ? Str::npos : line.find(U'$', a + 1);
    out += b == Str::npos ? line : U"$" + line.substr(a + 1, b - a - 1) + U"$";
    out += U'\n';
  }
  out.pop_back();
  return out;
}

// re.sub(r"(frac)([^{])(.)", "frac{\\2}{\\3}", s) and re.sub(r"(sqrt)([^{])", "sqrt{\\2}", s).
Str brace_frac(const Str& s) {
  Str out;
  size_t i = 0;
  while (i < s.size()) {
    if (pystr::starts_with(s, i, U"frac") && i + 5 < s.size() && s[i + 4] != U'{' && s[i + 5] != U'\n') {
      out += Str(U"frac{") + s[i + 4] + U"}{" + s[i + 5] + U"}";
      i += 6;
      continue;
    }
    out.push_back(s[i++]);
  }
  return out;
}

Str brace_sqrt(const Str& s) {
  Str out;
  size_t i = 0;
  while (i < s.size()) {
    if (pystr::starts_with(s, i, U"sqrt") && i + 4 < s.size() && s[i + 4] != U'{') {
      out += Str(U"sqrt{") + s[i + 4] + U"}";
      i += 5;
      continue;
    }
    out.push_back(s[i++]);
  }
  return out;
}

Str normalize_final_answer_u(const Str& in) {
  static const std::vector<std::pair<Str, Str>> kSubstitutions = {
      {U"an ", U""},     {U"a ", U""},           {U".$", U"$"},          {U"\\$", U""},
      {U"\\ ", U""},     {U" ", U""},            {U"mbox", U"text"},     {U",\\text{and}", U","},
      {U"\\text{and}", U","}, {U"\\text{m}", U"\\text{}"}};
  static const std::vector<Str> kRemovedExpressions = {
      U"square", U"ways", U"integers", U"dollars", U"mph", U"inches", U"hours", U"km", U"units",
      U"\\ldots", U"sue", U"points", U"feet", U"minutes", U"digits", U"cents", U"degrees", U"cm",
      U"gm", U"pounds", U"meters", U"meals", U"edges", U"students", U"childrentickets", U"multiples",
      U"\\text{s}", U"\\text{.}", U"\\text{\ns}", U"\\text{}^2", U"\\text{}^3", U"\\text{\n}",
      U"\\text{}", U"\\mathrm{th}", U"^\\circ", U"^{\\circ}", U"\\;", U",\\!", U"{,}", U"\"", U"\\dots"};
  Str s = pystr::split(in, U"=").back();
  for (const auto& [before, after] : kSubstitutions) s = pystr::replace(s, before, after);
  for (const auto& expr : kRemovedExpressions) s = pystr::replace(s, expr, U"");
  s = dollar_lines(s);
  s = unwrap_lazy(s, U"\\text{");
  s = unwrap_lazy(s, U"\\textbf{");
  s = unwrap_lazy(s, U"\\overline{");
  s = unwrap_boxed_greedy(s);
  s = brace_frac(s);
  s = brace_sqrt(s);
  s = pystr::replace(s, U"$", U"");
  if (pystr::is_digit_string(pystr::replace(s, U",", U""))) s = pystr::replace(s, U",", U"");
  return pystr::strip(s);
}

// re.findall(r"(?i)Answer\s*:\s*([^\n]+)", s): the captures. Under IGNORECASE a Python str
// pattern's 's' also matches U+017F (long s); its \s is str.isspace().
std::vector<Str> find_answers(const Str& s) {
  static const Str kWord = U"answer";
  auto letter_matches = [](char32_t c, char32_t want) {
    if (c == want || c == want - 32) return true;
    return want == U's' && c == 0x17F;
  };
  std::vector<Str> out;
  size_t i = 0;
  while (i < s.size()) {
    bool ok = i + kWord.size() <= s.size();
    for (size_t k = 0; ok && k < kWord.size(); ++k) ok = letter_matches(s[i + k], kWord[k]);
    size_t p = i + kWord.size();
    if (ok) {
      while (p < s.size() && pystr::is_space(s[p])) ++p;
      ok = p < s.size() && s[p] == U':';
    }
    if (ok) {
      const size_t w = p + 1;
      size_t q = w;
      while (q < s.size() && pystr::is_space(s[q])) ++q;
      // Greedy \s* backs off until [^\n]+ can match at least one character.
      size_t start = q;
      if (q == s.size()) {
        start = Str::npos;
        for (size_t k = q; k > w; --k) {
          if (s[k - 1] != U'\n') {
            start = k - 1;
            break;
          }
        }
      }
      if (start != Str::npos) {
        size_t end = start;
        while (end < s.size() && s[end] != U'\n') ++end;
        out.push_back(s.substr(start, end - start));
        i = end;
        continue;
      }
    }
    ++i;
  }
  return out;
}

// ---------------------------------------------------------------- countdown.py (TinyZero)

// Python's eval() of the characters countdown's regex allows: int and float literals, + - * /
// // ** and parentheses, with Python's precedence and types. Errors (SyntaxError, TypeError,
// ZeroDivisionError, OverflowError) and a non-number result (a tuple, a complex power) are all
// EvalError: countdown gives format_score for each alike. Python's ints are unbounded; beyond
// 127 bits one is kept as a double approximation ("huge"), which can only matter when two huge
// values cancel: that is an EvalError too.
using Int = __int128;

struct EvalError {};

struct Value {
  enum Kind { kInt, kFloat, kHuge } kind = kInt;
  Int i = 0;
  double d = 0;  // kFloat's value, or kHuge's approximation
};

Value make_int(Int v) { return {Value::kInt, v, 0}; }
Value make_float(double v) { return {Value::kFloat, 0, v}; }
Value make_huge(double approx) {
  if (!std::isnan(approx) && std::fabs(approx) < 0x1p126) throw EvalError{};  // cancelled: unknown
  if (std::isnan(approx)) throw EvalError{};
  return {Value::kHuge, 0, approx};
}
bool int_like(const Value& v) { return v.kind != Value::kFloat; }
double approx(const Value& v) { return v.kind == Value::kInt ? static_cast<double>(v.i) : v.d; }
// float(v): an int too large for a double is an OverflowError.
double to_float(const Value& v) {
  const double x = approx(v);
  if (v.kind == Value::kHuge && std::isinf(x)) throw EvalError{};
  return x;
}

class PyEval {
 public:
  explicit PyEval(const Str& s) { tokenize(s); }
  Value run() {
    Value v = expr();
    if (pos_ != toks_.size()) throw EvalError{};
    return v;
  }

 private:
  enum Kind { kNum, kOp, kOpen, kClose };
  struct Tok {
    Kind kind;
    std::string op;
    Value value;
  };

  void tokenize(const Str& s) {
    size_t i = 0;
    while (i < s.size()) {
      const char32_t c = s[i];
      if (c == U' ' || c == U'\t' || c == U'\f') {
        ++i;
      } else if (is_ascii_digit(c) || (c == U'.' && i + 1 < s.size() && is_ascii_digit(s[i + 1]))) {
        size_t j = i;
        while (j < s.size() && is_ascii_digit(s[j])) ++j;
        bool is_float = false;
        if (j < s.size() && s[j] == U'.') {
          is_float = true;
          ++j;
          while (j < s.size() && is_ascii_digit(s[j])) ++j;
        }
        const std::string text = pystr::to_utf8(s.substr(i, j - i));
        if (is_float) {
          toks_.push_back({kNum, "", make_float(std::strtod(text.c_str(), nullptr))});
        } else {
          // "007" is a SyntaxError in Python 3; "000" is zero.
          if (text.size() > 1 && text[0] == '0' && text.find_first_not_of('0') != std::string::npos) throw EvalError{};
          if (text.size() > 38) throw EvalError{};
          Int v = 0;
          for (char d : text) v = v * 10 + (d - '0');
          toks_.push_back({kNum, "", make_int(v)});
        }
        // A literal directly followed by another ("1.2.3", "1..2") is a SyntaxError.
        if (j < s.size() && (is_ascii_digit(s[j]) || s[j] == U'.')) throw EvalError{};
        i = j;
      } else if (c == U'(' || c == U')') {
        toks_.push_back({c == U'(' ? kOpen : kClose, "", {}});
        ++i;
      } else if (c == U'*' || c == U'/') {
        const bool twice = i + 1 < s.size() && s[i + 1] == c;
        toks_.push_back({kOp, std::string(twice ? 2 : 1, static_cast<char>(c)), {}});
        i += twice ? 2 : 1;
      } else if (c == U'+' || c == U'-') {
        toks_.push_back({kOp, std::string(1, static_cast<char>(c)), {}});
        ++i;
      } else {
        throw EvalError{};  // '.', other whitespace, other characters
      }
    }
  }
  bool at_op(const char* op) const { return pos_ < toks_.size() && toks_[pos_].kind == kOp && toks_[pos_].op == op; }

  Value expr() {
    Value v = term();
    while (at_op("+") || at_op("-")) {
      const bool plus = toks_[pos_++].op == "+";
      v = arith(v, term(), plus ? '+' : '-');
    }
    return v;
  }
  Value term() {
    Value v = factor();
    while (at_op("*") || at_op("/") || at_op("//")) {
      const std::string op = toks_[pos_++].op;
      v = arith(v, factor(), op == "*" ? '*' : op == "/" ? '/' : 'f');
    }
    return v;
  }
  Value factor() {
    if (at_op("+")) {
      ++pos_;
      return factor();
    }
    if (at_op("-")) {
      ++pos_;
      Value v = factor();
      v.i = -v.i;
      v.d = -v.d;
      return v;
    }
    return power();
  }
  Value power() {
    Value base = atom();
    if (pos_ < toks_.size() && (toks_[pos_].kind == kOpen || toks_[pos_].kind == kNum)) {
      throw EvalError{};  // a call "2(3)" (TypeError) or two literals in a row (SyntaxError)
    }
    if (at_op("**")) {
      ++pos_;
      return pow(base, factor());
    }
    return base;
  }
  Value atom() {
    if (pos_ >= toks_.size()) throw EvalError{};
    const Tok& t = toks_[pos_++];
    if (t.kind == kNum) return t.value;
    if (t.kind != kOpen) throw EvalError{};
    if (pos_ < toks_.size() && toks_[pos_].kind == kClose) throw EvalError{};  // "()" is a tuple
    Value v = expr();
    if (pos_ >= toks_.size() || toks_[pos_].kind != kClose) throw EvalError{};
    ++pos_;
    return v;
  }

  static Value arith(const Value& a, const Value& b, char op) {
    if (op == '/') {
      // int / int is correctly rounded in CPython; a double quotient of the approximations
      // differs from it at most in the last bit.
      const double x = int_like(a) ? approx(a) : to_float(a);
      const double y = int_like(b) ? approx(b) : to_float(b);
      if (y == 0.0 || std::isinf(x) || std::isinf(y)) throw EvalError{};
      const double r = x / y;
      if (std::isinf(r)) throw EvalError{};
      return make_float(r);
    }
    if (a.kind == Value::kInt && b.kind == Value::kInt) {
      Int r = 0;
      switch (op) {
        case '+':
          if (__builtin_add_overflow(a.i, b.i, &r)) return make_huge(approx(a) + approx(b));
          return make_int(r);
        case '-':
          if (__builtin_sub_overflow(a.i, b.i, &r)) return make_huge(approx(a) - approx(b));
          return make_int(r);
        case '*':
          if (__builtin_mul_overflow(a.i, b.i, &r)) return make_huge(approx(a) * approx(b));
          return make_int(r);
        default: {  // floor division
          if (b.i == 0) throw EvalError{};
          Int q = a.i / b.i;
          if ((a.i % b.i != 0) && ((a.i < 0) != (b.i < 0))) --q;
          return make_int(q);
        }
      }
    }
    if (int_like(a) && int_like(b)) {  // a huge int on one side at least
      const double x = approx(a), y = approx(b);
      switch (op) {
        case '+':
          return make_huge(x + y);
        case '-':
          return make_huge(x - y);
        case '*':
          if (x == 0.0 || y == 0.0) return make_int(0);
          return make_huge(x * y);
        default:  // floor division: a small int by a huge one is 0 or -1
          if (a.kind == Value::kInt) return make_int(a.i == 0 || (a.i > 0) == (y > 0) ? 0 : -1);
          if (b.kind == Value::kHuge || y == 0.0) throw EvalError{};
          return make_huge(std::floor(x / y));
      }
    }
    const double x = to_float(a), y = to_float(b);
    switch (op) {
      case '+':
        return make_float(x + y);
      case '-':
        return make_float(x - y);
      case '*':
        return make_float(x * y);
      default: {  // CPython's float_floor_div
        if (y == 0.0) throw EvalError{};
        const double mod = std::fmod(x, y);
        double div = (x - mod) / y;
        if (mod != 0.0 && ((y < 0) != (mod < 0))) div -= 1.0;
        double floordiv;
        if (div != 0.0) {
          floordiv = std::floor(div);
          if (div - floordiv > 0.5) floordiv += 1.0;
        } else {
          floordiv = std::copysign(0.0, x / y);
        }
        return make_float(floordiv);
      }
    }
  }
  static Value pow(const Value& a, const Value& b) {
    if (a.kind == Value::kInt && b.kind == Value::kInt && b.i >= 0) {
      Int result = 1, base = a.i, e = b.i;
      if (base == 0 || base == 1) return make_int(e == 0 ? 1 : base);
      if (base == -1) return make_int(e % 2 == 0 ? 1 : -1);
      bool overflow = false;
      while (e > 0 && !overflow) {
        if (e & 1) overflow = __builtin_mul_overflow(result, base, &result);
        e >>= 1;
        if (e > 0 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
      }
      if (overflow) return make_huge(std::pow(approx(a), approx(b)));
      return make_int(result);
    }
    if (a.kind == Value::kHuge && b.kind == Value::kInt && b.i >= 0) {
      return b.i == 0 ? make_int(1) : make_huge(std::pow(a.d, approx(b)));
    }
    if (b.kind == Value::kHuge) throw EvalError{};  // Python would compute for ever, or fail
    // CPython's float_pow (an int with a negative int exponent goes through it too).
    const double x = to_float(a), y = to_float(b);
    if (y == 0.0) return make_float(1.0);
    if (x == 0.0) {
      if (y < 0.0) throw EvalError{};  // ZeroDivisionError
      return make_float(std::pow(x, y));
    }
    if (x < 0.0 && y != std::floor(y)) throw EvalError{};  // a complex result
    const double r = std::pow(x, y);
    if (std::isinf(r)) throw EvalError{};  // OverflowError
    return make_float(r);
  }

  std::vector<Tok> toks_;
  size_t pos_ = 0;
};

// TinyZero's validate_equation: the \d+ runs (any Unicode decimal digits, as int() reads
// them) are the given numbers, each used once.
bool uses_numbers_once(const Str& eq, const nlohmann::json& numbers) {
  if (!numbers.is_array()) return false;
  std::vector<int64_t> given;
  for (const auto& n : numbers) {
    if (!n.is_number_integer()) return false;
    given.push_back(n.get<int64_t>());
  }
  std::vector<int64_t> used;
  for (size_t i = 0; i < eq.size();) {
    if (!pystr::is_decimal(eq[i])) {
      ++i;
      continue;
    }
    int64_t v = 0;
    bool too_big = false;
    for (; i < eq.size() && pystr::is_decimal(eq[i]); ++i) {
      if (v > (INT64_MAX - 9) / 10) too_big = true;
      if (!too_big) v = v * 10 + pystr::decimal_value(eq[i]);
    }
    if (too_big) return false;  // no given number is that large
    used.push_back(v);
  }
  std::sort(used.begin(), used.end());
  std::sort(given.begin(), given.end());
  return used == given;
}

// countdown's `re.match(r"^[\d+\-*/().\s]+$", eq)`: `$` also matches before a final "\n".
bool countdown_charset(const Str& eq) {
  if (eq.empty()) return false;
  size_t n = eq.size();
  if (eq.back() == U'\n') --n;
  if (n == 0) return false;
  for (size_t i = 0; i < n; ++i) {
    const char32_t c = eq[i];
    if (!(pystr::is_decimal(c) || pystr::is_space(c) || Str(U"+-*/().").find(c) != Str::npos)) return false;
  }
  return true;
}

// ---------------------------------------------------------------- built-in countdown

// Recursive descent: expr = term (('+'|'-') term)*, term = factor (('*'|'/') factor)*,
// factor = number | '(' expr ')' | '-' factor.
class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}
  std::optional<double> parse() {
    auto v = expr();
    skip();
    if (!v || pos_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  void skip() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  std::optional<double> expr() {
    auto v = term();
    while (v) {
      skip();
      if (pos_ >= s_.size() || (s_[pos_] != '+' && s_[pos_] != '-')) break;
      const char op = s_[pos_++];
      auto r = term();
      if (!r) return std::nullopt;
      v = op == '+' ? *v + *r : *v - *r;
    }
    return v;
  }
  std::optional<double> term() {
    auto v = factor();
    while (v) {
      skip();
      if (pos_ >= s_.size() || (s_[pos_] != '*' && s_[pos_] != '/')) break;
      const char op = s_[pos_++];
      auto r = factor();
      if (!r) return std::nullopt;
      if (op == '/' && *r == 0.0) return std::nullopt;
      v = op == '*' ? *v * *r : *v / *r;
    }
    return v;
  }
  std::optional<double> factor() {
    if (++depth_ > 64) return std::nullopt;
    skip();
    if (pos_ >= s_.size()) return std::nullopt;
    std::optional<double> out;
    if (s_[pos_] == '(') {
      ++pos_;
      out = expr();
      skip();
      if (!out || pos_ >= s_.size() || s_[pos_] != ')') return std::nullopt;
      ++pos_;
    } else if (s_[pos_] == '-') {
      ++pos_;
      auto v = factor();
      if (v) out = -*v;
    } else if (std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      double v = 0;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
        v = v * 10 + (s_[pos_++] - '0');
      }
      out = v;
    }
    --depth_;
    return out;
  }
  const std::string& s_;
  size_t pos_ = 0;
  int depth_ = 0;
};

// ---------------------------------------------------------------- dispatch

const std::vector<std::string> kMathLighteval = {"lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval",
                                                 "HuggingFaceH4/MATH-500"};
const std::vector<std::string> kMathDapo = {"math_dapo", "math", "math_dapo_reasoning"};

enum class Scorer { kNone, kGsm8k, kMath, kMathDapo, kCountdown, kArithmetic, kBuiltinCountdown };

bool one_of(const std::string& s, const std::vector<std::string>& names) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

Scorer scorer_for(const std::string& ds) {
  // verl's order first, then verlctl's own names.
  if (ds == "openai/gsm8k") return Scorer::kGsm8k;
  if (one_of(ds, kMathLighteval)) return Scorer::kMath;
  if (one_of(ds, kMathDapo) || ds.rfind("aime", 0) == 0) return Scorer::kMathDapo;
  if (ds == "arithmetic") return Scorer::kArithmetic;
  if (ds == "verlctl/countdown") return Scorer::kBuiltinCountdown;
  if (ds == "gsm8k") return Scorer::kGsm8k;
  if (ds.find("countdown") != std::string::npos) return Scorer::kCountdown;
  return Scorer::kNone;
}

}  // namespace

// ---------------------------------------------------------------- public

std::vector<std::string> supported_data_sources() {
  std::vector<std::string> out = {"openai/gsm8k"};
  out.insert(out.end(), kMathLighteval.begin(), kMathLighteval.end());
  out.insert(out.end(), kMathDapo.begin(), kMathDapo.end());
  out.insert(out.end(), {"aime*", "*countdown*", "arithmetic", "verlctl/countdown", "gsm8k"});
  return out;
}

bool has_scorer(const std::string& data_source) { return scorer_for(data_source) != Scorer::kNone; }

void check_data_source(const std::string& data_source, const std::string& where) {
  if (has_scorer(data_source)) return;
  std::string list;
  for (const auto& s : supported_data_sources()) list += (list.empty() ? "" : ", ") + s;
  throw Error{ExitCode::kInvalidConfig,
              (where.empty() ? "" : where + ": ") + "no reward function for data_source '" + data_source +
                  "' (verl's default_compute_score raises NotImplementedError for it too); supported: " + list,
              "set each row's data_source to one of these (verl's preprocess scripts write 'openai/gsm8k', "
              "'DigitalLearningGmbH/MATH-lighteval', ...); a custom reward function is not supported"};
}

Score score(const std::string& data_source, const std::string& response, const nlohmann::json& ground_truth) {
  Score s;
  switch (scorer_for(data_source)) {
    case Scorer::kGsm8k:
      s.score = gsm8k(response, ground_truth);
      break;
    case Scorer::kMath:
      s.score = math_reward(response, ground_truth);
      break;
    case Scorer::kMathDapo:
      s = math_dapo(response, ground_truth);
      break;
    case Scorer::kCountdown:
      s.score = countdown(response, ground_truth);
      break;
    case Scorer::kArithmetic:
      s.score = exact_match(response, ground_truth);
      break;
    case Scorer::kBuiltinCountdown:
      s.score = builtin_countdown(response, ground_truth);
      break;
    case Scorer::kNone:
      check_data_source(data_source);
  }
  return s;
}

double compute_score(const std::string& data_source, const std::string& response,
                     const nlohmann::json& ground_truth) {
  return score(data_source, response, ground_truth).score;
}

std::optional<std::string> extract_gsm8k_answer(const std::string& response, Gsm8kMethod method) {
  const Str s = pystr::last(pystr::from_utf8(response), kSolutionClipChars);
  if (method == Gsm8kMethod::kStrict) {
    const auto found = find_numbers(s, U"#### ");
    if (found.empty()) return std::nullopt;
    return pystr::to_utf8(pystr::replace(pystr::replace(found.back(), U",", U""), U"$", U""));
  }
  const auto found = find_numbers(s, U"");
  if (found.empty()) return std::nullopt;
  // The last number that is not "." (verl's loop leaves the first one when all are ".").
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    if (*it != U".") return pystr::to_utf8(*it);
  }
  return pystr::to_utf8(found.front());
}

double gsm8k(const std::string& response, const nlohmann::json& ground_truth, Gsm8kMethod method,
             double format_score, double score) {
  const auto answer = extract_gsm8k_answer(response, method);
  if (!answer) return 0.0;
  return *answer == gt_string(ground_truth) ? score : format_score;
}

std::optional<std::string> last_boxed_only_string(const std::string& s) {
  const auto b = last_boxed(pystr::from_utf8(s));
  if (!b) return std::nullopt;
  return pystr::to_utf8(*b);
}

std::string strip_string(const std::string& s) {
  return pystr::to_utf8(strip_string_u(pystr::from_utf8(s)));
}

bool is_equiv(const std::string& a, const std::string& b) {
  return is_equiv_u(pystr::from_utf8(a), pystr::from_utf8(b));
}

double math_reward(const std::string& response, const nlohmann::json& ground_truth) {
  const auto boxed = last_boxed(pystr::from_utf8(response));
  if (!boxed) return 0.0;
  try {
    return is_equiv_u(remove_boxed(*boxed), pystr::from_utf8(gt_string(ground_truth))) ? 1.0 : 0.0;
  } catch (const PyException&) {
    return 0.0;  // verl prints the exception and scores 0
  }
}

std::string normalize_final_answer(const std::string& s) {
  return pystr::to_utf8(normalize_final_answer_u(pystr::from_utf8(s)));
}

Score math_dapo(const std::string& response, const nlohmann::json& ground_truth) {
  // "The longest answer in MATH-500 has 159 characters": verl looks at the last 300.
  const Str s = pystr::last(pystr::from_utf8(response), 300);
  const auto answers = find_answers(s);
  const Str pred = normalize_final_answer_u(answers.empty() ? Str(U"[INVALID]") : answers.back());
  const Str gt = normalize_final_answer_u(pystr::from_utf8(gt_string(ground_truth)));
  const bool correct = pred == gt;
  Score out;
  out.score = correct ? 1.0 : -1.0;
  out.extra = {{"score", out.score}, {"acc", correct ? 1.0 : 0.0}};
  out.pred = pystr::to_utf8(pred);
  return out;
}

double countdown(const std::string& response, const nlohmann::json& ground_truth, double format_score,
                 double score) {
  if (!ground_truth.is_object() || !ground_truth.contains("target") || !ground_truth.contains("numbers") ||
      !ground_truth["target"].is_number()) {
    return 0.0;
  }
  const Str line = pystr::split(pystr::from_utf8(response), U"\n").back();
  // re.finditer(r"<answer>(.*?)</answer>"): the last one, stripped.
  std::optional<Str> equation;
  const Str open = U"<answer>", close = U"</answer>";
  for (size_t i = line.find(open); i != Str::npos; i = line.find(open, i)) {
    const size_t e = line.find(close, i + open.size());
    if (e == Str::npos) break;
    equation = pystr::strip(line.substr(i + open.size(), e - i - open.size()));
    i = e + close.size();
  }
  if (!equation) return 0.0;
  if (!uses_numbers_once(*equation, ground_truth["numbers"])) return format_score;
  if (!countdown_charset(*equation)) return format_score;
  Value result;
  try {
    result = PyEval(*equation).run();
  } catch (const EvalError&) {
    return format_score;
  }
  const auto& target = ground_truth["target"];
  bool hit = false;
  if (result.kind == Value::kInt && target.is_number_integer()) {
    hit = result.i == static_cast<Int>(target.get<int64_t>());
  } else if (result.kind != Value::kHuge) {  // a huge int is never within 1e-5 of a target
    hit = std::fabs(approx(result) - target.get<double>()) < 1e-5;
  }
  return hit ? score : format_score;
}

double exact_match(const std::string& response, const nlohmann::json& ground_truth) {
  return trim(response) == trim(gt_string(ground_truth)) ? 1.0 : 0.0;
}

std::optional<double> evaluate_expression(const std::string& expr) { return Parser(expr).parse(); }

double builtin_countdown(const std::string& response, const nlohmann::json& ground_truth,
                         double format_score, double score) {
  const std::string eq = trim(response);
  if (eq.empty() || !ground_truth.is_object() || !ground_truth.contains("target") ||
      !ground_truth.contains("numbers")) {
    return 0.0;
  }
  for (char ch : eq) {
    if (!std::isdigit(static_cast<unsigned char>(ch)) && std::string("+-*/() ").find(ch) == std::string::npos) {
      return 0.0;
    }
  }
  std::vector<int64_t> used;
  for (size_t i = 0; i < eq.size();) {
    if (std::isdigit(static_cast<unsigned char>(eq[i]))) {
      int64_t v = 0;
      while (i < eq.size() && std::isdigit(static_cast<unsigned char>(eq[i]))) v = v * 10 + (eq[i++] - '0');
      used.push_back(v);
    } else {
      ++i;
    }
  }
  auto given = ground_truth["numbers"].get<std::vector<int64_t>>();
  std::sort(used.begin(), used.end());
  std::sort(given.begin(), given.end());
  const auto value = evaluate_expression(eq);
  if (!value) return 0.0;
  if (used != given) return format_score;
  const double target = ground_truth["target"].get<double>();
  return std::fabs(*value - target) < 1e-5 ? score : format_score;
}

double integer_format(const std::string& response) {
  static const std::regex kInt("^\\s*-?[0-9]+\\s*$");
  return std::regex_match(response, kInt) ? 1.0 : 0.0;
}

}  // namespace verl::trainer::rewards

#include "text/jinja.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace verl::text::jinja {
namespace {

std::string render(const std::string& src, const nlohmann::json& globals = nlohmann::json::object()) {
  std::map<std::string, Value> g;
  for (auto it = globals.begin(); it != globals.end(); ++it) g[it.key()] = Value::from_json(it.value());
  return Template(src).render(g);
}

// The message of the verl::Error that rendering (or parsing) throws; "" when none.
std::string error_of(const std::string& src, const nlohmann::json& globals = nlohmann::json::object()) {
  try {
    render(src, globals);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    return e.what();
  }
  return "";
}

TEST(Jinja, PrintsTextAndExpressions) {
  EXPECT_EQ(render("a {{ x }} b", {{"x", "y"}}), "a y b");
  EXPECT_EQ(render("{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 2 ** 10 }}"),
            "7|9|3|-4|1|2|1024");
  EXPECT_EQ(render("{{ 7 / 2 }}|{{ 4 / 2 }}|{{ 0.1 + 0.2 }}|{{ 1e20 }}|{{ 1.5e-7 }}"), "3.5|2.0|0.30000000000000004|1e+20|1.5e-07");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ true }}|{{ 'ab' * 2 }}|{{ [1] + [2] }}"), "a1NoneTrue|abab|[1, 2]");
  EXPECT_EQ(render("{{ none }}|{{ true }}|{{ undefined_name }}|{{ {'k': 'v'} }}|{{ ['a', \"b'c\"] }}"),
            "None|True||{'k': 'v'}|['a', \"b'c\"]");
}

// Found by tests/fuzz/chat_template_fuzz.cc (with inputs longer than its seeds): the parser,
// the renderer and the tree's destructor recurse once per level, and 3000 '(' or 'not' or nested
// {% if %} overflowed the stack (SIGSEGV). Past the bounds it is a syntax error naming the tag.
TEST(Jinja, NestingPastTheBoundsIsASyntaxErrorNotAStackOverflow) {
  auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  EXPECT_NE(error_of("{{ " + repeat("(", 3000) + "1" + repeat(")", 3000) + " }}").find("template line 1:1: a tag of 6001 tokens"),
            std::string::npos);
  EXPECT_NE(error_of("{{ " + repeat("not ", 3000) + "1 }}").find("at most 1000"), std::string::npos);
  EXPECT_NE(error_of("{{ " + repeat("[", 3000) + repeat("]", 3000) + " }}"), "");
  EXPECT_NE(error_of("{{ x" + repeat(".a", 3000) + " }}"), "");
  EXPECT_NE(error_of(repeat("{% if 1 %}", 3000) + "x" + repeat("{% endif %}", 3000)).find("blocks nested deeper than 100 levels"),
            std::string::npos);
  EXPECT_NE(error_of(repeat("{% for i in [1] %}", 101) + "x" + repeat("{% endfor %}", 101)), "");
  // Up to the bounds it renders.
  EXPECT_EQ(render("{{ " + repeat("(", 499) + "1" + repeat(")", 499) + " }}"), "1");
  EXPECT_EQ(render("{{ " + repeat("not ", 998) + "1 }}"), "True");
  EXPECT_EQ(render("{{ 1" + repeat(" ~ 1", 499) + " }}"), repeat("1", 500));
  EXPECT_EQ(render(repeat("{% if 1 %}", 99) + "x" + repeat("{% endif %}", 99)), "x");
}

TEST(Jinja, StringLiteralEscapes) {
  EXPECT_EQ(render(R"({{ 'a\nb\t\'q\' \"d\" \\ \u00e9 \x41' }})"), "a\nb\t'q' \"d\" \\ \xc3\xa9 A");
  EXPECT_EQ(render(R"({{ "it's" 'concat' }})"), "it'sconcat");
}

TEST(Jinja, CommentsAreDropped) {
  EXPECT_EQ(render("a{# a comment {{ x }} #}b"), "ab");
}

TEST(Jinja, WhitespaceControlStripsAroundTags) {
  EXPECT_EQ(render("a  \n  {{- 'b' -}}  \n  c"), "abc");
  EXPECT_EQ(render("a \n{%- if true -%}\n b {%- endif %}"), "ab");
  EXPECT_EQ(render("a  {#- c -#}  b"), "ab");
}

TEST(Jinja, TrimBlocksAndLstripBlocksAsTransformersSetsThem) {
  // lstrip_blocks: spaces before a block tag on its own line go; trim_blocks: the newline after it.
  EXPECT_EQ(render("<\n  {% if true %}\n  x\n  {% endif %}\n>"), "<\n  x\n>");
  // Not before {{ }}, and not when other text precedes the tag on the line.
  EXPECT_EQ(render("  {{ 'a' }}\n b {% if true %}c{% endif %}\n"), "  a\n b c");
  // {%+ keeps the spaces.
  EXPECT_EQ(render("x\n  {%+ if true %}y{% endif %}"), "x\n  y");
  // Comments too; the strip markers win over both.
  EXPECT_EQ(render("a\n  {# c #}\nb|a\n  {#- c #}\nb|a {# c #}\nb"), "a\nb|ab|a b");
  EXPECT_EQ(render("x  {%- if 1 %}\n y{% endif %}|{% if 1 %}  \nz{% endif %}|\n\t{% if 1 %}x{% endif %}"), "x y|  \nz|\nx");
  // \r\n reads as \n, as in jinja2.
  EXPECT_EQ(render("a\r\n  {% if 1 %}\r\nb{% endif %}\rc\r\n{{ 'd' }}"), "a\nbc\nd");
  // One trailing newline of the template goes (keep_trailing_newline=False).
  EXPECT_EQ(render("a\n\n"), "a\n");
}

TEST(Jinja, IfElifElse) {
  const std::string t = "{% if n == 1 %}one{% elif n == 2 %}two{% elif n > 2 %}many{% else %}none{% endif %}";
  EXPECT_EQ(render(t, {{"n", 1}}), "one");
  EXPECT_EQ(render(t, {{"n", 2}}), "two");
  EXPECT_EQ(render(t, {{"n", 5}}), "many");
  EXPECT_EQ(render(t, {{"n", 0}}), "none");
}

TEST(Jinja, ForLoopVariables) {
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}"
                   "{{ loop.length }}{{ x }};{% endfor %}",
                   {{"xs", {"a", "b"}}}),
            "102TrueFalse2a;211FalseTrue2b;");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.previtem }}>{{ x }}>{{ loop.nextitem }} {% endfor %}", {{"xs", {1, 2, 3}}}),
            ">1>2 1>2>3 2>3> ");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.cycle('a', 'b') }}{% endfor %}", {{"xs", {1, 2, 3}}}), "aba");
}

TEST(Jinja, ForLoopElseFilterUnpackingAndControl) {
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in xs if x > 1 %}{{ x }}/{{ loop.length }} {% endfor %}", {{"xs", {1, 2, 3}}}), "2/2 3/2 ");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {{"d", {{"a", 1}, {"b", 2}}}}), "a=1;b=2;");
  EXPECT_EQ(render("{% for k in d %}{{ k }}{% endfor %}", {{"d", {{"a", 1}, {"b", 2}}}}), "ab");
  EXPECT_EQ(render("{% for (a, b) in [[1, 2], [3, 4]] %}{{ a + b }} {% endfor %}"), "3 7 ");
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}"
                   "{{ x }}{% endfor %}"),
            "013");
  EXPECT_EQ(render("{% for x in range(1, 7, 2) %}{{ x }}{% endfor %}{% for x in 'hé' %}[{{ x }}]{% endfor %}"), "135[h][é]");
}

TEST(Jinja, SetScopesAndNamespaces) {
  // A set inside a loop stays in the loop; a namespace carries state out of it.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}"), "1");
  // ... and in jinja2 not even into the next iteration.
  EXPECT_EQ(render("{% set x = 0 %}{% for i in [1, 2] %}[{{ x }}]{% set x = i %}{% endfor %}"), "[0][0]");
  EXPECT_EQ(render("{% set ns = namespace(found=false, n=0) %}{% for i in [1, 2, 3] %}{% if i == 2 %}"
                   "{% set ns.found = true %}{% endif %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.found }} {{ ns.n }}"),
            "True 6");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
  EXPECT_EQ(render("{% set block %}x{{ 1 + 1 }}{% endset %}[{{ block }}]"), "[x2]");
  EXPECT_EQ(render("{% if true %}{% set y = 'in if' %}{% endif %}{{ y }}"), "in if");
}

TEST(Jinja, RunawayRecursionIsAnError) {
  EXPECT_EQ(error_of("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}"),
            "template line 1:20: macro 'r' recursed too deep");
  EXPECT_EQ(error_of("{{ 'ab' * 1000000000000 }}"), "template line 1:9: repetition too large");
}

TEST(Jinja, Macros) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('a') }} {{ greet('b', '?') }} {{ greet(name='c', punct='.') }}"),
            "Hi a! Hi b? Hi c.");
}

TEST(Jinja, TestsAsJinja2DefinesThem) {
  nlohmann::json g = {{"s", "x"}, {"n", nullptr}, {"i", 3}, {"f", 1.5}, {"l", {1}}, {"d", {{"k", 1}}}, {"b", false}};
  EXPECT_EQ(render("{{ s is defined }}{{ u is defined }}{{ u is undefined }}{{ n is none }}{{ s is not none }}", g),
            "TrueFalseTrueTrueTrue");
  EXPECT_EQ(render("{{ s is string }}{{ i is string }}{{ d is mapping }}{{ l is mapping }}{{ l is iterable }}"
                   "{{ s is iterable }}{{ i is iterable }}{{ l is sequence }}",
                   g),
            "TrueFalseTrueFalseTrueTrueFalseTrue");
  EXPECT_EQ(render("{{ i is number }}{{ f is number }}{{ s is number }}{{ b is false }}{{ b is true }}{{ 0 is false }}"
                   "{{ i is odd }}{{ i is even }}{{ 9 is divisibleby(3) }}{{ i is eq 3 }}",
                   g),
            "TrueTrueFalseTrueFalseFalseTrueFalseTrueTrue");
}

TEST(Jinja, OperatorsInAndLogic) {
  nlohmann::json g = {{"m", {{"role", "user"}, {"tool_calls", {}}}}, {"s", "<think>x</think>"}};
  EXPECT_EQ(render("{{ 'tool_calls' in m }}{{ 'x' in m }}{{ '</think>' in s }}{{ 3 in [1, 3] }}{{ 'a' not in 'bcd' }}", g),
            "TrueFalseTrueTrueTrue");
  EXPECT_EQ(render("{{ 0 or 'b' }}|{{ 1 and 'c' }}|{{ not 0 }}|{{ '' or [] }}|{{ 1 < 2 < 3 }}{{ 3 < 2 < 4 }}"), "b|c|True|[]|TrueFalse");
  EXPECT_EQ(render("{{ 'y' if x else 'n' }}{{ 'y' if not x else 'n' }}[{{ 'only' if x }}][{{ 'no' if not x }}]",
                   {{"x", true}}),
            "yn[only][]");
  EXPECT_EQ(render("{{ 1 == 1.0 }}{{ 'a' == 'a' }}{{ [1, 'a'] == [1, 'a'] }}{{ none == none }}{{ u == none }}"),
            "TrueTrueTrueTrueFalse");
}

TEST(Jinja, SubscriptsSlicesAndAttributes) {
  nlohmann::json g = {{"xs", {1, 2, 3, 4}}, {"s", "héllo"}, {"m", {{"role", "user"}, {"content", "hi"}}}};
  EXPECT_EQ(render("{{ xs[0] }}{{ xs[-1] }}{{ xs[1:] }}{{ xs[:2] }}{{ xs[::-1] }}{{ xs[::2] }}{{ xs[10] }}", g),
            "14[2, 3, 4][1, 2][4, 3, 2, 1][1, 3]");
  EXPECT_EQ(render("{{ s[1] }}{{ s[::-1] }}{{ s[1:3] }}{{ s|length }}", g), "éolléhél5");
  EXPECT_EQ(render("{{ m.role }}{{ m['content'] }}{{ m.missing }}{{ m.missing.deeper }}{{ m.get('role') }}"
                   "{{ m.get('x', 'dflt') }}{{ m.get('x') }}",
                   g),
            "userhiuserdfltNone");
  // nlohmann::json hands over its keys sorted.
  EXPECT_EQ(render("{{ m.keys()|list }}{{ m.values()|list }}{{ m|items|list }}", g),
            "['content', 'role']['hi', 'user'][('content', 'hi'), ('role', 'user')]");
}

TEST(Jinja, StringMethods) {
  nlohmann::json g = {{"s", "\n\n<think>\nr\n</think>\n\n answer "}};
  EXPECT_EQ(render("[{{ s.split('</think>')[-1].lstrip('\\n') }}]", g), "[ answer ]");
  EXPECT_EQ(render("[{{ s.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}]", g), "[r]");
  EXPECT_EQ(render("[{{ '  a b  '.strip() }}][{{ 'xxaxx'.strip('x') }}][{{ 'a,b,,c'.split(',') }}][{{ ' a  b '.split() }}]"),
            "[a b][a][['a', 'b', '', 'c']][['a', 'b']]");
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'bc')) }}{{ 'Héllo'.upper() }}{{ 'HÉLLO Привет'.lower() }}"
                   "{{ 'hello world'.title() }}{{ 'a-a'.replace('a', 'b') }}{{ 'aaa'.replace('a', 'b', 2) }}"),
            "TrueTrueHÉLLOhéllo приветHello Worldb-bbba");
}

TEST(Jinja, Filters) {
  nlohmann::json g = {{"xs", {"b", "a"}}, {"ms", {{{"role", "user"}, {"n", 1}}, {{"role", "system"}, {"n", 2}}}}};
  EXPECT_EQ(render("[{{ '  x \\n'|trim }}][{{ 'ab'|upper }}][{{ 'AB'|lower }}][{{ 'hello wORLD'|capitalize }}]"
                   "[{{ 'hello wORLD'|title }}][{{ xs|join(', ') }}][{{ xs|first }}][{{ xs|last }}][{{ xs|length }}]",
                   g),
            "[x][AB][ab][Hello world][Hello World][b, a][b][a][2]");
  EXPECT_EQ(render("[{{ u|default('d') }}][{{ ''|default('d') }}][{{ ''|default('d', true) }}][{{ '42'|int + 1 }}]"
                   "[{{ 'x'|int }}][{{ '2.5'|float }}][{{ 3|string ~ 'x' }}][{{ 2.567|round(2) }}][{{ 2.5|round }}][{{ 3.5|round }}][{{ 2.675|round(2) }}]",
                   g),
            "[d][][d][43][0][2.5][3x][2.57][2.0][4.0][2.67]");
  EXPECT_EQ(render("{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='n')|list }}"
                   "{{ ms|rejectattr('role', 'equalto', 'user')|list|length }}{{ xs|reject('equalto', 'a')|list }}"
                   "{{ xs|sort }}{{ [3, 1, 2]|sort(reverse=true) }}{{ [1, 1, 2]|unique|list }}{{ xs|reverse|list }}",
                   g),
            "[1]1['b']['a', 'b'][3, 2, 1][1, 2]['a', 'b']");
  EXPECT_EQ(render("{{ 'a<b'|safe }}{{ 'x'|replace('x', 'y') }}{{ 'l1\\nl2'|indent(2) }}"), "a<byl1\n  l2");
}

TEST(Jinja, ToJsonAsTransformersDumps) {
  nlohmann::json g = {{"v", {{"name", "f"}, {"args", {{"q", "é \"x\"\n<tag>"}, {"n", {1, 2.5, true, nullptr}}, {"e", nlohmann::json::object()}}}}}};
  // nlohmann::json sorts keys; Python keeps the given order, which here is sorted too.
  EXPECT_EQ(render("{{ v|tojson }}", g), R"({"args": {"e": {}, "n": [1, 2.5, true, null], "q": "é \"x\"\n<tag>"}, "name": "f"})");
  EXPECT_EQ(render("{{ v.args.n|tojson(indent=2) }}", g), "[\n  1,\n  2.5,\n  true,\n  null\n]");
  EXPECT_EQ(render("{{ {'b': 1, 'a': {}}|tojson(indent=4) }}"), "{\n    \"b\": 1,\n    \"a\": {}\n}");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}{{ '\x01'|tojson }}"), "{\"a\": 2, \"b\": 1}\"\\u0001\"");
}

TEST(Jinja, SyntaxErrorsNameLineColumnAndToken) {
  EXPECT_EQ(error_of("line one\n{% if x %}\n  {{ x + }}\n{% endif %}"),
            "template line 3:10: unexpected '}}'");
  EXPECT_EQ(error_of("{% for x in xs %}\n{{ x }}"), "template line 2:8: unexpected end of template, expected 'else'");
  EXPECT_EQ(error_of("ok\n {% frobnicate %}"), "template line 2:5: unknown tag 'frobnicate'");
  EXPECT_EQ(error_of("{{ 'a' | nosuchfilter }}"), "template line 1:10: unknown filter 'nosuchfilter'");
  EXPECT_EQ(error_of("{{ x is nosuchtest }}"), "template line 1:9: unknown test 'nosuchtest'");
  EXPECT_EQ(error_of("{{ 'abc }}"), "template line 1:4: unterminated string literal");
  EXPECT_EQ(error_of("a\n{{ x"), "template line 2:1: unclosed tag '{{'");
  EXPECT_EQ(error_of("{{ x $ y }}"), "template line 1:6: unexpected character '$'");
  EXPECT_EQ(error_of("{% endif %}"), "template line 1:4: unknown tag 'endif'");
}

TEST(Jinja, RenderErrorsNameLineAndWhat) {
  EXPECT_EQ(error_of("\n{{ 'a'.nosuchmethod() }}"), "template line 2:8: unknown method 'nosuchmethod' of str");
  EXPECT_EQ(error_of("{{ nosuchfunction(1) }}"), "template line 1:4: 'nosuchfunction' is undefined");
  EXPECT_EQ(error_of("{{ 'a' + none }}"), "template line 1:8: unsupported operand type(s) for +: 'str' and 'NoneType'");
  EXPECT_EQ(error_of("{% set x = 1 %}{% set x.y = 2 %}"), "template line 1:19: cannot assign attribute on non-namespace object 'x'");
  EXPECT_EQ(error_of("{{ 1 // 0 }}"), "template line 1:6: integer division or modulo by zero");
}

}  // namespace
}  // namespace verl::text::jinja

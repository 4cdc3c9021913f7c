"""Renders a few hundred small Jinja snippets (every filter, test, method, operator and
whitespace rule the chat templates lean on, and then some) with Python's jinja2 set up as
transformers sets it up, into the JSONL shape of tests/peers/render_chat.mjs: one template and one
case per snippet. The ChatTemplatePeer gtest then requires text/jinja to render each the same.
Python's jinja2 is the engine transformers runs, so this is the reference where the JS port and
Python differ (None prints "None", a for-loop iteration has its own scope, round() is half to even).

    python3 tests/peers/render_snippets_jinja2.py <out.jsonl>

The context's dicts have sorted keys, as nlohmann::json hands them to the C++ side.
Exit 2 when python3 has no jinja2.
"""
import json
import sys

try:
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("render_snippets_jinja2.py: python3 has no jinja2", file=sys.stderr)
    sys.exit(2)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception

ctx = {"messages": [{"content": " Hé llo\n", "role": "user"}, {"content": "<think>\nr\n</think>\n\nans", "role": "assistant"}],
       "add_generation_prompt": True, "s": "  Mixed Case-text (x) [y] <z>\t", "n": 7, "f": -2.5, "z": 0, "l": [3, 1, "a"], "d": {"a": [1, {"c": None}], "b": 1},
       "e": "", "t": True, "nn": None, "u8": "日本語🚀", "nums": [4, 2, 9, 2]}
exprs = r"""
s|trim
s|upper
s|lower
s|title
s|capitalize
s.title()
s.capitalize()
s.strip()
s.lstrip()
s.rstrip()
s.strip(' \t(')
s.split()
s.split(' ')
s.split('e', 1)
s.replace('e', 'E')
s.startswith(' ')
s.endswith('\t')
s|length
u8|length
u8[1]
u8[::-1]
u8[1:]
u8|list
u8|reverse
u8|first
u8|last
s|wordcount
s.find('x')
s.count('e')
n + f
n - f
n * f
n / 2
n // 2
n % 3
-n // 3
-n % 3
n ** 2
f // 1
f % 1
2 ** -1
n / 4
1 / 3
2 / 3
10 / 5
1e3
1.5e300 * 1e10
0.1 * 3
100000000000000000000.0
1e16
1e15
123456789.123
-0.0
n|float
f|int
'3.9'|int
'  12 '|int
'x'|float
'1e3'|float
n|string
f|string
t|string
nn|string
l|string
d|string
d|tojson
d|tojson(indent=2)
l|tojson
l|tojson(indent=0)
u8|tojson
s|tojson
nn|tojson
t|tojson
f|tojson
d|tojson(sort_keys=true)
d|tojson(separators=(',', ':'))
[1, [2, []], {}]|tojson(indent=2)
d|items|list
d.items()|list
d.keys()|list
d.values()|list
d.get('a')
d.get('zz', 5)
d.get('zz')
d['b']
d.b
d.zz
d.zz is defined
l[0]
l[-1]
l[5]
l[1:]
l[:-1]
l[::-1]
l[::2]
l[-2:]
l|length
l|first
l|last
l|join('-')
l|join
nums|sort
nums|sort(reverse=true)
nums|unique|list
nums|max
nums|min
nums|sum
nums|reverse|list
nums|select('odd')|list
nums|reject('odd')|list
nums|select('gt', 2)|list
nums|map('string')|join(',')
messages|map(attribute='role')|list
messages|selectattr('role', 'equalto', 'user')|list|length
messages|rejectattr('role', 'equalto', 'user')|map(attribute='content')|first
messages|selectattr('role')|list|length
messages[0].content|trim
messages[1].content.split('</think>')[-1].lstrip('\n')
messages[1].content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
'</think>' in messages[1].content
'user' in messages|map(attribute='role')
'b' in d
'zz' not in d
3 in l
'x' in 'xyz'
n > 3 and f < 0
n > 3 or nn
nn or 'dflt'
e or 'empty'
not e
not l
z == 0
z == false
1 == true
nn == none
nn is none
u is undefined
u is defined
n is number
t is number
t is boolean
f is float
n is integer
s is string
l is sequence
d is sequence
d is iterable
d is mapping
n is odd
n is even
n is divisibleby 7
n is divisibleby(2)
n is eq 7
n is ne 7
n is lt 8
n is ge 7
n is in l
3 is in l
t is true
t is false
z is false
s is lower
'abc' is lower
'ABC' is upper
e|default('d')
u|default('d')
e|default('d', true)
nn|default('d')
nn|default('d', true)
u|d('x')
'x' if t else 'y'
'x' if nn
('x' if nn) is defined
n ~ f ~ t ~ nn ~ u
'a' ~ l
[1, 2] + [3]
'ab' * 3
(1, 2)
(1,)
()
[]
{}
{'a': 1, 'b': [1]}
range(3)|list
range(1, 10, 3)|list
range(5, 0, -2)|list
namespace(a=1).a
dict(a=1, b=2)
n|abs
f|abs
f|round
2.5|round
3.5|round
2.675|round(2)
1.23456|round(3)
f|round(0, 'floor')
f|round(0, 'ceil')
'a\nb\n\nc'|indent
'a\nb\n\nc'|indent(2, true)
'a\nb\n\nc'|indent(2, blank=true)
'<&>'|e
'<&>'|safe
s|replace(' ', '_')
'aaa'|replace('a', 'b', 2)
'a' < 'b'
[1, 2] < [1, 3]
1 < 2 < 3
3 > 2 > 5
'abc'[1:2]
true
True
none
None
"x" 'y' "z"
'\x41\u00e9\\\'\"'
l|length > 2
messages|length - 1
(messages|length - 1) - 0
messages[::-1]|map(attribute='role')|join(',')
'a' + 1
nn + 1
1 // 0
n / z
raise_exception('boom')
'x'.nosuch()
u()
d.a.b.c + 1
l + 'x'
'a' < 1
n is odd(2, 3)
"""
exprs = [e for e in exprs.strip("\n").split("\n") if e]
stmts = r"""
{% for x in l %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}
{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}
{% for k in d %}{{ k }}{% endfor %}
{% for x in l if x is number %}{{ x }}/{{ loop.length }};{% else %}none{% endfor %}
{% for x in [] %}x{% else %}empty{% endfor %}
{% for x in l %}{% for y in l %}{{ loop.index }}{% endfor %}|{{ loop.index }}{% endfor %}
{% set ns = namespace(c=0) %}{% for x in l %}{% set ns.c = ns.c + 1 %}{% endfor %}{{ ns.c }}
{% set x = 1 %}{% for i in l %}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}
{% macro m(a, b=2) %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(1, 3) }}{{ m(b=5, a=0) }}
{% set a, b = [1, 2] %}{{ b }}{{ a }}
{% set blk %}  in block {{ n }}  {% endset %}[{{ blk }}]
{% if n > 5 %}big{% elif n > 2 %}mid{% else %}small{% endif %}
{% for x in range(10) %}{% if x is odd %}{% continue %}{% endif %}{% if x > 6 %}{% break %}{% endif %}{{ x }}{% endfor %}
{{ 'a' }}   {{ 'b' }}
  {% if t %}
    x
  {% endif %}
end
{%- if t -%}
   x
{%- endif -%}
 end
{# comment #}
{#- comment -#}   after
{{ n -}}   {{- n }}
line1
{% if t %}
line2
{% endif %}
line3
{% for x in l %}
  - {{ x }}
{% endfor %}
<{%- for x in l -%} {{ x }} {%- endfor -%}>
{% filter upper %}hello {{ n }}{% endfilter %}
{% for x in l %}{{ loop.previtem }}/{{ loop.nextitem }};{% endfor %}
{% for x in l %}{{ loop.cycle('o', 'e') }}{% endfor %}
{% for x in l %}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{% endfor %}
{% set d2 = {'k': [1, 2]} %}{{ d2.k[1] }}{{ d2['k'][0] }}
{% if messages[0]['role'] == 'user' %}{{ messages[0]['content'] | trim }}{% endif %}
{% for m in messages %}{{ '<|' + m.role + '|>' + m.content + '\n' }}{% endfor %}
"""
stmts = stmts.strip("\n").split("\n{") 
rows = []
sources = ["{{ " + e + " }}" for e in exprs] + [("{" + s if i else s) for i, s in enumerate(stmts)]
for i, src in enumerate(sources):
    name = f"t{i}"
    rows.append({"kind": "template", "name": name, "source": src})
    try:
        row = {"kind": "case", "template": name, "context": ctx, "text": env.from_string(src).render(**ctx)}
    except Exception as ex:  # noqa: BLE001 - a refusal is a result to compare
        row = {"kind": "case", "template": name, "context": ctx, "error": repr(ex)}
    rows.append(row)
with open(sys.argv[1], "w", encoding="utf-8") as f:
    for r in rows:
        f.write(json.dumps(r, ensure_ascii=False) + "\n")
print(f"render_snippets_jinja2.py: {len(sources)} snippets -> {sys.argv[1]}", file=sys.stderr)

"""Re-renders the cases of tests/peers/render_chat.mjs with Python's jinja2 set up as transformers'
apply_chat_template sets it up, and reports where the JS peer and Python disagree.

    python3 tests/peers/render_chat_jinja2.py <cases.jsonl>

This keeps the corpus honest: where both agree, matching the JS peer means matching what verl's
Python stack renders. One disagreement is known and allowed: an empty message list, where Python's
Undefined raises on messages[0]['role'] and the JS port (and verlctl) render on. Exit 1 on any
other disagreement, 2 when jinja2 is missing.
"""
import json
import sys
from datetime import datetime

try:
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("render_chat_jinja2.py: python3 has no jinja2", file=sys.stderr)
    sys.exit(2)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)

templates, cases, known, bad = {}, 0, 0, 0
for line in open(sys.argv[1], encoding="utf-8"):
    row = json.loads(line)
    if row["kind"] == "template":
        templates[row["name"]] = env.from_string(row["source"])
        continue
    cases += 1
    try:
        text, error = templates[row["template"]].render(**row["context"]), None
    except Exception as e:  # noqa: BLE001 - any failure is an error to compare
        text, error = None, repr(e)
    if (error is None) == ("error" not in row) and (error is not None or text == row["text"]):
        continue
    if not row["context"]["messages"]:
        known += 1
        continue
    bad += 1
    if bad <= 5:
        print(f"{row['template']}: python {error or repr(text[:300])}\n    js {row.get('error') or repr(row['text'][:300])}")
print(f"render_chat_jinja2.py: {cases} cases, {bad} disagreements, {known} known (empty messages)", file=sys.stderr)
sys.exit(1 if bad else 0)

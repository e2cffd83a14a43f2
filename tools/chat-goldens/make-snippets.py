#!/usr/bin/env python3
"""Writes tests/data/chat/snippets.jsonl: small templates that pin down Jinja2/Python semantics
(printing, arithmetic, slicing, filters, tests, methods, scoping, whitespace control, errors),
rendered by Python Jinja2 configured as transformers configures it (render_fixed.py: the oracle's
render_py.py with strftime_now fixed at 2024-07-26 14:05:09).
The first line holds the default variables; a row may carry its own "vars"."""
import json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = {"x": 5, "s": "Hello World", "l": [3, 1, 2], "d": {"b": 1, "a": [1, 2]}, "n": None, "f": 1.5,
           "u": "h\u00e9llo w\u00f6rld", "e": "", "t": True,
           "messages": [{"role": "user", "content": "hi"},
                        {"role": "assistant", "content": "yo", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]}]}

# one template per line; "\\n" in a line is a newline
EXPRESSIONS = r"""
{{ x }}|{{ s }}|{{ l }}|{{ d }}|{{ n }}|{{ f }}|{{ t }}|{{ e }}|{{ undefined_var }}
{{ x + 1 }} {{ x - 10 }} {{ x * 2.5 }} {{ x / 2 }} {{ x // 2 }} {{ -x // 2 }} {{ x % 3 }} {{ -x % 3 }} {{ x ** 2 }} {{ 2 ** -1 }}
{{ s ~ x ~ n ~ l }}
{{ s[0] }}{{ s[-1] }}{{ s[1:3] }}{{ s[::-1] }}{{ s[::2] }}{{ s[100] }}|{{ l[1:] }}{{ l[-1] }}{{ l[::-1] }}{{ u[1:4] }}{{ u[-3:] }}
{{ s | length }} {{ u | length }} {{ l | length }} {{ d | length }} {{ undefined_var | length }}
{{ s.upper() }} {{ s.lower() }} {{ s | upper }} {{ s | lower }} {{ s | title }} {{ "hello world" | capitalize }} {{ "hello world".title() }} {{ "they're bill's" | title }} {{ "they're bill's".title() }}
{{ s.split() }} {{ s.split("o") }} {{ s.split("o", 1) }} {{ s.rsplit("o", 1) }} {{ "  a  b  ".split() }} {{ "a,b,,c".split(",") }}
{{ "  xx  ".strip() }}|{{ "  xx  ".lstrip() }}|{{ "  xx  ".rstrip() }}|{{ "xxaxx".strip("x") }}|{{ "\n\nabc\n".strip("\n") }}
{{ s.startswith("Hell") }} {{ s.endswith("ld") }} {{ s.startswith(("a", "H")) }} {{ s.replace("l", "L") }} {{ s.replace("l", "L", 2) }} {{ s.replace("", "-") }}
{{ s.find("o") }} {{ s.rfind("o") }} {{ s.count("l") }} {{ u.find("w") }}
{{ l | join(", ") }} {{ l | join }} {{ ["a", "b"] | join("-") }}
{{ l | sort }} {{ l | sort(reverse=true) }} {{ ["b", "A", "c"] | sort }} {{ ["b", "A", "c"] | sort(case_sensitive=true) }} {{ d | dictsort }}
{{ l | first }} {{ l | last }} {{ l | min }} {{ l | max }} {{ l | sum }} {{ s | first }} {{ s | last }}
{{ d | tojson }} {{ l | tojson }} {{ s | tojson }} {{ u | tojson }} {{ n | tojson }} {{ f | tojson }} {{ t | tojson }} {{ {"a": "<>&'"} | tojson }}
{{ d | tojson(indent=2) }}
{{ d | tojson(indent=4, sort_keys=true) }}{{ [] | tojson(indent=2) }}{{ {} | tojson(indent=2) }}
{{ messages | tojson }}
{{ messages[1].tool_calls[0].function.arguments | tojson }}
{{ n | default("dflt") }} {{ undefined_var | default("dflt") }} {{ e | default("dflt", true) }} {{ undefined_var | d("x") }}
{{ x is defined }} {{ undefined_var is defined }} {{ n is none }} {{ s is string }} {{ l is iterable }} {{ d is mapping }} {{ x is number }} {{ x is integer }} {{ f is float }} {{ t is boolean }} {{ l is sequence }} {{ x is even }} {{ x is odd }} {{ x is divisibleby 5 }}
{{ "a" in s }} {{ "H" in s }} {{ 3 in l }} {{ "b" in d }} {{ "z" not in d }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ "a" < "b" }} {{ [1, 2] < [1, 3] }}
{% for i in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}|{% endfor %}
{% for i in l if i > 1 %}{{ i }}:{{ loop.index }}/{{ loop.length }} {% else %}empty{% endfor %}
{% for i in [] %}x{% else %}empty{% endfor %}
{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}
{% for k in d %}{{ k }}{% endfor %}{% for c in "abc" %}{{ c }}-{% endfor %}
{% set ns = namespace(a=1, b="x") %}{% for i in l %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }} {{ ns.b }}
{% set y = 1 %}{% for i in l %}{% set y = y + i %}{{ y }}{% endfor %}{{ y }}
{% macro m(a, b="B") %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m(b=3, a=4) }}
{% macro m2() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m2(1, 2, z=3) }}
{% macro outer() %}<{{ caller() }}>{% endmacro %}{% call outer() %}inside{% endcall %}
{% set x2 %}block {{ x }}{% endset %}{{ x2 }}|{{ x2 | length }}
{% filter upper %}hello {{ s }}{% endfilter %}
{{ "%s and %d and %05.2f and %r" % ("a", 3, 2.5, "q") }} {{ "%s" % s }} {{ "%(a)s" % {"a": 1} }} {{ "%x %o %e %g" % (255, 8, 12345.678, 0.0001) }}
{{ "{} {}".format(1, "x") }} {{ "{0}{1}{0}".format("a", "b") }} {{ "{name}!".format(name="n") }} {{ "{:>5}|{:<5}|{:^5}".format("a", "b", "c") }}
{{ range(5) | list }} {{ range(1, 10, 3) | list }} {{ range(5, 0, -2) | list }} {{ range(3) }} {{ range(0, 10, 2) }}
{{ x if x > 3 else "small" }} {{ "yes" if n else "no" }} {{ (x if n) }}|
{{ not x }} {{ x and s }} {{ n or "fallback" }} {{ x and n }}
{{ l + [4] }} {{ s * 2 }} {{ [0] * 3 }} {{ (1, 2) + (3,) }} {{ (1,) }} {{ () }}
{{ 1.0 }} {{ 1e16 }} {{ 1e15 }} {{ 0.1 + 0.2 }} {{ 1/3 }} {{ 100.0 }} {{ 2.5e-5 }} {{ -0.0 }} {{ 1.5e300 * 1e10 }}
{{ 7.0 // 2 }} {{ -7.0 // 2 }} {{ 7.5 % 2 }} {{ -7.5 % 2 }} {{ 2 ** 0.5 }}
{{ 3 | float }} {{ "3.5" | float }} {{ "x" | float }} {{ "42" | int }} {{ "42.7" | int }} {{ "x" | int }} {{ 3.9 | int }} {{ " 12 " | int }} {{ "0x1A" | int(base=16) }}
{{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 3 | round }} {{ 2.4 | round(0, "ceil") }} {{ -2.5 | abs }} {{ -3 | abs }}
{{ "hello\nworld" | indent(2) }}|{{ "hello\nworld\n\nend" | indent(2, first=true) }}|{{ "a\n\nb" | indent(3, blank=true) }}
{{ l | map("string") | join(",") }} {{ messages | map(attribute="role") | list }} {{ messages | selectattr("role", "equalto", "user") | list }} {{ messages | rejectattr("role", "equalto", "user") | map(attribute="content") | list }}
{{ [1, 2, 3, 4] | select("even") | list }} {{ [1, 2, 3, 4] | reject("odd") | list }} {{ [0, 1, "", "a"] | select | list }}
{{ [1, 2, 2, 3, 1] | unique | list }} {{ ["a", "A", "b"] | unique | list }} {{ l | reverse | list }} {{ s | reverse }}
{{ d.get("a") }} {{ d.get("zz") }} {{ d.get("zz", 5) }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.items() | list }} {{ d | items | list }}
{{ d.items() }} {{ d.keys() }}
{{ "<b>" | e }} {{ "<b>" | safe }} {{ "<b>" | safe + "<i>" }} {{ "<i>" + "<b>" | safe }} {{ "a" ~ ("<b>" | e) ~ "<i>" }}
{{ "abc" | center(9) }}|{{ "abc".center(8, "*") }}|{{ "42".zfill(5) }}|{{ "-42".zfill(5) }}|{{ "ab".ljust(4) }}|{{ "ab".rjust(4, "0") }}
{{ "a b c".partition(" ") }} {{ "a b c".rpartition(" ") }} {{ "line1\nline2\r\nline3".splitlines() }} {{ "abc".removeprefix("a") }} {{ "abc".removesuffix("c") }}
{{ "123".isdigit() }} {{ "12a".isdigit() }} {{ "abc".isalpha() }} {{ "   ".isspace() }} {{ "abc".islower() }} {{ "ABC".isupper() }} {{ "Ab".islower() }}
{{ dict(a=1, b=2) }} {{ dict({"x": 1}, y=2) }} {{ namespace(a=1) }} {{ {"a": 1} == {"a": 1} }} {{ [1, 2] == [1, 2] }} {{ 1 == 1.0 }} {{ 1 == true }}
{{ {1: "a", "b": 2, none: 3, true: 4} }} {{ {1: "a"} | tojson }}
{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, e2 = [3, 4] %}{{ c }}{{ e2 }}
{%- if true -%}  X  {%- endif -%}  Y  {{- " Z " -}}  W
{% for i in range(3) %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}|{% for i in range(10) %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}
{{ strftime_now("%Y-%m-%d %H:%M:%S %a %A %b %B %d %-d %I %p %j %y") }}
{{ x.y }}
{{ undefined_var.y }}
{{ undefined_var + 1 }}
{{ raise_exception("boom") }}
{{ l.append(4) }}
{{ [1].append }}|{{ s.nomethod }}|{{ d.nokey }}|{{ d["nokey"] }}
{{ none.x }}|{{ x[0] }}|{{ x.real }}
{{ "a" + 1 }}
{{ 1 / 0 }}
{{ l | join(", ", attribute="x") }}
{{ messages[0]["role"] }} {{ messages[0].role }} {{ messages[-1].content }} {{ messages[10] }} {{ messages | length }}
{{ loop.index }}
{% for m in messages %}{{ loop.previtem.role if not loop.first }}/{{ loop.nextitem.role if not loop.last }}{{ loop.cycle("a", "b") }}{% endfor %}
{{ "%.3s|%5s|%-5s|" % ("abcdef", "ab", "ab") }}
{{ 10 | string + "x" }} {{ l | string }} {{ n | string }} {{ (l | string)[0] }}
{{ "Hello" | wordcount }} {{ "a b  c" | wordcount }} {{ [1,2,3,4,5] | batch(2) | list }} {{ [1,2,3] | batch(2, 0) | list }}
{{ "x" is lower }} {{ "X" is upper }} {{ "x1" is lower }} {{ "1" is lower }} {{ x is sameas 5 }} {{ n is sameas none }}
{{ x is eq 5 }} {{ x is ne 5 }} {{ x is lt 6 }} {{ x is gt 6 }} {{ x is in [5] }} {{ "upper" is filter }} {{ "foo" is test }} {{ "defined" is test }}
{%- set z = {"k": {"n": [1, {"deep": "v"}]}} -%}{{ z.k.n[1].deep }} {{ z["k"]["n"][0] }} {{ z.k.n.1.deep }}
{{ [3, 1, 2] | sort | first }} {{ {"b": 1, "a": 2} | dictsort(by="value") }} {{ {"b": 1, "a": 2} | dictsort(reverse=true) }}
{% set g = l | map("string") %}{{ g | join }}|{{ g | join }}|
{{ l | map("string") | first }}
{{ "ß".upper() }} {{ "éa" | upper }} {{ "ÀÉ" | lower }} {{ "ǅ" | lower }}
{{ "ß".upper() }} {{ "éa" | upper }} {{ "ÀÉ" | lower }} {{ "ǅ" | lower }} {{ "ǆ".title() }} {{ "ﬁne".upper() }} {{ "İ".lower() }} {{ "ΣΑΣ".lower() }} {{ "ΣΑΣ ΣΑΣ." | lower }} {{ "ὈΔΥΣΣΕΎΣ".lower() }}
{{ "hELLO wORLD ß" | capitalize }} {{ "ǆemal" | capitalize }} {{ "ΣΑΣ-ΣΑΣ" | title }} {{ "élan vital(x)y" | title }} {{ "ﬁne day" | title }} {{ "ﬁne day".title() }}
{{ "AbC ẞ" .swapcase() }} {{ "Ǳ" is upper }} {{ "ǲ" is upper }} {{ "ǳ" is lower }} {{ "ǲ" is lower }} {{ "ⓐ" is lower }} {{ "𝐀" is upper }} {{ "ª" is lower }}
{{ ["a\u00a0b", "\u200b", "é", "\x7f", "\ud7ff", "\U0001F600", "\u0378", "\ue000", "'", "\"", "'\""] }}
{{ "Straße".upper() }} {{ "ΌΣΟΣ" | lower }} {{ "Σ" | lower }} {{ "aΣ" | lower }} {{ "aΣb" | lower }} {{ "a'Σ" | lower }}
{% for i in l %}{% continue %}{% else %}E{% endfor %}|{% for i in [1] %}{% break %}{% else %}E{% endfor %}|{% for i in l %}{% if i == 1 %}{% continue %}{% endif %}{% else %}E{% endfor %}
{{ x is defined(1) }}
{{ s is lower {} }}
{{ cycler() }}
{{ cycler(a=1) }}
{{ 'x' if (true)[1:] else 'y' }}|{{ (s if (true)[1:] else 'y') }}|{{ false and x }}|{{ (1 if x) if false else 2 }}|{{ (true)[1:] }}
{{ (s is number)[1:] }}
{{ range(-2)[::-1] }} {{ range(10)[2:8:2] }} {{ range(10)[-1] }} {{ range(2, 20, 3)[::-2] }} {{ range(3)[5:] }} {{ range(3)[5] }}|{% for i in range(3)[::-1] %}{{ i }}{% endfor %}
{% for i in l %}{{ x }}{% endfor %}{% set x = 1 %}|{{ x }}
{% for i in l %}{{ x }}{% endfor %}{% if t %}{% set x = 1 %}{% else %}{% set x = 2 %}{% endif %}
{{ x }}{% for i in l %}{{ x }}{% endfor %}{% set x = 1 %}
{% macro m() %}{{ x }}{% endmacro %}{{ m() }}{% set x = 1 %}{{ m() }}
{% for i in l %}{% for j in l %}{{ x }}{% endfor %}{% set x = i %}{% endfor %}|{% filter upper %}{{ s }}{% endfilter %}{% set s = 'z' %}
{% with a = 1 %}{% for i in l %}{{ b }}{% endfor %}{% set b = 2 %}{% endwith %}{% macro m(a) %}{% for i in l %}{{ a }}{{ y }}{% endfor %}{% set y = 1 %}{% endmacro %}{{ m(3) }}
{% set g = l | map('string') %}{{ g | list }}{{ g | list }}|{{ (l | select) is true }}|{{ l | select('odd') | first }}
{% set g = l | select('even') %}{{ 2 in g }}{{ 2 in g }}|{{ [] | map('upper') | list }}{{ 0 | map('upper') | list }}
{{ x | map('upper') | list }}
{{ 'ǅ'.istitle() }} {{ 'Hello World'.istitle() }} {{ 'hello'.istitle() }} {{ 'é1'.isalnum() }} {{ '٣'.isdecimal() }} {{ '²'.isdigit() }} {{ '½'.isnumeric() }} {{ '五'.isnumeric() }} {{ 'ab'.isalpha() }} {{ 'a b' | wordcount }}
{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns }}
{{ '%s' % [1, 2] }} {{ '%s' % {'a': 1} }} {{ 'x' % {} }}
{{ [1, 2] in {'a': 1} }}
{{ 'hello world foo bar' | truncate(9) }}|{{ 'hello world foo bar' | truncate(9, true) }}|{{ 'héllo wörld' | truncate(3, leeway=0) }}|{{ ('x' * 300) | truncate | length }}|{{ 'abcdefgh ' | truncate(6, end='!', leeway=0) }}|{{ 'a b' | truncate(2, end='') }}
{{ 'ab' | truncate(1) }}
{{ ['b', 'B', 'a'] | sort }} {{ [2, 1.0, 1] | sort }} {{ 'nan' | float | int }} {{ 'inf' | int(7) }}""".strip().split("\n")

# whitespace control and lexer details, rendered without variables
LEXER = [
 "  {% if true %}\n  x\n  {% endif %}\n",
 "a\n  {% if true %}b{% endif %}  \nc",
 "a  {% if true %}b{% endif %}c",
 "{% if true %}\n\nx{% endif %}",
 "  {{ 1 }}  \n  {{- 2 -}}  \n {{ 3 }}",
 "{#- comment -#}  x  {# c2 #}\ny\n  {# c3 #}\nz",
 "{% raw %}{{ not }}{% endraw %}\n{%- raw -%}  {{ x }}  {%- endraw -%}  !",
 "a\r\nb\r\n{% if true %}\r\nc\r\n{% endif %}\r\n",
 "x\n\n",
 "x\n",
 "\t{%- if true %} t {% endif -%}\t\n",
 "{%+ if true %}a{% endif %}\n  {%+ if true %}b{% endif +%}\nc",
 "  {%- if true -%}  \n  a  \n  {%- endif -%}  \n",
 "{{ 'a' }}\n{% set x = 1 %}\n{{ x }}\n",
 " {% for i in [1,2] %}\n  - {{ i }}\n {% endfor %}\n",
 "{% for i in [1,2] -%}\n  {{ i }}\n{%- endfor %}",
 "{{- 'x' }}  \n{#- c #}\n{%- if 1 %}\n{% endif %}",
 "a {{ 'b' }}\n   {% if true %}\n c\n{% endif %}",
 "  {% if true %}x{% endif %}",
 "{% if true %}a{% else %}b{% endif %}{% if false %}a{% elif true %}c{% else %}b{% endif %}",
 "{{ {'a': {'b': 1}} }}{{ {'a':1}['a'] }}",
 "{{ 'a' 'b' \"c\" }}{{ 'it\\'s' }}{{ \"q\\\"q\" }}{{ '\\n\\t\\\\' }}{{ '\\x41\\u00e9\\U0001F600' }}{{ '\\d\\w' }}",
 "{{ 0x1f }} {{ 0o17 }} {{ 0b101 }} {{ 1_000 }} {{ 1.5e3 }} {{ 1e-3 }} {{ 0 }} {{ 007 if false else 1 }}",
 "{%- set x = [1, 2, 3,] -%}{{ x }}{{ (1, 2,) }}",
 "{{ [1,2,3][1:] }}{{ [1,2,3][:-1] }}{{ [1,2,3][::-1] }}{{ [1,2,3][-2:] }}{{ 'abc'[5:] }}{{ [1,2][5:9] }}",
 "{# {{ unclosed #}ok",
 "{% set x = 1 %}{% with x = 2, y = 3 %}{{ x }}{{ y }}{% endwith %}{{ x }}",
 "{% generation %}gen {{ 1 }}{% endgeneration %}",
 "{% for x in 'ab' %}{{ loop.index }}{% for y in 'cd' %}{{ loop.depth }}{{ loop.index }}{% endfor %}{% endfor %}"
]

rows = [{"template": t.replace("\\n", "\n")} for t in EXPRESSIONS] + [{"template": t, "vars": {}} for t in LEXER]
jobs = [{"template": r["template"], "context": r.get("vars", DEFAULT)} for r in rows]
res = subprocess.run([sys.executable, os.path.join(HERE, "render_fixed.py")], input=json.dumps(jobs).encode(),
                     capture_output=True, check=True)
out = os.path.join(HERE, "..", "..", "tests", "data", "chat", "snippets.jsonl")
with open(out, "w", encoding="utf-8") as f:
    f.write(json.dumps({"default_vars": DEFAULT}, ensure_ascii=False) + "\n")
    for r, x in zip(rows, json.loads(res.stdout)):
        r.update(x)
        f.write(json.dumps(r, ensure_ascii=False) + "\n")
print(f"{os.path.normpath(out)}: {len(rows)} snippets")

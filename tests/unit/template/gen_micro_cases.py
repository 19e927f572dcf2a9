#!/usr/bin/env python3
"""Regenerates micro_cases.h: small templates exercising one Jinja feature
each, with the output (or error) of Python's jinja2 3.1 in the environment
Transformers uses (the oracle; Debian's python3-jinja2). Run from this
folder: python3 gen_micro_cases.py > micro_cases.h"""
import json, sys, glob, os, datetime
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.exceptions import TemplateError
def raise_exception(m): raise TemplateError(m)
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
def strftime_now(f): return datetime.datetime(2026,11,29,12,0,0).strftime(f)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now
def render(src, ctx):
    try:
        return {"expected": env.from_string(src).render(**ctx)}
    except Exception as e:
        return {"expected_error": type(e).__name__ + ": " + str(e)}

CTX = {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], "d": {}, "l": []}
T = [
 "{{ [1,'a',1.5,None,True,{'k':[1]}] }}|{{ (1,) }}|{{ 1e20 }}|{{ 1/3 }}|{{ 10/2 }}|{{ 7//2 }}|{{ -7%3 }}|{{ 2**10 }}",
 "{% set x = 0 %}{% for i in [1,2] %}{{ x }}{% set x = i %}{% endfor %}{{ x }}",
 "{{ '%s-%d' % ('a', 3) }}|{{ '{}-{x}'.format(1, x=2) }}|{{ [3,1,2]|sort }}{{ 'abc'|list }}{{ {'a':1}|list }}",
 "{{ u is none }}{{ u == none }}{{ u|length }}{{ u|default('d') }}{{ none|default('d') }}{{ none|default('d', true) }}",
 "{{ 'abc'[1:] }}{{ 'abc'[-1] }}{{ [1,2,3][::-1] }}{{ 'héllo'[1] }}{{ 'héllo'|length }}{{ 'héllo'[1:3] }}",
 "{{ 1.0 }} {{ 0.1+0.2 }} {{ 1e-5 }} {{ 123456789012345678.0 }} {{ 2.5|int }} {{ '3'|int + 1 }} {{ 'x'|int }} {{ 3|float }}",
 "{{ {'a': 1, 'b': 'x<>&é'}|tojson }}|{{ [1, 2.0, none, true]|tojson(indent=2) }}|{{ {'b':1,'a':[]}|tojson(sort_keys=true) }}",
 "{% for k, v in {'a':1,'b':2}.items() %}{{ loop.index }}{{ k }}={{ v }}{% if not loop.last %},{% endif %}{% endfor %}",
 "{% for x in [1,2,3,4] if x is even %}{{ x }}/{{ loop.length }}{% else %}none{% endfor %}{% for x in [] %}x{% else %}empty{% endfor %}",
 "{% macro m(a, b='B') %}[{{ a }}{{ b }}{{ varargs }}{{ kwargs }}]{% endmacro %}{{ m(1) }}{{ m(1, 2, 3, z=4) }}",
 "{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}inside{% endcall %}",
 "{% set ns = namespace(a=1) %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}",
 "{%- for i in range(5) -%}{%- if i == 3 -%}{%- break -%}{%- endif -%}{%- if i == 1 -%}{%- continue -%}{%- endif -%}{{ i }}{%- endfor -%}",
 "  {% if true %}\n    x\n  {% endif %}\n{# c #}\n  y {{ 'z' }}\n",
 "{{ '  a b  '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'abc'.startswith(('x','a')) }}|{{ 'Hello World'.title() }}|{{ 'x'.upper() }}",
 "{{ 'a' in 'cab' }}{{ 1 in [1,2] }}{{ 'k' in {'k':1} }}{{ 2 not in [1] }}{{ 1 < 2 < 3 }}{{ 'b' > 'a' }}",
 "{{ [1,2,3]|join(', ') }}|{{ ['a','b']|map('upper')|join }}|{{ [{'n':1},{'n':2}]|map(attribute='n')|list }}|{{ [1,2,3]|select('odd')|list }}",
 "{{ [{'t':'a'},{'t':'b'}]|selectattr('t','equalto','a')|list }}{{ [{'t':'a'},{'t':'b'}]|rejectattr('t','eq','a')|list|length }}",
 "{{ 'abc'|replace('b','X') }}{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}{{ ' x '|trim }}{{ 'x'|center(5) }}|",
 "{{ {'b':2,'a':1}|dictsort }}{{ [3,1]|max }}{{ ['b','A']|min }}{{ [1,2]|sum }}{{ [1,1,2]|unique|list }}{{ 3.7|round }}{{ -3|abs }}",
 "{{ raise_exception('boom') }}",
 "{{ x.y }}", "{{ d.y.z }}", "{{ 'a' + 1 }}", "{{ 1 + 'a' }}", "{{ [] + 'a' }}", "{{ l.append(1) }}",
 "{{ strftime_now('%d %b %Y %H:%M') }}|{{ 'a' ~ 1 ~ none ~ [1] ~ undefinedvar }}",
 "{{ 10 // 3 }}{{ -10 // 3 }}{{ 10 % -3 }}{{ 2.5 // 1 }}{{ 7 / 2 }}{{ 1e16 }}{{ 1.5e-7 }}{{ -0.0 }}{{ 100.0 }}",
 "{{ 'a' if false }}|{{ 'b' if true else 'c' }}|{{ none is none }}{{ 1 is number }}{{ 'x' is string }}{{ [] is iterable }}{{ {} is mapping }}",
 "{% set s %}block {{ 1 }}{% endset %}{{ s|upper }}{% filter upper %}abc{% endfilter %}",
 "{{ \"it's\" }} {{ ['it\\'s', \"q\\\"\"] }} {{ {'a\\nb': 1} }}",
 "{{ '\\u00e9\\x41\\t' }}|{{ 'x' * 3 }}|{{ [0] * 2 }}|{{ 'ab'|reverse }}|{{ [1,2]|reverse|list }}",
 "{{ messages[0]['content'] }}{{ messages[0].content }}{{ messages[-1].role }}{{ messages|length }}",
 "{% if messages[0].role == 'system' %}{{ messages[1:]|map(attribute='role')|join(',') }}{% endif %}",
 "{{ {'a':1}.get('a') }}{{ {'a':1}.get('b', 2) }}{{ {'a':1}.keys()|list }}{{ {'a':1}.values()|list }}",
 "{{ (1, 2)[0] }}{{ [1,2,3]|first }}{{ [1,2,3]|last }}{{ 'abc'|first }}{{ range(3)|list }}{{ range(1,10,3)|list }}",
 "{{ '%05.2f|%x|%r|%s' % (3.14159, 255, 'q', [1]) }}",
 "{{ 'abc'|capitalize }}{{ 'a b'|wordcount }}{{ 'ab'.count('') }}{{ 'a-b-c'.rsplit('-', 1) }}{{ 'x'.zfill(3) }}",
 "{{ true and 'x' }}{{ false or 0 }}{{ not none }}{{ 0 or '' or 'z' }}",
 "{%- set a, b = 1, 2 -%}{{ a }}{{ b }}{% for (x, y) in [(1, 2)] %}{{ x + y }}{% endfor %}",
 "{{ 5 is divisibleby 5 }}{{ 3 is odd }}{{ 'A' is upper }}{{ x is undefined }}{{ 1 is sameas 1 }}{{ true is true }}{{ 'a' is in 'abc' }}",
 "{{ [1, [2, {'a': none}]]|tojson }}{{ 'é'|tojson }}{{ 'é'|tojson(ensure_ascii=true) }}{{ 1.0|tojson }}{{ 'a\\u0001'|tojson }}",
]


def c_str(s):
    out = []
    for ch in s.encode("utf-8"):
        if ch == 0x22: out.append('\\"')
        elif ch == 0x5C: out.append("\\\\")
        elif ch == 0x0A: out.append("\\n")
        elif ch == 0x09: out.append("\\t")
        elif ch < 0x20 or ch >= 0x7F: out.append("\\%03o" % ch)
        else: out.append(chr(ch))
    return '"' + "".join(out) + '"'


print("/* Generated by gen_micro_cases.py from jinja2 %s: do not edit. */" % __import__("jinja2").__version__)
print("static const char *MICRO_CTX = %s;" % c_str(json.dumps(CTX)))
print("static const struct { const char *tmpl, *expected, *error; } MICRO[] = {")
for t in T:
    r = render(t, CTX)
    print("    {%s, %s, %s}," % (c_str(t), c_str(r["expected"]) if "expected" in r else "NULL",
                                  c_str(r["expected_error"]) if "expected_error" in r else "NULL"))
print("};")

"""Translate the conformance corpora's ECMAScript expressions to Python: a small table of token rules.

The SCION and W3C documents use ``datamodel="ecmascript"``. Their
expressions are simple (comparisons, arithmetic, string concatenation,
object and array literals, ``In()``, a few ``typeof`` and ``in`` tests), so
a table of token rewrites turns each into the Python expression with the
same meaning. ``LITERAL_RULES`` apply first, to the whole expression,
because their pattern holds a string literal; ``RULES`` then apply to the
code between string literals. In order:

| ECMAScript                        | Python                         |
|-----------------------------------|--------------------------------|
| ``(function(str, starts){…})(a, b)`` | ``str(a).startswith(str(b))`` |
| ``typeof x === 'undefined'``      | ``x is None``                  |
| ``'name' in _event``              | ``hasattr(_event, 'name')``    |
| ``s.search(/re/) !== -1`` (or ``'re'``) | ``re.search(r're', s) is not None`` |
| ``x.getElementsByTagName('t')[n].getAttribute('a')`` | ``list(ET.fromstring(x).iter('t'))[n].get('a')`` |
| ``===``, ``!==``                  | ``==``, ``!=``                 |
| ``&&``, ``||``, ``!x``            | ``and``, ``or``, ``not x``     |
| ``a | b`` (between comparisons)   | ``a or b``                     |
| ``true``, ``false``               | ``True``, ``False``            |
| ``null``, ``undefined``           | ``None``                       |
| ``Math.pow(a, b)``                | ``pow(a, b)``                  |
| ``JSON.stringify(x)``             | ``str(x)``                     |
| ``[].concat(a, [b])``             | ``(a + [b])``                  |
| ``x instanceof Array``            | ``isinstance(x, list)``        |
| ``++x``                           | ``(x := x + 1)``               |
| ``var x = 1`` (a statement)       | ``x = 1``                      |
| ``_event.data.name``              | ``_event.data['name']``        |
| ``m['key'].name``                 | ``m['key']['name']``           |
| ``{key: value}``                  | ``{'key': value}``             |
| ``x += 1;`` (a statement)         | ``x += 1`` (no ``;``)          |

The first is the W3C stylesheet's ``conf:varPrefix`` (a ``startsWith``
written as an inline function). ``undefined`` becomes ``None`` because the Python datamodel's unassigned
variable and absent event field are ``None``. Nothing else is rewritten:
a document whose code needs more (function definitions, objects) is
listed with its reason in ``test_scion.py`` or ``test_w3c.py``. The XML DOM
reads become ElementTree reads of the XML text the Python datamodel keeps
for inline markup (its JSON-safe reading).
Comments (``<!-- -->``) are left as they are, so a ``<script>`` mentioned
in one is never taken for code.
"""

from __future__ import annotations

import html
import re

_STRING = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")

_OPERAND = r"[A-Za-z_][\w.]*(?:\[[^\]]*\])*"
"""A variable, a field path or a subscript: the operand ``typeof`` and ``instanceof`` apply to."""

LITERAL_RULES: tuple[tuple[str, str], ...] = (
    (r"\(function\(str, starts\)\{.*?\}\)\(\s*(\w+)\s*,\s*(\w+)\s*\)", r"str(\1).startswith(str(\2))"),
    (rf"\btypeof\s+({_OPERAND})\s*===?\s*'undefined'", r"\1 is None"),
    (r"'([A-Za-z_]\w*)'\s+in\s+_event\b", r"hasattr(_event, '\1')"),
    (
        rf"({_OPERAND})\.search\(\s*(?:/((?:[^/\\]|\\.)*)/|'([^']*)')\s*\)\s*!==\s*-1",
        r"(__import__('re').search(r'\2\3', \1) is not None)",
    ),
    (
        rf"({_OPERAND})\.getElementsByTagName\('([^']*)'\)\[(\d+)\]\.getAttribute\('([^']*)'\)",
        r"list(__import__('xml.etree.ElementTree', fromlist=['_']).fromstring(\1).iter('\2'))[\3].get('\4')",
    ),
)
"""(pattern, replacement) pairs applied in order to the whole expression: their patterns hold literals."""

RULES: tuple[tuple[str, str], ...] = (
    (r"===", "=="),
    (r"!==", "!="),
    (r"&&", " and "),
    (r"\|\|", " or "),
    (r"\s\|\s", " or "),
    (r"!(?!=)", " not "),
    (r"\btrue\b", "True"),
    (r"\bfalse\b", "False"),
    (r"\bnull\b", "None"),
    (r"\bundefined\b", "None"),
    (r"\bMath\.pow\(", "pow("),
    (r"\bJSON\.stringify\(", "str("),
    (r"\[\]\.concat\(\s*([\w.]+)\s*,\s*(\[[^\]]*\])\s*\)", r"(\1 + \2)"),
    (rf"({_OPERAND})\s+instanceof\s+Array\b", r"isinstance(\1, list)"),
    (r"\+\+([A-Za-z_]\w*)", r"(\1 := \1 + 1)"),
    (r"^(\s*)var\s+", r"\1"),
    (r"\b_event\.data\.([A-Za-z_]\w*)\b(?!\s*\()", r"_event.data['\1']"),
    (r"\]\.([A-Za-z_]\w*)\b(?!\s*\()", r"]['\1']"),
    (r"([{,]\s*)([A-Za-z_]\w*)\s*:", r"\1'\2':"),
    (r";\s*$", ""),
)
"""(pattern, replacement) pairs applied in order to the code between string literals."""

_ATTRIBUTES = (
    "cond",
    "expr",
    "array",
    "eventexpr",
    "targetexpr",
    "delayexpr",
    "sendidexpr",
    "srcexpr",
    "typeexpr",
    "location",
)
"""The attributes that hold expressions (``location`` is an lvalue, translated the same way)."""

_COMMENT = re.compile(r"(<!--.*?-->)", re.DOTALL)


def translate(expression: str) -> str:
    """One ECMAScript expression or statement in Python."""
    for pattern, replacement in LITERAL_RULES:
        expression = re.sub(pattern, replacement, expression)
    parts = _STRING.split(expression)
    for n in range(0, len(parts), 2):  # even parts lie outside string literals
        code = parts[n]
        for pattern, replacement in RULES:
            code = re.sub(pattern, replacement, code, flags=re.MULTILINE)
        parts[n] = code
    return "".join(parts)


def _attribute(match: re.Match[str]) -> str:
    name, value = match.group(1), html.unescape(match.group(2))
    return f'{name}="{html.escape(translate(value), quote=True)}"'


def _script(match: re.Match[str]) -> str:
    opening, body = match.group(1), html.unescape(match.group(2))
    lines = [translate(line) for line in body.splitlines()]
    return f"{opening}{html.escape(chr(10).join(lines), quote=False)}</script>"


def _markup(text: str) -> str:
    pattern = r"\b(" + "|".join(_ATTRIBUTES) + r')="([^"]*)"'
    text = re.sub(pattern, _attribute, text)
    return re.sub(r"(<script(?:\s[^>]*)?>)(.*?)</script>", _script, text, flags=re.DOTALL)


def translate_document(text: str) -> str:
    """The document with ``datamodel="python"`` and every expression and inline script translated."""
    text = text.replace('datamodel="ecmascript"', 'datamodel="python"')
    parts = _COMMENT.split(text)
    return "".join(part if n % 2 else _markup(part) for n, part in enumerate(parts))

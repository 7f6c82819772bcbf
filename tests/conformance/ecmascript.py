"""Translate the SCION corpus's ECMAScript expressions to Python: a small table of token rules.

The SCION documents use ``datamodel="ecmascript"``. Their expressions are
simple (comparisons, arithmetic, string concatenation, object and array
literals, ``In()``), so a table of token rewrites applied outside string
literals turns each into the Python expression with the same meaning. The
rules, in order:

| ECMAScript                | Python                  |
|---------------------------|-------------------------|
| ``===``, ``!==``          | ``==``, ``!=``          |
| ``&&``, ``||``, ``!x``    | ``and``, ``or``, ``not x`` |
| ``true``, ``false``       | ``True``, ``False``     |
| ``null``, ``undefined``   | ``None``                |
| ``Math.pow(a, b)``        | ``pow(a, b)``           |
| ``JSON.stringify(x)``     | ``str(x)``              |
| ``_event.data.name``      | ``_event.data['name']`` |
| ``{key: value}``          | ``{'key': value}``      |
| ``x += 1;`` (a statement) | ``x += 1`` (no ``;``)   |

Nothing else is rewritten; a document whose code needs more (function
definitions, ``var``) is listed in ``EXCLUDED`` in ``test_scion.py``.
"""

from __future__ import annotations

import html
import re

_STRING = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")

RULES: tuple[tuple[str, str], ...] = (
    (r"===", "=="),
    (r"!==", "!="),
    (r"&&", " and "),
    (r"\|\|", " or "),
    (r"!(?!=)", " not "),
    (r"\btrue\b", "True"),
    (r"\bfalse\b", "False"),
    (r"\bnull\b", "None"),
    (r"\bundefined\b", "None"),
    (r"\bMath\.pow\(", "pow("),
    (r"\bJSON\.stringify\(", "str("),
    (r"\b_event\.data\.([A-Za-z_]\w*)", r"_event.data['\1']"),
    (r"([{,]\s*)([A-Za-z_]\w*)\s*:", r"\1'\2':"),
    (r";\s*$", ""),
)
"""(pattern, replacement) pairs applied in order to the code between string literals."""

_ATTRIBUTES = ("cond", "expr", "array", "eventexpr", "targetexpr", "delayexpr", "sendidexpr", "location")
"""The attributes that hold expressions (``location`` is an lvalue, translated the same way)."""


def translate(expression: str) -> str:
    """One ECMAScript expression or statement in Python."""
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


def translate_document(text: str) -> str:
    """The document with ``datamodel="python"`` and every expression and inline script translated."""
    text = text.replace('datamodel="ecmascript"', 'datamodel="python"')
    pattern = r"\b(" + "|".join(_ATTRIBUTES) + r')="([^"]*)"'
    text = re.sub(pattern, _attribute, text)
    return re.sub(r"(<script(?:\s[^>]*)?>)(.*?)</script>", _script, text, flags=re.DOTALL)

"""``statechart.scxml.load`` on hostile or very large documents: refused early, or read in linear time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statechart import start
from statechart.scxml import ScxmlError, _load, load

SCXML = '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python" name="t"'


def nested_entities(levels: int) -> str:
    """A document whose last entity expands to 10 ** (levels + 1) characters (the "billion laughs")."""
    lines = ['<?xml version="1.0"?>', "<!DOCTYPE scxml [", ' <!ENTITY e0 "xxxxxxxxxx">']
    lines.extend(f' <!ENTITY e{n} "{f"&e{n - 1};" * 10}">' for n in range(1, levels + 1))
    lines.append("]>")
    lines.append(
        f'{SCXML} initial="s"><datamodel><data id="d">&e{levels};</data></datamodel><state id="s"/></scxml>'
    )
    return "\n".join(lines)


def refusal(text: str) -> str:
    """The one problem ``load`` reports for ``text``."""
    with pytest.raises(ScxmlError) as caught:
        load(text)
    assert len(caught.value.problems) == 1, caught.value.problems
    return caught.value.problems[0]


def test_nested_entity_declarations_are_refused_before_any_expansion() -> None:
    """A DOCTYPE declaring nested entities is refused at its line, naming the fix, before any is expanded."""
    problem = refusal(nested_entities(8))
    assert problem.startswith("line 2: found a DOCTYPE declaration <!DOCTYPE scxml [...]>")
    assert "SCXML documents need no DOCTYPE or entity declarations: remove it" in problem


@pytest.mark.parametrize(
    "doctype",
    [
        "<!DOCTYPE scxml>",
        '<!DOCTYPE scxml SYSTEM "scxml.dtd">',
        '<!DOCTYPE scxml PUBLIC "-//W3C//DTD SCXML 1.0//EN" "http://www.w3.org/2011/04/SCXML/scxml.dtd">',
    ],
)
def test_a_document_type_declaration_alone_is_refused(doctype: str) -> None:
    """A DOCTYPE without entities, with or without an external DTD, is refused too and shown as found."""
    problem = refusal(f'{doctype}\n{SCXML} initial="s"><state id="s"/></scxml>')
    assert problem.startswith(f"line 1: found a DOCTYPE declaration {doctype}; SCXML documents need no")


def test_an_external_entity_is_refused_and_never_read() -> None:
    """An entity naming a file (``SYSTEM "file:///etc/passwd"``) is refused, so its file is never read."""
    text = (
        '<!DOCTYPE scxml [<!ENTITY secret SYSTEM "file:///etc/passwd">]>\n'
        f'{SCXML} initial="s"><datamodel><data id="d">&secret;</data></datamodel><state id="s"/></scxml>'
    )
    assert refusal(text).startswith("line 1: found a DOCTYPE declaration <!DOCTYPE scxml [...]>")


def test_a_doctype_in_a_document_named_by_invoke_src_is_refused(tmp_path: Path) -> None:
    """A child document read through ``<invoke src>`` is refused the same way, under its own path."""
    (tmp_path / "child.scxml").write_text(nested_entities(3), encoding="utf-8")
    parent = f'{SCXML} initial="s"><state id="s"><invoke src="child.scxml"/></state></scxml>'
    with pytest.raises(ScxmlError) as caught:
        load(parent, base=tmp_path)
    assert "found a DOCTYPE declaration" in str(caught.value)
    assert "child.scxml" in str(caught.value)


def test_predefined_entities_and_character_references_still_read() -> None:
    """The five predefined entities and character references need no declaration and still work."""
    text = (
        f'{SCXML} initial="s"><datamodel><data id="d">&lt;&amp;&gt;&quot;&apos;&#65;&#x42;</data>'
        '</datamodel><state id="s"/></scxml>'
    )
    snapshot, _ = start(load(text), session="s-1")
    assert snapshot.context.vars == {"d": "<&>\"'AB"}


def test_eighty_thousand_lines_of_inline_json_load_whole() -> None:
    """A <data> element holding 80,000 lines of JSON loads, with every item in its value."""
    items = [{"i": i} for i in range(80_000)]
    body = "[\n" + ",\n".join(json.dumps(item) for item in items) + "\n]"
    text = f'{SCXML} initial="s"><datamodel><data id="d">{body}</data></datamodel><state id="s"/></scxml>'
    snapshot, _ = start(load(text), session="s-1")
    assert snapshot.context.vars == {"d": items}


def test_an_elements_text_is_joined_once_from_all_its_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """An element's text is set once from all the pieces expat delivers, never re-copied per piece."""
    assignments: list[str] = []

    class Counting(_load.Node):
        def __setattr__(self, name: str, value: object) -> None:
            if name == "text":
                assignments.append(str(value))
            super().__setattr__(name, value)

    monkeypatch.setattr(_load, "Node", Counting)
    lines = "\n".join(f"line {n}" for n in range(1_000))
    root = _load.parse(f'{SCXML}><datamodel><data id="d">{lines}</data></datamodel></scxml>', "<text>")
    assert root.elements("datamodel")[0].elements("data")[0].text == lines
    # Three elements, each set once when it ends (attrs may set the default once more per element).
    assert len(assignments) <= 6, len(assignments)

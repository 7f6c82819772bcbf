"""Diagrams of charts loaded from SCXML: a ``cond`` is labelled by its expression, cut and escaped."""

from __future__ import annotations

from statechart.diagram import to_dot, to_mermaid
from statechart.scxml import load


def chart_with_cond(cond: str) -> str:
    """A document whose one transition, ``go`` from ``a`` to ``b``, has the (XML-escaped) ``cond``."""
    return (
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python" name="t" '
        'initial="a"><datamodel><data id="x" expr="0"/></datamodel>'
        f'<state id="a"><transition event="go" cond="{cond}" target="b"/></state><state id="b"/></scxml>'
    )


def edge_labels(cond: str) -> tuple[str, str]:
    """The Mermaid and the DOT line of the ``a`` to ``b`` edge."""
    chart = load(chart_with_cond(cond))
    mermaid = next(line.strip() for line in to_mermaid(chart).splitlines() if "a --> b" in line)
    dot = next(line.strip() for line in to_dot(chart).splitlines() if '"a" -> "b"' in line)
    return mermaid, dot


def test_a_cond_is_labelled_by_its_expression() -> None:
    """Mermaid and DOT show the condition as written (``[x > 1]``), not the name of the loader's class."""
    mermaid, dot = edge_labels("x &gt; 1")
    assert mermaid == "a --> b : go [x #gt; 1]"
    assert dot == '"a" -> "b" [label="go [x > 1]"]'


def test_a_cond_over_several_lines_is_labelled_on_one() -> None:
    """A condition written over several lines is shown with each run of whitespace as one space."""
    mermaid, dot = edge_labels("x in [1,\n        2]\n   and x != 3")
    assert mermaid == "a --> b : go [x in [1, 2] and x != 3]"
    assert dot == '"a" -> "b" [label="go [x in [1, 2] and x != 3]"]'


def test_a_long_cond_is_cut_to_forty_characters() -> None:
    """A condition longer than 40 characters is cut to 39 and an ellipsis, whole words or not."""
    cond = "x == 1 or x == 2 or x == 3 or x == 4 or x == 5 or x == 6"
    mermaid, dot = edge_labels(cond)
    shown = "x == 1 or x == 2 or x == 3 or x == 4 or…"
    assert len(shown) == 40
    assert mermaid == f"a --> b : go [{shown}]"
    assert dot == f'"a" -> "b" [label="go [{shown}]"]'


def test_a_cond_with_label_syntax_is_escaped() -> None:
    """Quotes, colons, semicolons, ``#`` and backslashes in a condition cannot end or corrupt a label."""
    mermaid, dot = edge_labels("x != &quot;a:b;#&quot; and '\\\\' != '&lt;'")
    assert mermaid == "a --> b : go [x != #quot;a#58;b#59;#35;#quot; and '\\\\' != '#lt;']"
    assert dot == '"a" -> "b" [label="go [x != \\"a:b;#\\" and \'\\\\\\\\\' != \'<\']"]'


def test_in_is_labelled_as_written() -> None:
    """An ``In('b')`` condition is shown as written, like any other."""
    mermaid, _ = edge_labels("In('b')")
    assert mermaid == "a --> b : go [In('b')]"

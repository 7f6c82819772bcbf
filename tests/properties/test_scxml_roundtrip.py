"""``load(dump(chart))`` behaves as ``chart``, over generated SCXML documents and event scripts.

The documents nest compound, parallel, final and history states (shallow
and deep, with default content), guard transitions with ``In()`` and
datamodel conditions, take internal and eventless transitions, and run
``<raise>``, delayed ``<send>``, ``<cancel>``, ``<assign>``, ``<script>``,
``<if>``, ``<foreach>`` and ``<log>``, with early or late data binding, and
``<invoke>`` small inline child documents with ``namelist``, ``<param>``,
``typeexpr``, ``idlocation``, ``<finalize>`` and ``autoforward``. Scripts
include events from the child of the site ``kid``.
Every macrostep ends: internal events (``r``, ``u``) and done events only
take targetless transitions that raise nothing, an eventless transition
needs ``x < 4`` and first raises ``x``, which nothing lowers, sends to the
instance itself are delayed, and ``<finalize>`` runs only on a child's events.
"""

from __future__ import annotations

import itertools

import attrs
from hypothesis import given, note, settings
from hypothesis import strategies as st

from statechart.scxml import dump, load
from tests.unit.statechart.test_scxml_dump import FromChild, behaviour

QUIET = (
    '<log label="x" expr="x"/>',
    '<log label="y" expr="y"/>',
    '<log label="fails" expr="y[5]"/>',
    '<assign location="x" expr="x + 1"/>',
    '<assign location="y" expr="(y + [x])[-3:]"/>',
    "<script>\n  x = x + 2\n  y = y[-2:]\n</script>",
    '<foreach array="y" item="it" index="ix"><log label="item" expr="[it, ix]"/></foreach>',
)
"""Content that raises and sends nothing (but ``y[5]`` may fail, raising ``error.execution``)."""

LOUD = (
    '<raise event="r"/>',
    '<send event="t" delay="1s"/>',
    '<send event="t" delay="500ms" id="tm"/>',
    '<send eventexpr="\'t\'" delayexpr="\'1.5s\'" idlocation="sid"/>',
    '<cancel sendid="tm"/>',
    "<cancel sendidexpr=\"sid or 'none'\"/>",
    '<send event="u" target="#_internal"><param name="v" expr="x"/></send>',
    '<send event="u" target="#_internal" namelist="x y"/>',
    '<send event="u" target="#_internal"><content expr="[x, len(y)]"/></send>',
)
"""Content that raises or sends an event."""

PARAMS = ('<param name="p" expr="x * 2"/>', '<param name="q" location="y"/>', '<param name="r" expr="y[5]"/>')
"""An invoke's params (``y[5]`` may fail, failing the invoke with ``error.execution``)."""

CHILD = (
    '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python"{name}>'
    '<state id="c"><transition event="a" target="f"/></state><final id="f"/></scxml>'
)
"""The inline child document; unnamed, the loader names it after its site."""

DESCRIPTORS = ("a", "b", "a.x", "t", "a.*", "a b")
"""The descriptors of transitions that may have a target: on script events and delayed sends."""

SCRIPTS = st.lists(
    st.sampled_from(
        ["a", "b", "a.x", "t", "c", 1.0, 0.5]
        + [FromChild("kid", "a"), FromChild("kid", "n", {"k": 1}), FromChild("kid", None, {"ok": True})] * 2
    ),
    max_size=8,
)
"""Event names, numbers of seconds to advance the clock by, and events and completion from ``kid``'s child."""


@attrs.define
class Node:
    """One state of a generated document, before its content is drawn."""

    id: str
    tag: str
    children: list[Node] = attrs.Factory(list)

    def descendants(self) -> list[Node]:
        return [node for child in self.children for node in (child, *child.descendants())]


class Writer:
    """Draws one document: the state tree first, then each state's content, which names its states."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw
        self.numbers = itertools.count(1)
        self.states: list[str] = []
        self.targets: list[str] = []
        self.late = False
        self.kid = False

    def document(self) -> str:
        draw = self.draw
        roots = [self.tree(1, final=True) for _ in range(draw(st.integers(1, 3)))]
        nodes = [node for root in roots for node in (root, *root.descendants())]
        self.states = [node.id for node in nodes if node.tag != "history"]
        self.targets = [node.id for node in nodes]
        self.late = draw(st.booleans())
        body = "".join(self.state(root) for root in roots)
        initial = (
            f' initial="{draw(st.sampled_from([root.id for root in roots]))}"' if draw(st.booleans()) else ""
        )
        binding = ' binding="late"' if self.late else ""
        return (
            f'<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python" name="g"'
            f'{initial}{binding}><datamodel><data id="x" expr="0"/><data id="y">[]</data><data id="sid"/>'
            f"</datamodel>{body}</scxml>"
        )

    def tree(self, depth: int, *, final: bool) -> Node:
        draw = self.draw
        tags = ["atomic"] + (["compound", "compound", "parallel"] if depth < 3 else []) + (["final"] * final)
        tag = draw(st.sampled_from(tags))
        node = Node(f"s{next(self.numbers)}", {"atomic": "state", "compound": "state"}.get(tag, tag))
        if tag == "compound":
            node.children = [self.tree(depth + 1, final=True) for _ in range(draw(st.integers(1, 3)))]
        elif tag == "parallel":
            node.children = [self.tree(depth + 1, final=False) for _ in range(2)]
        with_history = draw(st.booleans())
        if node.children and with_history:
            node.children.append(Node(f"h{next(self.numbers)}", draw(st.sampled_from(["shallow", "deep"]))))
        return node

    def condition(self) -> str:
        state = self.draw(st.sampled_from(self.states))
        return self.draw(
            st.sampled_from(
                [
                    "x % 2 == 0",
                    "len(y) &gt; 1",
                    f"In('{state}')",
                    f"x &gt; 2 or not In('{state}')",
                    "x &gt; 0 and _event.name == 'a'",
                ]
            )
        )

    def content(self, *, loud: bool, nested: bool = False) -> str:
        pieces = self.draw(st.lists(st.sampled_from([*QUIET, *LOUD] if loud else QUIET), max_size=3))
        if not nested and self.draw(st.booleans()):
            then, otherwise, last = (self.content(loud=loud, nested=True) for _ in range(3))
            pieces.append(
                f'<if cond="{self.condition()}">{then}<elseif cond="{self.condition()}"/>{otherwise}'
                f"<else/>{last}</if>"
            )
        return "".join(pieces)

    def transition(self, node: Node) -> str:
        draw = self.draw
        kind = draw(st.sampled_from(["targeted", "eventless", "signal"]))
        cond = f' cond="{self.condition()}"' if draw(st.booleans()) else ""
        if kind == "signal":
            event = draw(st.sampled_from(["r", "u", "done"]))
            body = '<log label="data" expr="_event.data"/>' + self.content(loud=False)
            return f'<transition event="{event}"{cond}>{body}</transition>'
        inside = [child.id for child in node.descendants()]
        internal = bool(inside) and draw(st.booleans())
        target = draw(st.sampled_from(inside if internal else self.targets))
        attributes = f' target="{target}"' + (' type="internal"' if internal else "")
        if kind == "eventless":
            body = '<assign location="x" expr="x + 1"/>' + self.content(loud=True)
            return f'<transition cond="x &lt; 4"{attributes}>{body}</transition>'
        event = draw(st.sampled_from(DESCRIPTORS))
        return f'<transition event="{event}"{attributes}{cond}>{self.content(loud=True)}</transition>'

    def state(self, node: Node) -> str:
        draw = self.draw
        if node.tag in ("shallow", "deep"):
            raise AssertionError("history states are written by their parent")
        parts: list[str] = []
        if node.tag != "final" and draw(st.booleans()):
            parts.append(f'<datamodel><data id="v{node.id}" expr="x * 10"/></datamodel>')
        parts.extend(f"<onentry>{self.content(loud=True)}</onentry>" for _ in range(draw(st.integers(0, 2))))
        if draw(st.booleans()):
            parts.append(f"<onexit>{self.content(loud=True)}</onexit>")
        proper = [child for child in node.children if child.tag not in ("shallow", "deep")]
        initial = ""
        if node.tag == "state" and proper:
            first = draw(st.sampled_from([child.id for child in proper]))
            choice = draw(st.sampled_from(["first child", "attribute", "element"]))
            if choice == "attribute":
                initial = f' initial="{first}"'
            elif choice == "element":
                content = self.content(loud=True)
                parts.append(f'<initial><transition target="{first}">{content}</transition></initial>')
        if node.tag == "final":
            if draw(st.booleans()):
                parts.append('<donedata><param name="x" expr="x"/><param name="y" location="y"/></donedata>')
        else:
            parts.extend(self.transition(node) for _ in range(draw(st.integers(0, 2))))
            parts.extend(self.invoke() for _ in range(draw(st.sampled_from([0, 1, 1, 2]))))
        for child in node.children:
            history = child.tag in ("shallow", "deep")
            parts.append(self.history(child, proper) if history else self.state(child))
        return f'<{node.tag} id="{node.id}"{initial}>{"".join(parts)}</{node.tag}>'

    def invoke(self) -> str:
        """An ``<invoke>`` of an inline child: the first is ``id="kid"``, the others maybe ``idlocation``."""
        draw = self.draw
        attributes = ""
        if not self.kid:
            self.kid = True
            attributes += ' id="kid"'
        elif draw(st.booleans()):
            attributes += ' idlocation="sid"'
        attributes += draw(st.sampled_from(["", ' namelist="x"', ' namelist="x y"']))
        attributes += " typeexpr=\"'scxml'\"" if draw(st.booleans()) else ""
        attributes += ' autoforward="true"' if draw(st.booleans()) else ""
        params = "".join(draw(st.lists(st.sampled_from(PARAMS), max_size=2, unique=True)))
        child = CHILD.format(name=f' name="c{next(self.numbers)}"' if draw(st.booleans()) else "")
        finalize = f"<finalize>{self.content(loud=True)}</finalize>" if draw(st.booleans()) else ""
        return f"<invoke{attributes}>{params}<content>{child}</content>{finalize}</invoke>"

    def history(self, node: Node, siblings: list[Node]) -> str:
        kind = ' type="deep"' if node.tag == "deep" else ""
        default = self.draw(st.sampled_from([sibling.id for sibling in siblings]))
        body = self.content(loud=True) if self.draw(st.booleans()) else ""
        return f'<history id="{node.id}"{kind}><transition target="{default}">{body}</transition></history>'


@st.composite
def documents(draw: st.DrawFn) -> str:
    """An SCXML document whose every macrostep ends (see the module docstring)."""
    return Writer(draw).document()


@settings(max_examples=60, deadline=None)
@given(documents(), SCRIPTS)
def test_a_dumped_chart_behaves_as_the_loaded_one(text: str, script: list[str | float | FromChild]) -> None:
    """After start and each scripted event or clock advance, both charts have the same configuration,
    history, datamodel, timers, child slots and effects (births with their chart and input, events
    sent to children among them); and dumping the reloaded chart gives the same document."""
    chart = load(text)
    dumped = dump(chart)
    note(dumped)
    again = load(dumped)
    assert dump(again) == dumped
    assert again.fingerprint == chart.fingerprint
    assert behaviour(again, script) == behaviour(chart, script)

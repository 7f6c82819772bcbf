"""SCXML faults found by the W3C test suite, each pinned by a chart of our own.

Each test names the W3C test and the section of SCXML 1.0 it follows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from statechart import Chart, Event, Registry, start, step
from statechart.effects import BirthChild, Effect, Logged, SendToChild, SendToParent
from statechart.event import InvokeId, child_message_event
from statechart.scxml import Datamodel, dump, load
from statechart.snapshot import Snapshot

SESSION = "s-1"


def doc(body: str, *, attributes: str = "") -> str:
    """A document around ``body`` with the Python datamodel."""
    return (
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python" '
        f'name="t" {attributes}>{body}</scxml>'
    )


def begin(text: str) -> tuple[Chart[Datamodel], Snapshot[Datamodel], list[Effect]]:
    chart = load(text)
    snapshot, effects = start(chart, session=SESSION)
    return chart, snapshot, list(effects)


def send(
    chart: Chart[Datamodel], snapshot: Snapshot[Datamodel], event: str | Event, data: Any = None
) -> tuple[Snapshot[Datamodel], list[Effect]]:
    message = event if isinstance(event, Event) else Event(event, data)
    snapshot, effects = step(chart, snapshot, message, session=SESSION)
    return snapshot, list(effects)


# --------------------------------------------------------- 579: entry order


def test_default_history_content_runs_after_onentry_and_the_initial_transitions_content() -> None:
    """W3C 579: entering a state whose <initial> targets a history runs onentry, then the initial
    transition's content, then the history default's content (3.10, Appendix D enterStates)."""
    _, snapshot, _ = begin(
        doc(
            '<datamodel><data id="order" expr="[]"/></datamodel>'
            '<state id="outer">'
            '<initial><transition target="remembered">'
            '<assign location="order" expr="order + [\'initial\']"/></transition></initial>'
            '<onentry><assign location="order" expr="order + [\'onentry\']"/></onentry>'
            '<history id="remembered"><transition target="inner">'
            '<assign location="order" expr="order + [\'history\']"/></transition></history>'
            '<state id="inner"/></state>'
        )
    )
    assert snapshot.context["order"] == ["onentry", "initial", "history"]


# ------------------------------------------------ 332: a failed send's sendid

FAILED_SEND = (
    '<datamodel><data id="sid"/><data id="seen" expr="[]"/></datamodel>'
    '<state id="s"><onentry>{send}</onentry>'
    '<transition event="error.*" target="done">'
    '<assign location="seen" expr="[_event.name, _event.sendid]"/></transition></state>'
    '<final id="done"/>'
)


def test_an_error_from_a_failed_send_carries_the_generated_send_id() -> None:
    """W3C 332: the error.execution of a send the processor refuses carries the idlocation value (5.10.1)."""
    failing = '<send event="x" target="nowhere" idlocation="sid"/>'
    _, snapshot, _ = begin(doc(FAILED_SEND.format(send=failing)))
    assert snapshot.context["sid"], "the send id was generated and stored before the send failed"
    assert snapshot.context["seen"] == ["error.execution", snapshot.context["sid"]]


def test_an_error_from_a_failed_send_carries_the_authors_send_id() -> None:
    """A send with id= that fails raises error.execution whose sendid is that id (5.10.1)."""
    _, snapshot, _ = begin(doc(FAILED_SEND.format(send='<send id="mine" event="x" typeexpr="\'other\'"/>')))
    assert snapshot.context["seen"] == ["error.execution", "mine"]


# ------------------------------------ 216, 422: companions keyed by their source


def shared_name_children() -> str:
    """Two inline children that an editor gave the same name; each tells its parent who it is."""
    child = (
        '<content><scxml xmlns="http://www.w3.org/2005/07/scxml" datamodel="python" name="ScxmlShape1" '
        'initial="c"><state id="c"><onentry><send target="#_parent" event="{said}"/>'
        '<log label="name" expr="_name"/></onentry></state></scxml></content>'
    )
    return doc(
        '<datamodel><data id="heard" expr="[]"/></datamodel>'
        '<parallel id="p">'
        f'<state id="a"><invoke id="first">{child.format(said="one")}</invoke></state>'
        f'<state id="b"><invoke id="second">{child.format(said="two")}</invoke></state>'
        "</parallel>"
    )


def births(chart: Chart[Datamodel]) -> dict[str, str]:
    """Which chart each site births when the chart starts."""
    _, effects = start(chart, session=SESSION)
    return {e.invoke_id.site: str(e.chart) for e in effects if isinstance(e, BirthChild)}


def said(chart: Chart[Datamodel], name: str) -> list[object]:
    """What the companion chart called ``name`` sends its parent, and its ``_name``, when it starts."""
    (child,) = [c for c in chart.companions if c.name == name]
    _, effects = start(child, session="child")
    return [e.event.name for e in effects if isinstance(e, SendToParent)] + [
        e.data for e in effects if isinstance(e, Logged)
    ]


def test_inline_children_sharing_a_name_are_distinct_charts() -> None:
    """W3C 216/422: inline children are keyed by where they stand, not by a name two may share (6.4)."""
    chart = load(shared_name_children())
    sites = births(chart)
    assert len(set(sites.values())) == 2, sites
    assert said(chart, sites["first"]) == ["one", "ScxmlShape1"], "_name is still the document's name"
    assert said(chart, sites["second"]) == ["two", "ScxmlShape1"]
    registry = Registry([chart])
    assert set(sites.values()) <= set(registry.names), "a registry accepts both children"


def test_dump_writes_each_inline_child_and_load_gives_the_same_children() -> None:
    """load(dump(x)) runs the same children as load(x), each site its own (6.4)."""
    chart = load(shared_name_children())
    again = load(dump(chart))
    sites, again_sites = births(chart), births(again)
    assert sites.keys() == again_sites.keys()
    for site in sites:
        assert said(again, again_sites[site]) == said(chart, sites[site])


def test_sibling_documents_sharing_a_name_are_distinct_charts(tmp_path: Path) -> None:
    """srcexpr siblings whose <scxml name> is the same are still distinct charts, keyed by file (6.4)."""
    for said_name in ("one", "two"):
        (tmp_path / f"{said_name}.scxml").write_text(
            '<scxml xmlns="http://www.w3.org/2005/07/scxml" datamodel="python" name="Same">'
            f'<state id="c"><onentry><send target="#_parent" event="{said_name}"/></onentry></state></scxml>'
        )
    (tmp_path / "parent.scxml").write_text(
        doc(
            '<datamodel><data id="which" expr="\'two.scxml\'"/></datamodel>'
            '<state id="s"><invoke id="kid" srcexpr="which"/></state>'
        )
    )
    chart = load(tmp_path / "parent.scxml")
    names = sorted(c.name for c in chart.companions)
    assert len(names) == 2, names
    (birth,) = [e for e in start(chart, session=SESSION)[1] if isinstance(e, BirthChild)]
    assert said(chart, str(birth.chart))[0] == "two"
    Registry([chart])


# ---------------------------------------------------- empty expressions (5.9)


def test_an_empty_condition_is_an_illegal_expression() -> None:
    """cond="" is no condition at all: false, with error.execution, not silently false (5.9)."""
    _, snapshot, _ = begin(
        doc(
            '<datamodel><data id="seen" expr="[]"/></datamodel>'
            '<state id="s"><transition cond="" target="wrong"/>'
            '<transition event="error.execution" target="right">'
            '<assign location="seen" expr="_event.data[\'message\']"/></transition></state>'
            '<state id="wrong"/><state id="right"/>'
        )
    )
    assert snapshot.configuration == ("right",)
    assert "empty" in str(snapshot.context["seen"])


def test_an_empty_value_expression_raises_error_execution() -> None:
    """expr="" on <assign>, <param> and <data> is an illegal expression: error.execution (5.9, 5.4)."""
    _, snapshot, _ = begin(
        doc(
            '<datamodel><data id="d" expr=""/><data id="x" expr="1"/><data id="errors" expr="0"/></datamodel>'
            '<state id="s"><onentry><assign location="x" expr=""/></onentry>'
            '<onentry><send event="e"><param name="p" expr=""/></send></onentry>'
            '<transition event="error.execution"><assign location="errors" expr="errors + 1"/></transition>'
            "</state>"
        )
    )
    assert snapshot.context["x"] == 1, "the failing assign changed nothing"
    assert snapshot.context["d"] is None
    assert snapshot.context["errors"] == 3


# ------------------------------------------------- inline XML values (5.3, 5.6)


def test_inline_xml_is_its_markup_as_a_string() -> None:
    """Inline XML in <data>, <assign> and <send><content> is kept as its XML text, never lost (5.3, B.2)."""
    chart, snapshot, _ = begin(
        doc(
            '<datamodel><data id="d"> <books><book title="a &amp; b"/>text</books> </data>'
            '<data id="e"/><data id="got"/></datamodel>'
            '<state id="s"><onentry><assign location="e"><x:y xmlns:x="urn:x">1</x:y></assign>'
            '<send event="note" target="#_internal"><content><item n="1"/></content></send></onentry>'
            '<transition event="note"><assign location="got" expr="_event.data"/></transition></state>'
        )
    )
    assert snapshot.context["d"] == '<books><book title="a &amp; b"/>text</books>'
    assert snapshot.context["e"] == '<y xmlns="urn:x">1</y>'
    assert snapshot.context["got"] == '<item n="1"/>'
    again = load(dump(chart))
    assert start(again, session=SESSION)[0].context == snapshot.context, "dump writes the markup back"
    assert dump(again) == dump(chart)


# ----------------------------------------------------- 530: <content expr>


def test_invoke_content_expr_is_evaluated_when_the_invoke_runs() -> None:
    """W3C 530: <invoke><content expr> runs the document the expression gives when the invocation
    starts; a document written as XML in the chart is loaded with it, so the child is durable (6.4)."""
    text = doc(
        '<datamodel><data id="which" expr="1"/></datamodel>'
        '<state id="s"><onentry><assign location="which">'
        '<scxml version="1.0" datamodel="python"><final id="end"/></scxml></assign></onentry>'
        '<invoke id="kid"><content expr="which"/></invoke>'
        '<transition event="done.invoke.kid" target="ok"/></state><final id="ok"/>'
    )
    chart = load(text)
    (birth,) = [e for e in start(chart, session=SESSION)[1] if isinstance(e, BirthChild)]
    assert birth.chart in Registry([chart])
    assert sites_chart(load(dump(chart))) == sites_chart(chart)


def sites_chart(chart: Chart[Datamodel]) -> str:
    (birth,) = [e for e in start(chart, session=SESSION)[1] if isinstance(e, BirthChild)]
    return str(birth.chart)


def test_invoke_content_expr_naming_no_known_document_raises_error_execution() -> None:
    """A <content expr> that gives no document of the chart fails the invocation with error.execution."""
    text = doc(
        '<datamodel><data id="doc" expr="\'&lt;scxml&gt;&lt;final/&gt;&lt;/scxml&gt;\'"/></datamodel>'
        '<state id="s"><invoke id="kid"><content expr="doc"/></invoke>'
        '<transition event="error.execution" target="failed"/></state><state id="failed"/>'
        '<state id="never"><onentry><assign location="doc"><scxml><final id="x"/></scxml></assign></onentry>'
        "</state>"
    )
    _, snapshot, effects = begin(text)
    assert snapshot.configuration == ("failed",)
    assert not [e for e in effects if isinstance(e, BirthChild)]


# --------------------------------------------- 329: _event as a JSON object


def test_event_can_be_stored_in_a_variable_and_still_not_assigned() -> None:
    """W3C 329: _event is stored as a JSON object equal to it; assigning to _event raises error.execution
    and leaves it as it was (5.10)."""
    chart, snapshot, _ = begin(
        doc(
            '<datamodel><data id="kept"/><data id="same"/><data id="errors" expr="0"/></datamodel>'
            '<state id="s"><transition event="go"><assign location="kept" expr="_event"/>'
            "<script>copied = _event</script></transition>"
            '<transition event="error.execution"><assign location="errors" expr="errors + 1"/></transition>'
            '<transition event="check"><assign location="_event" expr="27"/></transition>'
            '<transition event="check"/></state>'
        )
    )
    snapshot, _ = send(chart, snapshot, "go", {"n": 1})
    kept = snapshot.context["kept"]
    assert kept == {
        "name": "go",
        "type": "external",
        "sendid": None,
        "origin": None,
        "origintype": None,
        "invokeid": None,
        "data": {"n": 1},
    }
    assert snapshot.context["copied"] == kept
    snapshot, _ = send(chart, snapshot, "check")
    assert snapshot.context["errors"] == 1


# ------------------------------------------- 229, 230: autoforward of own events


def test_autoforward_sends_the_child_its_own_events_with_their_fields() -> None:
    """W3C 229/230: an autoforwarding parent forwards every external event, the child's own included,
    with the fields it was received with (6.4)."""
    chart, snapshot, _ = begin(
        doc(
            '<state id="s"><invoke id="kid" autoforward="true"><content>'
            '<scxml xmlns="http://www.w3.org/2005/07/scxml" datamodel="python"><state id="c"/></scxml>'
            "</content></invoke></state>"
        )
    )
    invoke_id = InvokeId("kid", "", snapshot.children[0].generation)
    message = child_message_event(invoke_id, "from-kid", {"n": 1})
    _, effects = send(chart, snapshot, message)
    (forwarded,) = [e for e in effects if isinstance(e, SendToChild)]
    assert forwarded.invoke_id == invoke_id
    # The same fields, but no incarnation: to the child it is not evidence about a child of its own.
    copy = forwarded.event
    assert (copy.name, copy.data, copy.kind, copy.send_id, copy.invoke_id) == (
        "from-kid",
        {"n": 1},
        message.kind,
        None,
        None,
    )
    assert (copy.invocation, copy.reply_to) == (message.invocation, message.reply_to) == ("kid", "#_kid")

"""``statechart.scxml.dump``: a chart written back as SCXML loads as a chart that behaves the same.

Each test names the section of SCXML 1.0 it follows. A dumped document is
checked three ways: it contains the element the construct is written as,
``load(dump(chart))`` behaves as the chart on an event script (the
configuration, the datamodel, the child slots and the effects after every
step), and the dump is idempotent (``dump(load(dump(chart))) == dump(chart)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from statechart import (
    Chart,
    Event,
    JsonValue,
    NoContext,
    RetryPolicy,
    after,
    assign,
    block,
    cancel,
    due_timers,
    final,
    fire,
    history,
    if_,
    in_state,
    invoke,
    log,
    parallel,
    raise_event,
    send,
    send_child,
    send_parent,
    start,
    state,
    step,
    transition,
)
from statechart.effects import ActionFailed, BirthChild, Effect, Logged, SendToChild
from statechart.event import Timer, child_message_event, done_invoke_event
from statechart.model import Block, Branch, If, Site
from statechart.scxml import Datamodel, ScxmlError, dump, load
from statechart.scxml._datamodel import Code
from statechart.scxml._load import Cond
from statechart.snapshot import ChildSlot, HistoryEntry, SlotStatus, Snapshot, Status

SESSION = "s"


def _effect(effect: Effect) -> object:
    """An effect as compared: a failure without its message (which names the document's lines)."""
    if isinstance(effect, ActionFailed):
        return ("ActionFailed", effect.state, effect.action, effect.error, effect.transition)
    return effect


class Observation(NamedTuple):
    """What a macrostep leaves: the snapshot's parts an observer sees, and its effects."""

    status: Status
    configuration: tuple[str, ...]
    history: tuple[HistoryEntry, ...]
    variables: tuple[dict[str, JsonValue], list[str]]
    timers: tuple[Timer, ...]
    children: tuple[ChildSlot, ...]
    output: JsonValue
    effects: tuple[object, ...]


class FromChild(NamedTuple):
    """A script item: the running child of ``site`` sends ``event``, or with ``event=None`` completes."""

    site: str
    event: str | None
    data: JsonValue = None


def _observed(snapshot: Snapshot[Any], effects: Sequence[Effect]) -> Observation:
    context = snapshot.context
    variables = (context.vars, context.bound) if isinstance(context, Datamodel) else ({}, [])
    return Observation(
        snapshot.status,
        snapshot.configuration,
        snapshot.history,
        variables,
        snapshot.timers,
        snapshot.children,
        snapshot.output,
        tuple(_effect(effect) for effect in effects),
    )


Script = Sequence[str | float | FromChild]
"""Event names, seconds to advance the clock by, and events from children."""


def _child_event(snapshot: Snapshot[Any], item: FromChild) -> Event | None:
    """The event the running child of ``item.site`` sends (``None`` when the site has none)."""
    for slot in snapshot.children:
        if slot.site == item.site and slot.status is SlotStatus.RUNNING:
            if item.event is None:
                return done_invoke_event(slot.invoke_id, item.data)
            return child_message_event(slot.invoke_id, item.event, item.data)
    return None


def behaviour(chart: Chart[Any], script: Script) -> list[Observation]:
    """What start and each scripted item leave: a name is an event, a number advances the virtual clock.

    Advancing the clock fires every timer that falls due, earliest first,
    each as its own macrostep at its deadline. A :class:`FromChild` item is
    skipped while its site has no running child.
    """
    now = 0.0
    snapshot, effects = start(chart, now=now, session=SESSION)
    seen = [_observed(snapshot, effects)]
    for item in script:
        if isinstance(item, str | FromChild):
            if snapshot.status is not Status.RUNNING:
                break
            event = Event(item) if isinstance(item, str) else _child_event(snapshot, item)
            if event is not None:
                snapshot, effects = step(chart, snapshot, event, now=now, session=SESSION)
                seen.append(_observed(snapshot, effects))
            continue
        now += item
        while snapshot.status is Status.RUNNING and (due := due_timers(snapshot, now)):
            at = max(due[0].deadline, snapshot.time)
            snapshot, effects = fire(chart, snapshot, due[0].id, now=at, session=SESSION)
            seen.append(_observed(snapshot, effects))
    return seen


def round_trip(chart: Chart[Any], script: Script = (), *, base: Path | None = None) -> str:
    """The chart's document, after checking that it reloads as an equivalent chart and dumps the same.

    ``base`` is the folder the document is loaded beside (the documents a ``srcexpr`` names).
    """
    text = dump(chart)
    again = load(text, base=base)
    assert dump(again) == text
    assert behaviour(again, script) == behaviour(chart, script)
    return text


def flat(text: str) -> str:
    """The document without its indentation, for finding nested elements."""
    return "".join(line.strip() for line in text.splitlines())


def document(body: str, *, attributes: str = "") -> str:
    return (
        f'<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python" name="t"'
        f"{attributes}>{body}</scxml>"
    )


def refusal(chart: Chart[Any]) -> str:
    with pytest.raises(ScxmlError) as raised:
        dump(chart)
    return str(raised.value)


# ------------------------------------------------------------------ states


def test_the_document_names_the_chart_its_namespace_datamodel_and_initial_states() -> None:
    """The root ``<scxml>`` carries the namespace, version, datamodel, name and initial (SCXML 3.2).

    Elements are indented by two spaces per level, one to a line.
    """
    chart = load(
        document(
            '<state id="a"/><state id="b"><transition event="go" target="a"><log label="l"/></transition>'
            "</state>",
            attributes=' initial="b"',
        )
    )
    assert round_trip(chart, ["go"]) == (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python" name="t" '
        'initial="b">\n'
        '  <state id="a"/>\n'
        '  <state id="b">\n'
        '    <transition event="go" target="a">\n'
        '      <log label="l"/>\n'
        "    </transition>\n"
        "  </state>\n"
        "</scxml>\n"
    )


def test_compound_states_keep_their_initial_attribute_and_children_in_order() -> None:
    """A compound state's ``initial`` names its default child (SCXML 3.3)."""
    chart = load(
        document(
            '<state id="p" initial="b"><state id="a"/><state id="b">'
            '<transition event="go" target="a"/></state></state>'
        )
    )
    text = round_trip(chart, ["go", "go"])
    assert '<state id="p" initial="b">' in text
    assert text.index('<state id="a"/>') < text.index('<state id="b">')


def test_an_initial_transition_with_content_is_written_as_an_initial_element() -> None:
    """``initial_actions`` are the content of the ``<initial>`` transition (SCXML 3.6)."""
    chart = load(
        document(
            '<state id="p"><initial><transition target="b"><log label="init"/></transition></initial>'
            '<state id="a"/><state id="b"/></state>'
        )
    )
    text = round_trip(chart)
    assert '<initial><transition target="b"><log label="init"/>' in flat(text)
    assert 'initial="b"' not in text


def test_initial_actions_without_an_initial_target_enter_the_first_child() -> None:
    """Authored ``initial_actions`` with no ``initial`` target the first child (SCXML 3.6, 3.3)."""
    chart = Chart(
        "t", state("p", state("a", on=[transition("go", "b")]), state("b"), initial_actions=[log("init")])
    )
    assert '<transition target="a">' in round_trip(chart)


def test_parallel_regions_are_all_entered() -> None:
    """``<parallel>`` enters every child region (SCXML 3.4)."""
    chart = load(
        document(
            '<parallel id="p"><state id="r1"><state id="a"><transition event="go" target="b"/></state>'
            '<state id="b"/></state><state id="r2"/></parallel>'
        )
    )
    assert '<parallel id="p">' in round_trip(chart, ["go"])


def test_final_done_data_from_params_and_content() -> None:
    """``<donedata>`` with ``<param>`` or ``<content>`` becomes the done event's data (SCXML 5.5, 5.7)."""
    chart = load(
        document(
            '<datamodel><data id="x" expr="3"/></datamodel>'
            '<state id="p"><state id="a"><transition event="go" target="f"/></state>'
            '<final id="f"><donedata><param name="v" expr="x"/><param name="w" location="x"/></donedata>'
            "</final>"
            '<transition event="done.state.p" target="end">'
            '<log label="done" expr="_event.data"/></transition>'
            "</state>"
            '<final id="end"><donedata><content expr="[x, 1]"/></donedata></final>'
        )
    )
    text = round_trip(chart, ["go"])
    assert '<param name="v" expr="x"/>' in text
    assert '<param name="w" location="x"/>' in text
    assert '<content expr="[x, 1]"/>' in text
    assert behaviour(load(text), ["go"])[-1].output == [3, 1]


def test_constant_done_data_is_written_as_a_literal() -> None:
    """A constant JSON done data is ``<donedata><content expr=…>`` (SCXML 5.5, 5.6)."""
    chart = Chart("t", state("a", on=[transition("go", "f")]), final("f", done_data={"ok": [1, None, True]}))
    text = round_trip(chart, ["go"])
    assert "<content expr=\"{'ok': [1, None, True]}\"/>" in text


def test_history_states_shallow_and_deep_with_default_content() -> None:
    """``<history type=…>`` and its default transition with content (SCXML 3.10)."""
    chart = load(
        document(
            '<state id="p"><state id="a"><state id="a1"><transition event="next" target="a2"/></state>'
            '<state id="a2"/></state><state id="b"/>'
            '<history id="hs"><transition target="b"><log label="default"/></transition></history>'
            '<history id="hd" type="deep"><transition target="a"/></history>'
            '<transition event="out" target="o"/></state>'
            '<state id="o"><transition event="shallow" target="hs"/><transition event="deep" target="hd"/>'
            "</state>"
        )
    )
    text = round_trip(chart, ["shallow", "next", "out", "deep", "out", "shallow"])
    assert '<history id="hs"><transition target="b">' in flat(text)
    assert '<history id="hd" type="deep">' in text


def test_an_authored_history_is_written_after_its_siblings_as_the_loader_orders_it() -> None:
    """History states may come anywhere among the children; the loader puts them last (SCXML 3.10)."""
    chart = Chart(
        "t",
        state(
            "p",
            history("h", "b"),
            state("a", on=[transition("go", "b")]),
            state("b"),
            initial="a",
            on=[transition("out", "o")],
        ),
        state("o", on=[transition("back", "h")]),
    )
    text = round_trip(chart, ["go", "out", "back"])
    assert text.index('<state id="b"/>') < text.index('<history id="h">')


# ------------------------------------------------------------- transitions


def test_transitions_keep_events_targets_conditions_and_type() -> None:
    """``event`` descriptors, ``target`` ids, ``cond`` and ``type="internal"`` (SCXML 3.5, 3.12.1, 3.13)."""
    chart = load(
        document(
            '<datamodel><data id="n" expr="0"/></datamodel>'
            '<state id="p"><onentry><assign location="n" expr="n + 1"/></onentry>'
            '<transition event="in.* inner" target="b" type="internal"/>'
            '<transition event="ext" target="b"/>'
            '<state id="a"><transition cond="n &gt; 2" target="b"/></state><state id="b"/></state>'
        )
    )
    text = round_trip(chart, ["in.x", "ext", "inner", "ext", "ext"])
    assert '<transition event="in.* inner" target="b" type="internal"/>' in text
    assert '<transition target="b" cond="n &gt; 2"/>' in text


def test_in_state_guards_are_written_as_in() -> None:
    """An ``in_state(x)`` guard is ``cond="In('x')"`` (SCXML 5.9.1)."""
    chart = Chart(
        "t",
        parallel(
            "p",
            state("r1", state("a", on=[transition("go", "b", guard=in_state("d"))]), state("b")),
            state("r2", state("c", on=[transition("flip", "d")]), state("d")),
        ),
    )
    text = round_trip(chart, ["go", "flip", "go"])
    assert "cond=\"In('d')\"" in text


def test_targets_naming_several_states_are_space_separated() -> None:
    """A transition may target one state per parallel region (SCXML 3.5, 3.11)."""
    chart = load(
        document(
            '<state id="o"><transition event="go" target="b d"/></state>'
            '<parallel id="p"><state id="r1"><state id="a"/><state id="b"/></state>'
            '<state id="r2"><state id="c"/><state id="d"/></state></parallel>'
        )
    )
    assert 'target="b d"' in round_trip(chart, ["go"])


# ------------------------------------------------------ executable content


def test_several_onentry_and_onexit_handlers_stay_separate_blocks() -> None:
    """Each ``<onentry>``/``<onexit>`` is a block of its own: an error stops only its own (SCXML 3.8, 4.9)."""
    chart = load(
        document(
            '<datamodel><data id="x" expr="0"/></datamodel>'
            '<state id="a"><onentry><assign location="x" expr="1 / 0"/><log label="skipped"/></onentry>'
            '<onentry><log label="second"/></onentry>'
            '<onexit><log label="bye"/></onexit><onexit><log label="bye2"/></onexit>'
            '<transition event="go" target="b"/></state><state id="b"/>'
        )
    )
    text = round_trip(chart, ["go"])
    assert text.count("<onentry>") == 2
    assert text.count("<onexit>") == 2


def test_authored_blocks_become_handlers_and_a_trailing_block_is_inlined() -> None:
    """Leading ``Block`` values are handlers of their own; a last ``Block`` stops as inline content (4.9)."""
    chart = Chart(
        "t",
        state(
            "a",
            entry=[block([log("one")]), block([log("two")]), log("three"), block([log("four")])],
            on=[transition("go", "b", actions=[log("t"), Block((log("u"),))])],
        ),
        state("b"),
    )
    text = round_trip(chart, ["go"])
    assert text.count("<onentry>") == 3
    assert '<log label="three"/><log label="four"/>' in flat(text)


def test_raise_log_and_if_elseif_else() -> None:
    """``<raise>``, ``<log>`` and ``<if>``/``<elseif>``/``<else>`` (SCXML 4.2-4.5, 4.7)."""
    chart = load(
        document(
            '<datamodel><data id="x" expr="0"/></datamodel>'
            '<state id="a"><transition event="go">'
            '<assign location="x" expr="x + 1"/>'
            '<if cond="x == 1"><raise event="one"/><elseif cond="x == 2"/><log label="two" expr="x"/>'
            '<else/><log label="many" expr="{\'x\': x}"/></if></transition>'
            '<transition event="one"><log label="raised"/></transition></state>'
        )
    )
    text = round_trip(chart, ["go", "go", "go"])
    assert '<elseif cond="x == 2"/>' in text
    assert "<else/>" in text
    assert '<raise event="one"/>' in text


def test_authored_if_with_a_leading_else_and_constant_log_data() -> None:
    """An unguarded first branch is ``cond="True"``; constant log data is a Python literal (4.3, 4.7)."""
    chart = Chart(
        "t",
        state(
            "a",
            entry=[
                If((Branch(None, (log("always"),)),)),
                if_(in_state("b"), [log("never")], else_=[log("data", {"k": [1, 2.5, "s"]})]),
                raise_event("r", {"v": 1}),
            ],
            on=[transition("r", actions=[log("got")]), transition("go", "b")],
        ),
        state("b"),
    )
    text = round_trip(chart, ["go"])
    assert '<if cond="True">' in text
    assert "<log label=\"data\" expr=\"{'k': [1, 2.5, 's']}\"/>" in text
    assert '<send event="r" target="#_internal">' in text


def test_foreach_over_an_array_with_item_and_index() -> None:
    """``<foreach array=… item=… index=…>`` (SCXML 4.6)."""
    chart = load(
        document(
            '<datamodel><data id="items">[1, 2, 3]</data><data id="total" expr="0"/></datamodel>'
            '<state id="a"><onentry><foreach array="items" item="it" index="ix">'
            '<assign location="total" expr="total + it * ix"/></foreach></onentry></state>'
        )
    )
    text = round_trip(chart)
    assert '<foreach array="items" item="it" index="ix">' in text
    assert behaviour(load(text), [])[0].variables[0]["total"] == 8


def test_send_with_every_attribute_and_cancel() -> None:
    """``<send>``: event/eventexpr, target/targetexpr, type/typeexpr, id/idlocation, delay/delayexpr,
    namelist, ``<param>`` and ``<content>``; ``<cancel>`` by sendid and sendidexpr (SCXML 6.2, 6.3)."""
    chart = load(
        document(
            '<datamodel><data id="x" expr="1"/><data id="sid"/></datamodel>'
            '<state id="a"><onentry>'
            '<send event="later" delay="1.5s" id="t1" type="scxml"/>'
            '<send eventexpr="\'computed\'" targetexpr="\'#_internal\'" typeexpr="\'scxml\'" namelist="x">'
            '<param name="y" expr="x + 1"/></send>'
            '<send event="gen" delayexpr="\'2s\'" idlocation="sid"><content expr="[x]"/></send>'
            '<send event="json" target="#_internal"><content>{"k": [1, "two"]}</content></send>'
            '<send event="self" target="#_scxml_s"/>'
            "</onentry>"
            '<transition event="computed json"><log label="data" expr="_event.data"/></transition>'
            '<transition event="stop"><cancel sendid="t1"/><cancel sendidexpr="sid"/></transition>'
            '<transition event="later gen self"><log label="event" expr="_event.name"/></transition>'
            "</state>"
        )
    )
    text = round_trip(chart, [1.0, 1.0, "stop"])
    round_trip(chart, ["stop", 3.0])
    for written in (
        '<send event="later" type="scxml" id="t1" delay="1.5s"/>',
        '<send eventexpr="\'computed\'" targetexpr="\'#_internal\'" typeexpr="\'scxml\'" namelist="x">',
        '<send event="gen" idlocation="sid" delayexpr="\'2s\'">',
        '<content>{"k": [1, "two"]}</content>',
        '<cancel sendid="t1"/>',
        '<cancel sendidexpr="sid"/>',
    ):
        assert written in text


@pytest.mark.parametrize(("seconds", "written"), [(2.0, "2s"), (0.25, "0.25s"), (1e-05, "0.00001s")])
def test_constant_delays_are_css2_times_the_loader_reads_back(seconds: float, written: str) -> None:
    """A constant delay is written in seconds without an exponent (SCXML 6.2.4, CSS2 times)."""
    chart = Chart(
        "t", state("a", entry=[send("tick", delay=seconds, id="x")], on=[transition("tick", "b")]), state("b")
    )
    text = round_trip(chart, [seconds])
    assert f'delay="{written}"' in text


def test_authored_constant_sends_cancels_and_raises() -> None:
    """Constant names and data of the authoring API need no datamodel (SCXML 6.2, 6.3, 4.2)."""
    chart = Chart(
        "t",
        state(
            "a",
            entry=[send("ping", {"n": 1}, delay=1.0, id="p"), raise_event("hello")],
            on=[
                transition("hello", actions=[log("hello")]),
                transition("ping", "b", actions=[log("pinged", [1, "x"])]),
                transition("drop", actions=[cancel("p")]),
            ],
        ),
        state("b"),
    )
    text = round_trip(chart, [1.0])
    round_trip(chart, ["drop", 2.0])
    assert "<content expr=\"{'n': 1}\"/>" in text
    assert "<datamodel>" not in text


def test_assign_and_script() -> None:
    """``<assign>`` by expression, content or nothing; ``<script>`` kept as written (SCXML 5.4, 5.8)."""
    chart = load(
        document(
            '<datamodel><data id="x" expr="1"/><data id="y"/><data id="z">{"a": [1]}</data></datamodel>'
            "<script>\n  x = x + 10\n  if x &lt; 100:\n      y = 'small &amp; odd'\n</script>"
            '<state id="a"><onentry><assign location="z[\'a\']" expr="[x, y]"/>'
            '<assign location="y">[true, null]</assign></onentry>'
            '<transition event="go"><assign location="y"/><script>x = x * 2</script></transition></state>'
        )
    )
    text = round_trip(chart, ["go"])
    assert "<script>\n  x = x + 10\n  if x &lt; 100:\n      y = 'small &amp; odd'\n</script>" in text
    assert '<assign location="y">[true, null]</assign>' in text
    assert '<assign location="y"/>' in text
    assert '<data id="z">{"a": [1]}</data>' in text


def test_text_and_attributes_are_escaped() -> None:
    """Markup characters and line breaks survive in attributes and content (SCXML 3.2, XML 1.0 2.4, 3.3.3)."""
    label = "a <b> & \"c\"\n\t'd'"
    chart = load(
        document(
            '<datamodel><data id="s" expr="\'&lt;&amp;&gt;\'"/></datamodel>'
            '<state id="a"><onentry><log label="a &lt;b&gt; &amp; &quot;c&quot;&#10;&#9;\'d\'" expr="s"/>'
            '<log label="multi" expr="(s +&#10;  \'!\')"/></onentry></state>'
        )
    )
    text = round_trip(chart)
    assert "label=\"a &lt;b&gt; &amp; &quot;c&quot;&#10;&#9;'d'\"" in text
    effects = behaviour(load(text), [])[0].effects
    assert effects == (Logged(label, "<&>"), Logged("multi", "<&>!"))


# ---------------------------------------------------------------- datamodel


def test_top_level_data_by_expression_content_and_none() -> None:
    """``<datamodel><data id expr|content>`` initialises the datamodel before the first state (5.2, 5.3)."""
    chart = load(
        document(
            '<datamodel><data id="a" expr="[1, 2]"/><data id="b">"text"</data><data id="c"/>'
            '<data id="d">not json</data></datamodel><state id="s"/>'
        )
    )
    text = round_trip(chart)
    assert '<data id="a" expr="[1, 2]"/>' in text
    assert '<data id="b">"text"</data>' in text
    assert '<data id="c"/>' in text
    assert '<data id="d">"not json"</data>' in text


def test_nested_data_is_initialised_early_at_the_top() -> None:
    """With early binding every ``<data>`` is initialised at start, wherever it stands (SCXML 5.3)."""
    chart = load(
        document(
            '<state id="a"><transition event="go" target="b"/></state>'
            '<state id="b"><datamodel><data id="v" expr="5"/></datamodel>'
            '<onentry><log label="v" expr="v"/></onentry></state>'
        )
    )
    text = round_trip(chart, ["go"])
    assert text.index('<data id="v" expr="5"/>') < text.index('<state id="a">')
    assert "binding" not in text


def test_late_binding_keeps_each_states_data_in_the_state() -> None:
    """``binding="late"``: a state's ``<data>`` is assigned when it is first entered (SCXML 5.3)."""
    chart = load(
        document(
            '<datamodel><data id="n" expr="1"/></datamodel>'
            '<state id="a"><transition event="go" target="b"><assign location="n" expr="n + 1"/></transition>'
            "</state>"
            '<state id="b"><datamodel><data id="v" expr="n * 10"/></datamodel>'
            '<onentry><log label="v" expr="v"/></onentry><onentry><log label="again"/></onentry>'
            '<transition event="back" target="a"/></state>',
            attributes=' binding="late"',
        )
    )
    text = round_trip(chart, ["go", "back", "go"])
    assert 'binding="late"' in text
    assert '<state id="b"><datamodel><data id="v" expr="n * 10"/>' in flat(text)


def test_hand_built_datamodel_charts_with_loader_values_dump() -> None:
    """A chart built with the loader's expression values is written with their source (SCXML 5.9)."""
    cond = Cond(Code("_event.name == 'go'", "test", "eval"), "cond")
    chart: Chart[Datamodel] = Chart(
        "t", state("a", on=[transition("go", "b", guard=cond)]), state("b"), context=Datamodel
    )
    assert "cond=\"_event.name == 'go'\"" in round_trip(chart, ["go"])


def test_dump_is_stable() -> None:
    """The same chart gives the same text, and equal documents give equal text (SCXML 3.2)."""
    text = document('<state id="a"><onentry><log label="x"/></onentry></state>')
    assert dump(load(text)) == dump(load(text)) == dump(load(dump(load(text))))


# ------------------------------------------------------------------ invoke

CHILD = (
    '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python" name="child">'
    '<datamodel><data id="n" expr="0"/></datamodel>'
    '<state id="c"><transition event="stop" target="f"/></state><final id="f"/></scxml>'
)
"""A child document; :data:`UNNAMED` is the same without ``name`` (the loader names it after its site)."""

UNNAMED = CHILD.replace(' name="child"', "")


def invoking(invokes: str, *, inside: str = "", states: str = "") -> str:
    """A document whose state ``s`` holds ``invokes`` and ``inside``, and leaves for ``out`` on ``leave``."""
    return document(
        '<datamodel><data id="n" expr="5"/><data id="got" expr="[]"/><data id="iid"/><data id="other"/>'
        f'<data id="src"/></datamodel><state id="s">{invokes}{inside}'
        f'<transition event="leave" target="out"/></state><state id="out"/>{states}'
    )


def child_effects(chart: Chart[Any], script: Script) -> list[tuple[object, ...]]:
    """The births (site, chart, input) and the events sent to children (site, name, data) of a script."""
    found: list[tuple[object, ...]] = []
    for observation in behaviour(chart, script):
        for effect in observation.effects:
            if isinstance(effect, BirthChild):
                found.append(("birth", effect.invoke_id.site, effect.chart, effect.input))
            elif isinstance(effect, SendToChild):
                found.append(("send", effect.invoke_id.site, effect.event.name, effect.event.data))
    return found


def test_an_inline_child_document_is_written_nested_in_its_invoke() -> None:
    """``<invoke><content><scxml>``: the child chart is written inline, indented, named (SCXML 6.4)."""
    chart = load(invoking(f'<invoke id="kid"><content>{CHILD}</content></invoke>'))
    text = round_trip(chart, ["go", "leave"])
    assert (
        '    <invoke id="kid">\n'
        "      <content>\n"
        '        <scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python" '
        'name="child" xmlns:incarnate="urn:incarnate:scxml" incarnate:chart="t.kid">\n'
        "          <datamodel>\n"
        '            <data id="n" expr="0"/>\n'
        "          </datamodel>\n"
        '          <state id="c">\n'
        '            <transition event="stop" target="f"/>\n'
        "          </state>\n"
        '          <final id="f"/>\n'
        "        </scxml>\n"
        "      </content>\n"
        "    </invoke>\n"
    ) in text
    again = load(text)
    assert [companion.name for companion in again.companions] == ["t.kid"], "the name dump kept"
    assert behaviour(again.companions[0], ["stop"]) == behaviour(chart.companions[0], ["stop"])
    assert child_effects(again, ["leave"]) == [("birth", "kid", "t.kid", None)]


def test_generated_invoke_ids_stay_generated_and_child_names_are_written_explicitly() -> None:
    """An ``<invoke>`` without ``id`` (site ``<state>-invoke<n>``) is written without one, so its
    invocations stay named ``<state>.<generation>``; a child without ``name`` is written with
    ``<chart>.<site>`` as its chart name (SCXML 6.4, 6.4.1)."""
    chart = load(invoking(f"<invoke><content>{UNNAMED}</content></invoke>" * 2))
    assert [site.generated_id for site in chart.site_by_id.values()] == [True, True]
    text = round_trip(chart, ["leave"])
    assert "<invoke id=" not in text and flat(text).count("<invoke><content>") == 2
    assert 'name="t.s-invoke1"' in text
    assert child_effects(load(text), []) == [
        ("birth", "s-invoke", "t.s-invoke", None),
        ("birth", "s-invoke1", "t.s-invoke1", None),
    ]


def test_namelist_and_params_are_the_childs_input() -> None:
    """``namelist`` and ``<param expr|location>`` of an invoke make the child's input (SCXML 6.4, 5.7)."""
    chart = load(
        invoking(
            '<invoke id="kid" namelist="n"><param name="double" expr="n * 2"/>'
            f'<param name="same" location="n"/><content>{CHILD}</content></invoke>'
        )
    )
    text = round_trip(chart, ["leave"])
    assert '<invoke id="kid" namelist="n"><param name="double" expr="n * 2"/>' in flat(text)
    assert '<param name="same" location="n"/>' in text
    assert child_effects(load(text), []) == [("birth", "kid", "t.kid", {"n": 5, "double": 10, "same": 5})]


def test_typeexpr_is_checked_when_the_invoke_runs() -> None:
    """``typeexpr`` names the invoked type when the invoke runs; an unsupported one fails it (SCXML 6.4)."""
    chart = load(
        invoking(
            f'<invoke id="kid" typeexpr="\'scxml\'"><content>{CHILD}</content></invoke>',
            states=f'<state id="far"><invoke id="bad" typeexpr="\'http\'"><content>{CHILD}</content></invoke>'
            "</state>",
            inside='<transition event="away" target="far"/>',
        )
    )
    text = round_trip(chart, ["away"])
    assert '<invoke id="bad" typeexpr="\'http\'">' in text
    assert child_effects(load(text), ["away"]) == [("birth", "kid", "t.kid", None)]
    failure = ("ActionFailed", "far", "input of site bad", "ValueError", None)
    assert failure in behaviour(load(text), ["away"])[1].effects


def test_finalize_runs_on_each_event_from_the_child() -> None:
    """``<finalize>`` runs on every event the child sends, its done event too, before transitions (6.5)."""
    chart = load(
        invoking(
            f'<invoke id="kid"><content>{CHILD}</content>'
            '<finalize><assign location="got" expr="got + [_event.name]"/></finalize></invoke>',
            inside='<transition event="note" cond="got == [\'note\']"><log label="noted"/></transition>'
            '<transition event="done.invoke.kid"><log label="got" expr="got"/></transition>',
        )
    )
    script: Script = [FromChild("kid", "note"), "ping", FromChild("kid", None, {"ok": True})]
    text = round_trip(chart, script)
    assert '<finalize><assign location="got" expr="got + [_event.name]"/></finalize>' in flat(text)
    observed = behaviour(load(text), script)
    assert observed[1].effects == (Logged("noted", None),)
    assert observed[-1].effects == (Logged("got", ["note", "done.invoke.kid"]),)


def test_autoforward_sends_external_events_to_the_child() -> None:
    """``autoforward="true"`` sends the child each external event, its own included (SCXML 6.4)."""
    chart = load(invoking(f'<invoke id="kid" autoforward="true"><content>{CHILD}</content></invoke>'))
    script: Script = ["hello", FromChild("kid", "back"), "leave"]
    text = round_trip(chart, script)
    assert '<invoke id="kid" autoforward="true">' in text
    assert child_effects(load(text), script) == [
        ("birth", "kid", "t.kid", None),
        ("send", "kid", "hello", None),
        ("send", "kid", "back", None),
        ("send", "kid", "leave", None),
    ]


def test_idlocation_stores_the_generated_id_and_leaves_the_onentry_alone() -> None:
    """``idlocation`` receives the generated invoke id, ``<state>.<generation>``, when the child is
    born; dump writes it on the invoke, for each of several invokes of a state (SCXML 6.4, 6.4.1)."""
    chart = load(
        invoking(
            '<onentry><log label="n" expr="n"/></onentry>'
            f'<invoke idlocation="iid"><content>{UNNAMED}</content></invoke>'
            f'<invoke id="named"><content>{CHILD}</content></invoke>'
            f'<invoke idlocation="other"><content>{UNNAMED}</content></invoke>',
            states=f'<state id="p.q"><invoke idlocation="iid"><content>{CHILD}</content></invoke></state>',
            inside='<transition event="away" target="p.q"/>',
        )
    )
    text = round_trip(chart, ["away"])
    assert '<onentry><log label="n" expr="n"/></onentry>' in flat(text)
    assert "<assign" not in text
    assert '<invoke idlocation="iid">' in text
    assert '<invoke idlocation="other">' in text
    observed = behaviour(load(text), ["away"])
    assert {key: observed[0].variables[0][key] for key in ("iid", "other")} == {
        "iid": "s.1",
        "other": "s.3",
    }
    assert observed[1].variables[0]["iid"] == "p.q.4"


def test_a_child_that_invokes_a_grandchild_is_written_with_its_own_children() -> None:
    """An inline child document may itself invoke one; each level is written in its parent (SCXML 6.4)."""
    grandchild = CHILD.replace('name="child"', 'name="grandchild"')
    child = (
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python" name="child">'
        '<datamodel><data id="m" expr="7"/></datamodel><state id="c">'
        f'<invoke id="grand" namelist="m"><content>{grandchild}</content></invoke></state></scxml>'
    )
    chart = load(invoking(f'<invoke id="kid"><content>{child}</content></invoke>'))
    text = round_trip(chart, ["leave"])
    assert (
        '                <scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python" '
        'name="grandchild" xmlns:incarnate="urn:incarnate:scxml" incarnate:chart="t.kid.grand">\n'
    ) in text
    (kid,) = load(text).companions
    assert [companion.name for companion in kid.companions] == ["t.kid.grand"]
    assert behaviour(kid, []) == behaviour(chart.companions[0], [])
    assert child_effects(kid, []) == [("birth", "grand", "t.kid.grand", {"m": 7})]


def test_srcexpr_is_written_and_picks_among_the_same_sibling_documents(tmp_path: Path) -> None:
    """``srcexpr`` is written as it was: loaded beside the same documents, it picks the same one (6.4)."""
    (tmp_path / "child.scxml").write_text(CHILD)
    (tmp_path / "other.scxml").write_text(CHILD.replace('name="child"', 'name="other"'))
    chart = load(
        invoking(
            '<invoke id="kid" srcexpr="src" namelist="n"/>',
            inside='<onentry><assign location="src" expr="\'file:other.scxml\'"/></onentry>',
        ),
        base=tmp_path,
    )
    text = round_trip(chart, ["leave"], base=tmp_path)
    assert '<invoke id="kid" srcexpr="src" namelist="n"/>' in text
    assert "<content>" not in text
    again = load(text, base=tmp_path)
    assert sorted(companion.name for companion in again.companions) == ["child", "other"]
    assert child_effects(again, []) == [("birth", "kid", "other", {"n": 5})]


def test_an_authored_site_running_a_companion_chart_dumps() -> None:
    """An ``invoke(chart=…)`` site whose chart is a companion is an ``<invoke>`` with the chart inline,
    its finalize content and autoforward (SCXML 6.4, 6.5); the loader names an inline child by its
    chart and site, so a companion named so loads back as the same chart."""
    child = Chart("t.kid", state("c", on=[transition("stop", "f")]), final("f"))
    chart = Chart(
        "t",
        state(
            "a",
            invoke=[invoke("kid", chart="t.kid", finalize=[log("from kid")], autoforward=True)],
            on=[transition("leave", "b")],
        ),
        state("b"),
        companions=[child],
    )
    script: Script = ["hello", FromChild("kid", "note"), "leave"]
    text = round_trip(chart, script)
    assert '<invoke id="kid" autoforward="true">' in text
    assert '<finalize><log label="from kid"/></finalize>' in flat(text)
    assert child_effects(load(text), script)[:2] == [
        ("birth", "kid", "t.kid", None),
        ("send", "kid", "hello", None),
    ]


# ----------------------------------------------------------------- refusals


def test_a_python_guard_is_refused_naming_the_state_and_what_to_write() -> None:
    """A lambda guard has no SCXML ``cond`` (SCXML 5.9): refused, naming the transition and the fix."""
    chart: Chart[Datamodel] = Chart(
        "t", state("a", on=[transition("go", "b", guard=lambda c, e: True)]), state("b"), context=Datamodel
    )
    message = refusal(chart)
    assert "transition #0 (on go) of state 'a': guard " in message
    assert "<lambda> is a Python callable" in message
    assert "write the guard as an SCXML cond expression, or load the chart from SCXML" in message


def test_a_python_action_is_refused() -> None:
    """A function action has no SCXML executable content (SCXML 4): refused."""

    def bump(context: NoContext, event: Event) -> None:
        return None

    message = refusal(Chart("t", state("a", entry=[assign(bump)])))
    assert "entry of state 'a': assign " in message
    assert ".bump is a Python callable; write it as <assign> or <script>" in message


COMPANION = Chart("c", state("c"))


@pytest.mark.parametrize(
    ("site", "message"),
    [
        (invoke("kid", task="pay"), "runs task 'pay'; SCXML invokes SCXML documents: invoke a chart"),
        (
            invoke("kid", chart="payment"),
            "invokes chart 'payment', which is not among the chart's companions; dump the child chart "
            "separately, or load both from SCXML",
        ),
        (
            invoke("kid", chart="c", map=lambda context: {}),
            "fans out (map=<lambda>); an <invoke> starts one child: keep the chart in Python",
        ),
        (
            invoke("kid", chart="c", retry=RetryPolicy(3)),
            "retries (max_attempts=3); SCXML never restarts an invoked child: leave retry= out",
        ),
        (
            invoke("kid", chart="c", group="tree", max_depth=2),
            "is recursive (group='tree', max_depth=2), which SCXML has no form for: leave group= and "
            "max_depth= out",
        ),
        (
            invoke("kid", chart="c", output=lambda context, event: None),
            "maps the child's output with <lambda>; SCXML gives it as the data of done.invoke.kid: "
            "assign _event.data in <finalize> (finalize=) instead",
        ),
        (
            invoke("kid", chart="c", input=lambda context: 1),
            "input <lambda> is a Python callable; an <invoke> passes its namelist and <param> values "
            "(InvokeInput), or load the chart from SCXML",
        ),
        (invoke("kid", chart="c", input={"n": 1}), "input {'n': 1}; an <invoke> passes its namelist"),
        (
            invoke("kid", choose=lambda context: "c", charts=["c"]),
            "chooses its chart with <lambda>, a Python callable; name the document with srcexpr "
            "(SrcChoice), or load the chart from SCXML",
        ),
    ],
)
def test_a_site_an_invoke_cannot_say_is_refused(site: Site[Any], message: str) -> None:
    """A task, fan-out, retried, recursive or output-mapping site, a Python input or chart choice, and a
    child chart the chart does not carry have no ``<invoke>`` form (SCXML 6.4): refused, naming the
    state, the site and the fix."""
    refused = refusal(Chart("t", state("a", invoke=[site]), companions=[COMPANION]))
    assert f"state 'a': site 'kid' (<invoke>) {message}" in refused


def test_a_python_finalize_action_is_refused() -> None:
    """``<finalize>`` holds executable content (SCXML 6.5): a function action there is refused."""
    site = invoke("kid", chart="c", finalize=[lambda context, event: None])
    refused = refusal(Chart("t", state("a", invoke=[site]), companions=[COMPANION]))
    assert "finalize of site 'kid' (<invoke>) in state 'a': assign " in refused
    assert "<lambda> is a Python callable; write it as <assign> or <script>" in refused


def test_a_child_charts_problems_are_listed_as_the_sites() -> None:
    """The inline child document must dump too (SCXML 6.4): its problems name the site and the child."""
    child = Chart("c", state("c", on=[transition("go", "c", guard=lambda context, event: True)]))
    refused = refusal(Chart("t", state("a", invoke=[invoke("kid", chart="c")]), companions=[child]))
    assert (
        "state 'a': site 'kid' (<invoke>): in chart 'c': transition #0 (on go) of state 'c': guard" in refused
    )


def test_send_child_is_refused_with_its_send_rewrite() -> None:
    """``send_child`` is not written; ``<send target="#_<invokeid>">`` reaches the child (SCXML 6.2.4)."""
    chart = Chart(
        "t",
        state("a", entry=[send_child("kid", "ping")], invoke=[invoke("kid", chart="c")]),
        companions=[COMPANION],
    )
    assert "write send('ping', target='#_kid'), which is <send target=\"#_kid\">" in refusal(chart)


def test_a_delayed_transition_is_refused_with_its_rewrite() -> None:
    """``after()`` has no SCXML element (SCXML 6.2 sends delayed events instead): refused."""
    message = refusal(Chart("t", state("a", on=[after(2.0, "b")]), state("b")))
    assert "of state 'a': after(2) is a delayed transition" in message
    assert "<send event=… delay=… id=…>" in message


def test_send_parent_and_a_foreign_context_are_refused_together() -> None:
    """Every problem is listed at once: ``SendParent`` (write ``<send target="#_parent">``, 6.2)
    and a context that is not a datamodel (SCXML 5)."""
    import attrs

    @attrs.frozen
    class Order:
        n: int = 0

    chart: Chart[Order] = Chart("t", state("a", entry=[send_parent("up")]), context=Order)
    message = refusal(chart)
    assert "2 problem(s)" in message
    assert "Order has no SCXML form" in message
    assert "SendParent('up') is not written as SCXML; write send('up', target='#_parent')" in message


def test_an_expression_in_a_chart_without_a_datamodel_is_refused() -> None:
    """SCXML expressions need the datamodel (SCXML 5.9): in a NoContext chart they are refused."""
    cond = Cond(Code("True", "test", "eval"), "cond")
    chart = Chart("t", state("a", on=[transition("go", "a", guard=cond)]))  # type: ignore[arg-type]
    message = refusal(chart)
    assert "needs a datamodel; give the chart context=Datamodel" in message


def test_a_block_nested_in_content_is_refused() -> None:
    """SCXML runs a handler as one block (4.9): a ``Block`` inside ``<if>`` has no form."""
    chart = Chart("t", state("a", entry=[if_(in_state("a"), [block([log("x")])]), log("after")]))
    assert "a Block nested in executable content has no SCXML form" in refusal(chart)


# ------------------------------------------------------------------ corpus


def test_every_scion_document_round_trips() -> None:
    """Every SCION document that loads dumps, reloads with the same shape and reaches the same states."""
    from tests.conformance.test_scion import CASES, EXCLUDED, _chart

    cases = [case for case in CASES if case.name not in EXCLUDED]
    assert len(cases) == 121
    for case in cases:
        chart = _chart(case)
        again = load(dump(chart))
        assert again.fingerprint == chart.fingerprint, case.name
        script: list[str | float] = []
        for item in case.script:
            script.extend([item.get("after", 0) / 1000, item["event"]["name"]])
        assert behaviour(again, script) == behaviour(chart, script), case.name


def test_a_child_loaded_from_its_own_file_keeps_its_chart_name_through_dump(tmp_path: Path) -> None:
    """A ``src`` child is named by its file; written inline by ``dump``, it loads again under that name."""
    (tmp_path / "kid.scxml").write_text(CHILD, "utf-8")
    (tmp_path / "parent.scxml").write_text(invoking('<invoke id="k" src="kid.scxml"/>'), "utf-8")
    chart = load(tmp_path / "parent.scxml")
    assert [companion.name for companion in chart.companions] == ["kid"]
    (tmp_path / "elsewhere.scxml").write_text(dump(chart), "utf-8")
    again = load(tmp_path / "elsewhere.scxml")
    assert [companion.name for companion in again.companions] == ["kid"]
    assert again.fingerprint == chart.fingerprint

"""``statechart.scxml.load``: SCXML documents with the Python datamodel, construct by construct.

Each test names the section of SCXML 1.0 it follows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from statechart import Chart, Event, Registry, due_timers, fire, start, step
from statechart.effects import ActionFailed, BirthChild, Effect, Logged, SendToChild, SendToParent
from statechart.event import InvokeId, child_message_event, done_invoke_event
from statechart.scxml import Datamodel, ScxmlError, load, parse_delay
from statechart.snapshot import Snapshot

SESSION = "s-1"


def doc(body: str, *, attributes: str = "") -> str:
    """A document around ``body`` with the Python datamodel."""
    return (
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python" '
        f'name="t" {attributes}>{body}</scxml>'
    )


def begin(text: str, **load_options: Any) -> tuple[Chart[Datamodel], Snapshot[Datamodel], list[Effect]]:
    chart = load(text, **load_options)
    snapshot, effects = start(chart, session=SESSION)
    return chart, snapshot, list(effects)


def send(
    chart: Chart[Datamodel], snapshot: Snapshot[Datamodel], event: str | Event, data: Any = None
) -> tuple[Snapshot[Datamodel], list[Effect]]:
    message = event if isinstance(event, Event) else Event(event, data)
    snapshot, effects = step(chart, snapshot, message, session=SESSION)
    return snapshot, list(effects)


def fire_due(chart: Chart[Datamodel], snapshot: Snapshot[Datamodel], now: float) -> Snapshot[Datamodel]:
    for _ in range(100):
        due = due_timers(snapshot, now)
        if not due:
            break
        snapshot, _ = fire(
            chart, snapshot, due[0].id, now=max(due[0].deadline, snapshot.time), session=SESSION
        )
    return snapshot


def failures(effects: list[Effect]) -> list[ActionFailed]:
    return [e for e in effects if isinstance(e, ActionFailed)]


def logs(effects: list[Effect]) -> list[Any]:
    return [e.data for e in effects if isinstance(e, Logged)]


# ------------------------------------------------------------------- data


def test_early_binding_assigns_every_data_at_start_in_document_order() -> None:
    """Early binding: all <data>, top-level and in states, is assigned when the document starts (5.3)."""
    _, snapshot, _ = begin(
        doc(
            '<datamodel><data id="a" expr="1"/><data id="b" expr="a + 1"/></datamodel>'
            '<state id="s"><transition event="go" target="t"/></state>'
            '<state id="t"><datamodel><data id="c" expr="b * 10"/></datamodel></state>'
        )
    )
    assert snapshot.context.vars == {"a": 1, "b": 2, "c": 20}


def test_late_binding_assigns_a_states_data_on_its_first_entry_only() -> None:
    """Late binding: a state's data is unassigned until the state is first entered (5.3)."""
    chart, snapshot, _ = begin(
        doc(
            '<datamodel><data id="n" expr="0"/></datamodel>'
            '<state id="s"><transition event="go" target="t"/></state>'
            '<state id="t"><datamodel><data id="c" expr="n + 100"/></datamodel>'
            '<transition event="bump" target="s"><assign location="c" expr="c + 1"/></transition></state>',
            attributes='binding="late"',
        )
    )
    assert snapshot.context.vars == {"n": 0, "c": None}
    snapshot, _ = send(chart, snapshot, "go")
    assert snapshot.context["c"] == 100
    snapshot, _ = send(chart, snapshot, "bump")
    snapshot, _ = send(chart, snapshot, "go")
    assert snapshot.context["c"] == 101, "re-entering the state does not assign its data again"


def test_data_from_inline_content_and_from_a_file(tmp_path: Path) -> None:
    """<data> takes its value from inline content (JSON, else text) or from the file src names (5.3)."""
    (tmp_path / "prices.json").write_text('{"tea": 3}')
    (tmp_path / "order.scxml").write_text(
        doc(
            '<datamodel><data id="l">[1, 2]</data><data id="t"> two  words </data>'
            '<data id="p" src="prices.json"/></datamodel><state id="s"/>'
        )
    )
    chart = load(tmp_path / "order.scxml")
    snapshot, _ = start(chart, session=SESSION)
    assert snapshot.context.vars == {"l": [1, 2], "t": "two words", "p": {"tea": 3}}


def test_a_failing_data_expression_raises_error_execution_and_the_rest_still_initialise() -> None:
    """An illegal <data> value stays unassigned and raises error.execution; the rest go on (5.3)."""
    _, snapshot, effects = begin(
        doc(
            '<datamodel><data id="a" expr="1 / 0"/><data id="b" expr="2"/></datamodel>'
            '<state id="s"><transition event="error.execution" target="seen"/></state><state id="seen"/>'
        )
    )
    assert snapshot.context.vars == {"a": None, "b": 2}
    assert [f.action for f in failures(effects)] == ["assign data a"]
    assert snapshot.configuration == ("seen",)


def test_an_invokers_params_preset_the_childs_declared_data() -> None:
    """A child's <data> whose id an invoker's param names takes the param's value instead (6.4)."""
    chart = load(
        doc(
            '<datamodel><data id="amount" expr="1"/><data id="note" expr="\'x\'"/></datamodel><state id="s"/>'
        )
    )
    snapshot, _ = start(chart, input={"amount": 42, "stranger": True}, session=SESSION)
    assert snapshot.context.vars == {"amount": 42, "note": "x"}


# ----------------------------------------------------------- assign, cond


def test_assign_to_an_undeclared_location_raises_error_execution() -> None:
    """<assign> to a location the datamodel lacks raises error.execution and assigns nothing (5.4)."""
    _, snapshot, effects = begin(
        doc(
            '<datamodel><data id="a" expr="1"/></datamodel><state id="s"><onentry>'
            '<assign location="nope" expr="2"/></onentry></state>'
        )
    )
    assert "nope" not in snapshot.context.vars
    assert "no such variable" in failures(effects)[0].message


def test_assign_to_a_part_of_a_variable_and_to_a_system_variable() -> None:
    """A location may be part of a variable; the system variables are read-only (5.4, 5.10)."""
    _, snapshot, effects = begin(
        doc(
            '<datamodel><data id="d" expr="{\'k\': [1, 2]}"/></datamodel><state id="s"><onentry>'
            '<assign location="d[\'k\'][0]" expr="9"/></onentry><onentry>'
            '<assign location="_sessionid" expr="\'x\'"/></onentry></state>'
        )
    )
    assert snapshot.context["d"] == {"k": [9, 2]}
    assert "read-only system variable" in failures(effects)[0].message


def test_a_raising_condition_is_false_and_raises_error_execution() -> None:
    """A condition that cannot be evaluated is false, and error.execution is raised (5.9)."""
    chart, snapshot, _ = begin(
        doc(
            '<state id="s"><transition event="go" cond="undefined_name > 1" target="bad"/>'
            '<transition event="go" target="ok"/></state><state id="ok"/><state id="bad"/>'
        )
    )
    snapshot, effects = send(chart, snapshot, "go")
    assert snapshot.configuration == ("ok",)
    assert failures(effects)[0].error == "NameError"


def test_an_illegal_expression_fails_when_it_runs_not_when_it_loads() -> None:
    """A syntactically illegal expression raises error.execution at run time (5.9, 5.4)."""
    _, snapshot, effects = begin(doc('<datamodel><data id="o" expr="{\'p\': 1"/></datamodel><state id="s"/>'))
    assert snapshot.context["o"] is None
    assert failures(effects)[0].error == "SyntaxError"


def test_an_expression_may_span_lines() -> None:
    """A condition written over several lines is one expression (5.9)."""
    chart, snapshot, _ = begin(
        doc(
            '<datamodel><data id="a" expr="1"/></datamodel><state id="s">'
            '<transition event="go" cond="a == 1 and\n   a &lt; 2" target="t"/></state><state id="t"/>'
        )
    )
    snapshot, _ = send(chart, snapshot, "go")
    assert snapshot.configuration == ("t",)


# -------------------------------------------------------- system variables


def test_event_fields_of_an_external_event_sent_by_the_instance_itself() -> None:
    """_event has name, type, sendid, origin, origintype, invokeid and data (5.10.1)."""
    chart, snapshot, _ = begin(
        doc(
            '<datamodel><data id="seen"/></datamodel>'
            '<state id="s"><onentry><send event="ping" id="p1"><param name="n" expr="1"/></send></onentry>'
            '<transition event="ping" target="t">'
            '<assign location="seen" expr="{k: getattr(_event, k) for k in '
            "('name', 'type', 'sendid', 'origin', 'origintype', 'invokeid', 'data')}\"/></transition></state>"
            '<state id="t"/>'
        )
    )
    snapshot = fire_due(chart, snapshot, 0.0)
    assert snapshot.context["seen"] == {
        "name": "ping",
        "type": "external",
        "sendid": "p1",
        "origin": f"#_scxml_{SESSION}",
        "origintype": "http://www.w3.org/TR/scxml/#SCXMLEventProcessor",
        "invokeid": None,
        "data": {"n": 1},
    }


def test_event_raw_is_the_event_as_json_text_and_repeated_names_keep_every_value() -> None:
    """_event.raw is the event's JSON object as text; a name given twice (namelist or <param>) has
    the list of its values in document order, and a name given once stays a plain value (5.10.1, 6.2)."""
    chart, snapshot, _ = begin(
        doc(
            '<datamodel><data id="raw"/><data id="data"/><data id="v" expr="1"/></datamodel>'
            '<state id="s"><onentry><send event="ping" namelist="v"><param name="v" expr="2"/>'
            '<param name="v" expr="[3]"/><param name="w" expr="4"/></send></onentry>'
            '<transition event="ping" target="t"><assign location="raw" expr="_event.raw"/>'
            '<assign location="data" expr="_event.data"/></transition></state><state id="t"/>'
        )
    )
    snapshot = fire_due(chart, snapshot, 0.0)
    assert snapshot.context["data"] == {"v": [1, 2, [3]], "w": 4}
    assert snapshot.context["raw"] == (
        '{"name":"ping","type":"external","sendid":null,"origin":"#_scxml_s-1",'
        '"origintype":"http://www.w3.org/TR/scxml/#SCXMLEventProcessor","invokeid":null,'
        '"data":{"v":[1,2,[3]],"w":4}}'
    )


def test_event_of_internal_and_platform_events_and_outside_events() -> None:
    """Raised events are internal, errors platform; an outside event has no sendid nor origin (5.10.1)."""
    chart, snapshot, _ = begin(
        doc(
            '<datamodel><data id="kinds" expr="[]"/></datamodel><state id="s">'
            '<transition event="go"><raise event="inner"/><assign location="nope" expr="1"/>'
            '<assign location="kinds" expr="kinds + [[_event.type, _event.sendid, _event.origin]]"/>'
            '</transition><transition event="inner error.execution">'
            '<assign location="kinds" expr="kinds + [[_event.type, _event.name]]"/></transition></state>'
        )
    )
    snapshot, _ = send(chart, snapshot, "go")
    assert snapshot.context["kinds"] == [["internal", "inner"], ["platform", "error.execution"]]
    chart, snapshot, _ = begin(
        doc(
            '<datamodel><data id="kinds" expr="[]"/></datamodel><state id="s">'
            '<transition event="go">'
            '<assign location="kinds" expr="kinds + [[_event.type, _event.sendid, _event.origin]]"/>'
            '<raise event="inner"/></transition><transition event="inner">'
            '<assign location="kinds" expr="kinds + [[_event.type, _event.name]]"/></transition></state>'
        )
    )
    snapshot, _ = send(chart, snapshot, "go")
    assert snapshot.context["kinds"] == [["external", None, None], ["internal", "inner"]]


def test_sessionid_name_ioprocessors_and_in() -> None:
    """_sessionid, _name and _ioprocessors are bound; In() tests the configuration (5.10, 5.9.1)."""
    _, snapshot, _ = begin(
        doc(
            '<datamodel><data id="v"/></datamodel><parallel id="p"><state id="a"><onentry>'
            "<assign location=\"v\" expr=\"[_sessionid, _name, _ioprocessors['scxml']['location'], "
            "In('a'), In('b'), In('nowhere')]\"/></onentry></state><state id=\"b\"/></parallel>"
        )
    )
    assert snapshot.context["v"] == [SESSION, "t", f"#_scxml_{SESSION}", True, False, False]


def test_event_is_unbound_before_the_first_event() -> None:
    """_event is not bound until the first event is processed (5.10.1), then it stays bound."""
    chart, snapshot, _ = begin(
        doc(
            '<datamodel><data id="e" expr="\'_event\' in globals()"/></datamodel><state id="s">'
            '<transition event="go" target="t"/><onexit><assign location="e" expr="_event.name"/></onexit>'
            '</state><state id="t"/>'
        )
    )
    assert snapshot.context["e"] is False
    snapshot, _ = send(chart, snapshot, "go")
    assert snapshot.context["e"] == "go"


# -------------------------------------------------------------- content


def test_if_elseif_else_runs_the_first_branch_that_holds() -> None:
    """<if>/<elseif>/<else>: the first true condition's content runs, and only it (4.3)."""
    chart, snapshot, _ = begin(
        doc(
            '<datamodel><data id="n" expr="0"/><data id="out"/></datamodel><state id="s">'
            '<transition event="go"><if cond="n &lt; 0"><assign location="out" expr="\'neg\'"/>'
            '<elseif cond="n == 0"/><assign location="out" expr="\'zero\'"/>'
            '<else/><assign location="out" expr="\'pos\'"/></if></transition></state>'
        )
    )
    snapshot, _ = send(chart, snapshot, "go")
    assert snapshot.context["out"] == "zero"


def test_foreach_binds_item_and_index_and_iterates_a_copy() -> None:
    """<foreach> iterates over a shallow copy with item and index set; new variables are declared (4.6)."""
    _, snapshot, _ = begin(
        doc(
            '<datamodel><data id="xs" expr="[1, 3, 5]"/><data id="sum" expr="0"/></datamodel>'
            '<state id="s"><onentry><foreach array="xs" item="x" index="i">'
            '<assign location="sum" expr="sum + x * (i + 1)"/><assign location="xs" expr="xs + [0]"/>'
            "</foreach></onentry></state>"
        )
    )
    assert snapshot.context["sum"] == 1 + 6 + 15
    assert snapshot.context["xs"] == [1, 3, 5, 0, 0, 0]
    assert (snapshot.context["x"], snapshot.context["i"]) == (5, 2)


def test_foreach_over_something_not_iterable_raises_error_execution() -> None:
    """An array expression that is not a collection raises error.execution and runs nothing (4.6)."""
    _, snapshot, effects = begin(
        doc(
            '<datamodel><data id="n" expr="7"/></datamodel><state id="s"><onentry>'
            '<foreach array="n" item="x"><raise event="never"/></foreach></onentry></state>'
        )
    )
    assert "foreach array must be a list" in failures(effects)[0].message
    assert "x" not in snapshot.context.vars


def test_an_error_stops_its_block_and_the_next_onentry_still_runs() -> None:
    """An error stops the rest of its block only: each <onentry> is a block of its own (4.9, 3.8)."""
    _, snapshot, _ = begin(
        doc(
            '<datamodel><data id="trail" expr="[]"/></datamodel><state id="s">'
            '<onentry><assign location="trail" expr="trail + [1]"/><assign location="trail" expr="1 / 0"/>'
            '<assign location="trail" expr="trail + [2]"/></onentry>'
            '<onentry><assign location="trail" expr="trail + [3]"/></onentry></state>'
        )
    )
    assert snapshot.context["trail"] == [1, 3]


def test_script_changes_variables_and_keeps_only_json_values() -> None:
    """<script> runs Python against the datamodel; functions it defines live only while it runs (4.8)."""
    _, snapshot, effects = begin(
        doc(
            '<datamodel><data id="x" expr="1"/></datamodel><script>\n'
            "def double(v):\n    return v * 2\nx = double(x)\ny = [x, 'new']\n</script>"
            '<state id="s"><onentry><script>x = {1, 2}</script></onentry></state>'
        )
    )
    assert snapshot.context.vars == {"x": 2, "y": [2, "new"]}
    assert "JSON values only" in failures(effects)[0].message


def test_log_records_its_label_and_value() -> None:
    """<log label expr> records the value; a value that is not JSON is recorded as its text (4.7)."""
    _, _, effects = begin(
        doc(
            '<state id="s"><onentry><log label="n" expr="[1, 2]"/><log label="e" expr="{1, 2}"/>'
            '<log label="only"/></onentry></state>'
        )
    )
    assert logs(effects) == [[1, 2], "{1, 2}", None]


# ------------------------------------------------------------ send, cancel


def test_send_with_computed_event_target_delay_and_namelist_params() -> None:
    """eventexpr, targetexpr, delayexpr; namelist and <param> make the data (6.2)."""
    chart, snapshot, _ = begin(
        doc(
            '<datamodel><data id="a" expr="1"/><data id="name" expr="\'later\'"/></datamodel>'
            '<state id="s"><onentry><send eventexpr="name" targetexpr="\'#_scxml_\' + _sessionid" '
            'delayexpr="\'250ms\'" namelist="a"><param name="b" expr="a + 1"/></send></onentry>'
            '<transition event="later" target="t"/></state><state id="t"/>'
        )
    )
    (timer,) = snapshot.timers
    assert (timer.event.name, timer.event.data, timer.deadline) == ("later", {"a": 1, "b": 2}, 0.25)
    assert fire_due(chart, snapshot, 1.0).configuration == ("t",)


def test_send_content_gives_the_data_whole() -> None:
    """<content expr> or inline content is the event's data (6.2, 5.6)."""
    _, snapshot, _ = begin(
        doc(
            '<state id="s"><onentry><send event="a"><content expr="[1, 2]"/></send>'
            '<send event="b"><content>More content.</content></send></onentry></state>'
        )
    )
    assert [t.event.data for t in snapshot.timers] == [[1, 2], "More content."]


def test_send_to_internal_and_parent() -> None:
    """#_internal queues internally; #_parent goes out as an effect (6.2.4)."""
    _, snapshot, effects = begin(
        doc(
            '<datamodel><data id="got"/></datamodel><state id="s"><onentry>'
            '<send event="inner" target="#_internal"/><send event="up" target="#_parent"/></onentry>'
            '<transition event="inner"><assign location="got" expr="_event.type"/></transition></state>'
        )
    )
    assert snapshot.context["got"] == "internal"
    assert [e.event.name for e in effects if isinstance(e, SendToParent)] == ["up"]


ERRORS = (
    '<datamodel><data id="errs" expr="[]"/><data id="sid"/></datamodel><state id="s"><onentry>{}</onentry>'
    '<transition event="error.*">'
    '<assign location="errs" expr="errs + [[_event.name, _event.sendid]]"/></transition></state>'
)


def test_an_unsupported_send_type_raises_error_execution() -> None:
    """A send type the processor does not support raises error.execution and stops the block (6.2)."""
    _, snapshot, _ = begin(
        doc(ERRORS.format('<send event="x" typeexpr="\'http://example.org/other\'"/><send event="y"/>'))
    )
    assert snapshot.context["errs"] == [["error.execution", None]]
    assert snapshot.timers == (), "the error stopped the block: the second send never ran"


def test_an_unreachable_target_raises_error_communication_with_the_sendid() -> None:
    """A target the processor cannot reach raises error.communication carrying the send id (6.2, 5.10.1)."""
    _, snapshot, _ = begin(doc(ERRORS.format('<send event="y" target="#_scxml_another" idlocation="sid"/>')))
    assert snapshot.context["errs"] == [["error.communication", snapshot.context["sid"]]]


def test_idlocation_and_cancel_by_sendidexpr() -> None:
    """idlocation stores the generated send id; <cancel sendidexpr> withdraws the send (6.2.4, 6.3)."""
    chart, snapshot, _ = begin(
        doc(
            '<datamodel><data id="sid"/></datamodel><state id="s"><onentry>'
            '<send event="late" delay="1s" idlocation="sid"/></onentry>'
            '<transition event="stop"><cancel sendidexpr="sid"/></transition>'
            '<transition event="late" target="t"/></state><state id="t"/>'
        )
    )
    assert isinstance(snapshot.context["sid"], str) and snapshot.context["sid"]
    assert [t.id for t in snapshot.timers] == [snapshot.context["sid"]]
    snapshot, _ = send(chart, snapshot, "stop")
    assert snapshot.timers == ()


def test_parse_delay_reads_css2_times() -> None:
    """Delays are CSS2 time values (6.2.4)."""
    assert [parse_delay(t) for t in ("500ms", "2s", ".5s", "1.5", 3)] == [0.5, 2.0, 0.5, 1.5, 3.0]
    with pytest.raises(ValueError, match="'soon' is not a delay"):
        parse_delay("soon")


# ---------------------------------------------------- states and transitions


def test_initial_element_content_runs_after_the_parents_entry_before_its_children() -> None:
    """<initial> transition content runs after the state's onentry, before its children's (3.6, 3.13)."""
    _, snapshot, _ = begin(
        doc(
            '<datamodel><data id="trail" expr="[]"/></datamodel><state id="p">'
            '<onentry><assign location="trail" expr="trail + [\'p\']"/></onentry>'
            '<initial><transition target="c"><assign location="trail" expr="trail + [\'initial\']"/>'
            '</transition></initial><state id="c"><onentry><assign location="trail" expr="trail + [\'c\']"/>'
            "</onentry></state></state>"
        )
    )
    assert snapshot.context["trail"] == ["p", "initial", "c"]


def test_history_default_content_and_internal_transitions() -> None:
    """A history's default transition runs its content (3.10); type="internal" leaves its source (3.13)."""
    chart, snapshot, _ = begin(
        doc(
            '<datamodel><data id="exits" expr="0"/><data id="d" expr="0"/></datamodel>'
            '<state id="p"><onexit><assign location="exits" expr="exits + 1"/></onexit>'
            '<history id="h"><transition target="b"><assign location="d" expr="d + 1"/></transition>'
            "</history>"
            '<state id="a"><transition event="in" type="internal" target="b"/></state><state id="b"/>'
            '<transition event="inside" type="internal" target="a"/></state>'
            '<state id="o"><transition event="back" target="h"/></state>',
            attributes='initial="o"',
        )
    )
    snapshot, _ = send(chart, snapshot, "back")
    assert (snapshot.configuration[-1], snapshot.context["d"]) == ("b", 1)
    snapshot, _ = send(chart, snapshot, "inside")
    assert (snapshot.configuration[-1], snapshot.context["exits"]) == ("a", 0)


def test_donedata_params_and_content() -> None:
    """<donedata> gives the done event's data from <param> or <content> (5.5, 5.7)."""
    chart, snapshot, _ = begin(
        doc(
            '<datamodel><data id="r" expr="\'R-1\'"/></datamodel><state id="s">'
            '<transition event="go" target="f"/></state>'
            '<final id="f"><donedata><param name="receipt" expr="r"/><param name="copy" location="r"/>'
            "</donedata></final>"
        )
    )
    snapshot, _ = send(chart, snapshot, "go")
    assert snapshot.output == {"receipt": "R-1", "copy": "R-1"}
    chart, snapshot, _ = begin(doc('<final id="f"><donedata><content expr="[1, 2]"/></donedata></final>'))
    assert snapshot.output == [1, 2]


# -------------------------------------------------------------- invoke


CHILD = (
    '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python" name="child">'
    '<datamodel><data id="n" expr="0"/></datamodel><state id="c"/></scxml>'
)


def invoking(
    tmp_path: Path, invoke_attributes: str, inner: str = "", extra: str = "", states: str = ""
) -> Chart[Datamodel]:
    (tmp_path / "child.scxml").write_text(CHILD)
    (tmp_path / "parent.scxml").write_text(
        doc(
            '<datamodel><data id="n" expr="5"/><data id="got" expr="[]"/><data id="iid"/></datamodel>'
            f'<state id="s"><invoke src="child.scxml" {invoke_attributes}>{inner}</invoke>{extra}</state>'
            + states
        )
    )
    return load(tmp_path / "parent.scxml")


def test_invoke_births_the_child_document_with_its_params(tmp_path: Path) -> None:
    """<invoke src> starts the child document, its params and namelist as its input (6.4)."""
    chart = invoking(tmp_path, 'id="kid" namelist="n"', '<param name="extra" expr="n * 2"/>')
    assert [c.name for c in chart.companions] == ["child"]
    _, effects = start(chart, session=SESSION)
    (birth,) = [e for e in effects if isinstance(e, BirthChild)]
    assert (birth.chart, birth.input) == ("child", {"n": 5, "extra": 10})
    registry = Registry([chart])
    assert registry.names == ("t", "child"), "a registry adds the invoked documents with the chart"


def test_invoke_idlocation_stores_the_generated_id(tmp_path: Path) -> None:
    """idlocation receives the invoke id the processor generates, ``<state>.<generation>`` (6.4.1)."""
    chart = invoking(tmp_path, 'idlocation="iid"')
    snapshot, effects = start(chart, session=SESSION)
    (birth,) = [e for e in effects if isinstance(e, BirthChild)]
    assert snapshot.context["iid"] == f"s.{birth.invoke_id.generation}" == "s.1"
    assert birth.invoke_id.site == "s-invoke", "the site id still names the site and the child's Ref"


def test_a_generated_invoke_id_names_the_invocation_everywhere(tmp_path: Path) -> None:
    """The generated ``<state>.<generation>`` is ``_event.invokeid``, ``_event.origin``, the
    ``done.invoke.<id>`` name and a ``#_<id>`` target; the site's own token is no invoke id (6.4.1)."""
    chart = invoking(
        tmp_path,
        'idlocation="iid"',
        extra=(
            '<transition event="hello"><send targetexpr="\'#_\' + iid" event="ping"/>'
            '<send target="#_s-invoke" event="lost"/></transition>'
            '<transition event="error.communication"><assign location="got" '
            "expr=\"got + [_event.data['target']]\"/></transition>"
            '<transition event="note" target="s"><assign location="got" expr="got + [_event.invokeid, '
            '_event.origin]"/></transition>'
            '<transition event="done.invoke.s" target="out"><assign location="got" '
            'expr="got + [_event.name, _event.invokeid]"/></transition>'
        ),
        states='<state id="out"/>',
    )
    snapshot, _ = start(chart, session=SESSION)
    first = InvokeId("s-invoke", "", snapshot.children[0].generation)
    assert snapshot.context["iid"] == "s.1"
    snapshot, effects = send(chart, snapshot, "hello")
    assert [(e.invoke_id, e.event.name) for e in effects if isinstance(e, SendToChild)] == [(first, "ping")]
    assert snapshot.context["got"] == ["#_s-invoke"], "the site's token reaches no invocation"
    snapshot, _ = send(chart, snapshot, child_message_event(first, "note"))  # re-enters s: generation 2
    assert snapshot.context["got"] == ["#_s-invoke", "s.1", "#_s.1"] and snapshot.context["iid"] == "s.2"
    second = InvokeId("s-invoke", "", snapshot.children[0].generation)
    snapshot, _ = send(chart, snapshot, done_invoke_event(second))
    assert snapshot.configuration == ("out",)
    assert snapshot.context["got"] == ["#_s-invoke", "s.1", "#_s.1", "done.invoke.s.2", "s.2"]


def test_a_delayed_send_to_an_invocation_gone_when_it_fires_raises_error_communication(
    tmp_path: Path,
) -> None:
    """A timer for ``#_<id>`` that fires after that invocation ended (a newer generation runs), or
    after the chart lost the site, raises error.communication; nothing is sent (6.2.4)."""
    caught = (
        '<transition event="error.communication"><assign location="got" '
        "expr=\"got + [_event.data['reason']]\"/></transition>"
    )
    for attributes, reason in (('idlocation="iid"', "no running child"), ('id="kid"', "no such invoke id")):
        chart = invoking(
            tmp_path,
            attributes,
            extra=(
                '<transition event="hello"><send targetexpr="\'#_\' + (iid or \'kid\')" event="ping" '
                'delay="1s"/></transition><transition event="again" target="s"/>' + caught
            ),
        )
        snapshot, _ = start(chart, session=SESSION)
        snapshot, _ = send(chart, snapshot, "hello")
        snapshot, _ = send(chart, snapshot, "again")
        if attributes.startswith("id="):  # the chart, as deployed by the time the timer fires, lost the site
            (tmp_path / "parent.scxml").write_text(
                (tmp_path / "parent.scxml")
                .read_text()
                .replace('<invoke src="child.scxml" id="kid"></invoke>', "")
            )
            chart = load(tmp_path / "parent.scxml")
        else:
            assert snapshot.context["iid"] == "s.2"
        (timer,) = snapshot.timers
        snapshot, effects = fire(chart, snapshot, timer.id, now=1.0, session=SESSION)
        assert [e for e in effects if isinstance(e, SendToChild)] == []
        assert snapshot.context["got"] == [reason], attributes


def test_finalize_runs_on_every_event_from_the_child_before_transitions(tmp_path: Path) -> None:
    """<finalize> runs for each event the invoked child returns, before transitions are selected (6.5)."""
    chart = invoking(
        tmp_path,
        'id="kid"',
        '<finalize><assign location="got" expr="got + [_event.name]"/></finalize>',
        '<transition event="note" cond="got == [\'note\']" target="noted"/>',
        '<state id="noted"/>',
    )
    snapshot, _ = start(chart, session=SESSION)
    invoke_id = InvokeId("kid", "", snapshot.children[0].generation)
    snapshot, _ = send(chart, snapshot, child_message_event(invoke_id, "note"))
    assert snapshot.configuration == ("noted",)
    assert snapshot.context["got"] == ["note"]


def test_finalize_also_sees_the_done_event(tmp_path: Path) -> None:
    """The child's done event passes through <finalize> too (6.5)."""
    chart = invoking(
        tmp_path, 'id="kid"', '<finalize><assign location="got" expr="got + [_event.name]"/></finalize>'
    )
    snapshot, _ = start(chart, session=SESSION)
    invoke_id = InvokeId("kid", "", snapshot.children[0].generation)
    snapshot, _ = send(chart, snapshot, done_invoke_event(invoke_id, {"ok": True}))
    assert snapshot.context["got"] == ["done.invoke.kid"]


def test_autoforward_sends_external_events_to_the_child(tmp_path: Path) -> None:
    """autoforward="true" forwards a copy of each external event to the running child (6.4)."""
    chart = invoking(tmp_path, 'id="kid" autoforward="true"')
    snapshot, _ = start(chart, session=SESSION)
    snapshot, effects = send(chart, snapshot, "hello", {"x": 1})
    forwarded = [e for e in effects if isinstance(e, SendToChild)]
    assert [(f.invoke_id.site, f.event.name, f.event.data) for f in forwarded] == [("kid", "hello", {"x": 1})]
    invoke_id = InvokeId("kid", "", snapshot.children[0].generation)
    _, effects = send(chart, snapshot, child_message_event(invoke_id, "from-kid"))
    (echoed,) = [e for e in effects if isinstance(e, SendToChild)]
    assert (echoed.invoke_id.site, echoed.event.name) == ("kid", "from-kid"), "a child's own events too (229)"
    # detached: the child gets an ordinary event that names the invocation, not evidence about its slots
    assert echoed.event.invoke_id is None and echoed.event.invoke_name == "kid"
    assert (echoed.event.invocation, echoed.event.reply_to) == ("kid", "#_kid")


def srcexpr_documents(tmp_path: Path) -> Chart[Datamodel]:
    (tmp_path / "child.scxml").write_text(CHILD)
    (tmp_path / "other.scxml").write_text(CHILD.replace('name="child"', 'name="other"'))
    (tmp_path / "broken.scxml").write_text("<scxml")
    (tmp_path / "parent.scxml").write_text(
        doc(
            '<datamodel><data id="src" expr="\'file:nowhere.scxml\'"/></datamodel>'
            '<state id="s"><onentry><assign location="src" expr="\'file:other.scxml\'"/></onentry>'
            '<invoke id="kid" srcexpr="src"/></state>'
        )
    )
    return load(tmp_path / "parent.scxml")


def test_srcexpr_picks_the_document_when_the_invoke_runs(tmp_path: Path) -> None:
    """srcexpr is evaluated when the invocation starts, with the datamodel as it is then (6.4, W3C 216)."""
    chart = srcexpr_documents(tmp_path)
    assert sorted(c.name for c in chart.companions) == ["child", "other"], "the documents beside it"
    _, effects = start(chart, session=SESSION)
    assert [e.chart for e in effects if isinstance(e, BirthChild)] == ["other"]


def test_srcexpr_naming_no_loadable_document_raises_error_execution(tmp_path: Path) -> None:
    """A srcexpr naming no loadable document beside the invoker fails the invoke: error.execution (6.4)."""
    srcexpr_documents(tmp_path)
    text = (tmp_path / "parent.scxml").read_text().replace("other.scxml", "broken.scxml")
    chart = load(text, base=tmp_path)
    _, effects = start(chart, session=SESSION)
    assert not [e for e in effects if isinstance(e, BirthChild)]
    (failure,) = failures(list(effects))
    assert "did not load" in failure.message


def test_inline_content_documents_are_invoked_as_companion_charts() -> None:
    """<invoke> with an inline <content><scxml> document invokes it (6.4)."""
    chart = load(doc(f'<state id="s"><invoke id="kid"><content>{CHILD}</content></invoke></state>'))
    assert [c.name for c in chart.companions] == ["t.kid"], "named by its chart and site, not its name"
    _, effects = start(chart, session=SESSION)
    assert [e.chart for e in effects if isinstance(e, BirthChild)] == ["t.kid"]


# ------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            doc("<state id='s'/>").replace('datamodel="python"', 'datamodel="ecmascript"'),
            "datamodel='ecmascript'",
        ),
        (doc("<state id='s'>"), "not well-formed XML"),
        ("<html/>", "the root element must be <scxml>"),
        (
            doc("<state id='s'><onentry><dance/></onentry></state>"),
            "line 1: <dance>: is not executable content",
        ),
        (doc("<state id='s'><onentry><raise/></onentry></state>"), "<raise>: needs event="),
        (doc("<state id='s'><invoke type='http' src='x.scxml'/></state>"), "type='http' is not supported"),
        (doc("<state id='s'><invoke srcexpr='p'/></state>"), "srcexpr= needs the document's folder"),
        (
            doc("<state id='s'><onentry><send event='a' delay='1s' delayexpr='2'/></onentry></state>"),
            "not both",
        ),
        (
            doc("<state id='s'><onentry><send event='a' target='#_internal' delay='1s'/></onentry></state>"),
            "cannot be delayed",
        ),
        (doc("<state id='s'><transition target='nowhere'/></state>"), "nowhere"),
    ],
)
def test_a_bad_document_is_refused_naming_the_line_and_the_fix(text: str, message: str) -> None:
    """A document that is not valid SCXML, or not supported, is refused with every problem listed (3, 6)."""
    with pytest.raises(ScxmlError) as raised:
        load(text)
    assert message in str(raised.value)


def test_the_null_datamodel_runs_in_conditions() -> None:
    """datamodel="null" documents run: their In() conditions mean the same in Python (B.1)."""
    text = doc(
        '<parallel id="p"><state id="r1"><state id="a"><transition event="go" cond="In(\'b\')" target="a2"/>'
        '</state><state id="a2"/></state><state id="r2"><state id="b"/></state></parallel>'
    )
    chart = load(text.replace('datamodel="python"', 'datamodel="null"'))
    snapshot, _ = start(chart, session=SESSION)
    assert "a" in snapshot.configuration
    snapshot, _ = send(chart, snapshot, "go")
    assert "a2" in snapshot.configuration


def test_src_may_be_a_file_uri(tmp_path: Path) -> None:
    """src="file:child.scxml" names a file relative to the document, as the W3C tests write it (6.4)."""
    (tmp_path / "child.scxml").write_text(CHILD)
    chart = load(doc('<state id="s"><invoke id="kid" src="file:child.scxml"/></state>'), base=tmp_path)
    assert [c.name for c in chart.companions] == ["child"]


def test_a_missing_file_is_named() -> None:
    """A path that cannot be read is refused, naming it."""
    with pytest.raises(ScxmlError, match=r"cannot read the document"):
        load(Path("/nonexistent/doc.scxml"))


def test_a_loaded_chart_is_an_ordinary_chart_with_the_datamodel_as_its_context() -> None:
    """The chart's context is the Datamodel; its name comes from name=, the document, or the file."""
    chart = load(doc("<state id='s'/>"), name="renamed")
    assert (chart.name, chart.context_type) == ("renamed", Datamodel)


def test_event_data_that_is_not_json_raises_error_execution_and_sends_nothing() -> None:
    """Event data is stored with the event: a param that is not JSON fails the send (6.2, 5.10)."""
    _, snapshot, effects = begin(
        doc('<state id="s"><onentry><send event="a"><param name="p" expr="{1, 2}"/></send></onentry></state>')
    )
    assert snapshot.timers == ()
    assert "event data must be JSON" in failures(effects)[0].message


def test_idlocation_survives_late_binding_and_a_failing_one_stops_no_onentry(tmp_path: Path) -> None:
    """The invoke id is stored when the child is born, after late-bound data and ``<onentry>``; a failing
    idlocation stops neither the ``<onentry>`` nor the birth (6.4.1)."""
    (tmp_path / "child.scxml").write_text(CHILD)
    chart = load(
        doc(
            '<state id="s"><datamodel><data id="iid" expr="1"/><data id="ran" expr="False"/></datamodel>'
            '<invoke src="child.scxml" idlocation="iid"/><invoke src="child.scxml" idlocation="missing[0]"/>'
            '<onentry><assign location="ran" expr="True"/></onentry></state>',
            attributes='binding="late"',
        ),
        base=tmp_path,
    )
    snapshot, effects = start(chart, session=SESSION)
    assert snapshot.context["iid"] == "s.1"
    assert snapshot.context["ran"] is True
    assert len(failures(list(effects))) == 1
    assert len([e for e in effects if isinstance(e, BirthChild)]) == 2


def test_a_file_is_read_in_the_encoding_its_declaration_names(tmp_path: Path) -> None:
    """A document file is bytes: its declared encoding applies; bad bytes are refused with the line."""
    latin = tmp_path / "latin.scxml"
    latin.write_bytes(
        b'<?xml version="1.0" encoding="ISO-8859-1"?>'
        + doc('<state id="s"><onentry><log label="caf\xe9"/></onentry></state>').encode("latin-1")
    )
    _, effects = start(load(latin), session=SESSION)
    assert [e.label for e in effects if isinstance(e, Logged)] == ["café"]
    broken = tmp_path / "broken.scxml"
    broken.write_bytes(doc('<state id="\xff"/>').encode("latin-1"))
    with pytest.raises(ScxmlError, match="line 1: not well-formed XML"):
        load(broken)


def test_bytes_are_a_document_and_other_values_are_refused_by_type() -> None:
    """load() takes a path, the document's text or its bytes; anything else is a TypeError naming it."""
    assert load(doc("<state id='s'/>").encode()).name == "t"
    with pytest.raises(TypeError, match="got int 123"):
        load(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got str ''"):
        load("")


def test_a_child_document_without_a_name_is_named_by_its_file_whatever_the_src_form(tmp_path: Path) -> None:
    """A child document with no name attribute takes its file's stem, for src='x.scxml' and 'file:x.scxml'."""
    (tmp_path / "anon.scxml").write_text(CHILD.replace(' name="child"', ""))
    for src in ("anon.scxml", "file:anon.scxml", "./anon.scxml"):
        chart = load(doc(f'<state id="s"><invoke id="kid" src="{src}"/></state>'), base=tmp_path)
        assert [c.name for c in chart.companions] == ["anon"], src

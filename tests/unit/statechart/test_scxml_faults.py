"""SCXML faults found by the W3C test suite, each pinned by a chart of our own.

Each test names the W3C test and the section of SCXML 1.0 it follows.
"""

from __future__ import annotations

from typing import Any

from statechart import Chart, Event, start, step
from statechart.effects import Effect
from statechart.scxml import Datamodel, load
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

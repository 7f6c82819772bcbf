"""Run the SCION conformance corpus from its ``.scxml`` files: the active atomic states after every event.

Each SCION test is an SCXML document (ECMAScript datamodel) and a JSON script
of events with the atomic states expected after each. The documents are
loaded with :func:`statechart.scxml.load` after their ECMAScript
expressions are translated to Python by the small table in
:mod:`tests.conformance.ecmascript` (no chart is rewritten by hand).
Delays in scripts (``after``, milliseconds) advance a virtual clock and
fire the timers that are due, each as its own macrostep, before the next
event. ``EXCLUDED`` lists what does not run, each with its reason; the
summary test prints the counts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from statechart import Chart, Event, due_timers, fire, start, step
from statechart.scxml import ScxmlError, load
from statechart.snapshot import Snapshot
from tests.conformance.ecmascript import translate_document

CORPUS = Path(__file__).resolve().parent / "scion"
"""The corpus, kept here as SCION publishes it (its LICENSE.txt and README.md beside it)."""

SESSION = "scion-session"

LEGACY: dict[str, str] = {
    name: (
        "SCION's current expectations treat the parallel state p as the domain of the transition "
        "a -> a; the SCXML 1.0 algorithm (Appendix D, findLCCA skips parallel states) exits and "
        "re-enters p, which is what the test's own legacySemantics expectations describe"
    )
    for name in ("more-parallel/test10", "more-parallel/test10b")
}
"""Tests checked against their ``legacySemantics`` expectations, which follow SCXML 1.0, with the reason."""

EXCLUDED: dict[str, str] = {
    "internal-transitions/test0": (
        "the document puts a <transition> directly in <scxml>, which SCXML 1.0 does not allow (3.2); "
        "the loader refuses it"
    ),
    "error/error": (
        "its <script> defines ECMAScript functions (doError, checkErrorData) and its conditions "
        "inspect SCION's error object (tagname, line, column): not an expression to translate"
    ),
    "script-src/test0": "the corpus does not include the script files its <script src> names",
    "script-src/test1": "the corpus does not include the script files its <script src> names",
    "script-src/test2": "the corpus does not include the script files its <script src> names",
    "script-src/test3": "the corpus does not include the script files its <script src> names",
}
"""SCION tests that do not run, with the reason (printed by ``test_corpus_summary``)."""


@attrs.frozen
class Case:
    """One SCION test: its document, the initial atomic states and the scripted events."""

    name: str
    document: Path
    initial: list[str]
    script: list[dict[str, Any]]


def _cases() -> list[Case]:
    found: list[Case] = []
    for document in sorted(CORPUS.glob("*/*.scxml")):
        expected = document.with_suffix(".json")
        if not expected.exists():
            continue
        spec = json.loads(expected.read_text(encoding="utf-8"))
        name = f"{document.parent.name}/{document.stem}"
        if name in LEGACY:
            spec = spec["legacySemantics"]
        found.append(Case(name, document, spec["initialConfiguration"], spec["events"]))
    return found


CASES = _cases()


def _chart(case: Case) -> Chart[Any]:
    text = translate_document(case.document.read_text(encoding="utf-8"))
    return load(text, name=case.name.replace("/", ".").replace("+", "_"), base=case.document.parent)


def _deliver_due(chart: Chart[Any], snapshot: Snapshot[Any], now: float) -> Snapshot[Any]:
    """Fire every timer due by ``now``, earliest first, each as its own macrostep at its own deadline.

    A timer fires at its deadline on the virtual clock, so a delayed send
    made while it fires is due relative to that moment, not to ``now``.
    """
    for _ in range(1000):
        due = due_timers(snapshot, now)
        if not due:
            return snapshot
        at = max(due[0].deadline, snapshot.time)
        snapshot, _effects = fire(chart, snapshot, due[0].id, now=at, session=SESSION)
    raise AssertionError("timers kept re-arming themselves")


def _atomic(chart: Chart[Any], snapshot: Snapshot[Any]) -> list[str]:
    return sorted(chart.atomic(snapshot.configuration))


def test_corpus_summary(capsys: pytest.CaptureFixture[str]) -> None:
    """Every SCION test with a script runs from its .scxml file, except the listed exclusions."""
    names = [case.name for case in CASES]
    assert len(names) == len(set(names)) == 127
    assert set(EXCLUDED) <= set(names)
    assert set(LEGACY) <= set(names)
    with capsys.disabled():
        print(
            f"\nSCION corpus: {len(names)} tests, {len(names) - len(EXCLUDED)} run, {len(EXCLUDED)} excluded:"
        )
        for name, reason in sorted(EXCLUDED.items()):
            print(f"  {name}: {reason}")
        print(f"{len(LEGACY)} checked against their legacySemantics expectations:")
        for name, reason in sorted(LEGACY.items()):
            print(f"  {name}: {reason}")


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_scion_case(case: Case) -> None:
    """The document reaches the expected atomic configuration after each scripted event."""
    if case.name in EXCLUDED:
        pytest.skip(EXCLUDED[case.name])
    chart = _chart(case)
    now = 0.0
    snapshot, _ = start(chart, now=now, session=SESSION)
    snapshot = _deliver_due(chart, snapshot, now)
    assert _atomic(chart, snapshot) == sorted(case.initial)
    for number, item in enumerate(case.script):
        now += item.get("after", 0) / 1000
        snapshot = _deliver_due(chart, snapshot, now)
        snapshot, _ = step(chart, snapshot, Event(item["event"]["name"]), now=now, session=SESSION)
        snapshot = _deliver_due(chart, snapshot, now)
        expected = sorted(item["nextConfiguration"])
        assert _atomic(chart, snapshot) == expected, f"after event #{number} {item['event']['name']!r}"


def test_script_src_files_that_are_missing_are_refused_with_the_line() -> None:
    """The script-src documents name files the corpus lacks: the loader refuses them, naming each (5.8)."""
    case = next(case for case in CASES if case.name == "script-src/test0")
    text = translate_document(case.document.read_text(encoding="utf-8"))
    with pytest.raises(ScxmlError, match=r"line \d+: <script>: cannot read src='script-0-0.js'"):
        load(text, base=case.document.parent)


def test_a_transition_directly_in_scxml_is_refused() -> None:
    """internal-transitions/test0 has a <transition> in <scxml> (SCXML 3.2 allows none): refused."""
    case = next(case for case in CASES if case.name == "internal-transitions/test0")
    with pytest.raises(ScxmlError, match=r"line 26: <transition>: not allowed in <scxml>"):
        load(translate_document(case.document.read_text(encoding="utf-8")))

"""Fork (a new root from a past checkpoint, recording its source) and redrive (a failed or parked root)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from aggregates import Instance, InstanceStatus
from incarnate import Engine, ForkRefused, RedriveRefused, Storage, VirtualClock
from incarnate.testing import memory_engine
from statechart import Chart, Event, always, assign, final, state, transition
from tests.scenarios import charts


@attrs.frozen
class Flaky:
    """Context of the flaky chart: how many times ``go`` was taken."""

    goes: int = 0


BROKEN = {"now": True}
"""Whether the flaky chart's ``go`` loops forever (a runaway macrostep that fails the root)."""


def _broken(context: Flaky, event: Event) -> bool:
    return BROKEN["now"]


FLAKY = Chart(
    "flaky",
    state(
        "idle", on=[transition("go", "busy", actions=[assign(lambda c, e: attrs.evolve(c, goes=c.goes + 1))])]
    ),
    state("busy", on=[always("spin", guard=_broken), transition("rest", "idle")]),
    state("spin", on=[always("busy", guard=_broken)]),
    context=Flaky,
)
"""While broken, ``go`` enters a loop of eventless transitions that never stabilises."""


@pytest.fixture
def engine() -> Iterator[Engine]:
    """An in-memory engine with the scenario charts and the flaky one."""
    BROKEN["now"] = True
    found = memory_engine([*charts.ALL, FLAKY], {"charge": lambda call: "ok"}, clock=VirtualClock(1000.0))
    try:
        yield found
    finally:
        found.close()


def _names(engine: Engine, instance: Instance) -> list[str]:
    return [type(event).__name__ for event in engine.events_of(instance.id)]


def test_a_fork_is_a_new_root_that_records_its_source_and_version(engine: Engine) -> None:
    """The fork has a new id, its own root, ``Forked`` right after ``Started``, and the source's state."""
    source = engine.start("timed", {}).id
    engine.run_until_idle()
    engine.clock.advance(11)  # type: ignore[attr-defined]
    engine.run_until_idle()
    before = engine.events_of(source)
    forked = engine.fork(source, 3).id
    engine.run_until_idle()
    new = engine.instance(forked)
    assert forked != source and new.record.root == forked and new.record.parent is None
    assert _names(engine, new)[:3] == ["Started", "Forked", "Stepped"]
    provenance = engine.events_of(forked)[1]
    assert (provenance.source, provenance.version, provenance.source_root) == (source, 3, source)
    then = engine.at(source, 3).instance.record.snapshot_parts
    assert new.record.snapshot_parts is not None and then is not None
    assert new.record.snapshot_parts["context"] == then["context"]
    assert engine.events_of(source) == before  # the source is untouched
    assert engine.plan(forked).status is InstanceStatus.RUNNING  # its ResumePlan validates
    engine.clock.advance(15)  # type: ignore[attr-defined]
    engine.run_until_idle()
    later = engine.instance(forked).record.snapshot_parts
    assert later is not None and later["context"]["seen"] == ["a", "b"]


def test_a_fork_carries_the_messages_waiting_then(engine: Engine) -> None:
    """A message accepted but not yet processed at version k is accepted again by the fork, and processed."""
    source = engine.start("gate").id
    engine.run_until_idle()
    engine.send(source, "answer", "yes")
    waiting = engine.instance(source).version  # the Accepted, not yet stepped
    forked = engine.fork(source, waiting).id
    engine.run_until_idle()
    assert engine.result(forked) == "yes"


def test_a_fork_is_refused_where_it_cannot_be_exact(engine: Engine) -> None:
    """Before the first macrostep, with children retained, or of a task: refused, and nothing is written."""
    parent = engine.start("parent", {"members": ["a"]}).id
    engine.run_until_idle()
    count = sum(1 for _ in engine.instances())
    with pytest.raises(ForkRefused, match="its first macrostep had not been committed"):
        engine.fork(parent, 1)
    with pytest.raises(ForkRefused, match=r"children were retained then \(team\[a\]#1\)"):
        engine.fork(parent, engine.instance(parent).version)
    kid = engine.children(parent)[0]
    assert kid.record.kind.value == "chart"
    assert sum(1 for _ in engine.instances()) == count


def test_a_failed_root_is_redriven_from_the_version_before_its_incident(engine: Engine) -> None:
    """The runaway step failed the root; once fixed, a redrive records ``Redriven`` and reprocesses ``go``."""
    root = engine.start("flaky").id
    engine.run_until_idle()
    engine.send(root, "go")
    engine.run_until_idle()
    failed = engine.instance(root)
    assert failed.record.status is InstanceStatus.FAILED
    incident = failed.record.incidents[-1]
    with pytest.raises(RedriveRefused, match="not failed or parked"):
        engine.redrive(engine.start("gate").id)
    dry = engine.redrive(root, dry_run=True)
    assert (dry.was, dry.version, dry.written) == ("failed", incident.at_version - 1, False)
    assert engine.instance(root).version == failed.version  # a dry run writes nothing
    BROKEN["now"] = False
    done = engine.redrive(root, "fixed the loop")
    assert done.written and _names(engine, engine.instance(root))[-1] == "Redriven"
    engine.run_until_idle()
    redriven = engine.instance(root)
    assert redriven.record.status is InstanceStatus.RUNNING
    assert redriven.record.snapshot_parts is not None
    assert redriven.record.snapshot_parts["configuration"] == ["busy"]
    assert redriven.record.snapshot_parts["context"] == {"goes": 1}
    names = _names(engine, redriven)
    assert names.index("Redriven") < len(names) - 1 and names[-1] == "Stepped"  # recorded before it ran
    assert engine.plan(root).status is InstanceStatus.RUNNING


def test_a_child_is_not_redriven_on_its_own(engine: Engine) -> None:
    """A child runs again only as a retry its parent decides: redriving one names its root instead."""
    parent = engine.start("parent", {"members": ["a"]}).id
    engine.run_until_idle()
    kid = engine.children(parent)[0]
    with pytest.raises(RedriveRefused, match=f"redrive or fork its root {parent}"):
        engine.redrive(kid.id)


def test_a_parked_root_is_redriven_once_its_chart_fits_again(tmp_path: Path) -> None:
    """Parked by a release that dropped its state, then redriven under the chart it ran: it runs on."""
    path = str(tmp_path / "parked.db")
    renamed = Chart("gate", state("pending", on=[transition("answer", "answered")]), final("answered"))
    with Engine([charts.GATE], {}, storage=Storage.sqlite(path)) as before:
        gate = before.start("gate").id
        before.run_until_idle()
    with Engine([renamed], {}, storage=Storage.sqlite(path)) as release:
        release.resume_all()  # meets the stored 'waiting', which the release lacks: parks the root
        parked = release.instance(gate)
        assert parked.record.status is InstanceStatus.PARKED
        with pytest.raises(RedriveRefused, match=r"does not fit the chart 'gate' registered now"):
            release.redrive(gate, "still the wrong chart")
    with Engine([charts.GATE], {}, storage=Storage.sqlite(path)) as rolled_back:
        done = rolled_back.redrive(gate, "rolled the release back")
        assert (done.was, done.written) == ("parked", True)
        assert done.version == parked.record.incidents[-1].at_version - 1
        assert _names(rolled_back, rolled_back.instance(gate))[-1] == "Redriven"
        rolled_back.run_until_idle()
        assert rolled_back.instance(gate).record.status is InstanceStatus.RUNNING
        rolled_back.send(gate, "answer", "yes")
        rolled_back.run_until_idle()
        assert rolled_back.instance(gate).record.status is InstanceStatus.DONE

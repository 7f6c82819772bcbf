"""The typed engine calls: ``start`` with a chart object, ``snapshot`` typed by a chart."""

from __future__ import annotations

import attrs
import pytest

from incarnate import Engine, EngineError, Storage
from statechart import Chart, Event, final, state, transition
from statechart.snapshot import Snapshot


@attrs.frozen
class Approval:
    """The context of the approval chart."""

    title: str = ""
    approved_by: str = ""


def approve(approval: Approval, event: Event) -> Approval:
    """Record who approved."""
    return attrs.evolve(approval, approved_by=str(event.data))


APPROVAL: Chart[Approval] = Chart(
    "approval",
    state("open", on=[transition("approve", "done", actions=[approve])]),
    final("done"),
    context=Approval,
)
OTHER = Chart("other", state("idle"))


def test_start_takes_the_registered_chart_object() -> None:
    """``start(chart)`` starts the chart registered under the object's name, and the snapshot is typed."""
    with Engine([APPROVAL, OTHER], storage=Storage.popo()) as engine:
        instance_id = engine.start(APPROVAL, {"title": "laptop"})
        snapshot: Snapshot[Approval] = engine.snapshot(instance_id, APPROVAL)
        assert snapshot.chart == "approval"
        assert snapshot.context == Approval("laptop")
        assert engine.snapshot(instance_id).context == snapshot.context


def test_start_refuses_a_chart_object_that_differs_from_the_registered_one() -> None:
    """A chart object whose definition differs from the registered chart of that name is refused by name."""
    changed = Chart("approval", state("open"), context=Approval)
    with Engine([APPROVAL], storage=Storage.popo()) as engine:
        with pytest.raises(EngineError, match=r"chart 'approval' given to engine .* differs .* fix: pass"):
            engine.start(changed, {"title": "laptop"})
        assert list(engine.parts.journal.instance_ids()) == []


def test_start_refuses_an_unregistered_chart_object() -> None:
    """A chart object that was never registered is refused like an unknown name."""
    with (
        Engine([OTHER], storage=Storage.popo()) as engine,
        pytest.raises(EngineError, match=r"chart 'approval' is not registered"),
    ):
        engine.start(APPROVAL, {"title": "laptop"})


def test_snapshot_refuses_the_chart_of_another_instance() -> None:
    """``snapshot(id, chart)`` for an instance of another chart raises, naming both charts and the fix."""
    with Engine([APPROVAL, OTHER], storage=Storage.popo()) as engine:
        instance_id = engine.start(OTHER)
        with pytest.raises(
            EngineError, match=r"runs chart 'other', not 'approval'; fix: pass the chart 'other'"
        ):
            engine.snapshot(instance_id, APPROVAL)

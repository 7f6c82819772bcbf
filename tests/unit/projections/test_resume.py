"""The ResumePlan on hand-made corruptions that the property tests do not draw."""

from __future__ import annotations

import dataclasses
from typing import Any
from uuid import uuid4

import attrs
import pytest

from aggregates import AncestryFrame, Instance, InstanceKind
from incarnate import VirtualClock
from incarnate.testing import memory_engine, restart
from projections import DuplicatedActivation, MismatchedActivation, resume_plan
from statechart import Chart, final, invoke, state, transition
from tests.scenarios import charts


def retrying_parent() -> tuple[list[Any], Any]:
    """The events of a parent whose only child failed and waits for its retry, and its chart."""
    clock = VirtualClock(1000.0)
    engine = memory_engine(charts.ALL, {"charge": lambda call: "ok"}, clock=clock)
    parent = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    engine.cancel(engine.instance(parent).record.activations[0].child_id, "failed")
    engine.run_until_idle()
    events = list(engine.parts.journal.events.get(parent))
    chart = engine.charts["parent"]
    engine.close()
    return events, chart


@pytest.mark.parametrize("field", ["deadline", "error"])
def test_altered_retry_cursor_is_a_mismatch(field: str) -> None:
    """A ChildRetry whose deadline disagrees with the slot's retry deadline is a mismatched activation."""
    events, chart = retrying_parent()
    resume_plan(events, chart)  # the clean stream plans
    index = next(n for n, e in enumerate(events) if type(e).__name__ == "ChildRetry")
    retry: Any = events[index]
    if field == "deadline":
        events[index] = dataclasses.replace(retry, deadline=retry.deadline + 100)
        with pytest.raises(MismatchedActivation, match=r"team\[a\].*retry"):
            resume_plan(events, chart)
    else:
        # The error text is journal-only evidence: it does not change what resumes.
        events[index] = dataclasses.replace(retry, error={"changed": True})
        assert resume_plan(events, chart).activations[0].journal[-1].error == {"changed": True}


def resumed_parent() -> tuple[list[Any], Any]:
    """The events of a parent whose only child failed and was resumed as a fresh incarnation."""
    clock = VirtualClock(1000.0)
    engine = memory_engine(charts.ALL, {"charge": lambda call: "ok"}, clock=clock)
    parent = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    engine.cancel(engine.instance(parent).record.activations[0].child_id, "failed")
    engine.run_until_idle()
    clock.advance(5.0)
    engine.run_until_idle()
    events = list(engine.parts.journal.events.get(parent))
    chart = engine.charts["parent"]
    engine.close()
    return events, chart


def renumbered(events: list[Any]) -> list[Any]:
    """The events with consecutive versions, as a store would hold them."""
    return [dataclasses.replace(e, originator_version=n) for n, e in enumerate(events, start=1)]


def test_a_duplicated_child_resume_is_duplicated_not_reordered() -> None:
    """A second copy of a ChildResume is reported as a duplicated activation naming the slot."""
    events, chart = resumed_parent()
    resume_plan(events, chart)
    index = next(n for n, e in enumerate(events) if isinstance(e, Instance.ChildResume))
    corrupted = renumbered([*events[: index + 1], events[index], *events[index + 1 :]])
    with pytest.raises(
        DuplicatedActivation, match=r"slot team\[a\]: duplicated activation: a second ChildResume"
    ):
        resume_plan(corrupted, chart)


BIRTH_FACT_ALTERATIONS: dict[str, Any] = {
    "parent_type": lambda facts: attrs.evolve(facts, parent_type="Aggregate"),
    "root": lambda facts: attrs.evolve(facts, root=uuid4()),
    "kind": lambda facts: attrs.evolve(facts, kind=InstanceKind.TASK),
    "name": lambda facts: attrs.evolve(facts, name="parent"),
    "state": lambda facts: attrs.evolve(facts, state="reviewing"),
    "ancestry": lambda facts: attrs.evolve(facts, ancestry=(AncestryFrame("tree", facts.ref),)),
    "previous": lambda facts: attrs.evolve(facts, previous=facts.ref),
}


@pytest.mark.parametrize(
    ("fact", "field"),
    [
        *((Instance.Birth, field) for field in sorted(BIRTH_FACT_ALTERATIONS)),
        *((Instance.ChildResume, field) for field in sorted(BIRTH_FACT_ALTERATIONS) if field != "previous"),
    ],
    ids=lambda value: value if isinstance(value, str) else value.__name__,
)
def test_an_altered_birth_fact_is_a_mismatch_naming_the_fact(fact: type, field: str) -> None:
    """A Birth or ChildResume naming another chart, kind, state, root, type or ancestry is mismatched."""
    events, chart = resumed_parent()
    index = next(n for n, e in enumerate(events) if isinstance(e, fact))
    stored: Any = events[index]
    events[index] = dataclasses.replace(stored, facts=BIRTH_FACT_ALTERATIONS[field](stored.facts))
    with pytest.raises(MismatchedActivation, match=rf"slot team\[a\]: mismatched activation: .*\b{field}\b"):
        resume_plan(events, chart)


PARENT_RENAMED = Chart(
    "parent",
    state(
        "collecting",
        invoke=[invoke("team", chart="kid", map=charts.team)],
        on=[transition("done.invoke.team", "reviewing")],
    ),
    state("reviewing", on=[transition("approve", "approved")]),
    final("approved"),
    context=charts.Family,
)
"""``parent`` with its state ``gathering`` renamed ``collecting``."""


def test_a_migration_renames_the_state_a_slot_sits_on_not_its_birth() -> None:
    """After a migration maps a slot's state, the plan still holds: the Birth's state is mapped with it."""
    engine = memory_engine(charts.ALL, {"charge": lambda call: "ok"}, clock=VirtualClock(1000.0))
    parent = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    engine.parts.catalog.charts["parent"] = PARENT_RENAMED
    fresh = restart(engine)
    fresh.migrate(parent, {"gathering": "collecting"})
    events = list(fresh.parts.journal.events.get(parent))
    assert any(isinstance(e, Instance.Migrated) for e in events)
    plan = resume_plan(events, PARENT_RENAMED)
    assert plan.snapshot is not None and plan.snapshot.children[0].state == "collecting"
    fresh.close()

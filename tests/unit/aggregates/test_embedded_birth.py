"""Stored format 2 of ``Birth``, ``ChildResume`` and the snapshot: a task child may be embedded.

An embedded task child has no stream of its own; its parent's activation
says so (``embedded``), as the ``Birth`` or ``ChildResume`` that retained it
does. Only a task child may be embedded. Events and snapshots of format 1
read as births of children with streams of their own; a later format is
refused, naming what to do. The ResumePlan rebuilds the flag exactly, and
refuses an embedded chart child.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import attrs
import pytest
from eventsourcing.persistence import MapperDeserialisationError, StoredEvent

from aggregates import (
    BirthFacts,
    CattrsMapper,
    Instance,
    InstanceKind,
    InstanceSnapshot,
    Provenance,
    Ref,
    read_stored_json,
    stored_json,
    stored_topic,
)
from aggregates.errors import InvalidCommand
from incarnate.testing import memory_engine
from projections import Checkpoint, MismatchedActivation, embedded_tasks, instance_at, resume_plan
from statechart import Chart, final, invoke, state, transition
from statechart.codec import SnapshotDelta
from tests.scenarios import charts

MAPPER = CattrsMapper(transcoder=None)  # type: ignore[arg-type]  # the cattrs mapper uses no transcoder


def facts(root: uuid.UUID, kind: InstanceKind = InstanceKind.TASK, generation: int = 1) -> BirthFacts:
    ref = Ref(root, "charge", "", generation)
    return BirthFacts("Instance", ref, root, kind, "charge", "paying", 1, None, (), 0, Provenance.BIRTH, None)


def running_root() -> Instance:
    return started_root()[0]


def started_root() -> tuple[Instance, list[Any]]:
    """A root that has taken its first macrostep, and its events so far (collected)."""
    root = uuid.uuid4()
    instance = Instance.start_root(
        id=root, kind=InstanceKind.CHART, name="p", fingerprint="f", input=None, owner="e"
    )
    delta = SnapshotDelta({"configuration": ["paying"]}, (), (), ())
    instance.record_step(trigger=None, consumed=None, timer=None, effects=(), now=1.0, delta=delta)
    return instance, list(instance.collect_events())


def _round_trip(event: Any) -> tuple[StoredEvent, Any]:
    stored = MAPPER.to_stored_event(event)
    return stored, MAPPER.to_domain_event(stored)


def test_an_embedded_birth_is_stored_in_format_two_and_retains_an_embedded_activation() -> None:
    instance = running_root()
    instance.record_birth(facts(instance.id), embedded=True)
    [birth] = instance.collect_events()
    stored, read = _round_trip(birth)
    assert stored.topic == stored_topic(Instance.Birth) and stored.topic.endswith("Instance.Birth@2")
    assert read_stored_json(stored.state)["embedded"] is True
    assert read == birth
    [activation] = instance.record.activations
    assert activation.embedded and activation.kind is InstanceKind.TASK


def test_only_a_task_child_may_be_embedded() -> None:
    instance = running_root()
    with pytest.raises(InvalidCommand, match="is a chart child: only a task child may be embedded"):
        instance.record_birth(facts(instance.id, InstanceKind.CHART), embedded=True)
    assert instance.pending_events == [] and instance.record.activations == ()


TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_an_embedded_birth_keeps_its_trace_context_stored_only_when_set() -> None:
    (traced, before), plain = started_root(), running_root()
    traced.record_birth(facts(traced.id), embedded=True, traceparent=TRACEPARENT)
    plain.record_birth(facts(plain.id), embedded=True)
    [with_context], [without] = traced.collect_events(), plain.collect_events()
    stored, read = _round_trip(with_context)
    assert read_stored_json(stored.state)["traceparent"] == TRACEPARENT and read == with_context
    stored, read = _round_trip(without)
    assert "traceparent" not in read_stored_json(stored.state) and read == without
    [activation] = traced.record.activations
    assert activation.traceparent == TRACEPARENT
    snapshot, snapshot_read = _round_trip(InstanceSnapshot.take(traced))
    assert snapshot_read.mutate(None).record == traced.record
    [kept] = read_stored_json(snapshot.state)["state"]["record"]["retained"]
    assert kept["traceparent"] == TRACEPARENT
    assert (
        "traceparent"
        not in read_stored_json(_round_trip(InstanceSnapshot.take(plain))[0].state)["state"]["record"][
            "retained"
        ][0]
    )
    # The rebuilt task's Started carries it, as a task with a stream stores it on its own.
    [task_events] = embedded_tasks([*before, with_context]).values()
    assert task_events[0].traceparent == TRACEPARENT


def test_a_child_with_a_stream_carries_no_trace_context_on_its_birth() -> None:
    instance = running_root()
    with pytest.raises(InvalidCommand, match="its trace context goes on its Started"):
        instance.record_birth(facts(instance.id), traceparent=TRACEPARENT)
    assert instance.pending_events == [] and instance.record.activations == ()


def test_a_format_one_birth_reads_as_the_birth_of_a_child_with_its_own_stream() -> None:
    instance = running_root()
    instance.record_birth(facts(instance.id))
    [birth] = instance.collect_events()
    stored = MAPPER.to_stored_event(birth)
    data = read_stored_json(stored.state)
    del data["embedded"]  # as format 1 stored it, under the class's own topic
    older = StoredEvent(
        stored.originator_id, stored.originator_version, stored.topic.partition("@")[0], stored_json(data)
    )
    read = MAPPER.to_domain_event(older)
    assert isinstance(read, Instance.Birth) and read.embedded is False and read == birth


@pytest.mark.parametrize("event_class", [Instance.Birth, Instance.ChildResume, InstanceSnapshot])
def test_a_later_format_of_a_birth_or_a_snapshot_is_refused_naming_what_to_do(event_class: type) -> None:
    instance = running_root()
    instance.record_birth(facts(instance.id), embedded=True)
    [birth] = instance.collect_events()
    stored = MAPPER.to_stored_event(
        InstanceSnapshot.take(instance) if event_class is InstanceSnapshot else birth
    )
    base = stored_topic(event_class).partition("@")[0]
    later = StoredEvent(stored.originator_id, stored.originator_version, f"{base}@3", stored.state)
    with pytest.raises(MapperDeserialisationError) as raised:
        MAPPER.to_domain_event(later)
    message = str(raised.value)
    assert f"stored format 3 of {base.rpartition(':')[2]}" in message and "reads formats up to 2" in message
    assert "upgrade incarnate" in message


def test_a_snapshot_keeps_the_embedded_activation_and_a_format_one_snapshot_still_reads() -> None:
    instance = running_root()
    instance.record_birth(facts(instance.id), embedded=True)
    instance.collect_events()
    stored, read = _round_trip(InstanceSnapshot.take(instance))
    assert stored.topic.endswith("InstanceSnapshot@2")
    assert read.mutate(None).record == instance.record
    plain = running_root()
    plain.record_birth(facts(plain.id))
    plain.collect_events()
    stored = MAPPER.to_stored_event(InstanceSnapshot.take(plain))
    data = read_stored_json(stored.state)
    for activation in data["state"]["record"]["retained"]:
        del activation["embedded"]  # a format-1 snapshot has no such field
    older = StoredEvent(
        stored.originator_id, stored.originator_version, stored.topic.partition("@")[0], stored_json(data)
    )
    read_older: Any = MAPPER.to_domain_event(older)
    assert read_older.mutate(None).record == plain.record


# ------------------------------------------------------------ the ResumePlan and the rebuilt task

ERRAND = Chart(
    "errand",
    state(
        "waiting",
        invoke=[invoke("charge", task="charge")],
        on=[transition("done.invoke.charge", "paid"), transition("fail", "broken")],
    ),
    final("paid"),
    final("broken"),
)


def _embedded(events: list[Any]) -> list[Any]:
    """The events with each ``Birth`` marked embedded."""
    return [_embed(event) if type(event) is Instance.Birth else event for event in events]


def _embed(birth: Any) -> Any:
    return dataclasses.replace(birth, embedded=True)


def test_the_resume_plan_rebuilds_the_embedded_flag_exactly() -> None:
    engine = memory_engine([ERRAND], {"charge": lambda call: "r-1"})
    try:
        errand = engine.start("errand")  # its task is born, not yet run
        events = _embedded(engine.events_of(errand))
        live = instance_at(events, len(events))
        plan = resume_plan(events, ERRAND)
        assert plan == Checkpoint.of(live, ERRAND)
        [activation] = plan.activations
        assert activation.embedded
    finally:
        engine.close()


def test_the_resume_plan_refuses_an_embedded_chart_child() -> None:
    engine = memory_engine(charts.ALL)
    try:
        middle = engine.start("middle")  # a chart whose child is a chart
        events = engine.events_of(middle)
        corrupted = _embedded(events)
        assert corrupted != events
        with pytest.raises(MismatchedActivation, match="embedded chart child: only a task child"):
            resume_plan(corrupted, charts.GRANDKID_PARENT)
    finally:
        engine.close()


def test_a_task_still_running_when_its_parent_fails_ends_cancelled_naming_the_caller() -> None:
    """A macrostep that fails its instance leaves its activations; the rebuilt task ends with the parent."""
    engine = memory_engine([ERRAND], {"charge": lambda call: "r-1"})
    try:
        errand = engine.start("errand")
        parent = engine.instance(errand)
        parent.fail({"error": "StepError", "message": "a guard raised"})
        events = _embedded([*engine.events_of(errand), *parent.collect_events()])
        [(task_id, rebuilt)] = embedded_tasks(events).items()
        assert task_id == engine.instance(errand).record.activations[0].child_id
        task = instance_at(rebuilt, len(rebuilt))
        assert task.record.status.value == "cancelled"
        assert task.record.error == {"cancelled": f"caller {errand} is failed"}
    finally:
        engine.close()


def test_a_child_resume_carries_the_embedded_flag_as_a_birth_does() -> None:
    instance = running_root()
    first = facts(instance.id)
    instance.record_birth(first, embedded=True)
    instance.record_retry(first.ref, 2, 5.0, {"error": "RuntimeError"})
    second = attrs.evolve(
        first,
        ref=Ref(instance.id, "charge", "", 2),
        attempt=2,
        provenance=Provenance.RETRY,
        previous=first.ref,
    )
    instance.record_resume(second, embedded=True)
    events = instance.collect_events()
    stored, read = _round_trip(events[-1])
    assert stored.topic.endswith("Instance.ChildResume@2") and read == events[-1]
    [activation] = instance.record.activations
    assert activation.embedded and activation.ref == second.ref and activation.attempt == 2

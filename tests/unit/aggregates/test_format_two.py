"""Stored format 2: a ``Stepped`` event carries the message its macrostep accepted and what it settled.

A command that follows an unsaved event it can join extends that event
instead of adding one: the macrostep consuming a message accepted in the
same commit records it as ``received``, and a settlement right after a
macrostep joins its ``settled``. Replaying the joined event gives exactly
the record the separate events gave. Format-1 events are read through an
upcaster; a format this version does not know is refused, never misread.
"""

from __future__ import annotations

import uuid

import pytest
from eventsourcing.persistence import MapperDeserialisationError

from aggregates import (
    BirthFacts,
    CattrsMapper,
    Instance,
    InstanceKind,
    Provenance,
    Ref,
    Settlement,
    read_stored_json,
    stored_json,
    stored_topic,
)
from statechart import Event
from statechart.codec import SnapshotDelta


def parent(root: uuid.UUID | None = None) -> Instance:
    """A running root with one retained task child, everything saved (nothing pending)."""
    root = root or uuid.uuid4()
    instance = Instance.start_root(
        id=root, kind=InstanceKind.CHART, name="p", fingerprint="f", input=None, owner="e"
    )
    instance.record_step(trigger=None, consumed=None, timer=None, effects=(), now=1.0, delta=delta())
    ref = Ref(root, "charge", "", 1)
    facts = BirthFacts(
        "Instance", ref, root, InstanceKind.TASK, "charge", "paying", 1, None, (), 0, Provenance.BIRTH, None
    )
    instance.record_birth(facts)
    instance.collect_events()
    return instance


def delta(configuration: str = "paying") -> SnapshotDelta:
    return SnapshotDelta({"configuration": [configuration]}, (), (), ())


def test_a_message_consumed_in_its_own_commit_is_the_steps_received() -> None:
    instance = parent()
    ref = instance.record.activations[0].ref
    message = instance.accept(Event("done.invoke.charge", "r-1"), source=ref.child_id, sent_at=2.0)
    assert message is not None
    instance.record_step(
        trigger=message.event, consumed=message.seq, timer=None, effects=(), now=2.0, delta=delta("paid")
    )
    instance.record_settled(ref, Settlement.DONE)
    [stepped] = instance.pending_events
    assert isinstance(stepped, Instance.Stepped)
    assert stepped.received == message and stepped.consumed == message.seq
    assert stepped.settled == ((ref, Settlement.DONE),)
    assert stepped.originator_version == instance.version == 4
    assert instance.record.inbox == () and instance.record.message_seq == 1
    assert instance.record.activations == ()


def test_the_joined_event_replays_to_the_record_the_separate_events_made() -> None:
    """The same facts committed apart (format 1) and together (format 2) leave equal records."""
    root = uuid.uuid4()
    joined, separate, before = parent(root), parent(root), parent(root)
    for instance in (joined, separate):
        ref = instance.record.activations[0].ref
        outcome = Event("done.invoke.charge", "r-1")
        message = instance.accept(outcome, source=ref.child_id, sent_at=2.0, key="k")
        assert message is not None
        if instance is separate:
            instance.collect_events()  # saved alone: the macrostep cannot join it
        instance.record_step(
            trigger=message.event, consumed=message.seq, timer=None, effects=(), now=2.0, delta=delta("paid")
        )
        if instance is separate:
            instance.collect_events()
        instance.record_settled(ref, Settlement.DONE)
    assert [type(e).__name__ for e in separate.pending_events] == ["ChildSettled"]
    [stepped] = joined.pending_events
    assert joined.version == 4 and separate.version == 6
    fields = ("inbox", "message_seq", "keys", "snapshot_parts", "slots", "steps", "status", "retained")
    for field in fields:
        assert getattr(joined.record, field) == getattr(separate.record, field), field
    # Replayed on the record before it, the joined event gives the live record.
    rebuilt = stepped.mutate(before)
    assert rebuilt is not None
    for field in fields:
        assert getattr(rebuilt.record, field) == getattr(joined.record, field), field


def test_an_older_message_keeps_its_accepted_event() -> None:
    """FIFO: the macrostep consumes the inbox's head; a message accepted after it stays its own event."""
    instance = parent()
    first = instance.accept(Event("a"), source=None, sent_at=2.0)
    instance.collect_events()
    second = instance.accept(Event("b"), source=None, sent_at=2.1)
    assert first is not None and second is not None
    instance.record_step(
        trigger=first.event, consumed=first.seq, timer=None, effects=(), now=2.2, delta=delta("paid")
    )
    assert [type(e).__name__ for e in instance.pending_events] == ["Accepted", "Stepped"]
    assert isinstance(instance.pending_events[1], Instance.Stepped)
    assert instance.pending_events[1].received is None
    assert instance.record.inbox == (second,)


def test_a_settlement_after_another_fact_is_its_own_event() -> None:
    instance = parent()
    ref = instance.record.activations[0].ref
    instance.record_settled(ref, Settlement.CANCELLED)  # nothing unsaved to join
    assert [type(e).__name__ for e in instance.pending_events] == ["ChildSettled"]


def test_a_format_one_stepped_reads_as_one_that_received_and_settled_nothing() -> None:
    instance = parent()
    mapper = CattrsMapper(transcoder=None)  # type: ignore[arg-type]
    instance.record_step(trigger=None, consumed=None, timer=None, effects=(), now=3.0, delta=delta("paid"))
    stored = mapper.to_stored_event(instance.pending_events[0])
    assert stored.topic == stored_topic(Instance.Stepped) == f"{stored.topic.partition('@')[0]}@2"
    data = read_stored_json(stored.state)
    del data["received"], data["settled"]  # as format 1 stored it, under the class's own topic
    older = type(stored)(
        stored.originator_id,
        stored.originator_version,
        stored.topic.partition("@")[0],
        stored_json(data),
    )
    event = mapper.to_domain_event(older)
    assert isinstance(event, Instance.Stepped)
    assert event.received is None and event.settled == ()
    assert event == instance.pending_events[0]


def test_a_later_format_is_refused_naming_what_to_do() -> None:
    instance = parent()
    mapper = CattrsMapper(transcoder=None)  # type: ignore[arg-type]
    instance.record_step(trigger=None, consumed=None, timer=None, effects=(), now=3.0, delta=delta("paid"))
    stored = mapper.to_stored_event(instance.pending_events[0])
    later = type(stored)(
        stored.originator_id, stored.originator_version, stored.topic.replace("@2", "@3"), stored.state
    )
    with pytest.raises(MapperDeserialisationError) as raised:
        mapper.to_domain_event(later)
    message = str(raised.value)
    assert "stored format 3 of Instance.Stepped" in message and "reads formats up to 2" in message
    assert "upgrade incarnate" in message

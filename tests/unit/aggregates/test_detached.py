"""A cancellation marks the messages already waiting from the cancelled incarnation as ``detached``.

SCXML (6.4) ignores only the events of a cancelled invocation that arrive
after the cancellation; those received before it are still processed, as
ordinary events. The mark is applied with the settlement, so a replay of
the events, a joined ``Stepped`` and a separate ``ChildSettled`` all give
the same inbox.
"""

from __future__ import annotations

import uuid

import attrs

from aggregates import CONVERTER, Instance, Message, Settlement
from statechart import Event
from statechart.event import child_message_event, done_invoke_event
from tests.unit.aggregates.test_format_two import delta, parent


def waiting(instance: Instance) -> list[tuple[str, bool]]:
    return [(m.event.name, m.detached) for m in instance.record.inbox]


def test_a_cancelling_macrostep_marks_what_waits_from_the_child_and_nothing_else() -> None:
    """Messages from the cancelled incarnation are marked; an outside one and later ones are not."""
    instance = parent()
    ref = instance.record.activations[0].ref
    trigger = instance.accept(Event("leave"), source=None, sent_at=2.0)
    instance.accept(child_message_event(ref.invoke_id, "progress"), source=ref.child_id, sent_at=2.1)
    instance.accept(Event("other"), source=None, sent_at=2.2)
    instance.accept(done_invoke_event(ref.invoke_id, "r-1"), source=ref.child_id, sent_at=2.3)
    instance.collect_events()
    assert trigger is not None
    instance.record_step(
        trigger=trigger.event, consumed=trigger.seq, timer=None, effects=(), now=3.0, delta=delta("away")
    )
    instance.record_settled(ref, Settlement.CANCELLED)
    assert waiting(instance) == [("progress", True), ("other", False), ("done.invoke.charge", True)]
    instance.accept(child_message_event(ref.invoke_id, "late"), source=ref.child_id, sent_at=4.0)
    assert waiting(instance)[-1] == ("late", False), "what arrives after the cancellation stays evidence"


def test_the_mark_replays_the_same_joined_or_separate() -> None:
    """A joined Stepped and a separate ChildSettled, replayed, mark the inbox as the live record did."""
    root = uuid.uuid4()
    for separate in (False, True):
        instance, replayed = parent(root), parent(root)
        ref = instance.record.activations[0].ref
        trigger = instance.accept(Event("leave"), source=None, sent_at=2.0)
        instance.accept(child_message_event(ref.invoke_id, "progress"), source=ref.child_id, sent_at=2.1)
        assert trigger is not None
        instance.record_step(
            trigger=trigger.event, consumed=trigger.seq, timer=None, effects=(), now=3.0, delta=delta("away")
        )
        events = list(instance.collect_events()) if separate else []
        instance.record_settled(ref, Settlement.CANCELLED)
        events += instance.collect_events()
        assert [type(e).__name__ for e in events][-1] == ("ChildSettled" if separate else "Stepped")
        for event in events:
            mutated = event.mutate(replayed)
            assert mutated is not None
            replayed = mutated
        assert waiting(instance) == [("progress", True)]
        assert replayed.record.inbox == instance.record.inbox


def test_other_settlements_mark_nothing() -> None:
    """A child that finished or failed for good sends nothing after its outcome: nothing is marked."""
    for settlement in (Settlement.DONE, Settlement.FAILED):
        instance = parent()
        ref = instance.record.activations[0].ref
        instance.accept(child_message_event(ref.invoke_id, "progress"), source=ref.child_id, sent_at=2.0)
        instance.collect_events()
        instance.record_settled(ref, settlement)
        assert waiting(instance) == [("progress", False)]


def test_the_mark_is_stored_only_when_set() -> None:
    """An accepted message is stored as before the field existed; a marked one carries it."""
    message = Message(1, Event("progress"), None, 2.0)
    assert "detached" not in CONVERTER.unstructure(message)
    marked = attrs.evolve(message, detached=True)
    assert CONVERTER.unstructure(marked)["detached"] is True
    assert CONVERTER.structure(CONVERTER.unstructure(marked), Message) == marked

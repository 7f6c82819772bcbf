"""SRD-087: a call tree recovers as a unit (invariant 10), with two or three engines on one store.

Engine ``A`` started the trees and died: it never heartbeats, so it is not
live and whatever it owns may be taken over. ``B`` and ``C`` are recovering
engines, made live by a heartbeat as workers keep one.
"""

from __future__ import annotations

import threading
from uuid import UUID

import pytest

from aggregates import Instance, InstanceStatus
from incarnate import Engine
from incarnate.errors import NotARoot, TreeHeld
from tests.scenarios.fleet import Fleet, event_names, fleet, fleet_storage, live, only_child

__all__ = ["fleet", "fleet_storage"]


def started_pair(a: Engine) -> tuple[UUID, UUID]:
    """A caller (``parent``, fanned out to one member) and the child it awaits, both owned by ``a``."""
    parent = a.start("parent", {"members": ["a"]})
    a.run_until_idle()
    return parent, only_child(a, parent)


def finish_on(owner: Engine, sender: Engine, kid: UUID) -> None:
    """Send ``finish`` to a kid from ``sender``; its owner wakes and runs it (as a follower would)."""
    sender.send(kid, "finish")
    sender.run_until_idle()  # the sender does not own it: nothing of it runs there
    owner.runner.notify(kid)
    owner.run_until_idle()


def test_t1_a_call_pair_lands_on_one_engine_and_the_parent_resumes(fleet: Fleet) -> None:
    """T-1: a sweep offered only the caller claims its child too; one offered the child cannot split them."""
    a = fleet("A")
    parent, kid = started_pair(a)
    b, c = live(fleet("B")), live(fleet("C"))
    # The discriminator: B's candidates hold the caller but not the child; C's hold the child.
    result = b.take_over(parent, reason="B's sweep")
    assert set(result.claimed) == {parent, kid} and not result.parked
    with pytest.raises(NotARoot):
        c.take_over(kid, reason="C's sweep")
    assert c.process(kid) is None
    assert c.resume_all() == 0
    for instance_id in (parent, kid):
        record = b.instance(instance_id).record
        assert (record.owner, record.incarnation) == ("B", 2)
        assert b.owns(instance_id) and not c.owns(instance_id)
    finish_on(b, c, kid)
    assert b.instance(kid).record.status is InstanceStatus.DONE
    assert b.snapshot(parent).configuration == ("reviewing",)  # resumed through the re-link


def test_t2_a_child_listed_first_is_deferred_not_claimed(fleet: Fleet) -> None:
    """T-2: listing order does not decide: a child met before its caller is deferred, and claimed with it."""
    a = fleet("A")
    parent, kid = started_pair(a)
    b = live(fleet("B"))
    before = event_names(b, kid)
    outcomes: list[str] = []
    for candidate in (kid, parent):  # the child first
        try:
            b.take_over(candidate, reason="sweep")
            outcomes.append("claimed")
        except NotARoot as error:
            assert error.root == parent and str(parent) in str(error)
            assert event_names(b, kid) == before  # deferred: nothing written
            assert b.instance(kid).record.owner == "A"
            outcomes.append("deferred")
    assert outcomes == ["deferred", "claimed"]
    assert event_names(b, kid) == [*before, "Claimed"]  # claimed once, through its caller
    assert b.instance(kid).record.owner == "B"


def test_t3_the_claim_is_transitive_over_a_grandchild_tree(fleet: Fleet) -> None:
    """T-3: taking over a root claims its child and grandchild too, and all three run on the new owner."""
    a = fleet("A")
    root = a.start("cascade")
    a.run_until_idle()
    middle = only_child(a, root)
    grandkid = only_child(a, middle)
    b, c = live(fleet("B")), live(fleet("C"))
    result = b.take_over(root)
    assert set(result.claimed) == {root, middle, grandkid}
    assert {b.instance(i).record.owner for i in (root, middle, grandkid)} == {"B"}
    assert c.process(grandkid) is None and c.process(middle) is None
    finish_on(b, c, grandkid)
    assert b.instance(grandkid).record.status is InstanceStatus.DONE


def test_t4_a_live_leased_child_fails_the_tree_loudly_and_keeps_running(fleet: Fleet) -> None:
    """T-4: a child held by a live engine fails the takeover loudly (child, holder, rule); nothing written."""
    a = fleet("A")
    parent, kid = started_pair(a)
    h = live(fleet("H"))
    # A record written before affinity: the child alone moved to H, which runs it.
    child = h.instance(kid)
    h.parts.holdings.hold(kid, child.claim("H", reason="claimed on its own before affinity"))
    h.parts.commits.save_instances(child)
    b = live(fleet("B"))
    parent_events, kid_events = event_names(b, parent), event_names(b, kid)
    with pytest.raises(TreeHeld) as raised:
        b.take_over(parent)
    message = str(raised.value)
    assert str(kid) in message and "'H'" in message and "recovered as a unit" in message
    assert (raised.value.instance_id, raised.value.holder) == (kid, "H")
    assert event_names(b, parent) == parent_events and event_names(b, kid) == kid_events
    assert b.instance(parent).record.owner == "A" and not b.parts.holdings.held()
    finish_on(h, b, kid)  # the child keeps running on its holder
    assert h.instance(kid).record.status is InstanceStatus.DONE


def test_t5_a_terminal_callers_live_child_is_finished_never_revived(fleet: Fleet) -> None:
    """T-5: a child whose caller ended is written terminated with a fact naming the caller, never revived."""
    a = fleet("A")
    parent, kid = started_pair(a)
    caller = a.instance(parent)
    caller.mark_cancelled("stopped by an operator")  # the cascade to the child never ran
    a.parts.commits.save_instances(caller)
    b = live(fleet("B"))
    steps_before = event_names(b, kid).count("Stepped")
    b.resume_all()
    b.run_until_idle()
    record = b.instance(kid).record
    assert record.status is InstanceStatus.CANCELLED
    assert f"caller {parent} is cancelled" in str(record.error)
    stepped = [e for e in b.events_of(kid) if isinstance(e, Instance.Stepped)]
    assert len(stepped) == steps_before + 1 and stepped[-1].trigger is not None
    assert stepped[-1].trigger.name == "cancel"  # its only new step is the cancellation itself
    b.listing.catch_up()
    assert kid not in {row.id for row in b.listing.rows(in_flight=True)}


def test_t6_a_cyclic_document_terminates_the_walk(fleet: Fleet) -> None:
    """T-6: a record naming itself as its own child is walked once: each member claimed once."""
    a = fleet("A")
    parent, kid = started_pair(a)
    facts = a.instance(kid).record.birth
    assert facts is not None
    # Malformed: the kid retains the incarnation that is itself (its child id is its own id).
    child = a.instance(kid)
    child.trigger_event(Instance.Birth, facts=facts)
    a.parts.commits.save_instances(child)
    assert a.instance(kid).record.activations[0].child_id == kid
    b = live(fleet("B"))
    results = []
    walker = threading.Thread(target=lambda: results.append(b.take_over(parent)), daemon=True)
    walker.start()
    walker.join(timeout=30)
    assert not walker.is_alive(), "the walk did not terminate"
    assert set(results[0].claimed) == {parent, kid}
    assert event_names(b, kid).count("Claimed") == 1 and event_names(b, parent).count("Claimed") == 1
    assert b.take_over(parent).claimed == ()  # a repeat claims nothing again

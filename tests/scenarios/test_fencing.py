"""Fencing: one writer per instance (invariant 9); a stale owner's write is refused; it drops the instance."""

from __future__ import annotations

import logging
from uuid import UUID

import pytest

from aggregates import InstanceStatus
from incarnate import Engine, TaskCall
from incarnate._ownership import orphan
from incarnate.errors import TreeHeld
from projections import timeline
from statechart import JsonValue
from tests.scenarios.fleet import Fleet, event_names, fleet, fleet_storage, live, only_child

__all__ = ["fleet", "fleet_storage"]


def started_pair(a: Engine) -> tuple[UUID, UUID]:
    """A caller and the child it awaits, both owned by ``a``."""
    parent = a.start("parent", {"members": ["a"]})
    a.run_until_idle()
    return parent, only_child(a, parent)


def test_invariant_9_single_writer_a_stale_owners_write_is_refused(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    """Invariant 9: after B claims A's tree, A's next macrostep is fenced and dropped; B applies it once."""
    a = fleet("A")
    parent, kid = started_pair(a)
    a.send(kid, "finish")  # A has work for the kid in its own (soon stale) copy
    b = live(fleet("B"))
    b.take_over(parent, reason="A stopped heartbeating")
    kid_events = event_names(b, kid)
    with caplog.at_level(logging.WARNING, logger="incarnate.engine"):
        assert a.process(kid) is None  # the version conflict, then the incarnation check
    assert event_names(b, kid) == kid_events  # A wrote nothing
    assert kid not in a.parts.holdings.held() and kid not in a.parts.holdings.acquired() and not a.owns(kid)
    assert any(r.getMessage().startswith("fenced: ") and str(kid) in r.getMessage() for r in caplog.records)
    a.run_until_idle()
    assert a.process(kid) is None  # its queued work stays a no-op
    b.runner.notify(kid)
    b.run_until_idle()
    names = event_names(b, kid)
    assert names.count("Stepped") == 2 and names.count("Completed") == 1  # start, then finish: once
    assert b.instance(kid).record.status is InstanceStatus.DONE
    assert b.snapshot(parent).configuration == ("reviewing",)
    parent_events = b.events_of(parent)
    done = [
        e
        for e in parent_events
        if type(e).__name__ == "Accepted" and e.message.event.name.startswith("done.")
    ]
    assert len(done) == 1  # the kid's outcome reached its parent once


def test_a_task_taken_over_mid_run_never_commits_its_outcome_on_the_old_owner(fleet: Fleet) -> None:
    """A task whose instance is taken over while its body runs is fenced: only the new owner's run commits."""
    calls: list[tuple[str, str]] = []
    b: list[Engine] = []

    def charge(call: TaskCall) -> JsonValue:
        calls.append((call.idempotency_key, "A" if len(calls) == 0 else "B"))
        if len(calls) == 1:
            b[0].take_over(call.ref.parent, reason="A stopped heartbeating")  # while A's body runs
        return {"receipt": len(calls)}

    a = fleet("A", tasks={"charge": charge})
    b.append(live(fleet("B", tasks={"charge": charge})))
    root = a.start("charging")
    task = only_child(a, root)
    a.run_until_idle()
    assert len(calls) == 1  # A ran the body (its side effect happened) ...
    assert a.instance(task).record.status is InstanceStatus.BORN  # ... but committed no outcome
    assert task not in a.parts.holdings.held() and not a.owns(
        root
    )  # the root is dropped at A's next write to it
    b[0].run_until_idle()
    assert [key for key, _ in calls] == [calls[0][0]] * 2  # at least once: same idempotency key
    assert event_names(b[0], task).count("Completed") == 1
    assert b[0].instance(task).record.output == {"receipt": 2}  # the new owner's run
    assert b[0].instance(root).record.status is InstanceStatus.DONE


def test_a_task_taken_over_before_its_body_runs_is_not_run_by_the_old_owner(fleet: Fleet) -> None:
    """The old owner's copy still names it, but the task is read from the store first: A runs nothing."""
    calls: list[str] = []

    def charge(call: TaskCall) -> JsonValue:
        calls.append(call.idempotency_key)
        return "paid"

    a = fleet("A", tasks={"charge": charge})
    root = a.start("charging")
    task = only_child(a, root)  # born and queued on A, whose last copy names A as its owner
    b = live(fleet("B", tasks={"charge": charge}))
    b.take_over(root, reason="A stopped heartbeating")
    assert a.process(task) is None
    assert calls == []  # no side effect on the engine that lost the task
    assert task not in a.parts.holdings.held()
    b.run_until_idle()
    assert len(calls) == 1 and b.instance(root).record.status is InstanceStatus.DONE


def test_a_live_engines_tree_cannot_be_taken_over(fleet: Fleet) -> None:
    """Two live engines: B cannot take over A's tree (TreeHeld), writes nothing, and leaves A's work alone."""
    a = live(fleet("A"))
    parent, kid = started_pair(a)
    b = live(fleet("B"))
    before = (event_names(b, parent), event_names(b, kid))
    with pytest.raises(TreeHeld) as raised:
        b.take_over(parent)
    assert raised.value.holder == "A" and str(parent) in str(raised.value)
    assert b.process(kid) is None and b.process(parent) is None
    assert b.resume_all() == 0  # reported, not touched
    assert (event_names(b, parent), event_names(b, kid)) == before
    a.send(kid, "finish")  # A keeps its tree
    a.run_until_idle()
    assert a.snapshot(parent).configuration == ("reviewing",)


def test_resume_all_takes_over_only_trees_no_live_engine_holds(fleet: Fleet) -> None:
    """resume_all claims the trees of a dead engine and leaves those of a live one."""
    dead, alive = fleet("dead"), live(fleet("alive"))
    orphaned, _ = started_pair(dead)
    kept, _ = started_pair(alive)
    b = live(fleet("B"))
    assert b.resume_all() == 2  # the dead engine's parent and kid
    assert b.owns(orphaned) and not b.owns(kept)
    assert b.instance(kept).record.owner == "alive"


def test_an_engine_that_created_an_instance_holds_incarnation_1(fleet: Fleet) -> None:
    """Creation and births by an engine hold incarnation 1; owns() reads the store."""
    a = fleet("A")
    parent, kid = started_pair(a)
    assert a.parts.holdings.held() == {parent: 1, kid: 1} and a.owns(parent) and a.owns(kid)
    assert a.instance(kid).record.incarnation == 1


def test_orphan_ends_an_instance_with_status_orphan(fleet: Fleet) -> None:
    """Engine.orphan writes Orphaned (status orphan, finished, out of the listing); a second call is False."""
    a = fleet("A")
    _, kid = started_pair(a)
    assert orphan(a.parts, kid, "parent gone past the grace period") is True
    record = a.instance(kid).record
    assert record.status is InstanceStatus.ORPHAN and record.status.finished
    assert record.error == {"orphan": "parent gone past the grace period"}
    assert orphan(a.parts, kid, "again") is False
    assert a.plan(kid).status is InstanceStatus.ORPHAN


def test_claims_survive_snapshots_and_change_no_checkpoint(fleet: Fleet) -> None:
    """An instance rebuilt from a snapshot keeps its owner and incarnation; a claim changes no checkpoint."""
    a = fleet("A", snapshot_interval=1)
    parent, kid = started_pair(a)
    before = {i: a.plan(i) for i in (parent, kid)}
    b = live(fleet("B", snapshot_interval=1))
    b.take_over(parent, reason="A stopped heartbeating")
    assert b.take_over(parent).claimed == ()  # held already: nothing claimed again
    summaries = [entry.summary for entry in timeline(b.events_of(kid))]
    assert summaries[-1] == "claimed by B (incarnation 2): A stopped heartbeating"
    c = fleet("C", snapshot_interval=1)
    for instance_id in (parent, kid):
        instance, start, _ = c.parts.reads.read(instance_id)
        assert (instance.record.owner, instance.record.incarnation) == ("B", 2)
        assert start is not None and start.originator_version == instance.version  # from the snapshot
        assert start.state.record.incarnation == 2
        after = c.plan(instance_id)
        assert (after.snapshot, after.activations, after.status) == (
            before[instance_id].snapshot,
            before[instance_id].activations,
            before[instance_id].status,
        )
        assert after.version == before[instance_id].version + 1


def test_a_client_that_created_an_instance_learns_on_send_that_a_worker_took_it(fleet: Fleet) -> None:
    """A send from the engine that created a since-claimed instance reads it fresh and stops holding it."""
    client = fleet("client")
    parent, _ = started_pair(client)
    worker = live(fleet("worker"))
    worker.take_over(parent)
    assert client.send(parent, "nudge") is not None
    assert parent not in client.parts.holdings.held() and not client.owns(parent)
    assert worker.owns(parent)
    seq = client.send(parent, "nudge again")
    assert seq is not None and parent not in client.parts.holdings.held()

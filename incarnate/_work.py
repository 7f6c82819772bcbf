"""A unit of work: the aggregates one macrostep touches, saved together.

A parent's macrostep may create children, cancel or message others and
notify its own parent. The instance whose macrostep it is is *fenced*: the
commit is refused unless this engine holds its ownership incarnation
(accepting an event or a cancel request for another instance is not an
owner write and needs no fence). Everything it decides goes into one
``Application.save`` — one transaction — before anything is enacted; the
unit of work then tells the runner which instances now have work and which
deadlines to watch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError

from aggregates import Instance
from statechart import Event, JsonValue, Snapshot, error_invoke_event

if TYPE_CHECKING:
    from incarnate._engine import Engine


class UnitOfWork:
    """Loaded and new aggregates of one commit, and what to enact after it."""

    def __init__(self, engine: Engine, *, fresh: bool = True) -> None:
        self.engine = engine
        self.fresh = fresh
        self.loaded: dict[UUID, Instance | None] = {}
        self.created: dict[UUID, Instance] = {}
        self.followups: list[UUID] = []
        self.deadlines: list[tuple[float, UUID]] = []
        self.decoded: dict[UUID, Snapshot[Any]] = {}
        self.fenced: set[UUID] = set()

    def load(self, instance_id: UUID) -> Instance | None:
        """The instance, loaded once per unit of work (None when it does not exist)."""
        if instance_id in self.created:
            return self.created[instance_id]
        if instance_id not in self.loaded:
            try:
                instance: Instance | None = self.engine.load(instance_id, fresh=self.fresh)
            except AggregateNotFoundError:
                instance = None
            self.loaded[instance_id] = instance
        return self.loaded[instance_id]

    def fence(self, instance: Instance) -> None:
        """Mark a loaded instance as written by its owner: the engine must hold its incarnation.

        Checked now (:class:`~incarnate.errors.Fenced` at once for a copy
        that names another owner) and again at the commit, whose version
        check makes the two one compare-and-swap.
        """
        self.engine.check_holds(instance)
        self.fenced.add(instance.id)

    def create(self, instance: Instance) -> None:
        """Add a new instance to the commit."""
        self.created[instance.id] = instance
        self.follow(instance.id)

    def follow(self, instance_id: UUID) -> None:
        """Give ``instance_id`` to the runner once the commit has landed."""
        if instance_id not in self.followups:
            self.followups.append(instance_id)

    def watch(self, deadline: float, instance_id: UUID) -> None:
        """Wake ``instance_id`` at ``deadline`` once the commit has landed."""
        self.deadlines.append((deadline, instance_id))

    def tell_parent(self, child: Instance, now: float, build: Callable[..., Event], *args: JsonValue) -> None:
        """Put ``build(child's invoke id, *args)`` in the parent's inbox, in this commit.

        Nothing happens for a root or a finished parent.
        """
        ref = child.record.parent
        if ref is None:
            return
        parent = self.load(ref.parent)
        if parent is None or parent.record.status.finished:
            return
        parent.accept(build(ref.invoke_id, *args), source=child.id, sent_at=now)
        self.follow(parent.id)

    def end_cancelled(self, instance: Instance, now: float) -> None:
        """Finish a requested cancellation; a parent that did not ask for it hears of it as a failure."""
        request = instance.record.cancel
        assert request is not None
        instance.mark_cancelled(request.reason)
        ref = instance.record.parent
        if ref is not None and request.by != ref.parent:
            error: JsonValue = {"reason": "cancelled", "detail": request.reason}
            self.tell_parent(instance, now, error_invoke_event, error)

    def pending(self) -> list[Instance]:
        """Every aggregate with events to save."""
        touched = [i for i in self.loaded.values() if i is not None and i.pending_events]
        return touched + list(self.created.values())

    def event_count(self) -> int:
        """How many events the commit holds."""
        return sum(len(i.pending_events) for i in self.pending())

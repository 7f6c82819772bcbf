"""A unit of work: the aggregates one macrostep touches, saved together.

A parent's macrostep may create children, cancel or message others and
notify its own parent. The instance whose macrostep it is is *fenced*: the
commit is refused unless this engine holds its ownership incarnation
(accepting an event or a cancel request for another instance is not an
owner write and needs no fence). Everything it decides goes into one
``Application.save`` — one transaction — before anything is enacted; the
unit of work then tells the runner which instances now have work and which
deadlines to watch.

Deciding and the unit of work need only a few things of the engine, named by
:class:`Workshop`; anything that provides them (the Engine, or a small test
double over a bare ``Application``) can drive the path decide → unit of
work → commit → enact.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError

from aggregates import Instance, Ref
from incarnate._clock import Clock
from statechart import Chart, Event, JsonValue
from statechart.codec import SnapshotDelta
from statechart.event import error_invoke_event
from statechart.snapshot import Snapshot


class Workshop(Protocol):
    """What deciding a macrostep and its unit of work use of the engine, and nothing more.

    The :class:`~incarnate.Engine` is one; saving and enacting stay with the
    caller, which commits ``UnitOfWork.pending()`` in one save and only then
    enacts its ``followups`` and ``deadlines``.
    """

    @property
    def engine_id(self) -> str:
        """The id new children are owned by, and the owner a fenced write must name."""
        ...

    @property
    def clock(self) -> Clock:
        """The time every decision reads (``now`` of a macrostep, ``sent_at`` of a message)."""
        ...

    @property
    def charts(self) -> Mapping[str, Chart[Any]]:
        """The registered charts by name; an instance of a chart not among them is parked."""
        ...

    def encode(self, chart: Chart[Any], snapshot: Snapshot[Any]) -> dict[str, Any]:
        """``snapshot`` of ``chart`` as the data a ``Stepped`` event stores."""
        ...

    def http_location(self, instance_id: UUID) -> str | None:
        """The instance's Basic HTTP location, from the engine's ingress base URL (None: no ingress)."""
        ...

    def encode_delta(
        self, chart: Chart[Any], before: Snapshot[Any] | None, after: Snapshot[Any]
    ) -> SnapshotDelta:
        """What changed from ``before`` (None: a first macrostep) to ``after``, as ``Stepped`` stores it."""
        ...

    def decode(self, chart: Chart[Any], instance: Instance) -> Snapshot[Any]:
        """The current snapshot of ``instance`` (``CodecError`` when it has none or it does not decode)."""
        ...

    def load(self, aggregate_id: UUID, *, fresh: bool = True) -> Instance:
        """A private copy of a stored instance (``AggregateNotFoundError`` when there is none).

        ``fresh=False`` may answer from a copy this engine committed before;
        a decision computed on a stale copy then fails its save on the
        version conflict.
        """
        ...

    def check_holds(self, instance: Instance) -> None:
        """Raise :class:`~incarnate.errors.Fenced` unless ``instance`` is owned here, at the held incarnation.

        Called when an owner write is added to a unit of work, and again just before it is saved.
        """
        ...

    @property
    def embed_tasks(self) -> bool:
        """Whether a task child born now is embedded in its parent (no stream of its own)."""
        ...


_UNLOADED = object()
"""What :meth:`UnitOfWork.load` finds for an instance it has not loaded yet (None: loaded, absent)."""


class UnitOfWork:
    """Loaded and new aggregates of one commit, and what to enact after it."""

    def __init__(self, workshop: Workshop, *, fresh: bool = True) -> None:
        self.workshop = workshop
        self.fresh = fresh
        self.loaded: dict[UUID, Instance | None] = {}
        self.created: dict[UUID, Instance] = {}
        self.followups: list[UUID] = []
        self._following: set[UUID] = set()  # the followups, for an O(1) membership test
        self.deadlines: list[tuple[float, UUID]] = []
        self.decoded: dict[UUID, Snapshot[Any]] = {}
        self.fenced: set[UUID] = set()
        self.sent: tuple[UUID, int] | None = None
        """The message a ``send`` accepted in this commit: the instance and its inbox sequence number."""
        self.embedded: list[Ref] = []
        """The Refs of the embedded task children born in this commit."""

    def load(self, instance_id: UUID) -> Instance | None:
        """The instance, loaded once per unit of work (None when it does not exist)."""
        created = self.created.get(instance_id)
        if created is not None:
            return created
        loaded = self.loaded.get(instance_id, _UNLOADED)
        if loaded is not _UNLOADED:
            return loaded  # type: ignore[return-value]
        try:
            instance: Instance | None = self.workshop.load(instance_id, fresh=self.fresh)
        except AggregateNotFoundError:
            instance = None
        self.loaded[instance_id] = instance
        return instance

    def fence(self, instance: Instance) -> None:
        """Mark a loaded instance as written by its owner: its incarnation must be held.

        Checked now (:class:`~incarnate.errors.Fenced` at once for a copy
        that names another owner) and again at the commit, whose version
        check makes the two one compare-and-swap.
        """
        self.workshop.check_holds(instance)
        self.fenced.add(instance.id)

    def create(self, instance: Instance) -> None:
        """Add a new instance to the commit."""
        self.created[instance.id] = instance
        self.follow(instance.id)

    def embed(self, ref: Ref) -> None:
        """Run the body of the embedded task child of ``ref`` once the commit has landed."""
        self.embedded.append(ref)

    def follow(self, instance_id: UUID) -> None:
        """Give ``instance_id`` to the runner once the commit has landed."""
        if instance_id not in self._following:
            self._following.add(instance_id)
            self.followups.append(instance_id)

    def unfollow(self, instance_id: UUID) -> None:
        """Take back a follow-up: ``instance_id`` was already stepped in this commit and has nothing due."""
        if instance_id in self._following:
            self._following.discard(instance_id)
            self.followups.remove(instance_id)

    def include(self, instance: Instance) -> None:
        """Add an instance the caller loaded (and may have written to), as if loaded here."""
        self.loaded[instance.id] = instance

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

"""The store port: the protocols every store adapter implements.

A :class:`Store` is one kind of store (in memory, SQLite, PostgreSQL) as the
engine sees it: the ``eventsourcing`` settings for its events, the recovery
listing's tables, and the coordination facts the fleet shares (engine
heartbeats, recovery leases, the recovery leader, wake-ups). Every
coordination fact lives in the store itself — for PostgreSQL, in the same
database as the events — so nothing else is shared between workers.

Events themselves are written through the ``eventsourcing`` recorder the
store configures: a unit of work commits its aggregates in one atomic save,
whose optimistic concurrency on each aggregate's version is the
compare-and-swap that fences a stale owner (see ``docs/explanation/ownership.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Protocol
from uuid import UUID

import attrs
from eventsourcing.persistence import AggregateRecorder, ApplicationRecorder, StoredEvent

from projections import ListingRow
from statechart import JsonValue

Change = tuple[int, ListingRow]
"""A listing row to write, with its insertion sequence (used only when the row is new)."""

Load = Mapping[str, JsonValue]
"""What an engine reports of its work with a heartbeat: a small JSON object the store keeps as it is
(a worker's is described by ``incarnate._fleet.WorkerLoad``)."""


@attrs.frozen
class Heartbeat:
    """One engine's latest heartbeat: it is live until ``expires_at`` (store time, seconds).

    A retired heartbeat (a graceful stop) has no lease left: ``expires_at``
    is its ``beat_at``, the moment it retired.
    """

    engine_id: str
    group: str
    beat_at: float
    expires_at: float

    @property
    def retired(self) -> bool:
        """Whether the engine stopped gracefully: it holds nothing, and its trees may move at once."""
        return self.expires_at <= self.beat_at


@attrs.frozen
class Lease:
    """A recovery lease on a root: ``holder`` recovers it until ``expires_at`` (store time, seconds)."""

    root: UUID
    holder: str
    expires_at: float
    attempts: int
    outcome: str
    """``""`` while held; after a release: ``succeeded``, ``transient``, ``failed``, ``orphan``, ``error``."""
    message: str


class ListingTables(Protocol):
    """Where one store keeps the recovery listing's rows and its tracking position."""

    errors: tuple[type[Exception], ...]
    """The database's errors, which the listing wraps in StorageError."""

    def position(self) -> int:
        """The stored position (the last notification id folded)."""
        ...

    def load(self, ids: Collection[UUID]) -> dict[UUID, ListingRow]:
        """The stored rows of ``ids`` (absent ones left out).

        :class:`UnreadableRow` when a stored row does not read back.
        """
        ...

    def load_tasks(self, parents: Collection[UUID]) -> dict[UUID, ListingRow]:
        """The in-flight rows of embedded tasks (see ``projections.is_embedded``) of ``parents``.

        An event that ends a parent ends these rows too; it does not name them.
        :class:`UnreadableRow` when a stored row does not read back. An adapter
        without it still works: a parent's end then leaves such rows as they were.
        """
        ...

    def write(self, changes: Sequence[Change], expected: int, position: int) -> bool:
        """Move the position from ``expected`` to ``position`` and upsert ``changes``, atomically.

        False, writing nothing, when the position is no longer ``expected``.
        """
        ...

    def select(self, *, in_flight: bool, roots: bool) -> list[ListingRow]:
        """The stored rows in insertion order, filtered."""
        ...

    def reset(self) -> None:
        """Delete every row and move the position back to 0, atomically (the listing is then rebuilt)."""
        ...

    def close(self) -> None:
        """Release resources."""
        ...


class Coordination(Protocol):
    """The facts a fleet of engines shares through the store.

    Times are the store's own clock (PostgreSQL ``clock_timestamp()``, the
    host's clock for SQLite and memory), in seconds since the epoch, so
    engines on hosts whose clocks disagree still agree on who is live.
    """

    def now(self) -> float:
        """The store's clock."""
        ...

    # ------------------------------------------------------------ heartbeats

    def beat(self, engine_id: str, group: str, lease: float, load: Load | None = None) -> Heartbeat:
        """Record that ``engine_id`` is live for ``lease`` more seconds (upsert); returns the row.

        ``load`` is the engine's report of its work, kept with the row for
        anyone to read (:meth:`loads`) until the next beat replaces it; a beat
        without one leaves the engine's load unknown.
        """
        ...

    def retire(self, engine_id: str) -> None:
        """End ``engine_id``'s liveness now (a graceful stop): whatever it owned is claimable at once.

        The row stays, :attr:`Heartbeat.retired`, so that a recovery manager
        knows the owner left on purpose; an engine that never beat gets none.
        """
        ...

    def heartbeats(self, group: str | None = None) -> dict[str, Heartbeat]:
        """Every heartbeat row (of ``group`` when given), live or lapsed, by engine id."""
        ...

    def is_live(self, engine_id: str) -> bool:
        """Whether ``engine_id`` has a heartbeat that has not expired."""
        ...

    def loads(self, group: str | None = None) -> dict[str, dict[str, JsonValue]]:
        """The load each engine (of ``group`` when given) reported with its latest beat, by engine id.

        An engine whose latest beat carried none is left out: its load is
        unknown (an engine that is not a worker, or a row written before
        heartbeats carried loads). A retire keeps the last load reported.
        """
        ...

    # -------------------------------------------------------- recovery leases

    def claim(self, roots: Sequence[UUID], holder: str, lease: float, limit: int) -> list[UUID]:
        """Lease up to ``limit`` of ``roots`` to ``holder``, atomically, in the order given.

        A root whose lease is still held — by another holder or by
        ``holder`` itself, whose earlier attempt may still be running — is
        skipped (never waited for); an expired or released lease is taken
        over, counting one more attempt. Returns the roots now leased to
        ``holder``, in the order given.
        """
        ...

    def release(self, root: UUID, holder: str, *, outcome: str, message: str = "") -> bool:
        """End ``holder``'s lease on ``root`` recording ``outcome``; False when it no longer held it."""
        ...

    def release_many(self, roots: Sequence[UUID], holder: str, *, outcome: str, message: str = "") -> int:
        """:meth:`release` of every root of ``roots`` with one outcome, in one transaction; how many it held.

        An adapter of an older port may lack it: the engine then releases
        the roots one by one.
        """
        ...

    def leases(self) -> list[Lease]:
        """Every lease row, held or released."""
        ...

    # ------------------------------------------------------------ leadership

    def lead(self, lock_id: int, holder: str) -> bool:
        """Try to become (or stay) the leader for ``lock_id``; never blocks.

        PostgreSQL: a session advisory lock on a dedicated connection, held
        until :meth:`resign`, :meth:`close` or the connection's death. SQLite
        and memory: always True (one host; a single engine always leads).
        """
        ...

    def resign(self, lock_id: int, holder: str) -> None:
        """Stop leading ``lock_id`` (no-op when not leading)."""
        ...

    def leaders(self) -> dict[str, frozenset[int]] | None:
        """The leader locks held right now, by the engine holding them; None where no lock is ever held.

        PostgreSQL: the session advisory locks of the leader connections of
        the engines that have a heartbeat row here (an engine leads through a
        connection named after it). SQLite and memory: None, since every
        engine leads (see :meth:`lead`); ask the engines themselves (their
        :meth:`loads`).
        """
        ...

    # --------------------------------------------------------------- wake-ups

    def wait(self, timeout: float) -> bool:
        """Block until new events may have been committed by any process, or ``timeout`` seconds.

        True when woken by a notification (PostgreSQL LISTEN/NOTIFY), False
        on timeout (the caller then polls the notification log anyway:
        polling is the fallback, and the only mechanism on SQLite).
        """
        ...

    def close(self) -> None:
        """Release connections (and with them any advisory lock)."""
        ...


class Store(Protocol):
    """One kind of store, as the engine sees it."""

    kind: str
    """``memory``, ``sqlite`` or ``postgres``: for messages only, never switched on."""

    def describe(self) -> str:
        """A one-line description for logs and messages (never a password)."""
        ...

    def url(self) -> str:
        """The store as a ``--db`` value that :meth:`incarnate.Storage.from_url` reads back (no password)."""
        ...

    def environment(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The ``eventsourcing`` settings for the engine's Application (``environ`` fills unset timeouts)."""
        ...

    def check(self) -> None:
        """Connect once and raise :class:`~incarnate.errors.StoreUnreachable` naming what to check."""
        ...

    def recorder(self, construct: Callable[[], ApplicationRecorder]) -> ApplicationRecorder:
        """The application recorder: ``construct()``, or a shared one (named in-memory stores)."""
        ...

    def listing_tables(self) -> ListingTables:
        """The recovery listing's tables (created idempotently)."""
        ...

    def coordination(self) -> Coordination:
        """The fleet's shared facts (tables created idempotently)."""
        ...

    def select_many(
        self, recorder: AggregateRecorder, originator_ids: Sequence[UUID], *, latest: bool = False
    ) -> dict[UUID, list[StoredEvent]] | None:
        """The stored events of many originators, each one's in version order, in one query per chunk.

        ``latest`` selects only each originator's newest record (the latest
        snapshot). Originators with none are left out. None when the store
        reads originators one at a time (in memory, where that costs nothing).
        """
        ...

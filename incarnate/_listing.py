"""The recovery listing, kept durably next to the events it is folded from.

:class:`Listing` follows an engine's notification log and folds each
stored event into one row per instance (see :mod:`projections._listing`).
Rows and the tracking position live in the engine's own database, in the
store's :class:`~incarnate.store.ListingTables` — an in-memory table for
POPO, two tables for SQLite and PostgreSQL (``incarnate_listing`` and
``incarnate_listing_tracking``, created idempotently) — and every batch
writes its changed rows and its new position in one transaction, so a
crash between batches neither skips nor repeats a notification. Each row
carries the time of its instance's last event (``changed_at``: the event's
own timestamp, never later than the store's clock when it was folded), so
when a listing catches up does not change what it says.

That timestamp comes from the clock of the host that wrote the event, while
recovery measures ``ttl`` against the store's clock
(the store clock, ``Coordination.now()``): the hosts' clocks are assumed to agree with
the store's to well within ``ttl`` (NTP). A writer whose clock runs behind
makes its instances look older by the difference, which may start recovery
that much early; recovery still needs the owner's heartbeat to have expired
on the store's clock, and fencing holds whatever the times. A writer whose
clock runs ahead is capped at the fold's store time, so it cannot postpone
recovery beyond a ``ttl`` after the fold.

The listing is a view that may lag the log: it shows what had been folded
at its last :meth:`Listing.catch_up`. It decides nothing. Whoever resumes,
claims or resolves an instance it lists reloads the aggregate and decides
on that.

Corruption never stops it: a stored event that does not decode is folded
from its position alone (see :func:`projections._listing.apply_undecodable`),
and a stored row or position that does not read makes the listing rebuild
itself from the log, each with a logged warning.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from eventsourcing.persistence import Notification, PersistenceError
from eventsourcing.utils import TopicError, resolve_topic

from aggregates import read_stored_json
from aggregates.errors import DecodeError
from incarnate.errors import EngineError, StorageError
from incarnate.store import ListingTables, UnreadableRow
from incarnate.store._sql import ROWS_TABLE, TRACKING_TABLE
from projections._listing import (
    INSTANCE_TOPIC_PREFIX,
    ListingRow,
    apply_notification,
    apply_undecodable,
    ends_instance,
    event_time,
    is_embedded,
    needs_state,
    related_rows,
)

if TYPE_CHECKING:
    from incarnate._journal import Journal

__all__ = ["BATCH_SIZE", "ROWS_TABLE", "TRACKING_TABLE", "Listing"]

log = logging.getLogger("incarnate.listing")
_T = TypeVar("_T")

BATCH_SIZE = 500
"""How many notifications one catch-up transaction folds at most."""


class Listing:
    """The in-flight listing of an engine's store, folded from its notification log.

    :meth:`catch_up` reads the notifications after the stored position, in
    batches of :data:`BATCH_SIZE`, and writes each batch's changed rows with
    its new position in one transaction. Two listings over one store (two
    engines, or two processes) may catch up at once: a batch commits only
    if the position is still the one it started from, so each notification
    is applied exactly once; the loser re-reads and continues.

    The listing lags the log until the next catch-up, and a row's status is
    only as fresh as that. Nothing here makes a recovery decision: the
    engine and the command line use it to find candidates, then load each
    instance's aggregate and decide on what it says.

    The position is a notification id, so the listing relies on ids becoming
    visible in order. The library's SQLite and PostgreSQL recorders commit
    under a table lock and keep this; PostgreSQL's
    ``POSTGRES_ENABLE_DB_FUNCTIONS`` does not, and must stay off.

    Thread-safe: one lock serialises every call on a listing.
    """

    def __init__(self, journal: Journal, *, batch_size: int = BATCH_SIZE) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.journal = journal
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._closed = False
        self.tables: ListingTables = journal.store.listing_tables()
        mapper = journal.mapper
        self._stored_plain = not (mapper.cipher or mapper.compressor)
        """Whether stored states are plain JSON (read as they are, without the mapper)."""
        """Where the rows and the position are stored: the store's listing tables."""

    # ---------------------------------------------------------- catching up

    def catch_up(self, limit: int | None = None) -> int:
        """Fold the notifications after the stored position; returns how many were processed.

        With ``limit``, at most that many are processed. Each batch commits
        on its own, so an error leaves every earlier batch applied and the
        failed one not at all.
        """
        if limit is not None and limit < 0:
            raise ValueError(f"limit must not be negative, got {limit}")
        with self._lock:
            self._require_open()
            return self._readable(lambda: self._catch_up(limit))

    def _catch_up(self, limit: int | None) -> int:
        processed = 0
        while limit is None or processed < limit:
            size = self.batch_size if limit is None else min(self.batch_size, limit - processed)
            done = self._fold_batch(size)
            if done is None:
                continue  # another listing moved the position first: start again from it
            processed += done
            if done < size:
                break
        return processed

    def _readable(self, read: Callable[[], _T]) -> _T:
        """``read()``; if a stored row does not read back, rebuild the listing from the log and retry once."""
        try:
            return read()
        except UnreadableRow as error:
            log.warning(
                "%s in %s does not read; rebuilding the listing from the event log",
                error,
                self.journal.described,
            )
        with self._storage_errors("reset the listing"):
            self.tables.reset()
        try:
            self._catch_up(None)
            return read()
        except UnreadableRow as error:
            raise StorageError(
                f"the listing in {self.journal.described} does not read back after a rebuild: "
                f"{error}; check the database"
            ) from error

    def _fold_batch(self, size: int) -> int | None:
        """Fold and write one batch; its size, or None when another writer advanced first."""
        tables = self.tables
        with self._storage_errors("read the listing position"):
            position = tables.position()
        notifications = self._notifications(position + 1, size)
        if not notifications:
            return 0
        originators = [_originator(n) for n in notifications]
        now = self.journal.coordination.now()
        read = [
            self._read(n, originator, now) for n, originator in zip(notifications, originators, strict=True)
        ]
        # A parent's event may make or end its embedded tasks' rows: those are loaded with the rest.
        related = [
            related_rows(n.topic, state) if state else []
            for n, (state, _) in zip(notifications, read, strict=True)
        ]
        wanted = set(originators).union(*related)
        # A parent's end ends its embedded tasks still in flight, which it does not name.
        ending = {o for n, o in zip(notifications, originators, strict=True) if ends_instance(n.topic)}
        with self._storage_errors("read listing rows"):
            before = tables.load(wanted)
            load_tasks = getattr(tables, "load_tasks", None)  # a store adapter of an older port may lack it
            if ending and load_tasks is not None:
                before.update(load_tasks(ending))
        rows = dict(before)
        tasks: dict[UUID, list[UUID]] = {}
        for row in before.values():
            if row.parent in ending and is_embedded(row):
                tasks.setdefault(row.parent, []).append(row.id)
        first_seen: dict[UUID, int] = {}
        for notification, originator, (state, at), others in zip(
            notifications, originators, read, related, strict=True
        ):
            if others and originator in ending:
                tasks.setdefault(originator, []).extend(others)
            self._fold(rows, notification, originator, state, at, tasks.get(originator, ()))
            for row_id in (originator, *others):
                if row_id not in before and row_id in rows:
                    first_seen.setdefault(row_id, notification.id)
        changes = sorted(
            ((first_seen.get(row_id, 0), row) for row_id, row in rows.items() if before.get(row_id) != row),
            key=lambda change: change[0],
        )
        with self._storage_errors("write listing rows"):
            advanced = tables.write(changes, position, notifications[-1].id)
        return len(notifications) if advanced else None

    def _read(
        self, notification: Notification, originator: UUID, now: float
    ) -> tuple[dict[str, Any] | None, float]:
        """The state the fold needs of a notification and its time.

        The state is ``{}`` when the fold needs none, and None when it does not read.
        """
        topic = notification.topic
        version = notification.originator_version
        try:
            if not topic.startswith(INSTANCE_TOPIC_PREFIX):
                resolve_topic(topic)  # another aggregate's event (not listed), or an unreadable topic
                return {}, now
            if needs_state(topic):
                plain = self._plain(notification, originator)
                if not needs_state(topic, plain):
                    return {}, self._changed_at(notification, originator, now, plain)
                state = self._decode(plain, notification, originator)
                return state, self._changed_at(notification, originator, now, plain)
            return {}, self._changed_at(notification, originator, now)
        except (DecodeError, TopicError) as error:
            self._undecodable(topic, originator, version, error)
            return None, self._changed_at(notification, originator, now)

    def _fold(
        self,
        rows: dict[UUID, ListingRow],
        notification: Notification,
        originator: UUID,
        state: dict[str, Any] | None,
        at: float,
        tasks: Iterable[UUID],
    ) -> None:
        topic = notification.topic
        version = notification.originator_version
        if state is None:
            apply_undecodable(rows, originator, version, at=at)
            return
        if not topic.startswith(INSTANCE_TOPIC_PREFIX):
            return
        try:
            apply_notification(rows, topic, originator, version, state, at=at, tasks=tasks)
        except DecodeError as error:
            self._undecodable(topic, originator, version, error)
            apply_undecodable(rows, originator, version, at=at)

    @staticmethod
    def _undecodable(topic: str, originator: UUID, version: int, error: Exception) -> None:
        log.warning(
            "listing: stored event %s of %s at version %s does not decode (%s: %s); "
            "listed from its position only, recovery will park its call tree",
            topic,
            originator,
            version,
            type(error).__name__,
            error,
        )

    def _notifications(self, start: int, limit: int) -> Sequence[Notification]:
        try:
            return self.journal.recorder.select_notifications(start=start, limit=limit)
        except PersistenceError as error:
            raise StorageError(f"could not read notifications from {start}: {error}") from error

    def _plain(self, notification: Notification, originator: UUID) -> bytes:
        """The notification's state, decrypted and decompressed as the engine's mapper does.

        Any failure there (a wrong key, a truncated record) is a :class:`DecodeError`:
        the cipher and the compressor are configurable, and so are their exceptions.
        """
        mapper = self.journal.mapper
        state = notification.state
        try:
            if mapper.cipher:
                state = mapper.cipher.decrypt(state)
            if mapper.compressor:
                state = mapper.compressor.decompress(state)
        except Exception as error:
            raise DecodeError(
                notification.topic, originator, notification.originator_version, str(error)
            ) from error
        return state

    def _decode(self, plain: bytes, notification: Notification, originator: UUID) -> dict[str, Any]:
        try:
            data = read_stored_json(plain)
        except ValueError as error:
            raise DecodeError(
                notification.topic, originator, notification.originator_version, str(error)
            ) from error
        if not isinstance(data, dict):
            raise DecodeError(
                notification.topic,
                originator,
                notification.originator_version,
                f"expected a JSON object, got {type(data).__name__}",
            )
        return data

    def _changed_at(
        self, notification: Notification, originator: UUID, now: float, plain: bytes | None = None
    ) -> float:
        """When the notification's event happened, capped at ``now``; ``now`` when its time does not read.

        ``plain`` is the state already decrypted and decompressed, when the
        caller has it. The cap keeps a writer whose clock runs ahead from
        dating a change after the fold that saw it.
        """
        if plain is None:
            if self._stored_plain:
                plain = notification.state
            else:
                try:
                    plain = self._plain(notification, originator)
                except DecodeError:  # the row does not need this state: the fold's time stands in
                    return now
        when = event_time(plain)
        return now if when is None or when > now else when

    # ------------------------------------------------------------- queries

    def position(self) -> int:
        """The id of the last notification folded (0 before any)."""
        with self._lock:
            self._require_open()
            return self._readable(self._position)

    def _position(self) -> int:
        with self._storage_errors("read the listing position"):
            return self.tables.position()

    def rows(self, *, in_flight: bool = False, roots: bool = False) -> list[ListingRow]:
        """The listed instances in order of first appearance, only unfinished ones and/or roots if asked."""
        with self._lock:
            self._require_open()
            return self._readable(lambda: self._select(in_flight=in_flight, roots=roots))

    def _select(self, *, in_flight: bool, roots: bool) -> list[ListingRow]:
        with self._storage_errors("read listing rows"):
            return self.tables.select(in_flight=in_flight, roots=roots)

    def get(self, instance_id: UUID) -> ListingRow | None:
        """The row of one instance; None when it is not listed (yet)."""
        with self._lock:
            self._require_open()
            return self._readable(lambda: self._get(instance_id))

    def _get(self, instance_id: UUID) -> ListingRow | None:
        with self._storage_errors("read a listing row"):
            return self.tables.load({instance_id}).get(instance_id)

    # ----------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Release the listing's connection (the engine stays open)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            with self._storage_errors("close the listing"):
                self.tables.close()

    def __enter__(self) -> Listing:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _require_open(self) -> None:
        if self._closed:
            raise EngineError(
                "this listing is closed; create a new Listing(engine.parts.journal), or use engine.listing"
            )

    @contextlib.contextmanager
    def _storage_errors(self, doing: str) -> Iterator[None]:
        try:
            yield
        except self.tables.errors as error:
            raise StorageError(
                f"could not {doing} in {self.journal.described}: {type(error).__name__}: {error}"
            ) from error


def _originator(notification: Notification) -> UUID:
    originator = notification.originator_id
    return originator if isinstance(originator, UUID) else UUID(str(originator))

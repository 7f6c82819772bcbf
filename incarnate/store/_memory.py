"""The in-memory store (``eventsourcing``'s POPO recorder): nothing survives the process.

Engines given the same non-empty store name share one recorder, one
listing and one set of coordination facts, so a test can stop an engine
and start a fresh one over the same data. An unnamed store belongs to the
engine that opened it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, ClassVar
from uuid import UUID

import attrs
from eventsourcing.persistence import AggregateRecorder, ApplicationRecorder, StoredEvent

from incarnate._limits import MAX_PAYLOAD_VARIABLE
from incarnate._storage import Storage, optional_setting
from incarnate.errors import ConfigurationError
from incarnate.store._port import Change, Heartbeat, Lease, Load
from incarnate.store._sql import check_outcome, encode_load, read_load
from projections import ListingRow, is_embedded, select_rows
from statechart import JsonValue

PERSISTENCE_MODULE = "eventsourcing.popo"
SCHEME = "memory"


@attrs.frozen
class MemoryStorage(Storage):
    """In memory (``eventsourcing``'s POPO recorder): nothing survives the process (tests).

    Engines given the same non-empty ``name`` share one in-memory store, so
    a test can stop an engine and start a fresh one over the same data; an
    unnamed store belongs to the engine that opened it.
    """

    schemes: ClassVar[tuple[str, ...]] = (SCHEME,)
    modules: ClassVar[tuple[str, ...]] = (PERSISTENCE_MODULE, "popo")
    url_form: ClassVar[str] = "memory://[NAME] (in this process only)"
    transactional: ClassVar[bool] = False

    name: str = ""

    @classmethod
    def parse_url(cls, text: str) -> MemoryStorage:
        """``memory://`` (a store of its own) or ``memory://NAME`` (shared by name within the process)."""
        prefix = f"{SCHEME}://"
        name = text[len(prefix) :] if text.lower().startswith(prefix) else None
        if name is None or "/" in name or "?" in name:
            raise ConfigurationError(
                f"store URL {text!r} is not an in-memory store: write memory:// or memory://NAME"
            )
        return cls(name)

    @classmethod
    def parse_env(cls, env: Mapping[str, str]) -> MemoryStorage:
        """Only the payload limit: an unnamed store."""
        return cls(max_payload_bytes=optional_setting(env, MAX_PAYLOAD_VARIABLE))

    def open(self) -> MemoryStore:
        """The in-memory adapter (the named store's shared state, when named)."""
        return MemoryStore(self)

    def describe(self) -> str:
        """``in-memory (POPO)``, with the store's name when shared."""
        return f"in-memory (POPO) store {self.name!r}" if self.name else "in-memory (POPO)"

    def url(self) -> str:
        """None that another process could use: an in-memory store lives in one process."""
        raise ConfigurationError(
            f"{self.describe()} has no URL: it lives in one process; use a SQLite file or PostgreSQL"
        )

    def missing(self, named_by: str) -> str | None:
        """Missing unless a store of this name lives in this process."""
        with _STORES_LOCK:
            if self.name and self.name in _STORES:
                return None
        return (
            f"no store at {self.describe()} (named by {named_by}): an in-memory store lives only in the "
            "process that made it; pass --db naming a SQLite file or a PostgreSQL database"
        )

    def forget(self) -> None:
        """Drop the named store's state."""
        if self.name:
            forget_memory_store(self.name)


class _Shared:
    """Everything one in-memory store holds besides events: listing rows, heartbeats, leases."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.recorder: ApplicationRecorder | None = None
        self.rows: dict[UUID, Change] = {}
        self.tasks: dict[UUID, set[UUID]] = {}
        """The ids of each parent's embedded task rows still in flight."""
        self.position = 0
        self.heartbeats: dict[str, Heartbeat] = {}
        self.loads: dict[str, str] = {}
        """Each engine's last load, as the JSON text a SQL store keeps (so it reads back alike)."""
        self.leases: dict[UUID, Lease] = {}
        self.inserted = threading.Condition()
        self.inserts = 0
        """How many inserts the recorder has committed (a wait() returns when it moves)."""

    def note_insert(self) -> None:
        with self.inserted:
            self.inserts += 1
            self.inserted.notify_all()


_STORES: dict[str, _Shared] = {}
_STORES_LOCK = threading.Lock()


def forget_memory_store(name: str) -> None:
    """Drop a named in-memory store (tests call this when done with it)."""
    with _STORES_LOCK:
        _STORES.pop(name, None)


def _shared(name: str) -> _Shared:
    if not name:
        return _Shared()
    with _STORES_LOCK:
        shared = _STORES.get(name)
        if shared is None:
            shared = _STORES[name] = _Shared()
        return shared


class MemoryStore:
    """The in-memory store: a POPO recorder, and its listing and coordination in dictionaries."""

    kind = "memory"

    def __init__(self, storage: MemoryStorage) -> None:
        self.storage = storage
        self._shared = _shared(storage.name)

    def describe(self) -> str:
        """``in-memory (POPO)``, with the store's name when shared."""
        return self.storage.describe()

    def url(self) -> str:
        """None exists: an in-memory store lives in one process."""
        return self.storage.url()

    def environment(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """Select the library's POPO persistence module."""
        return {"PERSISTENCE_MODULE": PERSISTENCE_MODULE}

    def check(self) -> None:
        """Memory is always reachable."""

    def recorder(self, construct: Callable[[], ApplicationRecorder]) -> ApplicationRecorder:
        """The store's one recorder (constructed by the first engine).

        Its inserts wake :meth:`MemoryCoordination.wait`.
        """
        shared = self._shared
        with shared.lock:
            if shared.recorder is None:
                shared.recorder = _notifying(construct(), shared)
            return shared.recorder

    def listing_tables(self) -> MemoryListingTables:
        """The listing's rows and position, shared by every engine over this store."""
        return MemoryListingTables(self._shared)

    def coordination(self) -> MemoryCoordination:
        """Heartbeats and leases in the store's dictionaries; the host's clock."""
        return MemoryCoordination(self._shared)

    def select_many(
        self, recorder: AggregateRecorder, originator_ids: Sequence[UUID], *, latest: bool = False
    ) -> dict[UUID, list[StoredEvent]] | None:
        """None: reading an in-memory originator costs no round trip, so they are read one by one."""
        return None


def _notifying(recorder: ApplicationRecorder, shared: _Shared) -> ApplicationRecorder:
    """``recorder``, counting its committed inserts in ``shared`` (POPO has no NOTIFY of its own)."""
    insert = recorder.insert_events

    def insert_events(stored_events: Any, **kwargs: Any) -> Any:
        ids = insert(stored_events, **kwargs)
        shared.note_insert()
        return ids

    recorder.insert_events = insert_events  # type: ignore[method-assign]
    return recorder


class MemoryListingTables:
    """The listing of one in-memory store, under the store's lock."""

    errors: tuple[type[Exception], ...] = ()

    def __init__(self, shared: _Shared) -> None:
        self._shared = shared

    def position(self) -> int:
        """The stored position."""
        with self._shared.lock:
            return self._shared.position

    def load(self, ids: Collection[UUID]) -> dict[UUID, ListingRow]:
        """The stored rows of ``ids``."""
        with self._shared.lock:
            found = (self._shared.rows.get(row_id) for row_id in ids)
            return {entry[1].id: entry[1] for entry in found if entry is not None}

    def load_tasks(self, parents: Collection[UUID]) -> dict[UUID, ListingRow]:
        """The in-flight rows of embedded tasks whose parent is in ``parents``."""
        shared = self._shared
        with shared.lock:
            ids = [task_id for parent in parents for task_id in shared.tasks.get(parent, ())]
            return {task_id: shared.rows[task_id][1] for task_id in ids}

    def write(self, changes: Sequence[Change], expected: int, position: int) -> bool:
        """Move the position and upsert the rows, or nothing when the position moved."""
        shared = self._shared
        with shared.lock:
            if shared.position != expected:
                return False
            entries: dict[UUID, Change] = {}
            for seq, row in changes:
                existing = shared.rows.get(row.id)
                entries[row.id] = (seq if existing is None else existing[0], row)
            # Nothing is changed until every change is known, as a transaction would.
            shared.rows.update(entries)
            for _, row in entries.values():
                if row.parent is not None and is_embedded(row):
                    if row.in_flight:
                        shared.tasks.setdefault(row.parent, set()).add(row.id)
                    elif (tasks := shared.tasks.get(row.parent)) is not None:
                        tasks.discard(row.id)
                        if not tasks:
                            del shared.tasks[row.parent]
            shared.position = position
            return True

    def select(self, *, in_flight: bool, roots: bool) -> list[ListingRow]:
        """The rows in insertion order, filtered."""
        with self._shared.lock:
            ordered = sorted(self._shared.rows.values(), key=lambda entry: entry[0])
        return select_rows((row for _, row in ordered), in_flight=in_flight, roots=roots)

    def reset(self) -> None:
        """Forget every row and the position."""
        with self._shared.lock:
            self._shared.rows.clear()
            self._shared.tasks.clear()
            self._shared.position = 0

    def close(self) -> None:
        """Nothing to release."""


class MemoryCoordination:
    """Heartbeats and leases of one in-memory store; the host's clock; always the leader."""

    def __init__(self, shared: _Shared) -> None:
        self._shared = shared
        self._closed = threading.Event()
        with shared.inserted:
            self._seen = shared.inserts

    def now(self) -> float:
        """The host's clock."""
        return time.time()

    def beat(self, engine_id: str, group: str, lease: float, load: Load | None = None) -> Heartbeat:
        """Record ``engine_id`` live for ``lease`` seconds, with its load."""
        text = encode_load(engine_id, load)
        now = self.now()
        beat = Heartbeat(engine_id=engine_id, group=group, beat_at=now, expires_at=now + lease)
        with self._shared.lock:
            self._shared.heartbeats[engine_id] = beat
            if text is None:
                self._shared.loads.pop(engine_id, None)
            else:
                self._shared.loads[engine_id] = text
        return beat

    def retire(self, engine_id: str) -> None:
        """Mark ``engine_id``'s heartbeat retired: no lease left from now."""
        now = self.now()
        with self._shared.lock:
            beat = self._shared.heartbeats.get(engine_id)
            if beat is not None:
                self._shared.heartbeats[engine_id] = attrs.evolve(beat, beat_at=now, expires_at=now)

    def heartbeats(self, group: str | None = None) -> dict[str, Heartbeat]:
        """Every heartbeat (of ``group``)."""
        with self._shared.lock:
            beats = list(self._shared.heartbeats.values())
        return {b.engine_id: b for b in beats if group is None or b.group == group}

    def loads(self, group: str | None = None) -> dict[str, dict[str, JsonValue]]:
        """The load each engine (of ``group``) reported with its latest beat; unknown ones left out."""
        with self._shared.lock:
            texts = dict(self._shared.loads)
            groups = {engine_id: beat.group for engine_id, beat in self._shared.heartbeats.items()}
        found = {
            engine_id: read_load(text)
            for engine_id, text in texts.items()
            if group is None or groups.get(engine_id) == group
        }
        return {engine_id: load for engine_id, load in found.items() if load is not None}

    def is_live(self, engine_id: str) -> bool:
        """Whether ``engine_id``'s heartbeat has not expired."""
        with self._shared.lock:
            beat = self._shared.heartbeats.get(engine_id)
        return beat is not None and beat.expires_at > self.now()

    def claim(self, roots: Sequence[UUID], holder: str, lease: float, limit: int) -> list[UUID]:
        """Lease up to ``limit`` free roots to ``holder`` under the store's lock."""
        won: list[UUID] = []
        with self._shared.lock:
            now = self.now()
            leases = self._shared.leases
            for root in dict.fromkeys(roots):
                if len(won) >= limit:
                    break
                current = leases.get(root)
                if current is not None and current.outcome == "" and current.expires_at >= now:
                    continue
                attempts = 1 if current is None else current.attempts + 1
                leases[root] = Lease(root, holder, now + lease, attempts, "", "")
                won.append(root)
        return won

    def release_many(self, roots: Sequence[UUID], holder: str, *, outcome: str, message: str = "") -> int:
        """:meth:`release` of each root in turn (a memory store has no transaction to share)."""
        check_outcome(outcome)
        return sum(self.release(root, holder, outcome=outcome, message=message) for root in roots)

    def release(self, root: UUID, holder: str, *, outcome: str, message: str = "") -> bool:
        """End ``holder``'s lease on ``root``."""
        check_outcome(outcome)
        with self._shared.lock:
            current = self._shared.leases.get(root)
            if current is None or current.holder != holder or current.outcome != "":
                return False
            self._shared.leases[root] = Lease(
                root, holder, current.expires_at, current.attempts, outcome, message
            )
            return True

    def leases(self) -> list[Lease]:
        """Every lease."""
        with self._shared.lock:
            return list(self._shared.leases.values())

    def lead(self, lock_id: int, holder: str) -> bool:
        """Always: one process, and a single engine always leads."""
        return True

    def resign(self, lock_id: int, holder: str) -> None:
        """Nothing to give up."""

    def leaders(self) -> dict[str, frozenset[int]] | None:
        """None: no lock is held, every engine leads."""
        return None

    def wait(self, timeout: float) -> bool:
        """Until the store's recorder commits an insert not seen by an earlier wait, or ``timeout``."""
        shared = self._shared
        deadline = time.monotonic() + timeout
        with shared.inserted:
            while shared.inserts == self._seen and not self._closed.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                shared.inserted.wait(min(remaining, 0.5))
            woken = shared.inserts != self._seen
            self._seen = shared.inserts
            return woken

    def close(self) -> None:
        """End any wait."""
        self._closed.set()
        with self._shared.inserted:
            self._shared.inserted.notify_all()

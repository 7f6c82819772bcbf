"""The fleet as an operator sees it: every engine of a store, its heartbeat, its trees and its load.

A :class:`~incarnate.Worker` reports its load with every heartbeat
(:class:`WorkerLoad`, kept as a small JSON object in the heartbeat's row);
:func:`fleet` reads every heartbeat, the loads, who holds a leader lock
(PostgreSQL) and the listing's in-flight roots, and returns one
:class:`EngineRow` per engine. ``incarnate workers`` prints it and the
console's ``/workers`` page shows it; both give its JSON form
(:meth:`Fleet.to_json`), whose keys ``docs/reference/cli.md`` documents.

Every time is the store's clock (``Coordination.now()``), so hosts whose
clocks disagree still agree on a heartbeat's age. The load is what the
worker reported at its last beat, so it is up to a third of its lease old
(10 s by default); ``heartbeat_age`` says how old.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs

from incarnate._inspect import iso
from statechart import JsonValue

if TYPE_CHECKING:
    from incarnate._engine import Engine
    from incarnate.store import Heartbeat

LIVE = "live"
LAPSED = "lapsed"
RETIRED = "retired"
ABSENT = "absent"
STATES = (LIVE, LAPSED, RETIRED, ABSENT)
"""An engine's state: beating (``live``), its lease run out (``lapsed``), stopped gracefully
(``retired``), or owning in-flight roots without ever having beaten (``absent``: an engine that
runs no work, such as a web handler's or the CLI's)."""

RECENT = 3600.0
"""Seconds after its last beat a lapsed or retired engine that owns nothing is still shown."""


@attrs.frozen
class WorkerLoad:
    """What a worker reports of its work with each heartbeat (all counts are of distinct instances)."""

    running: int
    """Instances its runner's threads are working on at the beat (macrostep and task threads)."""
    queued: int
    """Instances waiting for one of its runner's threads at the beat."""
    retrying: int
    """Instances whose last unit of work raised and that wait to be tried again."""
    timers: int
    """Timer deadlines its runner watches that were not due yet."""
    held: int
    """Instances the engine holds (owns, in memory): its call trees' roots and children."""
    threads: int
    """Its runner's macrostep threads."""
    task_threads: int
    """Its runner's task threads."""
    leading: bool | None
    """Whether its recovery manager led its group at its last scan; None when it runs none."""
    position: int
    """The last notification id its follower had read."""
    behind: int
    """Notifications its follower knew the log to hold past ``position`` (the head it last read)."""
    lag: float
    """Seconds since its follower last read the notification log up to the head (the worker's clock)."""
    pid: int
    host: str

    def to_json(self) -> dict[str, JsonValue]:
        """The report as the heartbeat row keeps it."""
        return {
            "running": self.running,
            "queued": self.queued,
            "retrying": self.retrying,
            "timers": self.timers,
            "held": self.held,
            "threads": self.threads,
            "task_threads": self.task_threads,
            "leading": self.leading,
            "position": self.position,
            "behind": self.behind,
            "lag": self.lag,
            "pid": self.pid,
            "host": self.host,
        }

    @classmethod
    def from_json(cls, document: Mapping[str, JsonValue]) -> WorkerLoad | None:
        """The report a heartbeat row keeps; None when it is not one (another version's, damaged: unknown).

        Keys it does not know are ignored, so a newer worker's report still reads.
        """
        try:
            leading = document.get("leading")
            if not (leading is None or isinstance(leading, bool)):
                raise _Unreadable("leading")
            host = document.get("host")
            if not isinstance(host, str):
                raise _Unreadable("host")
            return cls(
                running=_whole(document, "running"),
                queued=_whole(document, "queued"),
                retrying=_whole(document, "retrying"),
                timers=_whole(document, "timers"),
                held=_whole(document, "held"),
                threads=_whole(document, "threads"),
                task_threads=_whole(document, "task_threads"),
                leading=leading,
                position=_whole(document, "position"),
                behind=_whole(document, "behind"),
                lag=_seconds(document, "lag"),
                pid=_whole(document, "pid"),
                host=host,
            )
        except _Unreadable:
            return None

    @property
    def in_flight(self) -> int:
        """Units of work in flight: instances worked on plus instances queued."""
        return self.running + self.queued


@attrs.frozen
class EngineRow:
    """One engine of the store as the operator sees it."""

    engine_id: str
    group: str | None
    """Its engine group; None for an ``absent`` engine (it never beat, so no group is known)."""
    state: str
    """One of :data:`STATES`."""
    beat_at: float | None
    """Its last beat (store time); None when it never beat."""
    expires_at: float | None
    """When its last beat's lease runs (ran) out; equal to ``beat_at`` once retired."""
    heartbeat_age: float | None
    """Seconds from its last beat to the store's clock now; None when it never beat."""
    leader: bool | None
    """Whether it leads its group's recovery (see :func:`fleet`); None when unknown."""
    trees: int
    """In-flight roots the listing names it the owner of (their whole call trees are its)."""
    load: WorkerLoad | None
    """What it reported with its last beat; None when unknown (not a worker, or an older version)."""

    def to_json(self) -> dict[str, JsonValue]:
        """The row as a JSON object; a field of an unknown load is null."""
        load = self.load
        return {
            "engine_id": self.engine_id,
            "group": self.group,
            "state": self.state,
            "leader": self.leader,
            "heartbeat_age": None if self.heartbeat_age is None else round(self.heartbeat_age, 3),
            "beat_at": iso(self.beat_at),
            "beat_at_epoch": self.beat_at,
            "expires_at": iso(self.expires_at),
            "expires_at_epoch": self.expires_at,
            "trees": self.trees,
            "in_flight": None if load is None else load.in_flight,
            "running": None if load is None else load.running,
            "queued": None if load is None else load.queued,
            "retrying": None if load is None else load.retrying,
            "timers": None if load is None else load.timers,
            "held": None if load is None else load.held,
            "threads": None if load is None else load.threads,
            "task_threads": None if load is None else load.task_threads,
            "lag": None if load is None else load.lag,
            "behind": None if load is None else load.behind,
            "position": None if load is None else load.position,
            "host": None if load is None else load.host,
            "pid": None if load is None else load.pid,
        }


@attrs.frozen
class Fleet:
    """Every engine of a store (of one group), read at one moment of the store's clock."""

    now: float
    """The store's clock when it was read."""
    group: str | None
    """The group asked for; None: every group."""
    leaders_from: str
    """``locks`` when leadership was read from the store's leader locks (PostgreSQL), else
    ``reports`` (each live worker's own report: on SQLite and in memory every engine may lead)."""
    rows: tuple[EngineRow, ...]
    """By group, then live, lapsed, retired, absent, then engine id."""
    left_off: int = 0
    """Lapsed or retired engines left out: they own nothing and last beat over :data:`RECENT` seconds ago."""

    def to_json(self) -> dict[str, JsonValue]:
        """``now``, ``now_epoch``, ``group``, ``leaders_from``, ``left_off`` and ``engines`` (the rows)."""
        return {
            "now": iso(self.now),
            "now_epoch": self.now,
            "group": self.group,
            "leaders_from": self.leaders_from,
            "left_off": self.left_off,
            "engines": [row.to_json() for row in self.rows],
        }


def fleet(engine: Engine, *, group: str | None = None, everyone: bool = False) -> Fleet:
    """Every engine of ``engine``'s store (of ``group`` when given), one row each, read now.

    The engines are those with a heartbeat row and, without ``group``, those
    that own in-flight roots without one (``absent``). A lapsed or retired
    engine that owns nothing and last beat over :data:`RECENT` seconds ago
    is left out (counted in :attr:`Fleet.left_off`) unless ``everyone``:
    a store keeps the row of every engine that ever beat.

    ``leader``: on a store whose leaders hold a lock (PostgreSQL's advisory
    locks), whether the engine holds one now, whatever its state (a frozen
    leader holds its lock until its lease lapses and a candidate ends its
    session); elsewhere every engine may lead, and a live worker's report
    says whether its recovery manager led at its last scan (None when its
    load is unknown); an engine that is not live does not lead.
    """
    coordination = engine.parts.coordination
    now = coordination.now()
    beats = coordination.heartbeats(group)
    loads = coordination.loads(group)
    locks = coordination.leaders()
    engine.listing.catch_up()
    trees = Counter(row.owner for row in engine.listing.rows(in_flight=True, roots=True))
    rows = [
        _row(beat, now, trees[beat.engine_id], loads.get(beat.engine_id), locks) for beat in beats.values()
    ]
    if group is None:
        rows += [
            EngineRow(owner, None, ABSENT, None, None, None, False, count, None)
            for owner, count in trees.items()
            if owner not in beats
        ]
    shown = [row for row in rows if everyone or _recent(row)]
    shown.sort(key=lambda row: (row.group is None, row.group or "", STATES.index(row.state), row.engine_id))
    return Fleet(
        now=now,
        group=group,
        leaders_from="reports" if locks is None else "locks",
        rows=tuple(shown),
        left_off=len(rows) - len(shown),
    )


def _row(
    beat: Heartbeat,
    now: float,
    trees: int,
    document: Mapping[str, JsonValue] | None,
    locks: Mapping[str, frozenset[int]] | None,
) -> EngineRow:
    state = RETIRED if beat.retired else LIVE if beat.expires_at > now else LAPSED
    load = None if document is None else WorkerLoad.from_json(document)
    leader: bool | None
    if locks is not None:
        leader = bool(locks.get(beat.engine_id))
    elif state != LIVE:
        leader = False
    else:
        leader = None if load is None else load.leading is True
    age = max(0.0, now - beat.beat_at)
    return EngineRow(
        beat.engine_id, beat.group, state, beat.beat_at, beat.expires_at, age, leader, trees, load
    )


def _recent(row: EngineRow) -> bool:
    if row.state in (LIVE, ABSENT) or row.trees or row.leader:
        return True
    return row.heartbeat_age is not None and row.heartbeat_age <= RECENT


class _Unreadable(Exception):
    """A stored report's field is missing or of another type (the report is then unknown)."""


def _whole(document: Mapping[str, JsonValue], name: str) -> int:
    value = document.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Unreadable(name)
    return value


def _seconds(document: Mapping[str, JsonValue], name: str) -> float:
    value = document.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Unreadable(name)
    return float(value)

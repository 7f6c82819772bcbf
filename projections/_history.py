"""An instance as it was: its stored events folded up to one version, and a call tree's positions.

Time travel replays history the way the aggregate itself does: every
event's own ``mutate`` (the ``apply`` the live instance ran when it was
committed), from the creation event or from an ``eventsourcing``
snapshot taken at or before the version asked for. Nothing matches on
individual event classes, so a new event, or several facts merged into
fewer events, folds as the live instance folded it.

A call tree's history is its instances' events interleaved by time (the
order :func:`projections.timeline` shows them in); a position in it is
how many of those events have happened, and :func:`versions_at` says
which version of each instance that is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from uuid import UUID

from aggregates import Instance, InstanceSnapshot


def instance_at(
    events: Iterable[Any], version: int, *, start: InstanceSnapshot | Instance | None = None
) -> Instance:
    """The instance at ``version``: ``start`` (a snapshot, or a copy to fold on) and its events up to it.

    ``events`` are the instance's stored events in version order; those at
    or before ``start``'s version, and those after ``version``, are skipped.
    ``start`` given as an :class:`Instance` is folded on in place: pass a
    copy. Raises ``ValueError`` when the events do not reach ``version``.
    """
    aggregate: Any = start.mutate(None) if isinstance(start, InstanceSnapshot) else start
    for event in events:
        event_version = event.originator_version
        if aggregate is not None and event_version <= aggregate.version:
            continue
        if event_version > version:
            break
        aggregate = event.mutate(aggregate)
    if not isinstance(aggregate, Instance) or aggregate.version != version:
        reached = 0 if aggregate is None else aggregate.version
        raise ValueError(f"the events given reach version {reached}, not {version}")
    return aggregate


def versions_at(events: Sequence[Any], position: int) -> dict[UUID, int]:
    """Each instance's version after the first ``position`` events of a call tree's interleaved history.

    An instance none of whose events is among them is left out: at that
    position it did not exist yet.
    """
    versions: dict[UUID, int] = {}
    for event in events[:position]:
        versions[event.originator_id] = event.originator_version
    return versions


def interleave(histories: Mapping[UUID, Sequence[Any]]) -> list[Any]:
    """The events of several instances as one history: by time, each instance's in version order.

    The sort is stable and keyed on the event's time alone, as the call
    tree's timeline is, so positions here are positions there.
    """
    events = [event for history in histories.values() for event in history]
    events.sort(key=lambda event: event.timestamp)
    return events

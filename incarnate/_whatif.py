"""What-if replay of a chart change over every live instance of a store, beside the mapping verdicts.

For each live chart instance, :func:`replay_all` reads its stored events
(many instances per query), takes its recorded inputs
(:func:`projections.recorded_run`) and runs them through the *new* chart
registered with the engine (:func:`projections.replay`): pure interpreter
calls, nothing written to the store. Instances whose recorded runs are
identical (the same chart, input, inputs and relative times, see
:meth:`~projections.RecordedRun.key`) share one replay. With ``verdicts``,
each instance also gets today's mapping verdict (:func:`incarnate._migration.judge`);
an instance whose stored checkpoint the new chart cannot take (the verdict
*parks*) parks in the replay too.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any
from uuid import UUID

import attrs

from aggregates import Instance, InstanceKind
from incarnate._journal import project
from incarnate._migration import InstanceVerdict, Verdict, judge
from incarnate._parts import Parts
from incarnate.errors import UnknownInstance
from projections import RecordedRun, Replayed, ReplayVerdict, recorded_run, replay
from statechart import JsonValue

BATCH = 500
"""How many instances' events one store query reads."""


@attrs.frozen
class WhatIf:
    """One live instance: how the new chart takes its recorded inputs, and today's mapping verdict."""

    instance_id: UUID
    root: UUID
    name: str
    status: str
    replay: ReplayVerdict
    verdict: InstanceVerdict | None = None

    def to_json(self) -> dict[str, JsonValue]:
        """As JSON: the instance, the replay (see :meth:`ReplayVerdict.to_json`) and the verdict."""
        return {
            "instance_id": str(self.instance_id),
            "root": str(self.root),
            "name": self.name,
            "status": self.status,
            **self.replay.to_json(),
            "verdict": self.verdict.verdict.value if self.verdict is not None else None,
            "verdict_reasons": list(self.verdict.reasons) if self.verdict is not None else [],
        }


def replay_summary(results: Sequence[WhatIf]) -> dict[str, JsonValue]:
    """How many instances each replay outcome has (every outcome named, zeros included)."""
    counts: dict[str, int] = {r.value: 0 for r in Replayed}
    for result in results:
        counts[result.replay.outcome.value] += 1
    return dict(counts)


def _live_ids(parts: Parts, chart: str | None, ids: Collection[UUID] | None) -> list[UUID]:
    parts.listing.catch_up()
    return [
        row.id
        for row in parts.listing.rows(in_flight=True)
        if row.kind == InstanceKind.CHART.value
        and (chart is None or row.name == chart)
        and (ids is None or row.id in ids)
    ]


def _histories(parts: Parts, ids: Sequence[UUID]) -> Iterator[tuple[Instance, list[Any]]]:
    """Each instance with its whole stored history, reading ``BATCH`` instances per query."""
    journal = parts.journal
    for start in range(0, len(ids), BATCH):
        chunk = ids[start : start + BATCH]
        records = parts.reads.prefetch(chunk)
        for instance_id in chunk:
            try:
                found = records.get(instance_id)
                events = (
                    journal.decode_records(instance_id, found)
                    if found
                    else journal.events_of(instance_id)  # snapshotted, or a store read one by one
                )
            except UnknownInstance:
                continue
            instance = project(None, events)
            if isinstance(instance, Instance) and not instance.record.status.finished:
                yield instance, events


def replay_all(
    parts: Parts,
    *,
    chart: str | None = None,
    mapping: Mapping[str, str] | None = None,
    ids: Collection[UUID] | None = None,
    verdicts: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> list[WhatIf]:
    """The what-if replay of every live chart instance (of ``chart``, or among ``ids``) under the new charts.

    ``parts`` belong to an engine opened over the store with the *new*
    charts; nothing is written. ``progress(done, total)`` is called every
    ``BATCH`` instances.
    """
    live = _live_ids(parts, chart, ids)
    shared: dict[tuple[Any, ...], ReplayVerdict] = {}
    results: list[WhatIf] = []
    for done, (instance, events) in enumerate(_histories(parts, live), start=1):
        record = instance.record
        verdict = judge(parts, instance, mapping, events=events) if verdicts else None
        run = recorded_run(events, [(a.site, a.key, a.generation) for a in record.activations])
        outcome = _replayed(parts, instance, run, shared)
        if verdict is not None and verdict.verdict is Verdict.PARKS:
            outcome = ReplayVerdict(Replayed.PARKS, "; ".join(verdict.reasons), steps=outcome.steps)
        results.append(WhatIf(instance.id, record.root, record.name, record.status.value, outcome, verdict))
        if progress is not None and done % BATCH == 0:
            progress(done, len(live))
    if progress is not None:
        progress(len(results), len(results))
    return results


def _replayed(
    parts: Parts, instance: Instance, run: RecordedRun, shared: dict[tuple[Any, ...], ReplayVerdict]
) -> ReplayVerdict:
    chart = parts.charts.get(run.name or instance.record.name)
    if chart is None:
        return ReplayVerdict(
            Replayed.PARKS,
            f"chart {instance.record.name!r} is not among the new charts ({', '.join(sorted(parts.charts))})",
        )
    key = (chart.fingerprint, run.key())
    found = shared.get(key)
    if found is None:
        found = shared[key] = replay(chart, run, session=str(instance.id))
    return found

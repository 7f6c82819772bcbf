"""Validated migration of every live instance of a chart: a verdict for each first, then batches.

:func:`check` answers, before a changed chart is deployed, what would become
of every live instance under it: it **resumes** (its stored checkpoint fits
the new chart as it is), it **migrates** (it does not fit as stored, and the
given state mapping — possibly empty, when only the recorded version must
move — makes it fit), it **needs a mapping** (it names states the new chart
no longer has: map them), it **parks** (nothing a mapping can do: its chart
is not among the new charts, its context does not decode, its checkpoint
does not validate), or it is **held** (its call tree is owned by a live
worker: stop that worker first, so that nothing writes under it). The
verdicts are computed by the same checks an engine's acquisition makes
(:mod:`incarnate._recovery`), so a verdict is what the engine would do.

:func:`apply` takes the verdicts anew (never a stale dry run), then writes
the migrations batch by batch: each instance's decision is recorded on it
as a ``Migrated`` event (the mapping, the new chart version, the batch id
and the reason) in the same commit that changes its checkpoint, and a batch
is one atomic save, so a crash leaves every instance either migrated with
its decision recorded or untouched. Running it again continues: migrated
instances now resume. Parked roots whose whole tree then fits are resolved.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any
from uuid import UUID

import attrs
from eventsourcing.persistence import IntegrityError

from aggregates import Instance, InstanceKind, InstanceStatus
from incarnate._ownership import is_live, take_over
from incarnate._parts import Parts
from incarnate._recovery import RETRIES, breaking_changes, call_tree, migrated_snapshot
from incarnate.errors import EngineError, MigrationRejected, StorageError, TreeHeld, UnknownInstance
from projections import Checkpoint, CheckpointError, CheckpointUndecodable, resume_plan
from statechart import Chart, JsonValue

log = logging.getLogger("incarnate.recovery")

DEFAULT_BATCH_SIZE = 100
"""How many instances one migration commit writes, by default."""


class Verdict(enum.Enum):
    """What would become of a live instance under the new charts."""

    RESUMES = "resumes"
    """Its stored checkpoint fits the new chart: nothing to do."""
    MIGRATES = "migrates"
    """It does not fit as stored; the mapping given makes it fit (``apply`` writes it)."""
    NEEDS_MAPPING = "needs-mapping"
    """It names states the new chart lacks (see ``missing``): map each to a state of the new chart."""
    PARKS = "parks"
    """It would be parked and no mapping helps; terminate it or change the chart."""
    HELD = "held"
    """Its call tree is owned by a live worker; stop that worker (or let it hand over) first."""

    @property
    def fine(self) -> bool:
        """Whether an instance with this verdict runs under the new charts (after ``apply``)."""
        return self in (Verdict.RESUMES, Verdict.MIGRATES)


@attrs.frozen
class InstanceVerdict:
    """The verdict on one live instance, with its reasons."""

    instance_id: UUID
    root: UUID
    name: str
    status: str
    verdict: Verdict
    reasons: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    """The stored states the new chart no longer has."""
    owner: str = ""

    def to_json(self) -> dict[str, JsonValue]:
        """The verdict as JSON (keys: see ``docs/reference/cli.md``, ``incarnate check``)."""
        return {
            "instance_id": str(self.instance_id),
            "root": str(self.root),
            "name": self.name,
            "status": self.status,
            "verdict": self.verdict.value,
            "reasons": list(self.reasons),
            "missing": list(self.missing),
            "owner": self.owner,
        }


@attrs.frozen
class MigrationReport:
    """What :func:`apply` did: the verdicts it started from, then what it wrote."""

    batch: str
    verdicts: tuple[InstanceVerdict, ...]
    migrated: tuple[UUID, ...] = ()
    resolved: tuple[UUID, ...] = ()
    skipped: tuple[tuple[UUID, str], ...] = ()
    """Instances a migration was decided for but not written (a concurrent write), with why."""

    def to_json(self) -> dict[str, JsonValue]:
        """The report as JSON (keys: see ``docs/reference/cli.md``, ``incarnate migrate``)."""
        return {
            "batch": self.batch,
            "verdicts": [v.to_json() for v in self.verdicts],
            "migrated": [str(i) for i in self.migrated],
            "resolved": [str(i) for i in self.resolved],
            "skipped": [{"instance_id": str(i), "reason": why} for i, why in self.skipped],
            "summary": summary(self.verdicts),
        }


def summary(verdicts: Sequence[InstanceVerdict]) -> dict[str, JsonValue]:
    """How many instances got each verdict (every verdict named, zeros included)."""
    counts: dict[str, JsonValue] = {v.value: 0 for v in Verdict}
    for verdict in verdicts:
        count = counts[verdict.verdict.value]
        assert isinstance(count, int)
        counts[verdict.verdict.value] = count + 1
    return counts


# ---------------------------------------------------------------- mapping


def parse_mapping(pairs: Iterable[str]) -> dict[str, str]:
    """The state mapping of ``OLD=NEW`` pairs (blank ones skipped); ``ValueError`` naming a bad pair."""
    mapping: dict[str, str] = {}
    for raw in pairs:
        pair = raw.strip()
        if not pair:
            continue
        old, equals, new = (part.strip() for part in pair.partition("="))
        if not equals or not old or not new or "=" in new:
            raise ValueError(
                f"{pair!r} is not OLD=NEW; write the stored state's id, '=', and the id of the state of "
                "the new chart it becomes, e.g. gathering=collecting"
            )
        if mapping.get(old, new) != new:
            raise ValueError(f"{old!r} is mapped twice ({mapping[old]!r} and {new!r}); map each state once")
        mapping[old] = new
    return mapping


# ------------------------------------------------------------------ check


def _stored_states(snapshot: Mapping[str, Any]) -> list[str]:
    states = [str(s) for s in snapshot.get("configuration", ())]
    for entry in snapshot.get("history", ()):
        states.extend(str(s) for s in entry.get("states", ()))
    return states


def _missing(chart: Chart[Any], snapshot: Mapping[str, Any], mapping: Mapping[str, str]) -> tuple[str, ...]:
    """The active states the chart lacks once mapped (remembered history of gone states is dropped)."""
    configuration = (str(s) for s in snapshot.get("configuration", ()))
    return tuple(dict.fromkeys(s for s in configuration if mapping.get(s, s) not in chart.index))


def _mapped(
    chart: Chart[Any], snapshot: dict[str, Any], mapping: Mapping[str, str]
) -> tuple[dict[str, Any] | None, str]:
    """The migrated snapshot data under the mapping's pairs that apply, or None and why not."""
    relevant = {old: new for old, new in mapping.items() if old in set(_stored_states(snapshot))}
    try:
        data, _ = migrated_snapshot(chart, snapshot, relevant)
    except ValueError as error:
        return None, str(error)
    return data, ""


def judge(
    parts: Parts,
    instance: Instance,
    mapping: Mapping[str, str] | None = None,
    *,
    events: Sequence[Any] | None = None,
) -> InstanceVerdict:
    """The verdict on one loaded instance under the charts registered with ``engine``.

    ``events`` are the instance's whole stored history when the caller has
    read it already (its ResumePlan is then built from them, not read again).
    """
    record = instance.record
    mapping = dict(mapping or {})

    def verdict(kind: Verdict, *reasons: str, missing: tuple[str, ...] = ()) -> InstanceVerdict:
        return InstanceVerdict(
            instance.id,
            record.root,
            record.name,
            record.status.value,
            kind,
            tuple(reasons),
            missing,
            record.owner,
        )

    notes: list[str] = []
    if record.status is InstanceStatus.PARKED:
        incidents = "; ".join(i.detail for i in record.incidents if i.parked) or "no incident recorded"
        notes.append(f"parked ({incidents}); it is resolved once every instance of its tree fits")
    chart = parts.charts.get(record.name)
    if chart is None:
        return verdict(
            Verdict.PARKS,
            f"chart {record.name!r} is not among the new charts ({', '.join(sorted(parts.charts))}); "
            "add it to them, or terminate the call tree",
        )
    if is_live(parts, record.owner):
        return verdict(
            Verdict.HELD,
            f"owned by live worker {record.owner!r}; stop it (or let its heartbeat lapse) before "
            "migrating, so that nothing runs the old chart under the new one",
            *notes,
        )
    snapshot = record.snapshot
    if snapshot is None:
        return verdict(Verdict.RESUMES, "it has not stepped yet: it starts under the new chart", *notes)
    missing = _missing(chart, snapshot, {})
    breaking = breaking_changes(parts, record.name, record.fingerprint, chart)
    if not missing:
        try:
            if events is None:
                parts.reads.plan(instance.id, chart)
            else:
                resume_plan(events, chart)
        except CheckpointUndecodable as error:
            return verdict(Verdict.PARKS, f"its checkpoint does not decode under the new chart: {error}")
        except CheckpointError as error:
            return verdict(Verdict.PARKS, f"its checkpoint does not validate: {error}")
        if not breaking:
            same = record.fingerprint == chart.fingerprint
            why = "stored under this very chart" if same else "the chart changed compatibly"
            return verdict(Verdict.RESUMES, why, *notes)
    if mapping or not missing:
        data, why_not = _mapped(chart, snapshot, mapping)
        if data is not None:
            changed = "; ".join(breaking) if breaking else "states it is in are gone"
            used = sorted((o, n) for o, n in mapping.items() if o in set(_stored_states(snapshot)))
            how = ", ".join(f"{o} -> {n}" for o, n in used) or "no state needs mapping"
            return verdict(
                Verdict.MIGRATES,
                f"the chart changed incompatibly ({changed}); migrating ({how}) records the new version",
                *notes,
            )
        if not _missing(chart, snapshot, mapping):
            return verdict(Verdict.PARKS, f"the mapping does not make it fit: {why_not}", *notes)
    still = _missing(chart, snapshot, mapping)
    return verdict(
        Verdict.NEEDS_MAPPING,
        f"it is in (or remembers) states the new chart lacks: {', '.join(still)}; map each with "
        "--map OLD=NEW to a state of the new chart",
        *notes,
        missing=still,
    )


def _live_instances(parts: Parts, chart: str | None, ids: Collection[UUID] | None) -> Iterator[Instance]:
    parts.listing.catch_up()
    for row in parts.listing.rows(in_flight=True):
        if row.kind != InstanceKind.CHART.value or (chart is not None and row.name != chart):
            continue
        if ids is not None and row.id not in ids:
            continue
        try:
            instance = parts.reads.instance(row.id)
        except UnknownInstance:
            continue
        if not instance.record.status.finished:
            yield instance


def check(
    parts: Parts,
    *,
    chart: str | None = None,
    mapping: Mapping[str, str] | None = None,
    ids: Collection[UUID] | None = None,
) -> list[InstanceVerdict]:
    """The verdict on every live chart instance (of ``chart``, or among ``ids``) under the new charts.

    ``engine`` is opened over the store with the *new* charts registered; it
    writes nothing here. Children come with their own verdicts; a parked
    root's verdict says that it is resolved once its whole tree fits.
    """
    if mapping:
        _check_mapping(parts, chart, mapping)
    return [judge(parts, instance, mapping) for instance in _live_instances(parts, chart, ids)]


def _check_mapping(parts: Parts, chart: str | None, mapping: Mapping[str, str]) -> None:
    if chart is None:
        return
    new = parts.charts.get(chart)
    if new is None:
        raise EngineError(
            f"chart {chart!r} is not among the new charts ({', '.join(sorted(parts.charts))}); "
            "name a chart the new charts define"
        )
    unknown = sorted({target for target in mapping.values() if target not in new.index})
    if unknown:
        raise EngineError(
            f"the mapping targets states chart {chart!r} does not have: {', '.join(unknown)}; "
            f"its states are {', '.join(new.ids[1:])}"
        )


# ------------------------------------------------------------------ apply


def apply(
    parts: Parts,
    *,
    chart: str,
    mapping: Mapping[str, str],
    batch_size: int = DEFAULT_BATCH_SIZE,
    reason: str = "migrated by an operator",
    progress: Callable[[int, int], None] | None = None,
    ids: Collection[UUID] | None = None,
) -> MigrationReport:
    """Migrate every live instance of ``chart`` whose verdict is *migrates*, in atomic batches.

    The verdicts are taken anew first and returned in the report; only
    instances judged *migrates* are written, each re-judged as it is
    written (a verdict never goes stale between check and write). A batch
    of ``batch_size`` instances is one atomic save; when a concurrent writer
    changed one of them, the batch is written instance by instance and the
    one that conflicted is skipped (reported). ``progress(done, total)`` is
    called after each batch. Parked roots whose trees then fit are resolved.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    _check_mapping(parts, chart, mapping)
    verdicts = check(parts, chart=chart, mapping=mapping, ids=ids)
    batch = f"migration-{uuid.uuid4()}"
    due = [v.instance_id for v in verdicts if v.verdict is Verdict.MIGRATES]
    migrated: list[UUID] = []
    skipped: list[tuple[UUID, str]] = []
    for start in range(0, len(due), batch_size):
        written, passed = _write_batch(parts, due[start : start + batch_size], mapping, batch, reason)
        migrated.extend(written)
        skipped.extend(passed)
        if progress is not None:
            progress(min(start + batch_size, len(due)), len(due))
    if progress is not None and not due:
        progress(0, 0)
    resolved = _resolve_parked(parts, verdicts, batch)
    return MigrationReport(batch, tuple(verdicts), tuple(migrated), tuple(resolved), tuple(skipped))


def _prepared(
    parts: Parts, instance_id: UUID, mapping: Mapping[str, str], batch: str, reason: str
) -> tuple[Instance | None, str]:
    """The instance, loaded fresh, with its ``Migrated`` event pending; or None and why not."""
    instance = parts.reads.instance(instance_id)
    verdict = judge(parts, instance, mapping)
    if verdict.verdict is not Verdict.MIGRATES:
        return None, f"now {verdict.verdict.value}: {'; '.join(verdict.reasons)}"
    chart = parts.charts[instance.record.name]
    snapshot = instance.record.snapshot
    assert snapshot is not None  # judged migrates: it has a snapshot
    data, why_not = _mapped(chart, snapshot, mapping)
    if data is None:
        return None, why_not
    used = tuple(sorted((o, n) for o, n in mapping.items() if o in set(_stored_states(snapshot))))
    instance.migrate(used, chart.fingerprint, data, batch=batch, reason=reason)
    return instance, ""


def _write_batch(
    parts: Parts, ids: Sequence[UUID], mapping: Mapping[str, str], batch: str, reason: str
) -> tuple[list[UUID], list[tuple[UUID, str]]]:
    prepared: list[Instance] = []
    skipped: list[tuple[UUID, str]] = []
    for instance_id in ids:
        instance, why_not = _prepared(parts, instance_id, mapping, batch, reason)
        if instance is None:
            skipped.append((instance_id, why_not))
        else:
            prepared.append(instance)
    if not prepared:
        return [], skipped
    try:
        parts.commits.save_instances(*prepared)
    except IntegrityError:
        return _write_each(parts, [i.id for i in prepared], mapping, batch, reason, skipped)
    return [i.id for i in prepared], skipped


def _write_each(
    parts: Parts,
    ids: Sequence[UUID],
    mapping: Mapping[str, str],
    batch: str,
    reason: str,
    skipped: list[tuple[UUID, str]],
) -> tuple[list[UUID], list[tuple[UUID, str]]]:
    written: list[UUID] = []
    for instance_id in ids:
        instance, why_not = _prepared(parts, instance_id, mapping, batch, reason)
        if instance is None:
            skipped.append((instance_id, why_not))
            continue
        try:
            parts.commits.save_instances(instance)
        except IntegrityError:
            skipped.append((instance_id, "written concurrently by another engine; run the migration again"))
            continue
        written.append(instance_id)
    return written, skipped


def _parked(parts: Parts, root_id: UUID) -> bool:
    try:
        return parts.reads.instance(root_id).record.status is InstanceStatus.PARKED
    except UnknownInstance:
        return False


def _resolve_parked(parts: Parts, verdicts: Sequence[InstanceVerdict], batch: str) -> list[UUID]:
    resolved: list[UUID] = []
    parked = [root_id for root_id in dict.fromkeys(v.root for v in verdicts) if _parked(parts, root_id)]
    if not parked:
        return resolved
    trees: dict[UUID, list[InstanceVerdict]] = {}
    for verdict in check(parts):  # anew: the migrations just written now resume
        trees.setdefault(verdict.root, []).append(verdict)
    for root_id in parked:
        if not all(v.verdict is Verdict.RESUMES for v in trees.get(root_id, ())):
            continue
        try:
            if resolve(parts, root_id, f"migrated by {batch}") is not None:
                resolved.append(root_id)
        except CheckpointError:
            continue  # it stays parked; its verdicts say why on the next check
    return resolved


def migrate(parts: Parts, instance_id: UUID, mapping: Mapping[str, str]) -> Checkpoint | None:
    """Map a parked instance's states onto the registered chart, then try to unpark its root."""
    for _ in range(RETRIES):
        instance = parts.reads.instance(instance_id)
        record = instance.record
        chart = parts.charts.get(record.name)
        if chart is None:
            raise EngineError(f"chart {record.name!r} is not registered; register the new version first")
        whole = record.snapshot
        if whole is None:
            raise EngineError(f"instance {instance_id} has no snapshot to migrate")
        try:
            data, _ = migrated_snapshot(chart, whole, mapping)
        except ValueError as error:
            raise MigrationRejected(instance_id, [str(error)]) from error
        instance.migrate(tuple(sorted(mapping.items())), chart.fingerprint, data)
        try:
            parts.commits.save_instances(instance)
        except IntegrityError:
            continue
        break
    else:
        raise StorageError(f"could not migrate {instance_id}")
    return resolve(parts, parts.reads.instance(instance_id).record.root, f"migrated {instance_id}")


def resolve(parts: Parts, root_id: UUID, resolution: str) -> Checkpoint | None:
    """Unpark a root if every instance of its tree now plans cleanly; returns the root's checkpoint."""
    root = parts.reads.instance(root_id)
    if root.record.status is not InstanceStatus.PARKED:
        return None
    for instance in call_tree(parts, root_id):
        record = instance.record
        if record.status.finished:
            continue
        chart = parts.charts.get(record.name) if record.kind is InstanceKind.CHART else None
        if record.kind is InstanceKind.CHART and chart is None:
            raise EngineError(f"chart {record.name!r} of {instance.id} is not registered")
        if chart is not None and breaking_changes(parts, record.name, record.fingerprint, chart):
            # A compatible decode is enough once migrated; the fingerprint now matches.
            pass
        parts.reads.plan(instance.id, chart)  # raises CheckpointError while something still does not fit
    for _ in range(RETRIES):
        root = parts.reads.instance(root_id)
        root.resolve(resolution)
        try:
            parts.commits.save_instances(root)
        except IntegrityError:
            continue
        break
    parts.holdings.unacquire(root_id)
    try:
        take_over(parts, root_id, reason=f"resolved: {resolution}")
    except TreeHeld as error:
        # Its owner is live: it sees the Resolved event and runs the tree itself.
        log.info("%s", error)
    chart = parts.charts.get(root.record.name)
    return parts.reads.plan(root_id, chart)

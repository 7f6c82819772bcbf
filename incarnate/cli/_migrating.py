"""``incarnate check`` and ``incarnate migrate``: what new charts do to the stored instances, and the fix.

``check`` opens the store with the *new* charts and gives each live chart
instance a verdict (it resumes, migrates with the mapping given, needs a
mapping, parks, or is held). ``migrate`` maps the stored states of one
parked instance (``migrate ID``) or of every instance of a chart at once
(``migrate --chart NAME``, in batches, with ``--dry-run`` to look first).
The verdicts and the batch are computed by :mod:`incarnate._migration`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn
from uuid import UUID

import click

from aggregates import InstanceStatus
from incarnate.cli._operating import unparked
from incarnate.cli._output import StatusLine, emit_json, out, table
from incarnate.cli._store import (
    DB_HELP,
    StoreOptions,
    instance,
    json_option,
    mapping_of,
    opened,
    store_options,
)
from incarnate.errors import CommandError, CommandFailed, MigrationRejected
from projections import CheckpointError
from statechart import JsonValue

if TYPE_CHECKING:
    from incarnate._migration import InstanceVerdict

_MAP_HELP = "map the stored state OLD to the state NEW of the new chart (repeat for each state)"


def _verdict_rows(verdicts: Sequence[InstanceVerdict]) -> list[tuple[str, ...]]:
    return [
        (
            str(v.instance_id),
            str(v.root)[:8],
            v.name,
            v.status,
            v.verdict.value,
            "; ".join(v.reasons) or ("missing " + ", ".join(v.missing) if v.missing else "-"),
        )
        for v in verdicts
    ]


def _print_verdicts(verdicts: Sequence[InstanceVerdict]) -> None:
    if verdicts:
        table(("ID", "ROOT", "CHART", "STATUS", "VERDICT", "WHY"), _verdict_rows(verdicts))
    counts = _counts(verdicts)
    summary = ", ".join(f"{count} {verdict}" for verdict, count in counts.items() if count) or "nothing"
    out(f"{len(verdicts)} live instance(s): {summary}")


def _counts(verdicts: Sequence[InstanceVerdict]) -> dict[str, JsonValue]:
    from incarnate import _migration

    return _migration.summary(verdicts)


def _fine(verdicts: Sequence[InstanceVerdict]) -> bool:
    return all(v.verdict.fine for v in verdicts)


@click.command(short_help="Say what new charts would do to every live instance.")
@click.argument("new_charts", metavar="CHARTS")
@click.option("--chart", metavar="NAME", help="check the instances of this chart only")
@click.option("--map", "pairs", multiple=True, metavar="OLD=NEW", help=_MAP_HELP)
@click.option(
    "--replay",
    is_flag=True,
    help="also re-run each instance's recorded inputs through the new charts (what-if), in memory",
)
@json_option
@click.option("--db", metavar="PATH_OR_URL", help=DB_HELP)
def check(
    new_charts: str, chart: str | None, pairs: tuple[str, ...], replay: bool, as_json: bool, db: str | None
) -> int:
    """Say what the charts about to be deployed do to every live instance of the store.

    CHARTS is the import path of the new charts (as --charts takes it). Each
    unfinished chart instance gets a verdict: resumes, migrates (with the
    --map given), needs-mapping, parks or held. With --replay, each
    instance's recorded inputs (accepted events, child outcomes, timer
    firings, in their recorded order and at their recorded times) are also
    run through the new chart from its recorded input, in memory, and the
    instance is classified: same, diverges (at event K, with both
    configurations), strands (it ends waiting for what can never come) or
    parks (the new chart raises, or cannot take its stored checkpoint).
    Nothing is written. Exit status 0 when every instance resumes or
    migrates (and, with --replay, replays the same), 1 otherwise.
    """
    from incarnate import _migration

    mapping = mapping_of(pairs)
    with opened(StoreOptions(db, new_charts), charts_for="check the instances against them") as engine:
        if chart is not None and chart not in engine.charts:
            raise CommandError(
                f"--chart {chart!r} is not among the charts of {new_charts!r} "
                f"({', '.join(sorted(engine.charts))})"
            )
        if replay:
            from incarnate.cli._whatif import check_replay

            return check_replay(engine, chart=chart, mapping=mapping, as_json=as_json)
        verdicts = _migration.check(engine.parts, chart=chart, mapping=mapping or None)
    ok = _fine(verdicts)
    if as_json:
        emit_json(_verdicts_json(verdicts))
    else:
        _print_verdicts(verdicts)
        if not ok:
            out(
                "Not every instance carries on by itself: map the removed states "
                "(incarnate migrate --chart NAME --map OLD=NEW --dry-run), or deploy compatible charts."
            )
    return 0 if ok else 1


@click.command(short_help="Map stored states onto a new chart: one ID or a chart.")
@click.argument("ident", metavar="[ID]", required=False)
@click.option("--chart", metavar="NAME", help="migrate every live instance of this chart (instead of one ID)")
@click.option("--map", "pairs", multiple=True, required=True, metavar="OLD=NEW", help=_MAP_HELP)
@click.option("--dry-run", is_flag=True, help="print the verdicts and write nothing")
@click.option(
    "--batch-size",
    type=int,
    default=100,
    show_default=True,
    metavar="N",
    help="instances migrated per commit, with --chart",
)
@click.option(
    "--reason",
    default="migrated by an operator",
    show_default=True,
    metavar="TEXT",
    help="why, recorded with each migration (with --chart)",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="with --chart: print the verdicts (--dry-run) or the report as one JSON document",
)
@store_options(charts="map the stored states onto the new charts")
def migrate(
    ident: str | None,
    chart: str | None,
    pairs: tuple[str, ...],
    dry_run: bool,
    batch_size: int,
    reason: str,
    as_json: bool,
    db: str | None,
    charts: str | None,
    tasks: str | None,
) -> int:
    """Map stored states onto the new chart: one parked instance (ID), or a whole chart (--chart).

    With ID (a parked root, or an instance of a parked tree), its snapshot is
    migrated and the root unparked once its tree validates. With --chart,
    every live instance of the chart gets a verdict, and those the mapping
    fits are migrated in batches (--dry-run: the verdicts only).
    """
    if (ident is None) == (chart is None):
        raise CommandError(
            "give exactly one of ID (one parked instance) or --chart NAME (every instance of a chart), "
            "e.g. incarnate migrate --chart order --map gathering=collecting --dry-run"
        )
    if batch_size < 1:
        raise CommandError(f"--batch-size must be at least 1, got {batch_size}")
    if as_json and chart is None:
        raise CommandError("--json applies to a whole chart's migration: give --chart NAME, not an ID")
    mapping = mapping_of(pairs)
    options = StoreOptions(db, charts, tasks)
    if chart is not None:
        return _migrate_chart(
            options, chart, mapping, dry_run=dry_run, batch_size=batch_size, reason=reason, as_json=as_json
        )
    assert ident is not None
    return _migrate_one(options, ident, mapping, dry_run=dry_run)


def _migrate_one(options: StoreOptions, ident: str, mapping: dict[str, str], *, dry_run: bool) -> int:
    with opened(options, charts_for="map the stored states onto the new charts") as engine:
        found = instance(engine, ident)
        root = engine.instance(found.record.root)
        if root.record.status is not InstanceStatus.PARKED:
            raise CommandError(
                f"the call tree of {found.id} is not parked (its root {root.id} is "
                f"{root.record.status.value}); migrate applies to parked trees (see `incarnate parked`)"
            )
        if dry_run:
            from incarnate import _migration

            verdicts = _migration.check(engine.parts, mapping=mapping, ids={found.id})
            _print_verdicts(verdicts)
            out("dry run: nothing was written; run it again without --dry-run to migrate")
            return 0 if _fine(verdicts) else 1
        try:
            checkpoint = engine.migrate(found.id, mapping)
        except MigrationRejected as err:
            _rejected(found.id, err)
        except CheckpointError as err:
            raise CommandFailed(
                f"migrated {found.id}, but its call tree still does not validate, so its root "
                f"{root.id} stays parked: {err}"
            ) from err
    mapped = ", ".join(f"{old} -> {new}" for old, new in sorted(mapping.items()))
    out(f"migrated {found.id} ({mapped})")
    out(unparked(root.id, checkpoint))
    return 0


def _verdicts_json(verdicts: Sequence[InstanceVerdict]) -> dict[str, JsonValue]:
    return {"verdicts": [v.to_json() for v in verdicts], "summary": _counts(verdicts), "ok": _fine(verdicts)}


def _migrate_chart(
    options: StoreOptions,
    chart: str,
    mapping: dict[str, str],
    *,
    dry_run: bool,
    batch_size: int,
    reason: str,
    as_json: bool,
) -> int:
    from incarnate import _migration

    with opened(options, charts_for="map the stored states onto the new charts") as engine:
        if chart not in engine.charts:
            raise CommandError(
                f"--chart {chart!r} is not among the charts of {options.charts!r} "
                f"({', '.join(sorted(engine.charts))})"
            )
        verdicts = _migration.check(engine.parts, chart=chart, mapping=mapping)
        if dry_run:
            if as_json:
                emit_json(_verdicts_json(verdicts))
            else:
                _print_verdicts(verdicts)
                out("dry run: nothing was written; run it again without --dry-run to migrate")
            return 0 if _fine(verdicts) else 1
        if not as_json:
            _print_verdicts(verdicts)
        due = sum(1 for v in verdicts if v.verdict is _migration.Verdict.MIGRATES)
        bar = StatusLine(f"migrating chart {chart!r}", total=due)

        def progress(done: int, total: int) -> None:
            bar.show(f"migrated {done} of {total}", key=done, completed=done, total=total)

        try:
            report = _migration.apply(
                engine.parts,
                chart=chart,
                mapping=mapping,
                batch_size=batch_size,
                reason=reason,
                progress=progress,
            )
        finally:
            bar.close()
    left = [v for v in report.verdicts if not v.verdict.fine]
    status = 0 if not left and not report.skipped else 1
    if as_json:
        emit_json(report.to_json())
        return status
    out(
        f"batch {report.batch}: {len(report.migrated)} migrated, {len(report.resolved)} parked root(s) "
        f"resolved, {len(report.skipped)} skipped"
    )
    for skipped, why in report.skipped[:10]:
        out(f"  skipped {skipped}: {why}")
    if left:
        out(
            f"{len(left)} instance(s) still do not fit the new chart: see `incarnate check` for why, and "
            "map what they need"
        )
    return status


def _rejected(instance_id: UUID, error: MigrationRejected) -> NoReturn:
    lines = [f"the migration of {instance_id} was rejected; nothing was written:"]
    lines.extend(f"  - {problem}" for problem in error.problems)
    lines.append("Map every removed state to a state of the new chart, or terminate the call tree.")
    raise CommandFailed("\n".join(lines)) from error

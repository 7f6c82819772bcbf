"""The commands that run history again: ``fork`` (a new root from a past checkpoint) and ``redrive``.

Both write only what :meth:`Engine.fork` and :meth:`Engine.redrive` record;
a worker (or ``incarnate recover``) runs the new or redriven root. Time
travel itself is ``show --at`` and ``timeline --at`` (:mod:`._inspecting`).
"""

from __future__ import annotations

import click

from incarnate.cli._output import emit_json, out
from incarnate.cli._store import StoreOptions, id_argument, instance_id, json_option, opened, store_options
from statechart import JsonValue


@click.command(short_help="Start a new root from an instance's checkpoint at version K.")
@id_argument
@click.option(
    "--at",
    "at",
    type=int,
    required=True,
    metavar="K",
    help="the version whose checkpoint the new root starts from (see `incarnate timeline ID --at K`)",
)
@json_option
@store_options(charts="decode the checkpoint under the instance's chart")
def fork(ident: str, at: int, as_json: bool, db: str | None, charts: str | None, tasks: str | None) -> int:
    """Start a new root instance from an instance's checkpoint at version K.

    The new root gets a new id, the source's chart and input, and the
    configuration, context, timers and waiting messages of version K; its
    first fact records the source and K. The source is not written. A
    worker (or `incarnate recover`) runs it.
    """
    with opened(
        StoreOptions(db, charts, tasks), charts_for="decode the checkpoint under the instance's chart"
    ) as engine:
        source = instance_id(engine, ident)
        handle = engine.fork(source, at)
        new = engine.instance(handle.id)
    configuration = [str(s) for s in (new.record.snapshot_parts or {}).get("configuration", ())]
    if as_json:
        emit_json(
            {
                "id": str(handle.id),
                "source": str(source),
                "version": at,
                "chart": new.record.name,
                "configuration": list[JsonValue](configuration),
            }
        )
        return 0
    out(f"forked {source} at version {at} as a new root {handle.id} (chart {new.record.name!r})")
    out(f"it starts in {', '.join(configuration) or '-'}; a worker runs it (or: incarnate recover)")
    return 0


@click.command(short_help="Drive a failed or parked root again from its last good checkpoint.")
@id_argument
@click.option(
    "--reason",
    default="redriven by an operator",
    show_default=True,
    metavar="TEXT",
    help="why, recorded with the redrive",
)
@click.option("--dry-run", is_flag=True, help="say from which version it would run again; write nothing")
@json_option
@store_options()
def redrive(
    ident: str,
    reason: str,
    dry_run: bool,
    as_json: bool,
    db: str | None,
    charts: str | None,
    tasks: str | None,
) -> int:
    """Drive a failed or parked root again, keeping its identity.

    It runs again from its last good checkpoint: the version before the
    incident that failed or parked it (the message whose macrostep failed is
    processed again, under the charts deployed now). The redrive is recorded
    on the root before a worker runs it.
    """
    with opened(StoreOptions(db, charts, tasks)) as engine:
        done = engine.redrive(instance_id(engine, ident), reason, dry_run=dry_run)
    if as_json:
        emit_json(
            {
                "id": str(done.instance_id),
                "was": done.was,
                "version": done.version,
                "reason": done.reason,
                "written": done.written,
            }
        )
        return 0
    verb = "would redrive" if dry_run else "redrove"
    out(f"{verb} {done.instance_id} ({done.was}) from version {done.version}, its last good checkpoint")
    if not dry_run:
        out("a worker runs it again (or: incarnate recover)")
    return 0

"""The commands that change one instance or call tree: ``send``, ``cancel``, ``resolve``, ``terminate``."""

from __future__ import annotations

from uuid import UUID

import click

from aggregates import Instance, InstanceStatus
from aggregates.errors import CorruptRecord
from incarnate._command import CommandError, CommandFailed, parse_json_option
from incarnate.cli._output import out
from incarnate.cli._store import (
    StoreOptions,
    id_argument,
    instance,
    instance_id,
    opened,
    require_root,
    store_options,
)
from projections import Checkpoint, CheckpointError
from statechart import JsonValue


@click.command()
@id_argument
@click.argument("event", metavar="EVENT")
@click.option("--data", metavar="JSON", help="the event's data, as JSON (default: null)")
@click.option(
    "--key", metavar="KEY", help="an idempotency key: a repeated send with the same key is accepted once"
)
@store_options()
def send(
    ident: str,
    event: str,
    data: str | None,
    key: str | None,
    db: str | None,
    charts: str | None,
    tasks: str | None,
) -> int:
    """Durably accept an event for an instance.

    EVENT is the event's name, e.g. approve. It is processed exactly once, by
    the engine that runs the instance next.
    """
    value: JsonValue = None if data is None else parse_json_option("--data", data)
    with opened(StoreOptions(db, charts, tasks)) as engine:
        target = instance_id(engine, ident)
        seq = engine.send(target, event, value, key=key)
    if seq is None:
        out(f"{event!r} with key {key!r} was accepted for {target} before; not accepted again")
    else:
        out(f"accepted {event!r} for {target} as inbox message {seq}")
    return 0


@click.command()
@id_argument
@click.option(
    "--reason",
    default="cancelled by an operator",
    show_default=True,
    metavar="TEXT",
    help="why, recorded with the request",
)
@store_options()
def cancel(ident: str, reason: str, db: str | None, charts: str | None, tasks: str | None) -> int:
    """Ask an instance (and its children) to stop."""
    with opened(StoreOptions(db, charts, tasks)) as engine:
        found = instance(engine, ident)
        record = found.record
        if record.status.finished:
            raise CommandError(f"{found.id} is {record.status.value}; there is nothing to cancel")
        if not engine.cancel(found.id, reason):
            asked = engine.instance(found.id).record.cancel
            earlier = f" ({asked.reason!r})" if asked is not None else ""
            out(f"a cancel of {found.id} was requested already{earlier}; nothing more to do")
            return 0
    out(f"cancel of {found.id} requested ({reason!r}); it stops, with its children, when it next runs")
    return 0


def unparked(root_id: UUID, checkpoint: Checkpoint | None) -> str:
    """What became of a root once an operator unparked it."""
    if checkpoint is None:
        return f"root {root_id} was not parked any more"
    where = f" in {', '.join(checkpoint.snapshot.configuration)}" if checkpoint.snapshot is not None else ""
    return (
        f"root {root_id} is {checkpoint.status.value}{where}; `incarnate recover` (or any engine's "
        "recovery) carries on with its work"
    )


@click.command()
@id_argument
@click.option(
    "--reason",
    default="resolved by an operator",
    show_default=True,
    metavar="TEXT",
    help="the resolution, recorded on the root",
)
@store_options(charts="check the tree's checkpoints against the charts")
def resolve(ident: str, reason: str, db: str | None, charts: str | None, tasks: str | None) -> int:
    """Unpark a root whose call tree validates again."""
    with opened(
        StoreOptions(db, charts, tasks), charts_for="check the tree's checkpoints against the charts"
    ) as engine:
        root = instance(engine, ident)
        require_root(root, "resolve")
        if root.record.status is not InstanceStatus.PARKED:
            raise CommandError(
                f"{root.id} is {root.record.status.value}, not parked; there is nothing to resolve"
            )
        try:
            checkpoint = engine.resolve(root.id, reason)
        except CheckpointError as err:
            raise CommandFailed(
                f"{root.id} stays parked: its call tree still does not validate: {err}"
            ) from err
    out(f"resolved {root.id} ({reason!r})")
    out(unparked(root.id, checkpoint))
    return 0


@click.command()
@id_argument
@click.option(
    "--reason",
    default="terminated by an operator",
    show_default=True,
    metavar="TEXT",
    help="why, recorded on every instance it ends",
)
@store_options()
def terminate(ident: str, reason: str, db: str | None, charts: str | None, tasks: str | None) -> int:
    """End a call tree without running it."""
    with opened(StoreOptions(db, charts, tasks)) as engine:
        root_id = instance_id(engine, ident)
        try:
            root: Instance | None = engine.instance(root_id)
        except CorruptRecord:
            root = None  # a record does not decode: the engine ends it without loading it
        if root is not None:
            require_root(root, "terminate")
            if root.record.status.finished:
                raise CommandError(f"{root.id} is {root.record.status.value}; there is nothing to terminate")
        ended = engine.terminate(root_id, reason)
    out(f"terminated the call tree of {root_id}: {ended} instance(s) cancelled ({reason!r})")
    return 0

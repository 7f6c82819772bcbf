"""The commands that start or change one instance or tree: start, send, cancel, resolve, terminate."""

from __future__ import annotations

from uuid import UUID

import attrs
import click

from aggregates import Instance, InstanceStatus
from aggregates.errors import CorruptRecord
from incarnate._engine import Engine
from incarnate._handles import receipt_for_key
from incarnate._inspect import check_event
from incarnate._reads import is_embedded_copy
from incarnate.cli._common import parse_json_option
from incarnate.cli._output import emit_json, note, out
from incarnate.cli._store import (
    StoreOptions,
    id_argument,
    instance,
    instance_id,
    json_option,
    opened,
    require_root,
    store_options,
)
from incarnate.errors import CommandError, CommandFailed, EngineError, EventNotTaken, UnknownInstance
from projections import Checkpoint, CheckpointError
from statechart import JsonValue


@click.command()
@click.argument("chart", metavar="CHART")
@click.option("--data", metavar="JSON", help="the root's input, as JSON (default: null)")
@click.option("--id", "given_id", metavar="UUID", help="the new instance's id (default: a random one)")
@click.option(
    "--key",
    metavar="KEY",
    help="an idempotency key: a repeated start with the same key and input starts nothing and prints "
    "the same id",
)
@json_option
@store_options(charts="find the chart to start")
def start(
    chart: str,
    data: str | None,
    given_id: str | None,
    key: str | None,
    as_json: bool,
    db: str | None,
    charts: str | None,
    tasks: str | None,
) -> int:
    """Start a root instance of CHART and print its id.

    The root and its first macrostep are committed together; a worker on
    the same store runs it from there (this command runs no work, so it
    needs no task code). CHART is a chart name from --charts.
    """
    value: JsonValue = None if data is None else parse_json_option("--data", data)
    if given_id is not None and key is not None:
        raise CommandError("give --id or --key, not both: the key derives the id")
    ident: UUID | None = None
    if given_id is not None:
        try:
            ident = UUID(given_id)
        except ValueError:
            raise CommandError(f"--id {given_id!r} is not a UUID (e.g. {UUID(int=1)})") from None
    with opened(StoreOptions(db, charts, tasks), charts_for="find the chart to start") as engine:
        if chart not in engine.charts:
            raise CommandError(
                f"chart {chart!r} is not among the charts of --charts {charts!r} "
                f"(they are: {', '.join(sorted(engine.charts))})"
            )
        expected = ident if key is None else engine.id_for_key(chart, key)
        before = expected is not None and _stored(engine, expected)
        handle = engine.start(chart, value, id=ident, key=key)
        status = engine.instance(handle.id).record.status.value
    started = not before
    if as_json:
        emit_json({"id": str(handle.id), "chart": chart, "started": started, "status": status, "key": key})
        return 0
    if not started:
        note(f"{chart!r} was started under key {key!r} before, as {handle.id}; not started again")
    out(str(handle.id))
    return 0


def _accepted_under(engine: Engine, target: UUID, key: str) -> bool:
    try:
        receipt_for_key(engine, target, key)
    except EngineError:
        return False
    return True


def _stored(engine: Engine, ident: UUID) -> bool:
    try:
        engine.instance(ident)
    except UnknownInstance:
        return False
    return True


@click.command()
@id_argument
@click.argument("event", metavar="EVENT")
@click.option("--data", metavar="JSON", help="the event's data, as JSON (default: null)")
@click.option(
    "--key", metavar="KEY", help="an idempotency key: a repeated send with the same key is accepted once"
)
@click.option(
    "--allow-ignored",
    is_flag=True,
    help="accept the event even when no transition of the instance's current states takes it",
)
@store_options()
def send(
    ident: str,
    event: str,
    data: str | None,
    key: str | None,
    allow_ignored: bool,
    db: str | None,
    charts: str | None,
    tasks: str | None,
) -> int:
    """Durably accept an event for an instance.

    EVENT is the event's name, e.g. approve. It is processed exactly once, by
    the engine that runs the instance next. An event that no transition of
    the instance's current states takes (a misspelt name, the wrong state,
    a finished instance) is not sent: the command says why and exits 3,
    unless --allow-ignored is given (then the instance consumes it and
    changes nothing). A guard may still refuse an event that a transition
    matches: the worker then logs it on incarnate.engine.ignored.
    """
    value: JsonValue = None if data is None else parse_json_option("--data", data)
    with opened(StoreOptions(db, charts, tasks)) as engine:
        target = instance_id(engine, ident)
        found = engine.instance(target)
        verdict = check_event(engine, found, event)
        if found.record.status.finished or (key is not None and _accepted_under(engine, target, key)):
            verdict = attrs.evolve(verdict, taken=None)  # send says why, or that it was accepted before
        if verdict.taken is False and not allow_ignored:
            raise EventNotTaken(
                f"not sent: {target} would ignore {event!r}: {verdict.describe()}; "
                "pass --allow-ignored to send it anyway"
            )
        seq = engine.send(target, event, value, key=key)
    if verdict.taken is False:
        out(f"warning: {target} will ignore {event!r}: {verdict.describe()}")
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
    if is_embedded_copy(found) and record.parent is not None:
        ref = record.parent
        out(
            f"cancel of {found.id} requested ({reason!r}); its parent {ref.parent} hears it as the "
            f"task's failure (error.invoke.{ref.site}) when it next runs"
        )
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

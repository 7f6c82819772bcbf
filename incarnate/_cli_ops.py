"""Operator commands of ``incarnate``: inspect a store, accept events, repair parked trees, recover.

Every command here opens the store named by ``--db`` (a SQLite file or a URL) or by
the environment, does one thing through a short-lived :class:`Engine`, and
closes it. ``--charts`` names the charts the instances were started with;
the commands that decode snapshots or run work require it. ``--tasks``
names the task functions, which only ``recover`` runs.

The store is the truth: the listing is caught up before it is read, and
every decision is taken on the instance aggregates, as the engine does.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn
from uuid import UUID

from eventsourcing.domain import EventSourcingError
from eventsourcing.persistence import PersistenceError

from aggregates import Activation, Instance, InstanceKind, InstanceStatus
from aggregates.errors import CorruptRecord, DecodeError, InvalidCommand
from incarnate._command import (
    Command,
    CommandError,
    CommandFailed,
    chart_problems,
    hide,
    load_object,
    parse_json_option,
)
from incarnate._engine import Engine
from incarnate._recovery import MigrationRejected
from incarnate._runners import Runner, ThreadedRunner
from incarnate._storage import Storage
from incarnate._tasks import TaskCall, TaskFunction
from incarnate.errors import EngineError, InstanceTerminated, StorageError, UnknownInstance
from projections import (
    Checkpoint,
    CheckpointError,
    ListingRow,
    TreeNode,
    call_tree,
    render_timeline,
    render_tree,
    timeline,
)
from statechart import Chart, JsonValue, Registry
from statechart.errors import ChartInvalid, CodecError

_ID_PREFIX = re.compile(r"[0-9a-fA-F][0-9a-fA-F-]{3,35}")
_ID_EXAMPLE = "0d3e0000-0000-4000-8000-00000000d3e0"
_CHARTS_HELP = (
    "import path of the charts the instances were started with: a list or tuple of Charts, a "
    "Registry, one Chart, or a function that takes no arguments and returns one of those"
)

# ------------------------------------------------------------ loading


def load_charts(path: str) -> list[Chart[Any]]:
    """The charts named by ``path``: a list or tuple of Charts, a Registry, a Chart, or a maker of one."""

    def accept(value: object) -> list[Chart[Any]] | None:
        if isinstance(value, Chart):
            return [value]
        if isinstance(value, Registry):
            return list(value)
        if not isinstance(value, list | tuple):
            return None
        wrong = [
            f"item {n} is of type {type(v).__name__}" for n, v in enumerate(value) if not isinstance(v, Chart)
        ]
        if wrong:
            raise CommandError(f"{path!r} lists things that are not Charts: {'; '.join(wrong)}")
        if not value:
            raise CommandError(f"{path!r} lists no charts; name the charts the instances were started with")
        return list(value)

    return load_object(
        path,
        metavar="CHARTS",
        example="shop.charts:CHARTS",
        expected="a list of Charts, a Registry or a Chart",
        accept=accept,
    )


def load_tasks(path: str) -> dict[str, TaskFunction]:
    """The task functions named by ``path``: a dict of task name to callable, or a maker of one."""

    def accept(value: object) -> dict[str, TaskFunction] | None:
        if not isinstance(value, Mapping):
            return None
        wrong = [
            f"{name!r} maps to a {type(fn).__name__}" if isinstance(name, str) else f"key {name!r} is no name"
            for name, fn in value.items()
            if not isinstance(name, str) or not callable(fn)
        ]
        if wrong:
            raise CommandError(
                f"{path!r} is not a table of task functions: {'; '.join(wrong)}; map each task name "
                "to a function that takes a TaskCall"
            )
        return dict(value)

    return load_object(
        path,
        metavar="TASKS",
        example="shop.tasks:TASKS",
        expected="a dict of task functions",
        accept=accept,
        listed="task tables",
    )


def _task_names(charts: Sequence[Chart[Any]]) -> set[str]:
    return {site.task for chart in charts for site, _ in chart.child_charts() if site.task is not None}


def _not_run_here(name: str) -> TaskFunction:
    def refuse(call: TaskCall) -> JsonValue:
        raise RuntimeError(f"task {name!r} is not run by this command; run `incarnate recover --tasks ...`")

    return refuse


# ---------------------------------------------------------- the store


DB_HELP = (
    "the store: a SQLite file (PATH or sqlite:///PATH) or a PostgreSQL URL "
    "postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME[?schema=SCHEMA] (default: the store the environment "
    "names with PERSISTENCE_MODULE, SQLITE_DBNAME or POSTGRES_*; ./incarnate.db when none is set)"
)


def command_storage(db: str | None, *, existing: bool = True) -> Storage:
    """The store a command's ``--db`` names (a SQLite path or a URL), else the environment's.

    Its password is hidden from every message the command prints. With
    ``existing``, a SQLite file that does not exist is refused: such a
    command never creates an empty store.
    """
    try:
        storage = Storage.from_env() if db is None else Storage.from_url(db)
    except EngineError as err:
        raise CommandError(str(err)) from err
    hide(storage.postgres_password)
    where = "the environment (SQLITE_DBNAME, by default ./incarnate.db)" if db is None else "--db"
    path = storage.sqlite_path
    if existing and storage.kind == "sqlite" and not path.startswith("file:") and not Path(path).is_file():
        raise CommandError(
            f"no store at {path!r} (named by {where}); pass --db PATH naming the SQLite file an engine wrote"
        )
    return storage


def _storage(db: str | None) -> Storage:
    return command_storage(db)


@contextlib.contextmanager
def _opened(
    args: argparse.Namespace,
    *,
    charts_for: str = "",
    runner: Runner | None = None,
    run_tasks: bool = False,
) -> Iterator[Engine]:
    """An engine over the command's store, closed on the way out; engine errors become exit statuses.

    ``charts_for`` says why the command needs ``--charts`` (none: optional).
    Unless ``run_tasks``, task names the charts invoke but ``--tasks`` does
    not supply are registered with a function that refuses to run: such a
    command never runs work, and needs no task code to inspect or repair.
    """
    storage = _storage(args.db)
    charts = load_charts(args.charts) if args.charts else []
    if charts_for and not charts:
        raise CommandError(
            f"--charts is required to {charts_for}; pass --charts MODULE:ATTR naming the charts "
            "the instances were started with, e.g. --charts shop.charts:CHARTS"
        )
    tasks = load_tasks(args.tasks) if args.tasks else {}
    if not run_tasks:
        for name in _task_names(charts) - set(tasks):
            tasks[name] = _not_run_here(name)
    try:
        engine = Engine(charts, tasks, storage=storage, runner=runner)
    except ChartInvalid as err:
        fix = "; pass --tasks MODULE:ATTR with a function for every task they invoke" if run_tasks else ""
        raise CommandError(
            f"the charts of {args.charts!r} cannot run together{fix}: {chart_problems(err)}"
        ) from err
    except (sqlite3.Error, PersistenceError) as err:
        raise CommandError(f"cannot open the store ({storage.describe()}): {err}") from err
    except EngineError as err:
        raise CommandError(str(err)) from err
    try:
        with _translated(storage.describe()):
            yield engine
    finally:
        engine.close()


@contextlib.contextmanager
def _translated(where: str) -> Iterator[None]:
    """Engine errors as command errors: bad input exits 2, a failed operation exits 1.

    An error of the ``eventsourcing`` library (a record of the store at
    ``where`` that does not decode, a failed read or write) is wrapped here,
    at the edge, as a failed operation naming the store.
    """
    try:
        yield
    except CommandError:
        raise
    except (UnknownInstance, InstanceTerminated, InvalidCommand) as err:
        raise CommandError(str(err)) from err
    except (CheckpointError, CodecError, DecodeError, StorageError) as err:
        raise CommandFailed(str(err)) from err
    except (EventSourcingError, sqlite3.Error) as err:
        raise CommandFailed(
            f"the store ({where}) failed: {err}; check that it is an incarnate store, and restore it "
            "from a backup if a record is damaged"
        ) from err
    except EngineError as err:
        raise CommandError(str(err)) from err


def _instance_id(engine: Engine, text: str) -> UUID:
    """The id ``text`` names: a UUID, or a unique prefix of the ids in the store."""
    with contextlib.suppress(ValueError):
        return UUID(text)
    if not _ID_PREFIX.fullmatch(text):
        raise CommandError(
            f"{text!r} is not an instance id; give its UUID (e.g. {_ID_EXAMPLE}) or a unique prefix "
            "of at least 4 hex digits, as `incarnate list` prints them"
        )
    engine.listing.catch_up()
    prefix = text.lower()
    matches = [row.id for row in engine.listing.rows() if str(row.id).startswith(prefix)]
    if not matches:
        raise CommandError(
            f"no instance id starts with {text!r} in {engine.storage.describe()}; see `incarnate list --all`"
        )
    if len(matches) > 1:
        shown = ", ".join(str(m) for m in matches[:5])
        raise CommandError(
            f"{text!r} is the start of {len(matches)} instance ids ({shown}); give more digits"
        )
    return matches[0]


def _instance(engine: Engine, text: str) -> Instance:
    return engine.instance(_instance_id(engine, text))


def _require_root(instance: Instance, verb: str) -> None:
    ref = instance.record.parent
    if ref is not None:
        raise CommandError(
            f"{instance.id} is a child ({_slot(ref.site, ref.key)} of {ref.parent}); {verb} applies to "
            f"a whole call tree: give its root {instance.record.root}"
        )


def _store_options(parser: argparse.ArgumentParser, *, charts: str = "") -> None:
    options = parser.add_argument_group("store options")
    options.add_argument("--db", metavar="PATH_OR_URL", help=DB_HELP)
    needed = f"required, to {charts}" if charts else "optional"
    options.add_argument("--charts", metavar="MODULE:ATTR", help=f"{_CHARTS_HELP} ({needed})")
    options.add_argument(
        "--tasks",
        metavar="MODULE:ATTR",
        help="import path of the task functions: a dict of task name to callable, or a function that "
        "takes no arguments and returns one (optional; only `recover` runs them)",
    )


def _id_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "id", metavar="ID", help="instance id: a UUID, or a unique prefix of at least 4 hex digits"
    )


# ------------------------------------------------------------ formatting


def _out(text: str = "") -> None:
    print(text, file=sys.stdout)


def _slot(site: str, key: str) -> str:
    return f"{site}[{key}]" if key else site


def _when(deadline: float) -> str:
    return datetime.fromtimestamp(deadline, UTC).isoformat(timespec="milliseconds")


def _short(instance_id: UUID | None) -> str:
    return "-" if instance_id is None else str(instance_id)[:8]


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[n]) for row in [headers, *rows]) for n in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *rows]
    )


def _label(instance: Instance) -> str:
    ref = instance.record.parent
    return instance.record.name if ref is None else f"{_slot(ref.site, ref.key)}#{ref.generation}"


# ------------------------------------------------------------------- list


def _list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--all", action="store_true", help="list finished instances too")
    parser.add_argument("--roots", action="store_true", help="list roots only")
    _store_options(parser)


def _list(args: argparse.Namespace) -> int:
    with _opened(args) as engine:
        engine.listing.catch_up()
        rows = engine.listing.rows(in_flight=not args.all, roots=args.roots)
        where = engine.storage.describe()
    if not rows:
        what = "instances" if args.all else "instances in flight"
        _out(f"no {'root ' if args.roots else ''}{what} in {where}")
        return 0
    _out(_table(("ID", "ROOT", "PARENT", "KIND", "NAME", "STATUS", "OWNER"), [_row(r) for r in rows]))
    return 0


def _row(row: ListingRow) -> tuple[str, ...]:
    return (str(row.id), _short(row.root), _short(row.parent), row.kind, row.name, row.status, row.owner)


# ------------------------------------------------------------------- tree


def _configuration(engine: Engine) -> Callable[[Instance], tuple[str, ...]]:
    def configuration(instance: Instance) -> tuple[str, ...]:
        record = instance.record
        chart = engine.charts.get(record.name)
        if chart is None or record.kind is not InstanceKind.CHART or record.snapshot is None:
            return ()
        try:
            return chart.atomic(engine.decode(chart, instance).configuration)
        except CodecError:
            return (f"a snapshot chart {record.name!r} does not decode",)

    return configuration


def _call_tree(engine: Engine, top: UUID) -> TreeNode:
    """The call tree under ``top``, finished children included, each parent's children by generation."""
    tree_root = engine.instance(top).record.root
    engine.listing.catch_up()
    born: dict[UUID, list[UUID]] = {}
    for row in engine.listing.rows():
        if row.root == tree_root and row.parent is not None:
            born.setdefault(row.parent, []).append(row.id)
    loaded: dict[UUID, Instance | None] = {}

    def load(instance_id: UUID) -> Instance | None:
        if instance_id not in loaded:
            try:
                loaded[instance_id] = engine.instance(instance_id)
            except UnknownInstance:
                loaded[instance_id] = None
        return loaded[instance_id]

    def generation(instance_id: UUID) -> int:
        instance = load(instance_id)
        ref = instance.record.parent if instance is not None else None
        return ref.generation if ref is not None else 0

    def children(instance: Instance) -> list[UUID]:
        return sorted(born.get(instance.id, []), key=generation)

    return call_tree(load, top, configuration=_configuration(engine), children=children)


def _tree_arguments(parser: argparse.ArgumentParser) -> None:
    _id_argument(parser)
    _store_options(parser)


def _tree(args: argparse.Namespace) -> int:
    with _opened(args) as engine:
        node = _call_tree(engine, _instance_id(engine, args.id))
    _out(render_tree(node))
    return 0


# --------------------------------------------------------------- timeline


def _timeline_arguments(parser: argparse.ArgumentParser) -> None:
    _id_argument(parser)
    parser.add_argument(
        "--tree", action="store_true", help="the events of every instance of its call tree, by time"
    )
    _store_options(parser)


def _timeline(args: argparse.Namespace) -> int:
    with _opened(args) as engine:
        instance = _instance(engine, args.id)
        if args.tree:
            instances = [engine.instance(node.id) for node in _call_tree(engine, instance.id).walk()]
        else:
            instances = [instance]
        events = [event for i in instances for event in engine.events_of(i.id)]
    events.sort(key=lambda event: event.timestamp)  # stable: one instance's events keep their order
    names = {i.id: _label(i) for i in instances}
    scope = f"the call tree of {instance.id} ({len(instances)} instances)" if args.tree else str(instance.id)
    start = f", from {events[0].timestamp.isoformat(timespec='milliseconds')}" if events else ""
    _out(f"timeline of {scope}: {len(events)} events{start}")
    _out(render_timeline(timeline(events), names=names))
    return 0


# ------------------------------------------------------------------- plan


def _plan_arguments(parser: argparse.ArgumentParser) -> None:
    _id_argument(parser)
    _store_options(parser, charts="decode the checkpoint's snapshot")


def _plan(args: argparse.Namespace) -> int:
    with _opened(args, charts_for="decode the checkpoint's snapshot") as engine:
        instance = _instance(engine, args.id)
        record = instance.record
        if record.kind is InstanceKind.CHART and record.name not in engine.charts:
            raise CommandError(
                f"chart {record.name!r} of {instance.id} is not among the charts of {args.charts!r} "
                f"({', '.join(sorted(engine.charts))}); name the charts it was started with"
            )
        try:
            checkpoint = engine.plan(instance.id)
        except CheckpointError as err:
            raise CommandFailed(f"the ResumePlan of {instance.id} does not validate: {err}") from err
    _out(_render_plan(instance, checkpoint))
    return 0


def _render_plan(instance: Instance, checkpoint: Checkpoint) -> str:
    record = instance.record
    snapshot = checkpoint.snapshot
    lines = [
        f"ResumePlan of {checkpoint.instance_id} ({record.kind.value} {record.name!r})",
        f"status:        {checkpoint.status.value}",
        f"version:       {checkpoint.version}",
    ]
    if snapshot is None:
        lines.append("configuration: -")
    else:
        lines.append(f"configuration: {', '.join(snapshot.configuration)}")
        timers = [f"{t.event.name!r} at {_when(t.deadline)}" for t in snapshot.timers]
        lines.append(f"timers:        {'; '.join(timers) if timers else 'none'}")
    lines.append(f"activations:   {len(checkpoint.activations)}")
    for activation in checkpoint.activations:
        lines.extend(_render_activation(activation))
    return "\n".join(lines)


def _render_activation(activation: Activation) -> list[str]:
    lines = [
        f"  {_slot(activation.site, activation.key)}",
        f"    generation:    {activation.generation}",
        f"    Ref:           {activation.ref}",
        f"    child:         {activation.kind.value} {activation.name!r} {activation.child_id}",
        f"    state:         {activation.state.value}",
        f"    attempt:       {activation.attempt}",
        f"    armed step:    {activation.armed_step}",
        f"    provenance:    {activation.provenance.value}",
        f"    retry journal: {'none' if not activation.journal else len(activation.journal)}",
    ]
    for entry in activation.journal:
        error = json.dumps(entry.error, sort_keys=True)
        lines.append(
            f"      attempt {entry.attempt} (generation {entry.ref.generation}) failed: {error}; "
            f"retry due {_when(entry.deadline)}"
        )
    return lines


# ------------------------------------------------------------------- send


def _send_arguments(parser: argparse.ArgumentParser) -> None:
    _id_argument(parser)
    parser.add_argument("event", metavar="EVENT", help="the event's name, e.g. approve")
    parser.add_argument("--data", metavar="JSON", help="the event's data, as JSON (default: null)")
    parser.add_argument(
        "--key", metavar="KEY", help="an idempotency key: a repeated send with the same key is accepted once"
    )
    _store_options(parser)


def _send(args: argparse.Namespace) -> int:
    data: JsonValue = None if args.data is None else parse_json_option("--data", args.data)
    with _opened(args) as engine:
        instance_id = _instance_id(engine, args.id)
        seq = engine.send(instance_id, args.event, data, key=args.key)
    if seq is None:
        _out(
            f"{args.event!r} with key {args.key!r} was accepted for {instance_id} before; not accepted again"
        )
    else:
        _out(f"accepted {args.event!r} for {instance_id} as inbox message {seq}")
    return 0


# ----------------------------------------------------------------- cancel


def _cancel_arguments(parser: argparse.ArgumentParser) -> None:
    _id_argument(parser)
    parser.add_argument(
        "--reason",
        default="cancelled by an operator",
        metavar="TEXT",
        help="why, recorded with the request (default: %(default)s)",
    )
    _store_options(parser)


def _cancel(args: argparse.Namespace) -> int:
    with _opened(args) as engine:
        instance = _instance(engine, args.id)
        record = instance.record
        if record.status.finished:
            raise CommandError(f"{instance.id} is {record.status.value}; there is nothing to cancel")
        if not engine.cancel(instance.id, args.reason):
            asked = engine.instance(instance.id).record.cancel
            reason = f" ({asked.reason!r})" if asked is not None else ""
            _out(f"a cancel of {instance.id} was requested already{reason}; nothing more to do")
            return 0
    _out(
        f"cancel of {instance.id} requested ({args.reason!r}); it stops, with its children, when it next runs"
    )
    return 0


# ----------------------------------------------------------------- parked


def _parked_arguments(parser: argparse.ArgumentParser) -> None:
    _store_options(parser)


def _parked(args: argparse.Namespace) -> int:
    with _opened(args) as engine:
        roots = engine.parked()
        where = engine.storage.describe()
    if not roots:
        _out(f"no parked roots in {where}")
        return 0
    for held in roots:
        _out(f"{held.root}  chart {held.name!r}  {len(held.incidents)} incident(s)")
        for incident in held.incidents:
            parked = ", parked" if incident.parked else ""
            _out(f"  {incident.kind} (version {incident.at_version}{parked}): {incident.detail}")
    _out("")
    _out("Migrate (incarnate migrate), resolve (incarnate resolve) or terminate (incarnate terminate) each.")
    return 0


# ---------------------------------------------------------------- migrate


def _mapping(pairs: Sequence[str]) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for pair in pairs:
        old, equals, new = (part.strip() for part in pair.partition("="))
        if not equals or not old or not new or "=" in new:
            raise CommandError(
                f"--map {pair!r} is not OLD=NEW; write the stored state's id, '=', and the id of the "
                "state of the new chart it becomes, e.g. --map gathering=collecting"
            )
        if mapping.get(old, new) != new:
            raise CommandError(
                f"--map maps {old!r} twice ({mapping[old]!r} and {new!r}); map each state once"
            )
        mapping[old] = new
    return mapping


def _migrate_arguments(parser: argparse.ArgumentParser) -> None:
    _id_argument(parser)
    parser.add_argument(
        "--map",
        dest="mapping",
        action="append",
        required=True,
        metavar="OLD=NEW",
        help="map the stored state OLD to the state NEW of the new chart (repeat for each state)",
    )
    _store_options(parser, charts="map the stored states onto the new charts")


def _migrate(args: argparse.Namespace) -> int:
    mapping = _mapping(args.mapping)
    with _opened(args, charts_for="map the stored states onto the new charts") as engine:
        instance = _instance(engine, args.id)
        root = engine.instance(instance.record.root)
        if root.record.status is not InstanceStatus.PARKED:
            raise CommandError(
                f"the call tree of {instance.id} is not parked (its root {root.id} is "
                f"{root.record.status.value}); migrate applies to parked trees (see `incarnate parked`)"
            )
        try:
            checkpoint = engine.migrate(instance.id, mapping)
        except MigrationRejected as err:
            _rejected(instance.id, err)
        except CheckpointError as err:
            raise CommandFailed(
                f"migrated {instance.id}, but its call tree still does not validate, so its root "
                f"{root.id} stays parked: {err}"
            ) from err
    mapped = ", ".join(f"{old} -> {new}" for old, new in sorted(mapping.items()))
    _out(f"migrated {instance.id} ({mapped})")
    _out(_unparked(root.id, checkpoint))
    return 0


def _rejected(instance_id: UUID, error: MigrationRejected) -> NoReturn:
    lines = [f"the migration of {instance_id} was rejected; nothing was written:"]
    lines.extend(f"  - {problem}" for problem in error.problems)
    lines.append("Map every removed state to a state of the new chart, or terminate the call tree.")
    raise CommandFailed("\n".join(lines)) from error


def _unparked(root_id: UUID, checkpoint: Checkpoint | None) -> str:
    if checkpoint is None:
        return f"root {root_id} was not parked any more"
    where = f" in {', '.join(checkpoint.snapshot.configuration)}" if checkpoint.snapshot is not None else ""
    return (
        f"root {root_id} is {checkpoint.status.value}{where}; `incarnate recover` (or any engine's "
        "recovery) carries on with its work"
    )


# -------------------------------------------------------- resolve, terminate


def _resolve_arguments(parser: argparse.ArgumentParser) -> None:
    _id_argument(parser)
    parser.add_argument(
        "--reason",
        default="resolved by an operator",
        metavar="TEXT",
        help="the resolution, recorded on the root (default: %(default)s)",
    )
    _store_options(parser, charts="check the tree's checkpoints against the charts")


def _resolve(args: argparse.Namespace) -> int:
    with _opened(args, charts_for="check the tree's checkpoints against the charts") as engine:
        root = _instance(engine, args.id)
        _require_root(root, "resolve")
        if root.record.status is not InstanceStatus.PARKED:
            raise CommandError(
                f"{root.id} is {root.record.status.value}, not parked; there is nothing to resolve"
            )
        try:
            checkpoint = engine.resolve(root.id, args.reason)
        except CheckpointError as err:
            raise CommandFailed(
                f"{root.id} stays parked: its call tree still does not validate: {err}"
            ) from err
    _out(f"resolved {root.id} ({args.reason!r})")
    _out(_unparked(root.id, checkpoint))
    return 0


def _terminate_arguments(parser: argparse.ArgumentParser) -> None:
    _id_argument(parser)
    parser.add_argument(
        "--reason",
        default="terminated by an operator",
        metavar="TEXT",
        help="why, recorded on every instance it ends (default: %(default)s)",
    )
    _store_options(parser)


def _terminate(args: argparse.Namespace) -> int:
    with _opened(args) as engine:
        root_id = _instance_id(engine, args.id)
        try:
            root: Instance | None = engine.instance(root_id)
        except CorruptRecord:
            root = None  # a record does not decode: the engine ends it without loading it
        if root is not None:
            _require_root(root, "terminate")
            if root.record.status.finished:
                raise CommandError(f"{root.id} is {root.record.status.value}; there is nothing to terminate")
        ended = engine.terminate(root_id, args.reason)
    _out(f"terminated the call tree of {root_id}: {ended} instance(s) cancelled ({args.reason!r})")
    return 0


# ---------------------------------------------------------------- recover


class _Progress:
    """One status line on standard error: rewritten in place on a terminal, else plain lines."""

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self.shown: object = None
        self.at = float("-inf")
        self.width = 0

    def show(self, text: str, key: object, *, final: bool = False) -> None:
        stream = sys.stderr
        now = time.monotonic()
        if stream.isatty():
            if now - self.at >= 0.1 or final:
                stream.write("\r" + text.ljust(self.width) + ("\n" if final else ""))
                self.width, self.at = len(text), now
        elif final or (key != self.shown and now - self.at >= self.interval):
            stream.write(text + "\n")
            self.shown, self.at = key, now
        stream.flush()


RECOVER_WAIT = 30.0
"""How long ``recover`` waits, by default, for timers (retry backoffs, delays) to fall due."""

TIMERS_PENDING = 3
"""The exit status of ``recover`` when it went idle with timers still pending: work remains."""


def _recover_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workers", type=int, default=4, metavar="N", help="worker threads (default: %(default)s)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="stop after S seconds even if work remains (default: %(default)s)",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=RECOVER_WAIT,
        metavar="S",
        help="once the work runs out, keep running for timers that fall due within S more seconds "
        "(default: %(default)s)",
    )
    _store_options(parser, charts="run the recovered instances")


def _recover(args: argparse.Namespace) -> int:
    if args.workers < 1:
        raise CommandError(f"--workers must be at least 1, got {args.workers}")
    if not args.timeout > 0:
        raise CommandError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if not args.wait >= 0:
        raise CommandError(f"--wait must be zero or a positive number of seconds, got {args.wait}")
    runner = ThreadedRunner(args.workers)
    progress = _Progress()
    with _opened(args, charts_for="run the recovered instances", runner=runner, run_tasks=True) as engine:
        where = engine.storage.describe()
        started = time.monotonic()
        progress.show(f"acquiring the unfinished call trees of {where}", key="acquiring")
        acquired = engine.resume_all()
        left_alone = engine.left_alone
        runner.start()
        idle = interrupted = False
        horizon: float | None = None  # timers due by then are waited for
        try:
            while not idle:
                elapsed = time.monotonic() - started
                if elapsed >= args.timeout:
                    break
                status = f"acquired {acquired}  processed {runner.units}  {elapsed:.1f}s"
                progress.show(status, key=(acquired, runner.units))
                if not runner.wait_until_idle(min(0.2, args.timeout - elapsed)):
                    continue
                now = engine.clock.now()
                horizon = now + args.wait if horizon is None else horizon
                due = runner.next_deadline()
                if due is None or due > horizon:
                    idle = True
                else:  # the timer thread releases it when due
                    time.sleep(max(0.0, min(0.2, due - now, args.timeout - elapsed)))
        except KeyboardInterrupt:
            interrupted = True  # stop as on a timeout: the units in progress finish first
        runner.stop()
        elapsed = time.monotonic() - started
        processed, errors = runner.units, list(runner.errors)
        timers, now = runner.pending_timers(), engine.clock.now()
        progress.show(f"acquired {acquired}  processed {processed}  {elapsed:.1f}s", key=None, final=True)
        engine.listing.catch_up()
        in_flight = engine.listing.rows(in_flight=True)
    parked = sum(1 for row in in_flight if row.parked and row.is_root)
    if idle and timers:
        ending = f"idle, with timers due after the {args.wait:g}s --wait"
        waiting = ", waiting for events, timers or children"
    elif idle:
        ending, waiting = "idle", ", waiting for events, timers or children"
    else:
        stopped = "interrupted" if interrupted else f"stopped by the {args.timeout:g}s timeout"
        ending, waiting = f"{stopped} with work left; run it again", ""
    _out(f"recovered {where} in {elapsed:.1f}s: {ending}")
    _out(f"acquired:   {acquired} instance(s)")
    _out(f"processed:  {processed} unit(s) of work")
    _out(f"in flight:  {len(in_flight)} instance(s){waiting}")
    _out(f"parked:     {parked} root(s){' (see `incarnate parked`)' if parked else ''}")
    if left_alone:
        shown = ", ".join(f"{held.root} (held by {held.holder})" for held in left_alone[:5])
        more = f" and {len(left_alone) - 5} more" if len(left_alone) > 5 else ""
        _out(
            f"left alone: {len(left_alone)} call tree(s) held by live workers: {shown}{more}; "
            "they run there (stop that worker, or let its heartbeat lapse, to recover them here)"
        )
    if timers:
        due = timers[0][0]
        _out(
            f"timers:     {len(timers)} pending, next due at {_when(due)} (in {max(0.0, due - now):.0f}s): "
            "run `incarnate recover` again then, or keep an engine running on this store"
        )
    if errors:
        _out(f"errors:     {len(errors)}")
        for error in errors[:5]:
            _out(f"  {type(error).__name__}: {error}")
        return 1
    return TIMERS_PENDING if idle and timers else 0


# ------------------------------------------------------------ the commands

OPERATOR_COMMANDS: tuple[Command, ...] = (
    Command(
        "list", "list the instances in flight (or all), from the recovery listing", _list_arguments, _list
    ),
    Command(
        "tree", "show the call tree under an instance, finished children included", _tree_arguments, _tree
    ),
    Command(
        "timeline",
        "show an instance's stored events (or its call tree's) in time order",
        _timeline_arguments,
        _timeline,
    ),
    Command(
        "plan",
        "show an instance's ResumePlan: its validated checkpoint and activations",
        _plan_arguments,
        _plan,
    ),
    Command("send", "durably accept an event for an instance", _send_arguments, _send),
    Command("cancel", "ask an instance (and its children) to stop", _cancel_arguments, _cancel),
    Command(
        "parked", "list the roots held for an operator, with their incidents", _parked_arguments, _parked
    ),
    Command(
        "migrate",
        "map a parked instance's stored states onto the new chart, then unpark it",
        _migrate_arguments,
        _migrate,
    ),
    Command("resolve", "unpark a root whose call tree validates again", _resolve_arguments, _resolve),
    Command("terminate", "end a call tree without running it", _terminate_arguments, _terminate),
    Command(
        "recover", "acquire every unfinished call tree and run it until idle", _recover_arguments, _recover
    ),
)
"""The operator subcommands, in the order ``incarnate --help`` lists them."""

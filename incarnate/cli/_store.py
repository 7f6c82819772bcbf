"""What the commands that open a store share: ``--db``/``--charts``/``--tasks``, the engine, ids.

Every such command opens the store named by ``--db`` (a SQLite file or a
PostgreSQL URL) or by the environment, does one thing through a short-lived
:class:`Engine`, and closes it. ``--charts`` names the charts the instances
were started with; the commands that decode snapshots or run work require
it. ``--tasks`` names the task functions, which only ``recover`` runs.

The store is the truth: the listing is caught up before it is read, and
every decision is taken on the instance aggregates, as the engine does.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar
from uuid import UUID

import attrs
import click
from eventsourcing.domain import EventSourcingError
from eventsourcing.persistence import PersistenceError

from aggregates import Instance
from aggregates.errors import DecodeError, InvalidCommand
from incarnate._engine import Engine, Runner
from incarnate._migration import parse_mapping
from incarnate._storage import Storage
from incarnate._tasks import TaskCall, TaskFunction
from incarnate.cli._common import chart_problems, hide, load_object, load_scxml
from incarnate.errors import (
    CommandError,
    CommandFailed,
    EngineError,
    InstanceTerminated,
    StorageError,
    UnknownInstance,
)
from projections import CheckpointError
from statechart import Chart, JsonValue, Registry
from statechart.errors import ChartInvalid, CodecError

_ID_PREFIX = re.compile(r"[0-9a-fA-F][0-9a-fA-F-]{3,35}")
_ID_EXAMPLE = "0d3e0000-0000-4000-8000-00000000d3e0"

CHARTS_HELP = (
    "import path of the charts the instances were started with: a list or tuple of Charts, a "
    "Registry, one Chart, or a function that takes no arguments and returns one of those; or the "
    "path of an SCXML document (*.scxml, with the documents it invokes)"
)
TASKS_HELP = (
    "import path of the task functions: a dict of task name to callable, or a function that "
    "takes no arguments and returns one"
)
DB_HELP = (
    "the store: a SQLite file (PATH or sqlite:///PATH) or a PostgreSQL URL "
    "postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME[?schema=SCHEMA] (default: the store the environment "
    "names with PERSISTENCE_MODULE, SQLITE_DBNAME or POSTGRES_*; ./incarnate.db when none is set)"
)

# ------------------------------------------------------------ loading


def load_charts(path: str) -> list[Chart[Any]]:
    """The charts named by ``path``: a list or tuple of Charts, a Registry, a Chart, or a maker of one.

    A path ending in ``.scxml`` is an SCXML document, loaded with the ones it invokes.
    """
    if path.endswith(".scxml"):
        chart = load_scxml(path)
        return [chart, *chart.companions]

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

FROM_ENVIRONMENT = "the environment (PERSISTENCE_MODULE and its variables; ./incarnate.db when none is set)"
"""Where a command's store is named when ``--db`` is not given."""


@attrs.frozen
class StoreOptions:
    """What ``--db``, ``--charts`` and ``--tasks`` named (None: not given)."""

    db: str | None
    charts: str | None = None
    tasks: str | None = None


def command_storage(db: str | None, *, existing: bool = True) -> Storage:
    """The store a command's ``--db`` names (a SQLite path or a URL), else the environment's.

    Its secrets (a password) are hidden from every message the command
    prints. With ``existing``, a store that surely does not exist (a SQLite
    file that is not there) is refused: such a command never creates an
    empty store.
    """
    try:
        storage = Storage.from_env() if db is None else Storage.from_url(db)
    except EngineError as err:
        raise CommandError(str(err)) from err
    hide(storage)
    where = "--db" if db is not None else FROM_ENVIRONMENT
    missing = storage.missing(where) if existing else None
    if missing is not None:
        raise CommandError(missing)
    return storage


@contextlib.contextmanager
def opened(
    options: StoreOptions,
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
    storage = command_storage(options.db)
    charts = load_charts(options.charts) if options.charts else []
    if charts_for and not charts:
        raise CommandError(
            f"--charts is required to {charts_for}; pass --charts MODULE:ATTR naming the charts "
            "the instances were started with, e.g. --charts shop.charts:CHARTS"
        )
    tasks = load_tasks(options.tasks) if options.tasks else {}
    if not run_tasks:
        for name in _task_names(charts) - set(tasks):
            tasks[name] = _not_run_here(name)
    try:
        engine = Engine(charts, tasks, storage=storage, runner=runner)
    except ChartInvalid as err:
        fix = "; pass --tasks MODULE:ATTR with a function for every task they invoke" if run_tasks else ""
        raise CommandError(
            f"the charts of {options.charts!r} cannot run together{fix}: {chart_problems(err)}"
        ) from err
    except (sqlite3.Error, PersistenceError) as err:
        raise CommandError(f"cannot open the store ({storage.describe()}): {err}") from err
    except EngineError as err:
        raise CommandError(str(err)) from err
    try:
        with translated(storage.describe()):
            yield engine
    finally:
        engine.close()


@contextlib.contextmanager
def translated(where: str) -> Iterator[None]:
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


def instance_id(engine: Engine, text: str) -> UUID:
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


def instance(engine: Engine, text: str) -> Instance:
    """The instance ``text`` names (see :func:`instance_id`), loaded fresh."""
    return engine.instance(instance_id(engine, text))


def slot(site: str, key: str) -> str:
    """A child's slot as the commands print it: ``site[key]``, or ``site`` without a member key."""
    return f"{site}[{key}]" if key else site


def require_root(found: Instance, verb: str) -> None:
    """Refuse a child where a command applies to a whole call tree, naming its root."""
    ref = found.record.parent
    if ref is not None:
        raise CommandError(
            f"{found.id} is a child ({slot(ref.site, ref.key)} of {ref.parent}); {verb} applies to "
            f"a whole call tree: give its root {found.record.root}"
        )


def mapping_of(pairs: Sequence[str]) -> dict[str, str]:
    """The state mapping of the ``--map OLD=NEW`` options."""
    try:
        return parse_mapping(pairs)
    except ValueError as err:
        raise CommandError(f"--map {err}") from err


# ------------------------------------------------------------ options

_F = TypeVar("_F", bound=Callable[..., Any])


def id_argument(function: _F) -> _F:
    """The ``ID`` argument: a UUID, or a unique prefix of at least 4 hex digits."""
    return click.argument("ident", metavar="ID")(function)


def json_option(function: _F) -> _F:
    """``--json``: print one JSON document instead of text."""
    return click.option(
        "--json", "as_json", is_flag=True, help="print one JSON document (keys: see the reference)"
    )(function)


def store_options(
    *, charts: str = "", tasks: str = "optional; only `recover` runs them"
) -> Callable[[_F], _F]:
    """``--db``, ``--charts`` (required when ``charts`` says why) and ``--tasks``."""
    needed = f"required, to {charts}" if charts else "optional"

    def decorate(function: _F) -> _F:
        function = click.option("--tasks", metavar="MODULE:ATTR", help=f"{TASKS_HELP} ({tasks})")(function)
        function = click.option("--charts", metavar="MODULE:ATTR", help=f"{CHARTS_HELP} ({needed})")(function)
        return click.option("--db", metavar="PATH_OR_URL", help=DB_HELP)(function)

    return decorate


def listen_options(*, port: int, guard: str, names: str) -> Callable[[_F], _F]:
    """``--host``, ``--port`` and ``--allow-host``: where a server listens and which Host names it answers.

    ``guard`` says what another address than the loopback needs (``--token``);
    ``names`` says whose name ``--allow-host`` adds (behind a reverse proxy).
    """

    def apply(fn: _F) -> _F:
        fn = click.option(
            "--allow-host",
            "allow_hosts",
            multiple=True,
            metavar="NAME[:PORT]",
            help=f"without a token, answer to this Host name too ({names}); localhost, loopback and IP "
            "addresses and the --host name are always answered",
        )(fn)
        fn = click.option(
            "--port",
            default=port,
            show_default=True,
            metavar="PORT",
            type=click.IntRange(0, 65535),
            help="the port; 0 for any free one (the first line printed names it)",
        )(fn)
        return click.option(
            "--host",
            default="127.0.0.1",
            show_default=True,
            metavar="HOST",
            help=f"the address to listen on; any but the loopback needs {guard}",
        )(fn)

    return apply

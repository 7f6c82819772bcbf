"""``incarnate worker``: serve a store as one worker of an engine group, until SIGTERM or SIGINT.

The worker builds an :class:`~incarnate.Engine` with a
:class:`~incarnate.ThreadedRunner` over the store ``--db`` names (a SQLite
file, created when missing, or a PostgreSQL URL), starts a
:class:`~incarnate.Worker` on it and blocks. It logs to standard error, one
line per record with its structured fields (``engine_id=… group=…
instance_id=…``); a store password never appears in them. SIGTERM or SIGINT
stops it gracefully (units of work in progress commit, the heartbeat is
retired so other workers may take over at once) and it exits 0.
"""

from __future__ import annotations

import json
import logging
import sys
import time

import click

from incarnate._engine import Engine
from incarnate._http import HttpConfig
from incarnate._manager import RecoverySettings
from incarnate._runners import ThreadedRunner
from incarnate._worker import Worker
from incarnate.cli._common import redact
from incarnate.cli._store import DB_HELP, command_storage, load_charts, load_tasks
from incarnate.errors import CommandError, ConfigurationError
from statechart.errors import ChartInvalid

_STANDARD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
LEVELS = ("debug", "info", "warning", "error")


class LineFormatter(logging.Formatter):
    """One line per record: time, level, logger, message, then its structured fields as ``key=value``.

    A store password given to :func:`incarnate.cli._common.hide` is shown as ``***``.
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line."""
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        parts = [f"{when}.{int(record.msecs):03d}Z", record.levelname, f"{record.name}:", record.getMessage()]
        for key, value in vars(record).items():
            if key not in _STANDARD_FIELDS and not key.startswith("_"):
                text = str(value)
                parts.append(
                    f"{key}={json.dumps(text) if not text or any(c.isspace() for c in text) else text}"
                )
        if record.exc_info:
            parts.append("| " + " | ".join(self.formatException(record.exc_info).splitlines()))
        return redact(" ".join(parts))


def configure_logging(level: str) -> logging.Handler:
    """Send the ``incarnate`` loggers' records at ``level`` and above to standard error, one line each."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LineFormatter())
    logger = logging.getLogger("incarnate")
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False
    return handler


def _positive(option: str, value: float) -> None:
    if not value > 0:
        raise CommandError(f"{option} must be a positive number of seconds, got {value:g}")


@click.command(short_help="Serve a store as one worker of an engine group.")
@click.option(
    "--charts",
    required=True,
    metavar="MODULE:ATTR",
    help="import path of the charts to run: a list or tuple of Charts, a Registry, one Chart, or a "
    "function that takes no arguments and returns one of those; or the path of an SCXML document "
    "(*.scxml, with the documents it invokes)",
)
@click.option(
    "--tasks",
    metavar="MODULE:ATTR",
    help="import path of the task functions: a dict of task name to callable, or a function that "
    "takes no arguments and returns one (needed when the charts invoke tasks)",
)
@click.option("--db", metavar="PATH_OR_URL", help=DB_HELP + "; a missing SQLite file is created")
@click.option(
    "--group",
    default="default",
    show_default=True,
    metavar="G",
    help="the engine group: workers that may recover each other's call trees",
)
@click.option(
    "--threads", type=int, default=4, show_default=True, metavar="N", help="threads that take macrosteps"
)
@click.option(
    "--task-threads",
    type=int,
    default=None,
    metavar="N",
    help="threads that run task bodies, apart from the macrostep threads, so that timers and events "
    "keep moving while tasks block (default: as many as --threads)",
)
@click.option(
    "--poll-interval",
    type=float,
    default=0.5,
    show_default=True,
    metavar="S",
    help="the longest an event sent from another process waits before this worker looks "
    "(a commit by another process usually wakes it sooner: PostgreSQL at once, SQLite within 10 ms)",
)
@click.option(
    "--lease",
    type=float,
    default=30.0,
    show_default=True,
    metavar="S",
    help="seconds one heartbeat keeps this worker live; a worker silent for longer is presumed dead "
    "and its call trees are recovered by another",
)
@click.option(
    "--recovery-ttl",
    type=float,
    default=RecoverySettings().ttl,
    show_default=True,
    metavar="S",
    help="seconds a dead worker's call tree must have been unchanged before this worker's recovery "
    "manager moves it",
)
@click.option(
    "--recovery-scan-interval",
    type=float,
    default=RecoverySettings().scan_interval,
    show_default=True,
    metavar="S",
    help="seconds between two sweeps of the recovery manager: how soon a stopped or dead worker's "
    "trees move (a gracefully stopped worker's at the next sweep)",
)
@click.option(
    "--no-recovery",
    is_flag=True,
    help="run no recovery manager here (another worker of the group sweeps dead workers' trees)",
)
@click.option(
    "--ingress-url",
    default=None,
    metavar="URL",
    help="where `incarnate ingress` is reached (http://HOST:PORT): each SCXML instance's "
    "_ioprocessors['basichttp']['location'] is URL/instances/ID/events",
)
@click.option(
    "--engine-id",
    default=None,
    metavar="ID",
    help="a name for this worker that outlives its process (default: host:pid:random, new at every "
    "start): restarted with the same ID after a crash, it takes its own call trees back at once "
    "instead of waiting for its old heartbeat to lapse. Give each worker its own ID",
)
@click.option(
    "--embed-tasks/--no-embed-tasks",
    default=True,
    show_default=True,
    help="give task children born here no event streams of their own: the parent's Birth is the "
    "task's birth and its outcome the parent's message (fewer events and reads per task; every "
    "worker recovers either kind). --no-embed-tasks gives each task its own stream",
)
@click.option(
    "--log-level",
    type=click.Choice(LEVELS),
    default="info",
    show_default=True,
    help="the least severe log records shown",
)
def worker(
    charts: str,
    tasks: str | None,
    db: str | None,
    group: str,
    threads: int,
    task_threads: int | None,
    poll_interval: float,
    lease: float,
    recovery_ttl: float,
    recovery_scan_interval: float,
    no_recovery: bool,
    ingress_url: str | None,
    engine_id: str | None,
    embed_tasks: bool,
    log_level: str,
) -> int:
    """Serve a store as one worker of an engine group until SIGTERM or SIGINT."""
    if threads < 1:
        raise CommandError(f"--threads must be at least 1, got {threads}")
    if task_threads is not None and task_threads < 1:
        raise CommandError(f"--task-threads must be at least 1, got {task_threads}")
    _positive("--poll-interval", poll_interval)
    _positive("--lease", lease)
    if not recovery_ttl >= 0:
        raise CommandError(f"--recovery-ttl must be 0 or more seconds, got {recovery_ttl:g}")
    _positive("--recovery-scan-interval", recovery_scan_interval)
    if engine_id is not None and not (engine_id.strip() and len(engine_id) <= 63 and engine_id.isprintable()):
        raise CommandError(
            f"--engine-id must be 1 to 63 printable characters, got {engine_id!r}; name the worker after "
            "its host and role (web-1, batch-2)"
        )
    try:
        http = HttpConfig(base_url=ingress_url.rstrip("/")) if ingress_url else None
    except ConfigurationError as err:
        raise CommandError(f"--ingress-url: {err}") from err
    storage = command_storage(db, existing=False)
    chart_list = load_charts(charts)
    task_table = load_tasks(tasks) if tasks else {}
    configure_logging(log_level)
    recovery = (
        None
        if no_recovery
        else RecoverySettings(group=group, ttl=recovery_ttl, scan_interval=recovery_scan_interval)
    )
    try:
        engine = Engine(
            chart_list,
            task_table,
            storage=storage,
            runner=ThreadedRunner(threads, task_workers=task_threads),
            engine_id=engine_id,
            http=http,
            embed_tasks=embed_tasks,
        )
    except ChartInvalid as err:
        problems = "\n".join(f"  - {problem}" for problem in err.exceptions)
        raise CommandError(
            f"the charts of {charts!r} cannot run together; pass --tasks MODULE:ATTR with a function "
            f"for every task they invoke: {err.message}:\n{problems}"
        ) from err
    with engine:
        serving = Worker(engine, group=group, lease=lease, poll_interval=poll_interval, recovery=recovery)
        serving.serve()
    return 0

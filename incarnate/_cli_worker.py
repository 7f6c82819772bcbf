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

import argparse
import json
import logging
import sys
import time

from incarnate._cli_ops import DB_HELP, command_storage, load_charts, load_tasks
from incarnate._command import Command, CommandError, redact
from incarnate._engine import Engine
from incarnate._manager import RecoverySettings
from incarnate._runners import ThreadedRunner
from incarnate._worker import Worker
from statechart.errors import ChartInvalid

_STANDARD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
LEVELS = ("debug", "info", "warning", "error")


class LineFormatter(logging.Formatter):
    """One line per record: time, level, logger, message, then its structured fields as ``key=value``.

    A store password given to :func:`incarnate._command.hide` is shown as ``***``.
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


def _worker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--charts",
        required=True,
        metavar="MODULE:ATTR",
        help="import path of the charts to run: a list or tuple of Charts, a Registry, one Chart, or a "
        "function that takes no arguments and returns one of those",
    )
    parser.add_argument(
        "--tasks",
        metavar="MODULE:ATTR",
        help="import path of the task functions: a dict of task name to callable, or a function that "
        "takes no arguments and returns one (needed when the charts invoke tasks)",
    )
    parser.add_argument("--db", metavar="PATH_OR_URL", help=DB_HELP + "; a missing SQLite file is created")
    parser.add_argument(
        "--group",
        default="default",
        metavar="G",
        help="the engine group: workers that may recover each other's call trees (default: %(default)s)",
    )
    parser.add_argument(
        "--threads", type=int, default=4, metavar="N", help="worker threads (default: %(default)s)"
    )
    parser.add_argument(
        "--poll-interval",
        type=float,
        default=0.5,
        metavar="S",
        help="the longest an event sent from another process waits before this worker looks "
        "(PostgreSQL usually wakes it sooner; default: %(default)s)",
    )
    parser.add_argument(
        "--lease",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds one heartbeat keeps this worker live; a worker silent for longer is presumed dead "
        "and its call trees are recovered by another (default: %(default)s)",
    )
    parser.add_argument(
        "--recovery-ttl",
        type=float,
        default=RecoverySettings().ttl,
        metavar="S",
        help="seconds a dead worker's call tree must have been unchanged before this worker's recovery "
        "manager moves it (default: %(default)s)",
    )
    parser.add_argument(
        "--no-recovery",
        action="store_true",
        help="run no recovery manager here (another worker of the group sweeps dead workers' trees)",
    )
    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        default="info",
        help="the least severe log records shown (default: %(default)s)",
    )


def _worker(args: argparse.Namespace) -> int:
    if args.threads < 1:
        raise CommandError(f"--threads must be at least 1, got {args.threads}")
    _positive("--poll-interval", args.poll_interval)
    _positive("--lease", args.lease)
    if not args.recovery_ttl >= 0:
        raise CommandError(f"--recovery-ttl must be 0 or more seconds, got {args.recovery_ttl:g}")
    storage = command_storage(args.db, existing=False)
    charts = load_charts(args.charts)
    tasks = load_tasks(args.tasks) if args.tasks else {}
    configure_logging(args.log_level)
    recovery = None if args.no_recovery else RecoverySettings(group=args.group, ttl=args.recovery_ttl)
    try:
        engine = Engine(charts, tasks, storage=storage, runner=ThreadedRunner(args.threads))
    except ChartInvalid as err:
        problems = "\n".join(f"  - {problem}" for problem in err.exceptions)
        raise CommandError(
            f"the charts of {args.charts!r} cannot run together; pass --tasks MODULE:ATTR with a function "
            f"for every task they invoke: {err.message}:\n{problems}"
        ) from err
    with engine:
        worker = Worker(
            engine, group=args.group, lease=args.lease, poll_interval=args.poll_interval, recovery=recovery
        )
        worker.serve()
    return 0


WORKER_COMMANDS: tuple[Command, ...] = (
    Command(
        "worker",
        "serve a store as one worker of an engine group until SIGTERM or SIGINT",
        _worker_arguments,
        _worker,
    ),
)
"""The long-running subcommands."""

"""The ``incarnate`` command line.

Each subcommand is a :class:`Command`: a name, a one-line help, a function
that declares its arguments and a function that runs it and returns the exit
status. Adding a subcommand means writing those two functions and listing it
in :data:`COMMANDS`.

A command that cannot do what it was asked raises :class:`CommandError`;
:func:`main` prints its message to standard error and exits with status 2,
the status argparse uses for a bad command line. A command that was asked
properly but whose operation failed (a checkpoint that does not validate, a
rejected migration) raises :class:`CommandFailed`, and exits with status 1.

:func:`main` never lets a Python traceback reach the user: any other
project error (an :class:`~statechart.errors.IncarnateError`) is one
``incarnate COMMAND: error: MESSAGE`` line and status 2; an interrupt exits
130 quietly; standard output closed early (``incarnate list | head -1``)
exits 141, as a command killed by ``SIGPIPE`` does; anything else is a bug,
reported in one line with status 70 (the traceback is printed only when
``INCARNATE_DEBUG`` is set).

The shared parts (the command value, errors, exit statuses, loaders) live
in :mod:`incarnate._command`; the operator commands (``list``, ``tree``,
``plan``, ``send``, ``recover``…) in :mod:`incarnate._cli_ops`, the worker
in :mod:`incarnate._cli_worker`.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from incarnate._cli_ops import OPERATOR_COMMANDS
from incarnate._cli_worker import WORKER_COMMANDS
from incarnate._command import (
    BROKEN_PIPE,
    BUG,
    DEBUG_VARIABLE,
    INTERRUPTED,
    OPERATION_FAILED,
    USAGE_ERROR,
    Command,
    CommandError,
    CommandFailed,
    chart_problems,
    hide,
    load_chart,
    load_object,
    parse_json_option,
    redact,
)
from incarnate._demo import DEFAULT_DB, run_demo
from statechart import Chart, to_dot, to_mermaid
from statechart.errors import ChartInvalid, IncarnateError

# ------------------------------------------------------------------- diagram

_RENDERERS: dict[str, Callable[[Chart[object]], str]] = {"mermaid": to_mermaid, "dot": to_dot}


def _diagram_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "chart",
        metavar="CHART",
        help="import path 'package.module:attribute' of a Chart, or of a function that takes no "
        "arguments and returns one",
    )
    parser.add_argument(
        "--format",
        "-f",
        choices=tuple(_RENDERERS),
        default="mermaid",
        help="Mermaid stateDiagram-v2 or Graphviz DOT (default: %(default)s)",
    )
    parser.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help="write the diagram to FILE instead of standard output",
    )


def _diagram(args: argparse.Namespace) -> int:
    chart = load_chart(args.chart)
    text = _RENDERERS[args.format](chart)
    if args.output is None or args.output == "-":
        sys.stdout.write(text)
        return 0
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as err:
        raise CommandError(f"cannot write the diagram to {args.output!r}: {err.strerror}") from err
    return 0


# ---------------------------------------------------------------------- demo


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        default=DEFAULT_DB,
        metavar="PATH",
        help="the SQLite file to run the demo on (default: %(default)s); a file from an earlier demo "
        "is replaced, any other existing file is refused and left untouched",
    )


def _demo(args: argparse.Namespace) -> int:
    return run_demo(args.db)


# ---------------------------------------------------------------------- main


COMMANDS: tuple[Command, ...] = (
    Command(
        "demo",
        "run an order with children and a task in a worker process, kill it, and recover exactly",
        _demo_arguments,
        _demo,
    ),
    Command("diagram", "draw a chart as a Mermaid or Graphviz DOT diagram", _diagram_arguments, _diagram),
    *OPERATOR_COMMANDS,
    *WORKER_COMMANDS,
)
"""Every subcommand, in the order ``incarnate --help`` lists them."""


def parser() -> argparse.ArgumentParser:
    """The argument parser of ``incarnate`` with every subcommand of :data:`COMMANDS`."""
    root = argparse.ArgumentParser(
        prog="incarnate", description="Durable, event-sourced statecharts: command-line tools."
    )
    subcommands = root.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        sub = subcommands.add_parser(command.name, help=command.help, description=command.help)
        command.arguments(sub)
        sub.set_defaults(run=command.run)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``incarnate`` with ``argv`` (default: the process arguments); return the exit status.

    Never raises and never prints a traceback (unless ``INCARNATE_DEBUG`` is
    set): every failure is one ``incarnate COMMAND: error: ...`` message on
    standard error and a documented exit status.
    """
    command: list[str] = []  # filled in once the command line names the command
    try:
        status = _main(argv, command)
        _flush_output()  # a closed standard output shows here, not at interpreter exit
    except BrokenPipeError:
        _discard_output()
        return BROKEN_PIPE
    except KeyboardInterrupt:
        return INTERRUPTED
    except CommandError as err:
        _error(command, str(err))
        return err.status
    except ChartInvalid as err:
        _error(command, chart_problems(err))
        return USAGE_ERROR
    except IncarnateError as err:
        _error(command, str(err) or type(err).__name__)
        return USAGE_ERROR
    except Exception as err:  # noqa: BLE001 - the last guard: a bug is one line, never a traceback
        kind = type(err)
        name = (
            kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
        )
        detail = " ".join(str(err).split())
        hint = "printed above" if _debug() else f"run it again with {DEBUG_VARIABLE}=1 to print it"
        _error(
            command,
            f"unexpected {name}{': ' + detail if detail else ''}; this is a bug in incarnate: please "
            f"report it with the command line and the traceback ({hint})",
        )
        return BUG
    return status


def _main(argv: Sequence[str] | None, command: list[str]) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exit_:  # argparse exits after --help and after a usage error
        return exit_.code if isinstance(exit_.code, int) else USAGE_ERROR if exit_.code else 0
    command.append(args.command)
    run: Callable[[argparse.Namespace], int] = args.run
    return run(args)


def _flush_output() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as err:  # standard output failed otherwise (a full disk)
        _discard_output()
        raise CommandFailed(f"cannot write to standard output: {err}") from err


def _debug() -> bool:
    return os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")


def _error(command: list[str], message: str) -> None:
    """Print ``message`` as the command's error (after the traceback, when debugging).

    A closed standard error loses it silently.
    """
    prefix = " ".join(["incarnate", *command])
    try:
        if _debug():
            traceback.print_exc(file=sys.stderr)
        print(f"{prefix}: error: {redact(message)}", file=sys.stderr)
        sys.stderr.flush()
    except OSError:
        pass


def _discard_output() -> None:
    """Point standard output at the null device, so the interpreter's last flush cannot fail."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (output captured in-process): nothing is flushed at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


__all__ = [
    "BROKEN_PIPE",
    "BUG",
    "COMMANDS",
    "DEBUG_VARIABLE",
    "INTERRUPTED",
    "OPERATION_FAILED",
    "USAGE_ERROR",
    "Command",
    "CommandError",
    "CommandFailed",
    "hide",
    "load_chart",
    "load_object",
    "main",
    "parse_json_option",
    "parser",
    "redact",
]

if __name__ == "__main__":
    raise SystemExit(main())

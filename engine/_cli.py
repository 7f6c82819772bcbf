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

The operator commands (``list``, ``tree``, ``plan``, ``send``, ``recover``…)
live in :mod:`engine._cli_ops`.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import attrs

from engine.errors import EngineError
from statechart import Chart, to_dot, to_mermaid
from statechart.errors import ChartInvalid

USAGE_ERROR = 2
"""Exit status for a command that could not run as asked."""

OPERATION_FAILED = 1
"""Exit status for a command that ran as asked but whose operation failed."""

_IMPORT_PATH = re.compile(r"(?P<module>\w+(?:\.\w+)*):(?P<attribute>\w+(?:\.\w+)*)")


class CommandError(EngineError):
    """A command could not run as asked; the message says why and, when known, what to do."""

    status = USAGE_ERROR
    """The exit status :func:`main` returns for this error."""


class CommandFailed(CommandError):
    """A command ran as asked, but the operation failed (exit status 1)."""

    status = OPERATION_FAILED


@attrs.frozen
class Command:
    """One subcommand of ``incarnate``."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


# ------------------------------------------------------------ loading charts


def _problems(error: ChartInvalid) -> str:
    return "\n".join([f"{error.message}:", *(f"  - {problem}" for problem in error.exceptions)])


def _import(module_name: str) -> object:
    # Like ``python -m``, resolve chart modules from the current directory too,
    # which an installed console script does not have on its path.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name is not None and (module_name == err.name or module_name.startswith(err.name + ".")):
            raise CommandError(
                f"module {module_name!r} not found; check the spelling, and run from the directory "
                "that holds the package or install it"
            ) from err
        raise CommandError(f"importing module {module_name!r} failed: {err}") from err
    except ChartInvalid as err:
        raise CommandError(f"importing module {module_name!r} failed: {_problems(err)}") from err


_T = TypeVar("_T")


def load_object(
    path: str,
    *,
    metavar: str,
    example: str,
    expected: str,
    accept: Callable[[object], _T | None],
    listed: str = "charts",
) -> _T:
    """The value named by ``path``, ``package.module:attribute``, as ``accept`` takes it.

    ``accept`` returns the value it takes, or None for a value of another
    type (it may raise :class:`CommandError` for one that is nearly right).
    A value it does not take but that is callable without arguments is
    called, and its result offered to ``accept`` in turn. ``expected`` names
    what is wanted (``"a Chart"``) and ``listed`` what to suggest when the
    attribute is missing. Every failure raises :class:`CommandError` naming
    the path and the fix.
    """
    match = _IMPORT_PATH.fullmatch(path)
    if match is None:
        raise CommandError(
            f"{path!r} is not an import path; write {metavar} as 'package.module:attribute', e.g. {example!r}"
        )
    module_name, attribute = match["module"], match["attribute"]
    module = _import(module_name)
    found: object = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            names = sorted(name for name, value in vars(module).items() if _takes(accept, value))
            hint = (
                f"{listed} it defines: {', '.join(names)}"
                if names
                else f"it defines no {listed} at top level"
            )
            raise CommandError(f"module {module_name!r} has no attribute {attribute!r}; {hint}")
        found = getattr(found, part)
    taken = accept(found)
    if taken is not None:
        return taken
    if not callable(found):
        raise CommandError(
            f"{path!r} is of type {type(found).__name__}, not {expected}; name {expected} or a "
            "function that takes no arguments and returns one"
        )
    try:
        inspect.signature(found).bind()
    except TypeError as err:
        raise CommandError(
            f"{path!r} cannot be called without arguments ({err}); name {expected} or a function "
            "that takes no arguments and returns one"
        ) from err
    except ValueError:
        pass  # no signature to inspect (some builtins): calling it will tell
    try:
        made = found()
    except ChartInvalid as err:
        raise CommandError(f"calling {path!r} failed: {_problems(err)}") from err
    taken = accept(made)
    if taken is None:
        raise CommandError(
            f"calling {path!r} returned a value of type {type(made).__name__}, not {expected}; "
            f"make it return {expected}"
        )
    return taken


def _takes(accept: Callable[[object], object], value: object) -> bool:
    try:
        return accept(value) is not None
    except CommandError:
        return False


def _chart(value: object) -> Chart[object] | None:
    return value if isinstance(value, Chart) else None


def load_chart(path: str) -> Chart[object]:
    """The chart named by ``path``, an import path ``package.module:attribute``.

    The attribute (which may be dotted) is a :class:`~statechart.Chart` or a
    callable that takes no arguments and returns one. Every failure raises
    :class:`CommandError` with a message naming the path and the fix.
    """
    return load_object(path, metavar="CHART", example="shop.charts:ORDER", expected="a Chart", accept=_chart)


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
        default="incarnate.db",
        metavar="PATH",
        help="the SQLite file to run the demo on; it is replaced (default: %(default)s)",
    )


def _demo(args: argparse.Namespace) -> int:
    from engine._demo import run_demo

    return run_demo(args.db)


# ---------------------------------------------------------------------- main


def _operator_commands() -> tuple[Command, ...]:
    # The operator commands build on this module's errors and loaders.
    from engine._cli_ops import OPERATOR_COMMANDS

    return OPERATOR_COMMANDS


COMMANDS: tuple[Command, ...] = (
    Command(
        "demo",
        "run an order with children and a task in a worker process, kill it, and recover exactly",
        _demo_arguments,
        _demo,
    ),
    Command("diagram", "draw a chart as a Mermaid or Graphviz DOT diagram", _diagram_arguments, _diagram),
    *_operator_commands(),
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
    """Run ``incarnate`` with ``argv`` (default: the process arguments); return the exit status."""
    try:
        args = parser().parse_args(argv)
    except SystemExit as exit_:  # argparse exits after --help and after a usage error
        return exit_.code if isinstance(exit_.code, int) else USAGE_ERROR if exit_.code else 0
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except CommandError as err:
        print(f"incarnate {args.command}: error: {err}", file=sys.stderr)
        return err.status


if __name__ == "__main__":
    raise SystemExit(main())

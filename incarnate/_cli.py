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

The operator commands (``list``, ``tree``, ``plan``, ``send``, ``recover``…)
live in :mod:`incarnate._cli_ops`.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import attrs

from incarnate.errors import EngineError
from statechart import Chart, JsonValue, to_dot, to_mermaid
from statechart.errors import ChartInvalid, IncarnateError

if __name__ == "__main__":
    # ``python -m incarnate._cli``: import the module under its own name and run that. Run as
    # ``__main__``, its body would import the operator commands, which import ``incarnate._cli``
    # again: a second copy whose errors this copy's main would not recognise.
    from incarnate._cli import main as _cli_main

    raise SystemExit(_cli_main())

USAGE_ERROR = 2
"""Exit status for a command that could not run as asked."""

OPERATION_FAILED = 1
"""Exit status for a command that ran as asked but whose operation failed."""

BUG = 70
"""Exit status for an unexpected error: a bug in incarnate (``EX_SOFTWARE`` of ``sysexits.h``)."""

INTERRUPTED = 130
"""Exit status after an interrupt (Ctrl-C), as a shell reports a command killed by ``SIGINT``."""

BROKEN_PIPE = 141
"""Exit status when standard output was closed early, as a shell reports a command killed by ``SIGPIPE``."""

DEBUG_VARIABLE = "INCARNATE_DEBUG"
"""Set this environment variable (to anything but empty or 0) to print the traceback of an error."""

MAX_JSON_DEPTH = 100
"""How deeply lists and objects may nest in a JSON option such as ``--data``."""

MAX_INTEGER_DIGITS = 4300
"""How many digits an integer in a JSON option may have (Python's default conversion limit)."""

_IMPORT_PATH = re.compile(r"(?P<module>\w+(?:\.\w+)*):(?P<attribute>\w+(?:\.\w+)*)")


_SECRETS: set[str] = set()


def hide(secret: str) -> None:
    """Never print ``secret`` (a store password): errors and worker logs show it as ``***``."""
    if secret:
        _SECRETS.add(secret)


def redact(text: str) -> str:
    """``text`` with every secret passed to :func:`hide` shown as ``***``."""
    for secret in _SECRETS:
        text = text.replace(secret, "***")
    return text


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


# -------------------------------------------------------------- JSON options


class _Refused(ValueError):
    """A value that parses as Python's JSON but is not accepted: the message says why and the fix."""


def _constant(name: str) -> JsonValue:
    raise _Refused(
        f"{name} is not a JSON value (JSON has no NaN or Infinity); send null, a finite number or a string"
    )


def _integer(digits: str) -> JsonValue:
    count = len(digits.lstrip("-"))
    if count > MAX_INTEGER_DIGITS:
        raise _Refused(
            f"it holds an integer of {count} digits, and integers may have at most {MAX_INTEGER_DIGITS}; "
            "send a longer number as a string"
        )
    try:
        return int(digits)
    except ValueError as err:  # the interpreter's own limit (PYTHONINTMAXSTRDIGITS) may be lower
        raise _Refused(f"it holds an integer of {count} digits ({err}); send it as a string") from err


def _number(text: str) -> JsonValue:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        shown = text if len(text) <= 20 else f"{text[:17]}..."
        raise _Refused(
            f"the number {shown} is out of range of a 64-bit float; send a smaller number, or a string"
        )
    return value


def _nesting(text: str) -> int:
    """How deeply lists and objects nest in ``text`` (brackets inside strings do not count)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 60 else f"{text[:40]!r}... ({len(text)} characters)"


def parse_json_option(option: str, text: str) -> JsonValue:
    """The JSON value of a command-line option such as ``--data``.

    JSON as the standard defines it (RFC 8259): no ``NaN`` or ``Infinity``,
    finite numbers, integers of at most :data:`MAX_INTEGER_DIGITS` digits,
    lists and objects nested at most :data:`MAX_JSON_DEPTH` levels. Anything
    else raises :class:`CommandError` naming the option, what is wrong and
    the fix.
    """
    depth = _nesting(text)
    if depth > MAX_JSON_DEPTH:
        raise CommandError(
            f"{option} {_shown(text)} nests lists and objects {depth} levels deep, and at most "
            f"{MAX_JSON_DEPTH} are accepted; flatten the data"
        )
    try:
        value: JsonValue = json.loads(text, parse_constant=_constant, parse_int=_integer, parse_float=_number)
    except _Refused as err:
        raise CommandError(f"{option} {_shown(text)} is not accepted: {err}") from err
    except json.JSONDecodeError as err:
        raise CommandError(
            f"{option} {_shown(text)} is not JSON ({err}); e.g. {option} '{{\"ok\": true}}', "
            f"{option} '\"text\"' or {option} 3"
        ) from err
    except RecursionError as err:  # not expected below MAX_JSON_DEPTH; never a traceback
        raise CommandError(f"{option} {_shown(text)} nests too deeply to parse; flatten the data") from err
    return value


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
    from incarnate._demo import DEFAULT_DB

    parser.add_argument(
        "--db",
        default=DEFAULT_DB,
        metavar="PATH",
        help="the SQLite file to run the demo on (default: %(default)s); a file from an earlier demo "
        "is replaced, any other existing file is refused and left untouched",
    )


def _demo(args: argparse.Namespace) -> int:
    from incarnate._demo import run_demo

    return run_demo(args.db)


# ---------------------------------------------------------------------- main


def _operator_commands() -> tuple[Command, ...]:
    # The operator commands build on this module's errors and loaders.
    from incarnate._cli_ops import OPERATOR_COMMANDS

    return OPERATOR_COMMANDS


def _worker_commands() -> tuple[Command, ...]:
    from incarnate._cli_worker import WORKER_COMMANDS

    return WORKER_COMMANDS


COMMANDS: tuple[Command, ...] = (
    Command(
        "demo",
        "run an order with children and a task in a worker process, kill it, and recover exactly",
        _demo_arguments,
        _demo,
    ),
    Command("diagram", "draw a chart as a Mermaid or Graphviz DOT diagram", _diagram_arguments, _diagram),
    *_operator_commands(),
    *_worker_commands(),
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
        _error(command, _problems(err))
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

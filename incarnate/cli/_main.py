"""The ``incarnate`` command group and :func:`main`, the one guard every command runs under.

Each command is a :class:`click.Command` of its module (``_inspecting``,
``_operating``, ``_travelling``, ``_migrating``, ``_recovering``, ``_worker``, ``_fleet``, ``_tools``),
added to :data:`root` in the order ``incarnate --help`` lists them. A
command returns its exit status.

A command that cannot do what it was asked raises :class:`CommandError`,
and :func:`main` prints its message and exits 2, as for a bad command line
(a :class:`click.UsageError`). A command that was asked properly but whose
operation failed raises :class:`CommandFailed`, exit status 1.

:func:`main` never lets a Python traceback reach the user: any other
project error (an :class:`~statechart.errors.IncarnateError`) is one
``incarnate COMMAND: error: MESSAGE`` line and status 2; an interrupt exits
130 quietly; standard output closed early (``incarnate list | head -1``)
exits 141, as a command killed by ``SIGPIPE`` does; anything else is a bug,
reported in one line with status 70 (the traceback is printed only when
``INCARNATE_DEBUG`` is set). Click runs in its non-standalone mode, so that
these statuses, not click's own, are the ones a shell sees. A command line
with ``--json`` gets its error as one JSON document on standard error
instead of the line, with the error's stable code.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import attrs
import click

from incarnate.cli._common import (
    BROKEN_PIPE,
    BUG,
    BUG_CODE,
    DEBUG_VARIABLE,
    INTERRUPTED,
    USAGE_CODE,
    USAGE_ERROR,
    chart_problems,
    error_code,
    redact,
)
from incarnate.cli._fleet import workers
from incarnate.cli._ingress import ingress
from incarnate.cli._inspecting import list_, parked, plan, show, timeline, tree
from incarnate.cli._migrating import check, migrate
from incarnate.cli._operating import cancel, resolve, send, start, terminate
from incarnate.cli._recovering import recover
from incarnate.cli._tools import demo, diagram
from incarnate.cli._travelling import fork, redrive
from incarnate.cli._worker import worker
from incarnate.console import command as console_command
from incarnate.errors import CommandError, CommandFailed
from statechart.errors import ChartInvalid, IncarnateError

_COMMAND = "incarnate.command"
"""The key of the context's ``meta`` under which :class:`_Root` notes the command being run."""


class _Root(click.Group):
    """The ``incarnate`` group: commands in the order they were added, and the command run noted."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The commands in the order they were added (the order of the documentation)."""
        return list(self.commands)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """Resolve the command as click does, and note its name for error messages."""
        name, command, rest = super().resolve_command(ctx, args)
        noted = ctx.meta.get(_COMMAND)
        if isinstance(noted, list) and command is not None:
            noted.append(command.name or name or "")
        return name, command, rest


@click.group(
    cls=_Root,
    name="incarnate",
    no_args_is_help=False,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(
    package_name="incarnate", prog_name="incarnate", message="%(prog)s %(version)s", help="print the version"
)
def root() -> None:
    """Durable, event-sourced statecharts: command-line tools."""


for _command in (
    demo,
    diagram,
    list_,
    show,
    tree,
    timeline,
    plan,
    start,
    send,
    cancel,
    parked,
    check,
    migrate,
    resolve,
    terminate,
    fork,
    redrive,
    recover,
    worker,
    workers,
    ingress,
):
    root.add_command(_command)


root.add_command(console_command)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``incarnate`` with ``argv`` (default: the process arguments); return the exit status.

    Never raises and never prints a traceback (unless ``INCARNATE_DEBUG`` is
    set): every failure is one ``incarnate COMMAND: error: ...`` message on
    standard error and a documented exit status. When the command line asks
    for ``--json``, the error is one JSON document on standard error instead,
    carrying the error's stable code (see :func:`error_code`).
    """
    args = sys.argv[1:] if argv is None else list(argv)
    report = _Report(as_json=_asks_for_json(args))
    try:
        status = _main(args, report.command)
        _flush_output()  # a closed standard output shows here, not at interpreter exit
    except BrokenPipeError:
        _discard_output()
        return BROKEN_PIPE
    except (KeyboardInterrupt, click.Abort):
        return INTERRUPTED
    except click.UsageError as err:
        return report.usage_error(err)
    except click.ClickException as err:  # a file option that does not open, say
        return report.error(err.format_message(), USAGE_CODE, USAGE_ERROR)
    except CommandError as err:
        return report.error(str(err), error_code(err), err.status)
    except ChartInvalid as err:
        return report.error(chart_problems(err), error_code(err), USAGE_ERROR)
    except IncarnateError as err:
        return report.error(str(err) or type(err).__name__, error_code(err), USAGE_ERROR)
    except Exception as err:  # noqa: BLE001 - the last guard: a bug is one line, never a traceback
        kind = type(err)
        name = (
            kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
        )
        detail = " ".join(str(err).split())
        hint = "printed above" if _debug() else f"run it again with {DEBUG_VARIABLE}=1 to print it"
        return report.error(
            f"unexpected {name}{': ' + detail if detail else ''}; this is a bug in incarnate: please "
            f"report it with the command line and the traceback ({hint})",
            BUG_CODE,
            BUG,
        )
    return status


def _asks_for_json(args: Sequence[str]) -> bool:
    """Whether the command line has ``--json`` (before a ``--`` that ends the options)."""
    options = args[: list(args).index("--")] if "--" in args else args
    return "--json" in options


def _main(args: list[str], command: list[str]) -> int:
    try:
        context = root.make_context("incarnate", args)
        context.meta[_COMMAND] = command
        with context:
            result: Any = root.invoke(context)
    except click.exceptions.Exit as exit_:  # after --help and --version
        return exit_.exit_code
    return result if isinstance(result, int) else 0


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


@attrs.define
class _Report:
    """How :func:`main` reports an error: the command being run (noted as click resolves it), and the form."""

    as_json: bool
    command: list[str] = attrs.Factory(list)

    def usage_error(self, error: click.UsageError) -> int:
        """The usage of the command the error is about, then the error as one line (status 2)."""
        context = error.ctx
        usage = context.get_usage() if context is not None else ""
        path = context.command_path.split() if context is not None else ["incarnate", *self.command]
        help_option = f"{' '.join(path)} --help"
        message = error.format_message().rstrip(".")
        if usage and not self.as_json:
            with contextlib.suppress(OSError):
                print(usage, file=sys.stderr)
        return self.error(f"{message}; see `{help_option}`", USAGE_CODE, USAGE_ERROR, command=path[1:])

    def error(self, message: str, code: str, status: int, *, command: Sequence[str] = ()) -> int:
        """Print ``message`` as the command's error (after the traceback, when debugging); return ``status``.

        With ``--json`` the error is one JSON document, ``{"error": {"code",
        "message", "exit_status"}}``. A closed standard error loses it silently.
        """
        try:
            if _debug():
                traceback.print_exc(file=sys.stderr)
            if self.as_json:
                document = {"error": {"code": code, "message": redact(message), "exit_status": status}}
                print(json.dumps(document, indent=2, ensure_ascii=False), file=sys.stderr)
            else:
                prefix = " ".join(["incarnate", *(command or self.command)])
                print(f"{prefix}: error: {redact(message)}", file=sys.stderr)
            sys.stderr.flush()
        except OSError:
            pass
        return status


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

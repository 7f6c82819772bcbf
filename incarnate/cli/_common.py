"""What every ``incarnate`` command shares: its exit statuses, loaders, JSON options, secrets.

A command that cannot do what it was asked raises :class:`CommandError`
(exit status 2); one whose operation failed raises :class:`CommandFailed`
(exit status 1); both are defined, with every other error, in
:mod:`incarnate.errors`. :func:`load_object` and :func:`load_chart` import
what an argument names; :func:`parse_json_option` reads a JSON argument
strictly. The command modules of :mod:`incarnate.cli`, and the console's,
build on this one.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from incarnate._storage import Storage
from incarnate.errors import CommandError, CommandFailed, EventNotTaken, InvalidJson
from statechart import Chart, JsonValue
from statechart.codec import check_json
from statechart.errors import ChartInvalid, IncarnateError

USAGE_ERROR = CommandError.status
"""Exit status for a command that could not run as asked."""

OPERATION_FAILED = CommandFailed.status
"""Exit status for a command that ran as asked but whose operation failed."""

NOT_TAKEN = EventNotTaken.status
"""Exit status of ``incarnate send`` for an event no transition of the instance's current states takes."""

BUG = 70
"""Exit status for an unexpected error: a bug in incarnate (``EX_SOFTWARE`` of ``sysexits.h``)."""

INTERRUPTED = 130
"""Exit status after an interrupt (Ctrl-C), as a shell reports a command killed by ``SIGINT``."""

BROKEN_PIPE = 141
"""Exit status when standard output was closed early, as a shell reports a command killed by ``SIGPIPE``."""

DEBUG_VARIABLE = "INCARNATE_DEBUG"
"""Set this environment variable (to anything but empty or 0) to print the traceback of an error."""

USAGE_CODE = "usage-error"
"""The code of a bad command line (click's usage errors), which no error class of ours raises."""

BUG_CODE = "internal-error"
"""The code of an unexpected error: a bug in incarnate (exit status :data:`BUG`)."""

MAX_JSON_DEPTH = 100
"""How deeply lists and objects may nest in a JSON option such as ``--data``."""

MAX_INTEGER_DIGITS = 4300
"""How many digits an integer in a JSON option may have (Python's default conversion limit)."""

_IMPORT_PATH = re.compile(r"(?P<module>\w+(?:\.\w+)*):(?P<attribute>\w+(?:\.\w+)*)")


_SECRETS: set[str] = set()


def hide(secrets: Storage | str) -> None:
    """Never print a secret: errors and worker logs show it as ``***``.

    Given a :class:`~incarnate.Storage`, every string its ``secrets()``
    names (a password), whatever the store's kind; else the string itself.
    """
    for secret in (secrets,) if isinstance(secrets, str) else secrets.secrets():
        if secret:
            _SECRETS.add(secret)


def redact(text: str) -> str:
    """``text`` with every secret passed to :func:`hide` shown as ``***``."""
    for secret in _SECRETS:
        text = text.replace(secret, "***")
    return text


def error_code(error: BaseException) -> str:
    """The code a command's error is reported with: its class's, or the wrapped error's.

    A command wraps an engine error in a :class:`CommandError` to give it an
    exit status (an unknown instance exits 2, a store error 1); the code is
    the wrapped error's, so that ``--json`` tells an unknown instance from a
    bad argument. An error that is not ours is a bug.
    """
    while isinstance(error, CommandError) and isinstance(error.__cause__, IncarnateError):
        error = error.__cause__
    return type(error).code if isinstance(error, IncarnateError) else BUG_CODE


# ------------------------------------------------------------ loading charts


def chart_problems(error: ChartInvalid) -> str:
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
        raise CommandError(f"importing module {module_name!r} failed: {chart_problems(err)}") from err
    except Exception as err:
        where = _raised_at(err, module_name)
        raise CommandError(
            f"importing module {module_name!r} failed: it raised {type(err).__name__}: "
            f"{' '.join(str(err).split())}{where}; fix the module (run `python -c 'import {module_name}'` "
            "to see the traceback)"
        ) from err


def _raised_at(error: BaseException, module_name: str) -> str:
    """`` at FILE:LINE``: the innermost frame of the user's code the error came from, if any."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if "importlib" not in f.filename and "/incarnate/" not in f.filename]
    if not ours:
        return ""
    frame = ours[-1]
    return f" at {frame.filename}:{frame.lineno}"


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
        raise CommandError(f"calling {path!r} failed: {chart_problems(err)}") from err
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


def load_scxml(path: str) -> Chart[Any]:
    """The chart of the SCXML document at ``path`` (its invoked documents are its companions)."""
    from statechart import scxml

    try:
        return scxml.load(path)
    except scxml.ScxmlError as error:
        raise CommandError(str(error)) from error


def load_chart(path: str) -> Chart[object]:
    """The chart named by ``path``, an import path ``package.module:attribute`` or an SCXML file.

    The attribute (which may be dotted) is a :class:`~statechart.Chart` or a
    callable that takes no arguments and returns one; a path ending in
    ``.scxml`` is loaded as an SCXML document. Every failure raises
    :class:`CommandError` with a message naming the path and the fix.
    """
    if path.endswith(".scxml"):
        return load_scxml(path)
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
    # repr() escapes lone surrogates, so the message can always be printed
    return repr(text) if len(text) <= 60 else f"{text[:40]!r}... ({len(text)} characters)"


def parse_json_option(option: str, text: str) -> JsonValue:
    """The JSON value of a command-line option such as ``--data``.

    JSON as the standard defines it (RFC 8259): no ``NaN`` or ``Infinity``,
    finite numbers, integers of at most :data:`MAX_INTEGER_DIGITS` digits,
    lists and objects nested at most :data:`MAX_JSON_DEPTH` levels. Anything
    else raises :class:`~incarnate.errors.InvalidJson` (a :class:`CommandError`)
    naming the option, what is wrong and the fix.
    """
    depth = _nesting(text)
    if depth > MAX_JSON_DEPTH:
        raise InvalidJson(
            f"{option} {_shown(text)} nests lists and objects {depth} levels deep, and at most "
            f"{MAX_JSON_DEPTH} are accepted; flatten the data"
        )
    try:
        value: JsonValue = json.loads(text, parse_constant=_constant, parse_int=_integer, parse_float=_number)
    except _Refused as err:
        raise InvalidJson(f"{option} {_shown(text)} is not accepted: {err}") from err
    except json.JSONDecodeError as err:
        raise InvalidJson(
            f"{option} {_shown(text)} is not JSON ({err}); e.g. {option} '{{\"ok\": true}}', "
            f"{option} '\"text\"' or {option} 3"
        ) from err
    except RecursionError as err:  # not expected below MAX_JSON_DEPTH; never a traceback
        raise InvalidJson(f"{option} {_shown(text)} nests too deeply to parse; flatten the data") from err
    try:
        check_json(value, option)
    except TypeError as err:  # a lone surrogate: a "\ud800" escape, or bytes that are not UTF-8
        raise InvalidJson(
            f"{option} {_shown(text)} is not accepted: {err}; the command line must be UTF-8 text"
        ) from err
    return value

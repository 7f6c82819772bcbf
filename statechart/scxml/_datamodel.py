"""The Python datamodel of SCXML documents (``datamodel="python"``).

The datamodel is the instance's context: a :class:`Datamodel` value mapping
variable names to JSON values, stored with the snapshot like any context.
Expressions (``cond``, ``expr``, ``eventexpr``…) are Python expressions and
``<script>`` is Python code, evaluated with the datamodel's variables as
globals beside the system variables ``_event``, ``_sessionid``, ``_name``,
``_ioprocessors`` and the predicate ``In(state_id)`` (SCXML 5.10, 5.9.1);
``_event`` is bound from the first event on (before it, reading it raises
``NameError``, so ``error.execution``).

Every evaluation works on a copy: an expression that mutates a list it
reads changes nothing until an ``<assign>`` or a ``<script>`` stores the
result. A script keeps what it binds to JSON values; functions, classes and
modules it binds live only while it runs.
"""

from __future__ import annotations

import builtins
import functools
import json
from collections.abc import Callable, Mapping
from types import CodeType, ModuleType
from typing import Any

import attrs

from statechart._codec import check_json
from statechart._event import Event, JsonValue
from statechart._model import BASIC_HTTP_PROCESSOR, SCXML_PROCESSOR
from statechart._scope import current
from statechart.errors import ExpressionError

SYSTEM_VARIABLES = ("_event", "_sessionid", "_name", "_ioprocessors")
"""The read-only system variables (SCXML 5.10); a script or assign that sets one raises error.execution."""


@attrs.frozen(eq=True, hash=False)
class Datamodel:
    """The variables of an SCXML instance: name -> JSON value.

    ``bound`` records what initialisation must not repeat: the states whose
    late-bound ``<data>`` has been assigned (SCXML 5.3, ``binding="late"``),
    and, as ``"=<name>"``, the variables an invoker's params gave a value
    (6.4), whose ``<data>`` expressions are then not evaluated.
    """

    vars: dict[str, JsonValue] = attrs.field(factory=dict)
    bound: list[str] = attrs.field(factory=list)

    def __getitem__(self, name: str) -> JsonValue:
        return self.vars[name]

    def get(self, name: str, default: JsonValue = None) -> JsonValue:
        """A variable's value, or ``default`` when it is not declared."""
        return self.vars.get(name, default)


@attrs.frozen(eq=False)
class EventView:
    """``_event`` as an expression sees it (SCXML 5.10.1).

    Stored in a variable (``<assign expr="_event">``, a script's
    ``x = _event``) it becomes its JSON object (:meth:`as_json`), which it
    equals, so that the datamodel stays JSON (W3C 329). :attr:`raw` is the
    event as a message: that object as JSON text.
    """

    name: str
    type: str
    sendid: str | None
    origin: str | None
    origintype: str | None
    invokeid: str | None
    data: Any
    message: str | None = None
    """The message as its event I/O processor received it, when it kept one (an HTTP request)."""

    def as_json(self) -> dict[str, JsonValue]:
        """The event as a JSON object: its fields by name."""
        return {
            "name": self.name,
            "type": self.type,
            "sendid": self.sendid,
            "origin": self.origin,
            "origintype": self.origintype,
            "invokeid": self.invokeid,
            "data": copy_json(self.data),
        }

    @property
    def raw(self) -> str:
        """``_event.raw`` (5.10.1): the event as the SCXML event I/O processor carries it, as JSON text.

        An event that came over HTTP (SCXML C.2) has the request as it
        arrived instead (:attr:`message`).

        The object :meth:`as_json` gives, its fields in that order, written
        compactly; the processor's messages never leave the engine, so this
        is their form (a ``<param>`` name given twice is one key whose value
        lists both values, as ``data`` has it).
        """
        if self.message is not None:
            return self.message
        return json.dumps(self.as_json(), ensure_ascii=False, separators=(",", ":"), allow_nan=False)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EventView):
            return self.as_json() == other.as_json()
        if isinstance(other, dict):
            return self.as_json() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def of(cls, event: Event | None) -> EventView | None:
        """The view of the event being processed (``None`` before the first event: SCXML 5.10.1)."""
        if event is None or event.name == "":
            return None
        origin = event.reply_to
        origintype = event.origin_type
        if origintype is None and origin is not None:
            origintype = SCXML_PROCESSOR
        return cls(
            event.name,
            event.kind.value,
            event.send_id,
            origin,
            origintype,
            event.invocation,
            copy_json(event.data),
            event.raw,
        )


class Code:
    """One expression or script of a document, compiled once, named by where it stands.

    ``source`` is the Python text as written (kept for :func:`dump`). A
    syntax error is raised when the code runs, as ``error.execution``
    (SCXML 5.9: an illegal expression), not when the document loads.
    ``name`` is the ``name`` of the document the code stands in, what it
    reads as ``_name`` (5.10); ``None``: the running chart's name.
    """

    __slots__ = ("_code", "_error", "mode", "name", "source", "where")

    def __init__(self, source: str, where: str, mode: str, name: str | None = None) -> None:
        self.source = source
        self.where = where
        self.mode = mode
        self.name = name
        self._code: CodeType | None = None
        self._error: SyntaxError | None = None
        # an expression may span lines: parenthesised, its newlines are only whitespace
        text = _dedent(source) if mode == "exec" else f"({source.strip()}\n)"
        if mode == "eval" and not source.strip():
            # "()" would compile to an empty tuple: an empty expression is an illegal one (5.9)
            self._error = SyntaxError("an empty expression has no value; write a Python expression")
            return
        try:
            self._code = compile(text, where, mode)
        except SyntaxError as error:
            self._error = error

    def __repr__(self) -> str:
        return f"<{self.mode} {self.source.strip()!r} at {self.where}>"

    def run(self, namespace: dict[str, Any]) -> Any:
        """Evaluate (or execute) against ``namespace``; raises what the code raises."""
        if self._code is None:
            assert self._error is not None
            raise SyntaxError(f"{self._error.msg} in {self.source.strip()!r} ({self.where})")
        if self.mode == "eval":
            return eval(self._code, namespace)
        exec(self._code, namespace)
        return None


def _dedent(source: str) -> str:
    lines = source.strip("\n").splitlines()
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    cut = min(indents, default=0)
    return "\n".join(line[cut:] for line in lines)


def namespace(model: Datamodel, event: Event | None, name: str | None = None) -> dict[str, Any]:
    """The globals an expression sees: a copy of the variables and the system variables.

    ``name`` is the document's name (``_name``); by default the running chart's.
    """
    scope = current()
    session = scope.session
    location = f"#_scxml_{session}" if session is not None else None
    values: dict[str, Any] = copy_json(model.vars)  # type: ignore[assignment]
    values["__builtins__"] = builtins
    view = EventView.of(event)
    if view is not None:  # 5.10.1: _event is not bound until the first event is processed
        values["_event"] = view
    values["_sessionid"] = session
    values["_name"] = scope.chart if name is None else name
    processors: dict[str, Any] = {
        "scxml": {"location": location},
        SCXML_PROCESSOR: {"location": location},
    }
    http = scope.http_location
    if http is not None:  # SCXML C.2: only an engine with an HTTP ingress has this processor
        processors["basichttp"] = {"location": http}
        processors[BASIC_HTTP_PROCESSOR] = {"location": http}
    values["_ioprocessors"] = processors
    values["In"] = scope.active
    return values


def evaluate(code: Code, model: Datamodel, event: Event | None) -> Any:
    """The value of an expression."""
    return code.run(namespace(model, event, code.name))


def copy_json(value: JsonValue) -> JsonValue:
    """A deep copy of JSON data (what every evaluation works on, so the stored datamodel never changes)."""
    if type(value) is dict:
        return {key: copy_json(item) for key, item in value.items()}
    if type(value) is list:
        return [copy_json(item) for item in value]
    return value


def _kept(values: Mapping[str, Any]) -> dict[str, JsonValue]:
    """The variables after a script: JSON values kept, helpers dropped, system variables untouched."""
    kept: dict[str, JsonValue] = {}
    for name, value in values.items():
        if name.startswith("__") or name in SYSTEM_VARIABLES or name == "In":
            continue
        if isinstance(value, ModuleType) or callable(value):
            continue
        kept[name] = check_json(_stored(value), name)
    return kept


def run_script(code: Code, model: Datamodel, event: Event | None) -> Datamodel:
    """Execute a ``<script>`` (SCXML 4.8): the datamodel with what it changed."""
    values = namespace(model, event, code.name)
    system = {name: values.get(name) for name in SYSTEM_VARIABLES}
    code.run(values)
    for name, before in system.items():
        if values.get(name) is not before:
            raise ExpressionError(f"{code.where}: {name} is a read-only system variable (SCXML 5.10)")
    try:
        return attrs.evolve(model, vars=_kept(values))
    except TypeError as error:
        raise ExpressionError(
            f"{code.where}: the datamodel holds JSON values only, and the script left {error}"
        ) from error


def _stored(value: Any) -> Any:
    """What the datamodel stores for ``value``: ``_event`` as its JSON object, else the value."""
    return value.as_json() if isinstance(value, EventView) else value


def assign(model: Datamodel, location: str, value: Any, where: str) -> Datamodel:
    """``<assign location=… expr=…>`` (SCXML 5.4): set a declared variable or a part of one."""
    value = _stored(value)
    try:
        check_json(value, location)
    except TypeError as error:
        raise ExpressionError(f"{where}: the datamodel holds JSON values only: {error}") from error
    name = location.strip()
    if name in SYSTEM_VARIABLES or name == "In":
        raise ExpressionError(f"{where}: {name} is a read-only system variable (SCXML 5.10)")
    if name.isidentifier():
        if name not in model.vars:
            raise ExpressionError(
                f"{where}: cannot assign to {name!r}: no such variable in the datamodel; "
                "declare it with <data id=...> (SCXML 5.4)"
            )
        return attrs.evolve(model, vars={**model.vars, name: copy_json(value)})
    values = namespace(model, None)
    values["__value__"] = copy_json(value)
    _store(name, where).run(values)
    values.pop("__value__")
    return attrs.evolve(model, vars=_kept(values))


@functools.lru_cache(maxsize=1024)
def _store(location: str, where: str) -> Code:
    """The compiled ``<location> = __value__`` of an assign to a part of a variable."""
    return Code(f"{location} = __value__", where, "exec")


@attrs.frozen
class FromInput:
    """``context_from_input`` of a document: an invoker's params and namelist preset declared data (6.4).

    ``document`` is the document's ``name`` attribute (what its code reads
    as ``_name``), which :func:`~statechart.scxml.dump` writes back: an
    invoked document's chart is named by where it stands, not by it.
    """

    names: tuple[str, ...]
    document: str | None = None

    def __call__(self, given: JsonValue) -> Datamodel:
        values: dict[str, JsonValue] = dict.fromkeys(self.names)
        preset: list[str] = []
        if isinstance(given, dict):
            for name, value in given.items():
                if name in values:
                    values[name] = check_json(value, name)
                    preset.append(name)
        return Datamodel(values, [f"={name}" for name in preset])


def from_input(names: list[str], document: str | None = None) -> Callable[[JsonValue], Datamodel]:
    """The :class:`FromInput` of a document that declares ``names``."""
    return FromInput(tuple(names), document)


def preset(model: Datamodel, name: str) -> bool:
    """Whether an invoker gave ``name`` a value (its ``<data>`` expression is then not evaluated)."""
    return f"={name}" in model.bound

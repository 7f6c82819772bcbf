"""Errors raised by the statechart package.

Every error derives from :class:`IncarnateError`; the packages above reuse
these classes rather than redefining them. Messages name the chart, state,
transition or site concerned, the offending value and, where one is known,
the fix. The same facts stay available as attributes.

Every error class also has a stable :attr:`IncarnateError.code`, a
kebab-case name that never changes with the wording of its message: match
on it in logs, alerts and API answers rather than on the class name or the
text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar

_CODE = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
_CODES: dict[str, str] = {}


class IncarnateError(Exception):
    """Root of every error raised by incarnate.

    ``code`` is the error's stable, kebab-case identity. Each subclass
    declares its own; a malformed code, or one that another class already
    uses, is refused when the class is defined.
    """

    code: ClassVar[str] = "incarnate-error"

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("code")
        if code is None:
            return
        name = f"{cls.__module__}.{cls.__qualname__}"
        if not isinstance(code, str) or not _CODE.fullmatch(code):
            raise TypeError(
                f"{name}.code must be a kebab-case str (lower-case words joined by '-'), got {code!r}"
            )
        holder = _CODES.setdefault(code, name)
        if holder != name:
            raise TypeError(
                f"{name}.code {code!r} is already the code of {holder}; every error class needs its own code"
            )


_CODES[IncarnateError.code] = f"{IncarnateError.__module__}.{IncarnateError.__qualname__}"


class DefinitionError(IncarnateError, ValueError):
    """One problem found while validating a chart or a registry.

    Validation collects every problem and raises them together in a
    :class:`ChartInvalid` group, so an author fixes them in one pass.
    """

    code = "definition-error"

    def __init__(self, chart: str, where: str, problem: str, fix: str) -> None:
        self.chart = chart
        self.where = where
        self.problem = problem
        self.fix = fix
        super().__init__(f"chart {chart!r}, {where}: {problem}; fix: {fix}")


class UnknownTarget(DefinitionError):
    """A transition or history default names a state that does not exist."""

    code = "unknown-target"


class UnreachableState(DefinitionError):
    """No transition, initial or history default can ever enter the state."""

    code = "unreachable-state"


class MissingInitial(DefinitionError):
    """A compound state's initial child is missing or is not its child."""

    code = "missing-initial"


class AmbiguousId(DefinitionError):
    """Two states, sites or transitions share one id."""

    code = "ambiguous-id"


class FinalWithChildren(DefinitionError):
    """A final state was given child states."""

    code = "final-with-children"


class HistoryOutsideCompound(DefinitionError):
    """A history pseudo-state is not the child of a compound or parallel state."""

    code = "history-outside-compound"


class UnregisteredChart(DefinitionError):
    """A child site names a chart or task that the registry does not hold."""

    code = "unregistered-chart"


class UnboundedRecursion(DefinitionError):
    """A site on a cycle of charts declares no recursive group or ``max_depth``."""

    code = "unbounded-recursion"


class UnstableId(DefinitionError):
    """An id that cannot stay stable across chart versions or event names."""

    code = "unstable-id"


class InvalidDefinition(DefinitionError):
    """Any other definition problem (a bad argument, a mutable context type)."""

    code = "invalid-definition"


class ChartInvalid(ExceptionGroup[DefinitionError], IncarnateError):
    """Every definition problem of one chart or registry, raised together."""

    code = "chart-invalid"

    def __new__(cls, message: str, errors: list[DefinitionError]) -> ChartInvalid:
        return super().__new__(cls, message, errors)

    def derive(self, excs: list[DefinitionError]) -> ChartInvalid:  # type: ignore[override]
        return ChartInvalid(self.message, excs)


class StepError(IncarnateError):
    """A macrostep could not be computed; nothing of it may be committed."""

    code = "step-error"


class RunawayMacrostep(StepError, RuntimeError):
    """A macrostep did not reach a stable configuration within its microstep cap."""

    code = "runaway-macrostep"

    def __init__(self, chart: str, event: str, limit: int, configuration: tuple[str, ...]) -> None:
        self.chart = chart
        self.event = event
        self.limit = limit
        self.configuration = configuration
        super().__init__(
            f"chart {chart!r}: event {event!r} did not settle within {limit} microsteps "
            f"(last configuration {list(configuration)}); an eventless transition or raised "
            "event probably loops forever: add a guard that eventually fails, or raise "
            "Chart(max_microsteps=...) if the work is genuinely that long"
        )


class InstanceFinished(StepError, ValueError):
    """An event was given to a snapshot that has already completed or stopped."""

    code = "instance-finished"

    def __init__(self, chart: str, status: str, event: str) -> None:
        self.chart = chart
        self.status = status
        self.event = event
        super().__init__(
            f"chart {chart!r}: cannot process event {event!r}, the instance is {status}; "
            "finished instances accept no further events"
        )


class UnknownTimer(StepError, LookupError):
    """A timer was fired that is not armed in the snapshot."""

    code = "unknown-timer"

    def __init__(self, chart: str, timer_id: str, armed: tuple[str, ...]) -> None:
        self.chart = chart
        self.timer_id = timer_id
        self.armed = armed
        super().__init__(
            f"chart {chart!r}: timer {timer_id!r} is not armed (armed: {list(armed)}); "
            "it was cancelled or has fired already"
        )


class InvalidEvent(StepError, ValueError):
    """An event handed to the interpreter is malformed."""

    code = "invalid-event"


class CodecError(IncarnateError, ValueError):
    """A value could not be encoded or decoded by the snapshot codec."""

    code = "codec-error"

    def __init__(self, chart: str, path: str, problem: str) -> None:
        self.chart = chart
        self.path = path
        self.problem = problem
        super().__init__(f"chart {chart!r}, at {path}: {problem}")


class UnknownChart(IncarnateError, LookupError):
    """A chart or task name is not registered."""

    code = "unknown-chart"

    def __init__(self, kind: str, name: str, known: tuple[str, ...]) -> None:
        self.kind = kind
        self.name = name
        self.known = known
        super().__init__(
            f"{kind} {name!r} is not registered (registered: {sorted(known)}); register it first"
        )


class SnapshotMismatch(CodecError):
    """A stored snapshot decodes but does not fit the registered chart (a state or site is gone)."""

    code = "snapshot-mismatch"


class StrictTypeError(IncarnateError, TypeError):
    """A value is not of the declared type, and the strict converter converts nothing.

    Raised inside the snapshot codec's structuring hooks; the codec reports it
    as a :class:`CodecError` naming the chart and the field path.
    """

    code = "strict-type"


class ScxmlError(IncarnateError, ValueError):
    """An SCXML document that cannot be loaded, or a chart that cannot be dumped: each problem and its fix."""

    code = "scxml-error"

    def __init__(self, source: str, problems: Sequence[str], *, doing: str = "load SCXML document") -> None:
        self.source = source
        self.problems = tuple(problems)
        listed = "\n".join(f"  - {problem}" for problem in problems)
        super().__init__(f"cannot {doing} {source}: {len(problems)} problem(s)\n{listed}")


class ExpressionError(IncarnateError):
    """An SCXML expression or script failed; the interpreter turns it into ``error.execution``."""

    code = "expression-error"

"""What a guard or action may ask about the macrostep that calls it: the session and the configuration.

Authors' callables receive ``(context, event)``. SCXML expressions can also
read ``_sessionid``, ``_name`` and ``In(state)`` (5.10, 5.9.1), which live in
the interpreter, not in the context: :func:`current` exposes them, read-only,
while a macrostep runs. The interpreter stays pure: the scope is a view of
the macrostep's own working state, set for the duration of one call of
``start``/``step``/``fire``/``stop`` in the calling thread (a context
variable, so threads and asyncio tasks never see each other's).
"""

from __future__ import annotations

import contextvars
from typing import Protocol


class _Running(Protocol):
    """What a scope reads from the interpreter's working copy."""

    session: str | None
    http_location: str | None

    @property
    def chart_name(self) -> str: ...

    def is_active(self, state: str) -> bool: ...

    def active_ids(self) -> tuple[str, ...]: ...


class Scope:
    """The macrostep a callable runs in: its chart, its session and its live configuration."""

    __slots__ = ("_run",)

    def __init__(self, run: _Running) -> None:
        self._run = run

    def __repr__(self) -> str:
        return f"<Scope {self.chart!r} session={self.session!r}>"

    @property
    def chart(self) -> str:
        """The chart's name (SCXML ``_name``)."""
        return self._run.chart_name

    @property
    def session(self) -> str | None:
        """The instance's session id (SCXML ``_sessionid``); ``None`` when the caller gave none."""
        return self._run.session

    @property
    def http_location(self) -> str | None:
        """The instance's Basic HTTP access URL (SCXML C.2); ``None`` when the engine has no HTTP ingress."""
        return self._run.http_location

    def active(self, state: str) -> bool:
        """Whether ``state`` is in the configuration right now (SCXML ``In()``), mid-microstep included."""
        return self._run.is_active(state)

    @property
    def configuration(self) -> tuple[str, ...]:
        """The active states right now, in document order."""
        return self._run.active_ids()


_CURRENT: contextvars.ContextVar[Scope | None] = contextvars.ContextVar("statechart_scope", default=None)


def current() -> Scope:
    """The scope of the macrostep calling this guard or action.

    Raises ``LookupError`` outside a macrostep: call it from a guard, an
    action or another callable the interpreter runs.
    """
    scope = _CURRENT.get()
    if scope is None:
        raise LookupError(
            "statechart.current() is only available while start/step/fire/stop runs a chart's "
            "callables; call it from a guard or an action"
        )
    return scope

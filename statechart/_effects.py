"""Effects: what a step asks the engine to do. Data only; never performed here."""

from __future__ import annotations

from typing import TypeAlias

import attrs

from statechart._event import Event, InvokeId, JsonValue, Timer


@attrs.frozen
class BirthChild:
    """Create the first incarnation of a child slot (a new key, or a re-entered site)."""

    invoke_id: InvokeId
    chart: str | None
    task: str | None
    input: JsonValue
    attempt: int
    lineage: tuple[str, ...]
    state: str


@attrs.frozen
class RetryChild:
    """The incarnation ``failed`` failed; attempt ``attempt`` is due at ``deadline``."""

    failed: InvokeId
    attempt: int
    deadline: float
    error: JsonValue


@attrs.frozen
class ResumeChild:
    """Create a fresh incarnation of a retried slot (new generation, next attempt)."""

    invoke_id: InvokeId
    previous: InvokeId
    chart: str | None
    task: str | None
    input: JsonValue
    attempt: int
    lineage: tuple[str, ...]
    state: str


@attrs.frozen
class CancelChild:
    """Stop the live incarnation of a slot (its site's state was exited, or its key removed).

    Also emitted for a slot waiting for a retry: its retained activation ends
    although no child is running.
    """

    invoke_id: InvokeId


@attrs.frozen
class SendToChild:
    """Deliver ``event`` to the incarnation ``invoke_id``."""

    invoke_id: InvokeId
    event: Event


@attrs.frozen
class SendToParent:
    """Deliver ``event`` to the parent that invoked this instance."""

    event: Event


@attrs.frozen
class SendHttp:
    """Post an event to ``target``, a URL, with the Basic HTTP event I/O processor (SCXML C.2).

    ``event`` is the send's event name (posted as ``_scxmleventname``;
    ``None`` when the send gave none). ``data`` is what the send carries: a
    dict of its namelist and params (posted as form fields) or its content's
    value (posted as the body). ``send_id`` is the author's send id (the
    ``_event.sendid`` of an ``error.communication`` that reports a failed
    delivery); ``origin`` is the sender's own Basic HTTP location, where a
    reply can be posted (``None`` when the engine has no HTTP ingress).
    The engine records the effect with its macrostep and posts it after the
    commit, at least once.
    """

    target: str
    event: str | None
    data: JsonValue
    send_id: str | None = None
    origin: str | None = None


@attrs.frozen
class ArmTimer:
    """Deliver ``timer.event`` at ``timer.deadline`` (fire it with ``fire``)."""

    timer: Timer


@attrs.frozen
class CancelTimer:
    """Forget the armed timer ``timer_id``."""

    timer_id: str


@attrs.frozen
class Logged:
    """A ``log`` action ran."""

    label: str
    data: JsonValue


@attrs.frozen
class ActionFailed:
    """An action, guard or mapper raised; ``error.execution`` was raised internally.

    ``state`` is the state whose entry, exit, transition, done data or site
    ran the failing code; ``transition`` names the transition (its id, or
    ``<state>#<position>``) when a transition's guard or action raised.
    ``error`` is the exception's class name and ``message`` its text.
    """

    state: str
    action: str
    error: str
    message: str
    transition: str | None = None

    def describe(self) -> str:
        """One line for timelines and logs, naming where it happened and what raised."""
        where = f"state {self.state!r}"
        if self.transition is not None:
            where = f"transition {self.transition!r} of {where}"
        return f"error.execution in {where}: {self.action} raised {self.error}: {self.message}"


@attrs.frozen
class RejectedEvent:
    """An event was refused: stale evidence from an older incarnation, or no such slot."""

    event: Event
    reason: str


@attrs.frozen
class Ignored:
    """An event was processed but took no transition: nothing in the configuration wanted it.

    No transition of an active state (or of one of its ancestors) matches
    ``event``, or every matching transition's guard was false, and no
    autoforwarding site passed it to a child. SCXML (3.13) discards such an
    event; the interpreter still reports it, so that a misspelt name or an
    event sent in the wrong state does not vanish silently.
    """

    event: str


@attrs.frozen
class Completed:
    """The instance reached a top-level final state with ``output`` as done data."""

    output: JsonValue


@attrs.frozen
class Stopped:
    """The instance was stopped from outside; its children were cancelled."""

    reason: str


Effect: TypeAlias = (
    BirthChild
    | RetryChild
    | ResumeChild
    | CancelChild
    | SendToChild
    | SendToParent
    | SendHttp
    | ArmTimer
    | CancelTimer
    | Logged
    | ActionFailed
    | RejectedEvent
    | Ignored
    | Completed
    | Stopped
)

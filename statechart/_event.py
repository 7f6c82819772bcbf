"""Events, invocation identities and timers: the values a step consumes."""

from __future__ import annotations

import enum
from typing import TypeAlias, Union

import attrs

JsonValue: TypeAlias = Union[  # noqa: UP007 - a runtime object cattrs can key hooks on
    bool, int, float, str, list["JsonValue"], dict[str, "JsonValue"], None
]
"""Data carried by events, child inputs and outputs: plain JSON values.

Lists, not tuples, so that a value survives an encode/decode round trip
unchanged.
"""


class EventKind(enum.Enum):
    """Where an event came from (SCXML 5.10.1, ``_event.type``)."""

    EXTERNAL = "external"
    INTERNAL = "internal"
    PLATFORM = "platform"


@attrs.frozen
class InvokeId:
    """One incarnation of a child slot, as the parent's interpreter sees it.

    ``key`` is the member key of a fan-out site (``""`` for a single child);
    ``generation`` is the number the parent allocated when it decided the
    birth. Together with the parent instance id they make the durable Ref.
    """

    site: str
    key: str
    generation: int

    def __str__(self) -> str:
        member = f"[{self.key}]" if self.key else ""
        return f"{self.site}{member}#{self.generation}"


@attrs.frozen
class Event:
    """A named event with optional JSON data.

    ``invoke_id`` is set on events that come from a child (its completion,
    failure or messages): it is evidence about one of the receiver's child
    slots. ``send_id`` is SCXML's ``_event.sendid`` (6.2): the
    id the author gave the ``send`` that delivered the event, and ``None``
    when none was given (the timer that delivers a send or an ``after`` has
    an id of its own, :attr:`Timer.id`, which stays out of the event).
    ``origin`` is ``_event.origin``: where a reply can be sent (``#_parent``,
    ``#_<invokeid>``, ``#_scxml_<sessionid>``), set on events a chart sent
    and ``None`` on events sent from outside; an event from a child
    has origin ``#_<invokeid>`` (see :attr:`reply_to`).
    ``_event.origintype`` is the SCXML processor's URI whenever there is an
    origin.

    ``invoke_name`` is the invocation's id as the chart sees it
    (``_event.invokeid``, :attr:`invocation`) when it is not the site's id:
    the interpreter sets it on the event a chart processes, and it stays on
    an event that came from an invocation but is no longer evidence about a
    slot (``invoke_id`` is ``None``): the copy an autoforwarding parent sends
    back to the child, and an event that was queued before its invocation
    was cancelled (see :func:`statechart.event.detach`).

    ``origin_type`` is ``_event.origintype`` when the event came through an
    event I/O processor other than SCXML's (the Basic HTTP one, SCXML C.2:
    its URI, with ``origin`` the sender's URL when it gave one), and
    ``raw`` is ``_event.raw`` when that processor kept the message as it
    arrived (the HTTP request: its request line, content type and body).
    Both are ``None`` on every other event.
    """

    name: str
    data: JsonValue = None
    kind: EventKind = EventKind.EXTERNAL
    send_id: str | None = None
    invoke_id: InvokeId | None = None
    origin: str | None = None
    invoke_name: str | None = None
    origin_type: str | None = None
    raw: str | None = None

    @property
    def invocation(self) -> str | None:
        """``_event.invokeid``: the id of the invocation the event came from, or ``None``."""
        if self.invoke_name is not None:
            return self.invoke_name
        return self.invoke_id.site if self.invoke_id is not None else None

    @property
    def reply_to(self) -> str | None:
        """``_event.origin``: the target that reaches the sender, or ``None`` for an outside event."""
        if self.origin is not None:
            return self.origin
        invocation = self.invocation
        return f"#_{invocation}" if invocation is not None else None


@attrs.frozen
class Timer:
    """A delayed event armed in a snapshot, due at an absolute ``deadline``.

    ``id`` names the timer for ``fire`` and ``cancel``: the send's own id when
    the author gave one, else one the interpreter allocates (``send.<n>``,
    ``after.<state>.<n>``, ``retry.<site>``). ``sequence`` orders timers that
    share a deadline: they fire in the order they were armed. ``target`` is
    where a delayed send goes when due: ``None`` for this instance, else
    ``"#_parent"`` or ``"#_<invokeid>"`` (firing it delivers the event
    there and steps nothing here).
    """

    id: str
    deadline: float
    sequence: int
    event: Event
    target: str | None = None


def done_invoke_event(invoke_id: InvokeId, output: JsonValue = None) -> Event:
    """The event that reports a child's completion to its parent."""
    return Event(f"done.invoke.{invoke_id.site}", output, EventKind.PLATFORM, invoke_id=invoke_id)


def error_invoke_event(invoke_id: InvokeId, error: JsonValue = None) -> Event:
    """The event that reports a child's failure (or cancellation) to its parent."""
    return Event(f"error.invoke.{invoke_id.site}", error, EventKind.PLATFORM, invoke_id=invoke_id)


def child_message_event(invoke_id: InvokeId, name: str, data: JsonValue = None) -> Event:
    """An event a child sent to its parent (``send_parent``); its origin is ``#_<invokeid>``."""
    return Event(name, data, EventKind.EXTERNAL, invoke_id=invoke_id)

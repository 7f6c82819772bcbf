"""Events and what names them: kinds, child incarnations, timers and the child outcome events.

:class:`Event` and :data:`JsonValue` are also exported by :mod:`statechart`;
the rest is what an engine needs to route events between instances: the
:class:`InvokeId` of a child incarnation, the ``done.invoke``,
``error.invoke`` and child message events it reports to the parent, the
:class:`Timer` a snapshot keeps armed, and :func:`detach`, which turns an
event from a child into an ordinary one (autoforwarded back to the child,
or received before its invocation was cancelled).
"""

from statechart._children import detach
from statechart._event import (
    Event,
    EventKind,
    InvokeId,
    JsonValue,
    Timer,
    child_message_event,
    done_invoke_event,
    error_invoke_event,
)

__all__ = [
    "Event",
    "EventKind",
    "InvokeId",
    "JsonValue",
    "Timer",
    "child_message_event",
    "done_invoke_event",
    "error_invoke_event",
    "detach",
]

"""Effects: what a macrostep asks the engine to do, returned as data and never performed here.

``start``, ``step``, ``fire`` and ``stop`` return ``(snapshot, effects)``;
each effect is one of the classes of the :data:`Effect` union (birth,
retry, resume or cancel a child, send to a child or the parent, post over HTTP, arm or
cancel a timer, a log record, a failed action, a rejected or ignored event,
completion, stop).
"""

from statechart._effects import (
    ActionFailed,
    ArmTimer,
    BirthChild,
    CancelChild,
    CancelTimer,
    Completed,
    Effect,
    Ignored,
    Logged,
    RejectedEvent,
    ResumeChild,
    RetryChild,
    SendHttp,
    SendToChild,
    SendToParent,
    Stopped,
)

__all__ = [
    "Effect",
    "ActionFailed",
    "ArmTimer",
    "BirthChild",
    "CancelChild",
    "CancelTimer",
    "Completed",
    "Ignored",
    "Logged",
    "RejectedEvent",
    "ResumeChild",
    "RetryChild",
    "SendHttp",
    "SendToChild",
    "SendToParent",
    "Stopped",
]

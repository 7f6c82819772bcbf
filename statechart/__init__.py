"""Statecharts authored in Python, with SCXML semantics and a pure interpreter.

Define a chart with :func:`state`, :func:`parallel`, :func:`final`,
:func:`history`, :func:`transition` and friends; build it with
:class:`Chart` (which validates it); compute macrosteps with :func:`start`,
:func:`step`, :func:`fire` and :func:`stop`. Nothing here performs I/O,
reads a clock or draws randomness: effects are returned as data.

The root holds what an author writes. The rest is grouped in public
submodules: :mod:`statechart.model` (the authored value classes),
:mod:`statechart.effects` (what a step returns), :mod:`statechart.event`,
:mod:`statechart.snapshot`, :mod:`statechart.codec`,
:mod:`statechart.shape`, :mod:`statechart.diagram`,
:mod:`statechart.errors` and :mod:`statechart.scxml`.
"""

from statechart._chart import Chart, NoContext
from statechart._event import Event, JsonValue
from statechart._interpreter import due_timers, fire, start, step, stop
from statechart._model import (
    RetryPolicy,
    after,
    always,
    assign,
    block,
    cancel,
    final,
    foreach,
    history,
    if_,
    in_state,
    invoke,
    log,
    parallel,
    raise_event,
    send,
    send_child,
    send_parent,
    state,
    transition,
)
from statechart._registry import Registry
from statechart._scope import Scope, current

__all__ = [
    "Chart",
    "NoContext",
    "Registry",
    "state",
    "parallel",
    "final",
    "history",
    "transition",
    "always",
    "after",
    "invoke",
    "RetryPolicy",
    "assign",
    "raise_event",
    "send",
    "cancel",
    "send_parent",
    "send_child",
    "log",
    "if_",
    "foreach",
    "block",
    "in_state",
    "current",
    "Scope",
    "Event",
    "JsonValue",
    "start",
    "step",
    "fire",
    "stop",
    "due_timers",
]

"""The authored values: what the authoring functions of :mod:`statechart` build.

``state(...)`` returns a :class:`StateNode`, ``transition(...)`` a
:class:`Transition`, ``invoke(...)`` a :class:`Site` and ``assign``,
``raise_event``, ``send``… the action classes of the closed :data:`Action`
union. Import them to annotate values built outside a ``Chart(...)`` call
(``OPEN: StateNode[Approval] = state(...)``), or to inspect a chart's tree.
"""

from statechart._model import (
    BASIC_HTTP_PROCESSOR,
    SCXML_PROCESSOR,
    Action,
    Assign,
    Block,
    Branch,
    Cancel,
    ForEach,
    If,
    InState,
    Log,
    Raise,
    Send,
    SendChild,
    SendParent,
    Site,
    StateKind,
    StateNode,
    Transition,
)

__all__ = [
    "BASIC_HTTP_PROCESSOR",
    "SCXML_PROCESSOR",
    "Action",
    "Assign",
    "Block",
    "Branch",
    "Cancel",
    "ForEach",
    "If",
    "InState",
    "Log",
    "Raise",
    "Send",
    "SendChild",
    "SendParent",
    "Site",
    "StateKind",
    "StateNode",
    "Transition",
]

"""Write a chart as an SCXML document with the Python datamodel: the inverse of :func:`load`.

Every callable the loader builds keeps its Python source, so a loaded chart
is written back as the document it came from (up to layout), its invoked
child charts inline. Charts written with the authoring API are dumpable
when everything in them has an SCXML form: constant names, data and delays,
``in_state`` guards, the loader's expression values, and child sites that
run a companion chart. A Python callable (a lambda guard, a function
action), a task or fan-out site, a delayed transition or another construct
SCXML lacks is refused with :class:`~statechart.scxml.ScxmlError`, which
names each one and what to write instead.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any, assert_never
from xml.sax.saxutils import escape

from statechart._chart import Chart, NoContext
from statechart._codec import check_json
from statechart._model import (
    Action,
    Assign,
    Block,
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
    _callable_name,
    for_every_action,
)
from statechart._validate import _transition_label
from statechart.errors import ScxmlError
from statechart.scxml._datamodel import Datamodel, FromInput
from statechart.scxml._load import (
    CHART_NS,
    SCXML_NS,
    AssignExpr,
    Bound,
    Cond,
    Constant,
    ContentChoice,
    DataInit,
    Delay,
    IdLocation,
    InvokeInput,
    Items,
    LogValue,
    Markup,
    Payload,
    Script,
    SrcChoice,
    Text,
    Unbound,
    Value,
    _bind,
    _Expr,
    generated_invoke_id,
)

_LOADED_MAX_MICROSTEPS: int = inspect.signature(Chart.__init__).parameters["max_microsteps"].default
"""The microstep cap of a loaded chart (the loader keeps ``Chart``'s default)."""

_ATTRIBUTE_ESCAPES = {'"': "&quot;", "\n": "&#10;", "\r": "&#13;", "\t": "&#9;"}
_TEXT_ESCAPES = {"\r": "&#13;"}
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters no XML 1.0 document can hold, even as character references."""

_FROM_SCXML = "or load the chart from SCXML"


class _Element:
    """One element to write: its tag, its attributes in order, and its children or its text."""

    __slots__ = ("attributes", "children", "tag", "text")

    def __init__(self, tag: str, text: str | None = None, **attributes: str | None) -> None:
        self.tag = tag
        self.text = text
        self.attributes = {name: value for name, value in attributes.items() if value is not None}
        self.children: list[_Element] = []

    def add(self, *children: _Element) -> _Element:
        self.children.extend(children)
        return self

    def render(self, depth: int, lines: list[str]) -> None:
        pad = "  " * depth
        written = "".join(
            f' {name}="{escape(value, _ATTRIBUTE_ESCAPES)}"' for name, value in self.attributes.items()
        )
        if self.text is not None:
            lines.append(f"{pad}<{self.tag}{written}>{escape(self.text, _TEXT_ESCAPES)}</{self.tag}>")
        elif self.children:
            lines.append(f"{pad}<{self.tag}{written}>")
            for child in self.children:
                child.render(depth + 1, lines)
            lines.append(f"{pad}</{self.tag}>")
        else:
            lines.append(f"{pad}<{self.tag}{written}/>")


class _Markup(_Element):
    """An element whose content is inline XML markup, written as it is (the loader's :class:`Markup`)."""

    __slots__ = ()

    def render(self, depth: int, lines: list[str]) -> None:
        pad = "  " * depth
        written = "".join(
            f' {name}="{escape(value, _ATTRIBUTE_ESCAPES)}"' for name, value in self.attributes.items()
        )
        lines.append(f"{pad}<{self.tag}{written}>{self.text}</{self.tag}>")


def _seconds(delay: float) -> str:
    """A delay as a CSS2 time the loader parses back to the same float (no exponent)."""
    if delay.is_integer():
        return f"{int(delay)}s"
    return f"{Decimal(repr(delay)):f}s"


def _data_block(action: Action[Any]) -> DataInit | None:
    """The ``<data>`` of a block as the loader builds it (``Block((Assign(DataInit),))``)."""
    if type(action) is Block and len(action.actions) == 1:
        inner = action.actions[0]
        if type(inner) is Assign and type(inner.fn) is DataInit:
            return inner.fn
    return None


def _script_block(action: Action[Any]) -> Script | None:
    """The top-level ``<script>`` of a block as the loader builds it (``Block((Assign(Script),))``)."""
    if type(action) is Block and len(action.actions) == 1:
        inner = action.actions[0]
        if type(inner) is Assign and type(inner.fn) is Script:
            return inner.fn
    return None


def _late_data(state_id: str, entry: tuple[Action[Any], ...]) -> list[DataInit] | None:
    """The late-bound ``<data>`` of a state: its entry's ``If(Branch(Unbound(id), data…, Bound(id)))``."""
    if not entry or type(first := entry[0]) is not If or len(first.branches) != 1:
        return None
    branch = first.branches[0]
    if branch.guard != Unbound(state_id) or not branch.actions:
        return None
    *blocks, mark = branch.actions
    if type(mark) is not Assign or mark.fn != Bound(state_id):
        return None
    inits = [init for block in blocks if (init := _data_block(block)) is not None]
    return inits if len(inits) == len(blocks) else None


class _Dumper:
    """Builds the document of one chart, collecting every construct SCXML cannot say before refusing."""

    def __init__(self, chart: Chart[Any], *, child: bool = False) -> None:
        self.chart = chart
        self.invoked = child
        self.problems: list[str] = []
        self.data_ids: list[str] = []
        self.late = False
        self.datamodel = chart.context_type is Datamodel

    def problem(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")

    def scripted(self, where: str, what: str) -> bool:
        """Whether ``what`` can run here: SCXML expressions and data need a :class:`Datamodel` context."""
        if not self.datamodel and self.chart.context_type is NoContext:
            self.problem(where, f"{what} needs a datamodel; give the chart context=Datamodel")
        return self.datamodel

    def expression(self, where: str, what: str, value: object, kind: type[_Expr], advice: str) -> str | None:
        """The Python source of a loader expression of ``kind``, or ``None`` with a problem."""
        if isinstance(value, _Expr) and type(value) is kind:
            return value.code.source if self.scripted(where, f"{what} {value!r}") else None
        self.problem(where, f"{what} {_callable_name(value)} is a Python callable; {advice}")
        return None

    def literal(self, where: str, what: str, value: object) -> str | None:
        """A constant as a Python literal (``repr`` of its JSON value)."""
        try:
            check_json(value, what)
        except TypeError as error:
            self.problem(where, f"{error}; SCXML data is JSON: use lists, dicts, strings and numbers")
            return None
        return repr(value)

    def json_text(self, where: str, what: str, value: object) -> str | None:
        """A constant as inline JSON content (what the loader's inline content parses back)."""
        if self.literal(where, what, value) is None:
            return None
        return json.dumps(value)

    # ------------------------------------------------------------ document

    def document(self) -> _Element:
        chart = self.chart
        if not self.datamodel and chart.context_type is not NoContext:
            self.problem(
                "the chart",
                f"context {chart.context_type.__qualname__} has no SCXML form; SCXML keeps data in its "
                "datamodel: use context=Datamodel (or none, for a chart without data)",
            )
        if chart.max_microsteps != _LOADED_MAX_MICROSTEPS:
            self.problem(
                "the chart",
                f"max_microsteps={chart.max_microsteps} has no SCXML form (a loaded chart has "
                f"{_LOADED_MAX_MICROSTEPS}); leave it at the default",
            )
        inits, scripts = self.setup()
        data = [self.data("the chart's setup", init) for init in inits]
        states = [self.state(node) for node in chart.roots]
        self.check_initial_context()
        root = _Element(
            "scxml",
            xmlns=SCXML_NS,
            version="1.0",
            datamodel="python",
            name=self.document_name(),
            initial=" ".join(chart.initial_ids) or None,
            binding="late" if self.late else None,
        )
        if data:
            root.add(_Element("datamodel").add(*data))
        for script in scripts:
            if self.scripted("the chart's setup", "<script>"):
                root.add(_Element("script", script.code.source))
        return root.add(*states)

    def document_name(self) -> str:
        """The ``<scxml name>``: the chart's name, or for an invoked document the name it was loaded with.

        The loader names an invoked document's chart by where it stands
        (its invoking chart and site), and keeps the document's own
        ``name`` (its ``_name``) beside it, so that is what is written back.
        """
        build = self.chart.context_from_input
        if self.invoked and type(build) is FromInput and build.document is not None:
            return build.document
        return self.chart.name

    def setup(self) -> tuple[list[DataInit], list[Script]]:
        """The chart's setup as SCXML has it (5.2.2, 5.8): every ``<data>``, then the top-level scripts."""
        inits: list[DataInit] = []
        scripts: list[Script] = []
        for action in self.chart.setup:
            init, script = _data_block(action), _script_block(action)
            if init is not None and scripts:
                self.problem(
                    "the chart's setup",
                    f"data {init.id!r} comes after a script; SCXML initialises every <data> before "
                    "the top-level <script> runs: put the data first",
                )
            elif init is not None:
                inits.append(init)
            elif script is not None:
                scripts.append(script)
            else:
                self.problem(
                    "the chart's setup",
                    f"{_describe(action)} has no SCXML form; the setup holds only <data> and top-level "
                    "<script>, each a Block of one Assign(DataInit | Script) as load builds them: move "
                    "other actions to the initial state's entry",
                )
        return inits, scripts

    def check_initial_context(self) -> None:
        """The chart starts as load starts a document: every ``<data>`` declared, none assigned yet."""
        chart = self.chart
        build = chart.context_from_input
        if chart.context_type is NoContext:
            if build is not None:
                self.problem("the chart", f"context_from_input {_callable_name(build)} has no SCXML form")
            return
        if not self.datamodel:
            return
        expected = Datamodel(dict.fromkeys(self.data_ids))
        try:
            initial = Datamodel() if build is None else build(None)
        except Exception as error:  # noqa: BLE001 - any failure of the author's builder is reported
            self.problem("the chart", f"context_from_input(None) raised {type(error).__name__}: {error}")
            return
        if initial != expected:
            self.problem(
                "the chart",
                f"its initial context is {initial!r}; a loaded document starts with its <data> declared "
                f"and unassigned, {expected!r}: declare each variable with a DataInit in setup",
            )

    def data(self, where: str, init: DataInit) -> _Element:
        """``<data id=… expr=…>`` or ``<data id=…>content</data>`` (5.3)."""
        self.data_ids.append(init.id)
        value = init.value
        what = f"data {init.id!r}"
        if not self.scripted(where, what) or value is None:
            return _Element("data", id=init.id)
        if type(value) is Constant:
            return _Element("data", self.json_text(where, what, value.value), id=init.id)
        if type(value) is Markup:
            return _Markup("data", value.value, id=init.id)
        advice = f"give {what} an SCXML expression (Value) or constant content, {_FROM_SCXML}"
        return _Element("data", id=init.id, expr=self.expression(where, what, value, Value, advice))

    # -------------------------------------------------------------- states

    def state(self, node: StateNode[Any]) -> _Element:
        if node.kind is StateKind.HISTORY:
            return self.history(node)
        where = f"state {node.id!r}"
        if node.kind in (StateKind.ATOMIC, StateKind.COMPOUND) and bool(node.children) != (
            node.kind is StateKind.COMPOUND
        ):
            self.problem(where, f"a {node.kind.value} state with {len(node.children)} children")
        tag = _state_tag(node.kind)
        proper = [child for child in node.children if child.kind is not StateKind.HISTORY]
        initial = " ".join(node.initial) if node.kind is StateKind.COMPOUND and node.initial else None
        element = _Element(tag, id=node.id, initial=None if node.initial_actions else initial)
        entry = node.entry
        late = _late_data(node.id, entry)
        if late is not None:
            self.late = True
            entry = entry[1:]
            element.add(_Element("datamodel").add(*(self.data(where, init) for init in late)))
        if node.initial_actions and proper:
            initial_transition = _Element("transition", target=initial or proper[0].id)
            self.content(f"initial actions of {where}", node.initial_actions, initial_transition)
            element.add(_Element("initial").add(initial_transition))
        self.handlers(f"entry of {where}", "onentry", entry, element)
        self.handlers(f"exit of {where}", "onexit", node.exit, element)
        for position, t in enumerate(node.transitions):
            element.add(self.transition(node.id, position, t))
        for position, site in enumerate(node.sites):
            element.add(self.invoke(where, site, generated_invoke_id(node.id, position)))
        if node.kind is StateKind.FINAL and node.done_data is not None:
            done = _Element("donedata")
            self.payload(f"done data of {where}", node.done_data, done)
            element.add(done)
        histories = [child for child in node.children if child.kind is StateKind.HISTORY]
        return element.add(*(self.state(child) for child in proper + histories))

    # -------------------------------------------------------------- invoke

    def invoke(self, where: str, site: Site[Any], generated: str) -> _Element:
        """``<invoke>`` (6.4): the child chart inline or ``srcexpr``, its input, ``<finalize>`` (6.5).

        A site whose invocations are named by the platform (``generated_id``)
        is written without ``id``; the loader gives it the id ``generated``
        again, so it must be that one.
        """
        what = f"site {site.id!r} (<invoke>)"
        if site.generated_id and site.id != generated:
            self.problem(
                where,
                f"{what} names its invocations <state>.<generation> (generated_id) but its id is not "
                f"{generated!r}, the one the loader gives an <invoke> without id there; give it that "
                "id, or leave generated_id out",
            )
        id_location = None
        if site.id_location is not None:
            if not site.generated_id:
                self.problem(
                    where,
                    f"{what} has an id and an id_location; an <invoke> takes id= or idlocation=, not "
                    "both (6.4): set generated_id, or leave id_location out",
                )
            elif type(site.id_location) is IdLocation:
                id_location = site.id_location.location
            else:
                self.problem(
                    where,
                    f"id_location {_callable_name(site.id_location)} of {what} is a Python callable; store "
                    f"the id with idlocation (IdLocation), {_FROM_SCXML}",
                )
        self.site_problems(where, what, site)
        content_expr = None
        if type(site.choose) is ContentChoice:
            srcexpr = None
            if self.scripted(where, f"content expr of {what}"):
                content_expr = site.choose.code.source
        else:
            srcexpr = None if site.choose is None else self.src_choice(where, what, site.choose)
        kind, payload = self.invoke_input(where, what, site.input)
        if id_location is not None:
            self.scripted(where, f"idlocation of {what}")
        element = _Element(
            "invoke",
            id=None if site.generated_id else site.id,
            srcexpr=srcexpr,
            typeexpr=kind,
            idlocation=id_location,
            autoforward="true" if site.autoforward else None,
        )
        if payload is not None:
            self.payload(f"input of {what} in {where}", payload, element)
        if content_expr is not None:
            element.add(_Element("content", expr=content_expr))
        if site.chart is not None:
            child = next((chart for chart in self.chart.companions if chart.name == site.chart), None)
            if child is None:
                self.problem(
                    where,
                    f"{what} invokes chart {site.chart!r}, which is not among the chart's companions; "
                    "dump the child chart separately, or load both from SCXML",
                )
            else:
                # The child's chart name, kept: loaded again from another file, or from a file
                # of its own, its place would name it otherwise.
                document = self.child(where, what, child)
                document.attributes["xmlns:incarnate"] = CHART_NS
                document.attributes["incarnate:chart"] = child.name
                element.add(_Element("content").add(document))
        if site.finalize:
            finalize = _Element("finalize")
            self.content(f"finalize of {what} in {where}", site.finalize, finalize)
            element.add(finalize)
        return element

    def site_problems(self, where: str, what: str, site: Site[Any]) -> None:
        """What a site does that an ``<invoke>`` cannot say (6.4)."""
        if site.task is not None:
            self.problem(
                where, f"{what} runs task {site.task!r}; SCXML invokes SCXML documents: invoke a chart"
            )
        if site.members is not None:
            self.problem(
                where,
                f"{what} fans out (map={_callable_name(site.members)}); an <invoke> starts one child: "
                "keep the chart in Python",
            )
        if site.retry.max_attempts > 1:
            self.problem(
                where,
                f"{what} retries (max_attempts={site.retry.max_attempts}); SCXML never restarts an "
                "invoked child: leave retry= out",
            )
        if site.group is not None or site.max_depth is not None:
            self.problem(
                where,
                f"{what} is recursive (group={site.group!r}, max_depth={site.max_depth}), which SCXML "
                "has no form for: leave group= and max_depth= out",
            )
        if site.output is not None:
            self.problem(
                where,
                f"{what} maps the child's output with {_callable_name(site.output)}; SCXML gives it as "
                f"the data of done.invoke.{site.id}: assign _event.data in <finalize> (finalize=) instead",
            )

    def src_choice(self, where: str, what: str, choose: object) -> str | None:
        """``srcexpr``: the source of the loader's choice among the documents beside the invoking one."""
        if type(choose) is not SrcChoice:
            self.problem(
                where,
                f"{what} chooses its chart with {_callable_name(choose)}, a Python callable; name the "
                f"document with srcexpr (SrcChoice), {_FROM_SCXML}",
            )
            return None
        return choose.code.source if self.scripted(where, f"srcexpr of {what}") else None

    def invoke_input(self, where: str, what: str, value: object) -> tuple[str | None, Payload | None]:
        """A child's input as its ``typeexpr`` and the payload its namelist and params are (6.4)."""
        if value is None:
            return None, None
        if type(value) is not InvokeInput:
            described = f"{_callable_name(value)} is a Python callable" if callable(value) else f"{value!r}"
            self.problem(
                where,
                f"{what} input {described}; an <invoke> passes its namelist and <param> values "
                f"(InvokeInput), {_FROM_SCXML}",
            )
            return None, None
        payload = value.payload
        if payload is not None and (payload.content is not None or not (payload.names or payload.params)):
            self.problem(
                where,
                f"{what} input {payload!r}: an <invoke> takes namelist and <param>, not content (6.4); "
                "give the Payload names or params, or no payload",
            )
            payload = None
        if value.kind is None:
            return None, payload
        advice = f"give the type as an SCXML typeexpr (Text), {_FROM_SCXML}"
        return self.expression(where, f"typeexpr of {what}", value.kind, Text, advice), payload

    def child(self, where: str, what: str, child: Chart[Any]) -> _Element:
        """The ``<scxml>`` element of an invoked chart (with its own children), its problems the site's."""
        dumper = _Dumper(child, child=True)
        root = dumper.document()
        self.problems.extend(f"{where}: {what}: in chart {child.name!r}: {p}" for p in dumper.problems)
        return root

    def history(self, node: StateNode[Any]) -> _Element:
        """``<history type=…>`` and its default transition (3.10)."""
        where = f"history {node.id!r}"
        element = _Element("history", id=node.id, type="deep" if node.deep else None)
        if len(node.transitions) > 1:
            self.problem(where, "a history state takes one default transition")
        if not node.transitions:
            return element
        default = node.transitions[0]
        if default.events or default.guard is not None or default.delay is not None:
            self.problem(where, "its default transition has an event, guard or delay; SCXML's has none")
        if default.targets or default.actions:
            transition = _Element("transition", target=" ".join(default.targets) or None)
            self.content(f"default of {where}", default.actions, transition)
            element.add(transition)
        return element

    def transition(self, source: str, position: int, t: Transition[Any]) -> _Element:
        """``<transition event=… target=… cond=… type=…>`` (3.5)."""
        where = _transition_label(source, position, t)
        if t.delay is not None:
            self.problem(
                where,
                f"after({t.delay:g}) is a delayed transition, which SCXML has not: send a delayed event "
                "on entry (<send event=… delay=… id=…>), cancel it on exit, and take this transition on it",
            )
        if t.id is not None:
            self.problem(where, f"id {t.id!r}: SCXML transitions have no id; leave id= out")
        for event in t.events:
            if not event or event.split() != [event]:
                self.problem(where, f"event descriptor {event!r} is not one SCXML token")
        element = _Element(
            "transition",
            event=" ".join(t.events) or None,
            target=" ".join(t.targets) or None,
            cond=None if t.guard is None else self.condition(where, "guard", t.guard),
            type="internal" if t.internal else None,
        )
        self.content(where, t.actions, element)
        return element

    def condition(self, where: str, what: str, guard: object) -> str | None:
        """A guard as a ``cond``: ``in_state(x)`` is ``In('x')`` (5.9.1)."""
        if type(guard) is InState:
            return f"In({guard.state!r})"
        advice = f"write the {what} as an SCXML cond expression, {_FROM_SCXML}"
        return self.expression(where, what, guard, Cond, advice)

    # ------------------------------------------------ executable content

    def handlers(self, where: str, tag: str, actions: tuple[Action[Any], ...], parent: _Element) -> None:
        """Entry or exit content: each leading :class:`Block` a handler of its own, the rest one (4.9)."""
        lead = 0
        while lead < len(actions) and type(actions[lead]) is Block:
            lead += 1
        blocks = [block.actions for block in actions[:lead] if type(block) is Block] + [actions[lead:]]
        for block in blocks:
            handler = _Element(tag)
            self.content(where, block, handler)
            if handler.children:
                parent.add(handler)

    def content(
        self, where: str, actions: tuple[Action[Any], ...], parent: _Element, nested: bool = False
    ) -> None:
        """One block of executable content; a :class:`Block` that ends it is inlined (it stops the same)."""
        for position, action in enumerate(actions):
            if type(action) is Block and not nested and position == len(actions) - 1:
                self.content(where, action.actions, parent)
            else:
                element = self.action(where, action)
                if element is not None:
                    parent.add(element)

    def action(self, where: str, action: Action[Any]) -> _Element | None:
        """The element of one action, or ``None`` when it has no SCXML form (a problem says why)."""
        return _DUMP[type(action)](self, where, action)

    def log(self, where: str, action: Log) -> _Element:
        """``<log label=… expr=…>`` (4.7)."""
        expr = None
        if callable(action.data):
            advice = f"log an SCXML expression (LogValue) or a constant, {_FROM_SCXML}"
            expr = self.expression(where, "log data", action.data, LogValue, advice)
        elif action.data is not None:
            expr = self.literal(where, "log data", action.data)
        return _Element("log", label=action.label or None, expr=expr)

    def cancel(self, where: str, action: Cancel) -> _Element:
        """``<cancel sendid=…>`` or ``sendidexpr`` (6.3)."""
        element = _Element("cancel")
        self.name(where, element, "sendid", action.send_id)
        return element

    def send_parent(self, where: str, action: SendParent) -> None:
        self.problem(
            where,
            f"{_describe(action)} is not written as SCXML; write send({action.event!r}, "
            "target='#_parent'), which is <send target=\"#_parent\">",
        )

    def send_child(self, where: str, action: SendChild) -> None:
        self.problem(
            where,
            f"{_describe(action)} is not written as SCXML; write send({action.event!r}, "
            f"target='#_{action.site}'), which is <send target=\"#_{action.site}\">",
        )

    def nested_block(self, where: str, action: Block[Any]) -> None:
        """A block inside executable content (one that ends a handler is inlined by :meth:`content`)."""
        self.problem(
            where,
            "a Block nested in executable content has no SCXML form (each handler is one "
            "block, 4.9): give it an <onentry>/<onexit> handler of its own, or inline its actions",
        )

    def raise_(self, where: str, action: Raise) -> _Element:
        """``<raise>``; with data, the same internal event as ``<send target="#_internal">`` (6.2.4)."""
        if not action.event:
            self.problem(where, "raise needs an event name")
        if action.data is None:
            return _Element("raise", event=action.event)
        element = _Element("send", event=action.event, target="#_internal")
        self.payload(where, action.data, element)
        return element

    def send(self, where: str, action: Send) -> _Element:
        """``<send>`` with its names or their expressions, delay, id and data (6.2)."""
        element = _Element("send")
        self.name(where, element, "event", action.event)
        self.name(where, element, "target", action.target)
        self.name(where, element, "type", action.type)
        if action.event is None and action.data is None:
            self.problem(where, "a send needs an event name (event=, eventexpr= or content, 6.2)")
        if action.id is not None:
            element.attributes["id"] = action.id
        if action.id_location is not None:
            if action.id is not None:
                self.problem(where, "a send takes id= or idlocation=, not both (6.2.4)")
            if type(action.id_location) is IdLocation:
                if self.scripted(where, "idlocation"):
                    element.attributes["idlocation"] = action.id_location.location
            else:
                self.problem(
                    where,
                    f"id_location {_callable_name(action.id_location)} is a Python callable; store the "
                    f"id with idlocation (IdLocation), {_FROM_SCXML}",
                )
        delay = action.delay
        if callable(delay):
            advice = f"compute the delay with an SCXML delayexpr (Delay), {_FROM_SCXML}"
            source = self.expression(where, "delay", delay, Delay, advice)
            if source is not None:
                element.attributes["delayexpr"] = source
        elif isinstance(delay, bool) or not 0 <= delay < float("inf"):
            self.problem(where, f"delay {delay!r} is not a number of seconds >= 0")
        elif delay:
            element.attributes["delay"] = _seconds(float(delay))
            if action.target == "#_internal":
                self.problem(where, "a send to #_internal cannot be delayed (6.2.4)")
        self.payload(where, action.data, element)
        return element

    def name(self, where: str, element: _Element, attribute: str, value: object) -> None:
        """A constant name as ``attribute``, or its expression as ``attribute + "expr"``."""
        if value is None:
            return
        if isinstance(value, str):
            element.attributes[attribute] = value
            return
        advice = f"give {attribute} a constant, or an SCXML {attribute}expr (Text), {_FROM_SCXML}"
        source = self.expression(where, attribute, value, Text, advice)
        if source is not None:
            element.attributes[f"{attribute}expr"] = source

    def payload(self, where: str, data: object, element: _Element) -> None:
        """Event or done data: ``namelist``, ``<param>`` and ``<content>`` of ``element`` (5.6, 5.7)."""
        if data is None:
            return
        if type(data) is not Payload:
            if callable(data):
                self.content_element(where, data, element)
            else:
                element.add(_Element("content", expr=self.literal(where, "data", data)))
            return
        if not self.scripted(where, "event data"):
            return
        if data.content is not None and (data.names or data.params):
            self.problem(where, "data has content and namelist or params; SCXML takes one or the other (5.6)")
        if data.names:
            element.attributes["namelist"] = " ".join(data.names)
        for param, value in data.params:
            advice = f"give param {param!r} an SCXML expression (Value), {_FROM_SCXML}"
            source = self.expression(where, f"param {param!r}", value, Value, advice)
            kind = "location" if type(value) is Value and value.kind == "location" else "expr"
            element.add(_Element("param", name=param, **{kind: source}))
        if data.content is not None:
            self.content_element(where, data.content, element)
        elif not data.names and not data.params:
            element.add(_Element("content", expr="{}"))

    def content_element(self, where: str, value: object, element: _Element) -> None:
        """``<content expr=…>`` for an expression, ``<content>json</content>`` for constant content."""
        if type(value) is Constant:
            element.add(_Element("content", self.json_text(where, "content", value.value)))
            return
        if type(value) is Markup:
            element.add(_Markup("content", value.value))
            return
        advice = f"give the data as an SCXML expression (Value) or a constant, {_FROM_SCXML}"
        element.add(_Element("content", expr=self.expression(where, "data", value, Value, advice)))

    def if_(self, where: str, action: If[Any]) -> _Element:
        """``<if>``/``<elseif>``/``<else>`` (4.3); an unguarded branch before the last is ``cond="True"``."""
        branches = action.branches
        if not branches:
            return _Element("if", cond="False")
        element = _Element("if", cond=self.branch_condition(where, branches[0].guard))
        for position, branch in enumerate(branches):
            if position and branch.guard is None and position == len(branches) - 1:
                element.add(_Element("else"))
            elif position:
                element.add(_Element("elseif", cond=self.branch_condition(where, branch.guard)))
            self.content(where, branch.actions, element, nested=True)
        return element

    def branch_condition(self, where: str, guard: object) -> str | None:
        return "True" if guard is None else self.condition(where, "if condition", guard)

    def foreach(self, where: str, action: ForEach[Any]) -> _Element:
        """``<foreach array=… item=… index=…>`` (4.6), binding datamodel variables as load does."""
        if action.bind is not _bind:
            self.problem(
                where,
                f"foreach binds with {_callable_name(action.bind)}; SCXML's foreach sets datamodel "
                f"variables (the loader's binder), {_FROM_SCXML}",
            )
        advice = f"give the foreach an SCXML array expression (Items), {_FROM_SCXML}"
        array = self.expression(where, "foreach array", action.items, Items, advice)
        element = _Element("foreach", array=array, item=action.item, index=action.index)
        self.content(where, action.actions, element, nested=True)
        return element

    def assign(self, where: str, action: Assign[Any]) -> _Element | None:
        """``<assign>`` (5.4) from an :class:`AssignExpr`, ``<script>`` (4.8) from a :class:`Script`."""
        fn = action.fn
        if type(fn) is Script:
            return _Element("script", fn.code.source) if self.scripted(where, "<script>") else None
        if type(fn) is not AssignExpr:
            self.problem(
                where,
                f"assign {action.name} is a Python callable; write it as <assign> or <script> "
                f"(AssignExpr, Script), {_FROM_SCXML}",
            )
            return None
        what = f"assign {fn.location!r}"
        if not self.scripted(where, what):
            return None
        if type(fn.value) is Constant:
            value = fn.value.value
            text = None if value is None else self.json_text(where, what, value)
            return _Element("assign", text, location=fn.location)
        if type(fn.value) is Markup:
            return _Markup("assign", fn.value.value, location=fn.location)
        advice = f"assign an SCXML expression (Value) or constant content, {_FROM_SCXML}"
        return _Element(
            "assign", location=fn.location, expr=self.expression(where, what, fn.value, Value, advice)
        )


def _state_tag(kind: StateKind) -> str:
    """The element of each state kind (SCXML 3.3-3.7, 3.10)."""
    match kind:
        case StateKind.ATOMIC | StateKind.COMPOUND:
            return "state"
        case StateKind.PARALLEL:
            return "parallel"
        case StateKind.FINAL:
            return "final"
        case StateKind.HISTORY:
            return "history"
        case _:
            assert_never(kind)


_DUMP: dict[type[Any], Callable[[_Dumper, str, Any], _Element | None]] = for_every_action(
    "the SCXML dump (statechart.scxml._dump._DUMP)",
    {
        Assign: _Dumper.assign,
        Raise: _Dumper.raise_,
        Send: _Dumper.send,
        Cancel: _Dumper.cancel,
        SendParent: _Dumper.send_parent,
        SendChild: _Dumper.send_child,
        Log: _Dumper.log,
        If: _Dumper.if_,
        ForEach: _Dumper.foreach,
        Block: _Dumper.nested_block,
    },
)
"""How each action class is written (``None``: it has no SCXML form, and a problem was recorded)."""


def _describe(action: Action[Any]) -> str:
    """An action as a problem names it: ``assign <name>``, ``Raise('go')``, ``Block``…"""
    match action:
        case Assign():
            return f"assign {action.name}"
        case Raise() | SendParent() | SendChild():
            return f"{type(action).__name__}({action.event!r})"
        case Send():
            return type(action).__name__ if action.event is None else f"Send({action.event!r})"
        case Cancel() | Log() | If() | ForEach() | Block():
            return type(action).__name__
        case _:
            assert_never(action)


def dump(chart: Chart[Any]) -> str:
    """The SCXML document of a chart, as text: ``load(dump(chart))`` behaves as ``chart``.

    The document has the Python datamodel, the chart's name and initial
    states, and every state, transition, handler and datamodel variable in
    the chart's order (a history state after its siblings, where the loader
    puts it). Constant names and data are written as they are (data as
    Python literals, or JSON content), expressions as the Python source the
    loader kept. A site's child chart (one of ``chart.companions``) is written
    inline, as ``<invoke><content><scxml>…``, with its own children (a
    companion no site runs is not written); a site
    whose chart a ``srcexpr`` picks is written with that ``srcexpr``, so the
    document must be loaded beside the same documents (with the same
    ``base``) for the expression to find them. Raises :class:`ScxmlError`
    listing every construct that has no SCXML form, each with what to write
    instead.
    """
    dumper = _Dumper(chart)
    root = dumper.document()
    if dumper.problems:
        raise ScxmlError(f"chart {chart.name!r}", dumper.problems, doing="dump")
    lines = ['<?xml version="1.0" encoding="UTF-8"?>']
    root.render(0, lines)
    text = "\n".join(lines) + "\n"
    illegal = _NOT_XML.search(text)
    if illegal is not None:
        line = text.count("\n", 0, illegal.start()) + 1
        raise ScxmlError(
            f"chart {chart.name!r}",
            [f"line {line}: {illegal.group()!r} cannot be written in XML 1.0; remove it from the chart"],
            doing="dump",
        )
    return text

"""Load an SCXML document into a :class:`~statechart.Chart` with the Python datamodel.

The loader builds on the authoring API (``state``, ``transition``,
``send``, ``if_``, ``foreach``…): a loaded chart is an ordinary chart whose
context is a :class:`~statechart.scxml.Datamodel` and whose guards and
actions evaluate the document's Python expressions.
"""

from __future__ import annotations

import json
import re
import xml.parsers.expat
from collections.abc import Callable
from typing import Any
from xml.sax.saxutils import escape

import attrs
from attrs import Factory

from statechart import errors
from statechart._chart import Chart
from statechart._codec import check_json
from statechart._event import Event, JsonValue
from statechart._model import (
    HTTP_SEND_TYPES,
    Action,
    Assign,
    Block,
    Branch,
    Cancel,
    ForEach,
    If,
    Log,
    Raise,
    Send,
    Site,
    StateKind,
    StateNode,
    Transition,
)
from statechart.errors import ExpressionError, ScxmlError
from statechart.scxml._datamodel import (
    SYSTEM_VARIABLES,
    Code,
    Datamodel,
    EventView,
    assign,
    evaluate,
    from_input,
    preset,
    run_script,
)
from statechart.scxml._source import (
    Folder,
    Source,
    canonical,
    document_key,
    folder_of,
    read_document,
    read_relative,
    sibling_documents,
    stem_of,
)

INVOKE_TYPES = ("scxml", "http://www.w3.org/TR/scxml/", "http://www.w3.org/TR/scxml")
"""The ``<invoke type>`` values the loader accepts: SCXML documents (SCXML 6.4)."""

_NO_EVENT = Event("")
"""What an invoke's input sees as ``_event`` (``None``: it is not evaluated for an event)."""

SCXML_NS = "http://www.w3.org/2005/07/scxml"
CHART_NS = "urn:incarnate:scxml"
"""The namespace of the one attribute the project adds to SCXML: ``chart`` on an inline ``<scxml>``.

``dump`` writes it on every inline document: a child loaded from a file of
its own, or from a document loaded again under another file name, would
otherwise be named by its new place, so ``load(dump(chart))`` registers
every child under the name it had."""
"""The SCXML namespace; elements in other namespaces are ignored (SCXML 3.2)."""

SUPPORTED_DATAMODELS = ("python", "null")
"""The ``datamodel`` attribute values :func:`load` accepts (absent means ``python``).

``null`` (SCXML B.1) is run by the Python datamodel, whose ``In(state)``
conditions mean the same; a null-datamodel document has no data to store.
"""


@attrs.define
class Node:
    """One element of the document: its local name, attributes, children, text and line."""

    tag: str
    attrs: dict[str, str]
    line: int
    children: list[Node] = Factory(list)
    text: str = ""
    foreign: bool = False
    uri: str = ""
    chart: str | None = None
    """The ``chart`` attribute in :data:`CHART_NS`, when the element carries one."""
    mixed: list[str | Node] = Factory(list)
    """The character data and the child elements in document order (what inline XML markup is)."""

    def elements(self, *tags: str) -> list[Node]:
        """The SCXML children with one of ``tags`` (all SCXML children when none is given)."""
        return [c for c in self.children if not c.foreign and (not tags or c.tag in tags)]


def parse(text: str | bytes, source: str) -> Node:
    """Parse the document with expat into :class:`Node` values with line numbers.

    A DOCTYPE is refused as soon as expat meets it, before any entity it
    declares is expanded: SCXML needs none, and nested entities can expand a
    few hundred bytes into gigabytes. Character data arrives in many pieces
    (one per line at least), so each element's pieces are joined once, when
    it ends.
    """
    parser = xml.parsers.expat.ParserCreate(namespace_separator=" ")
    stack: list[Node] = []
    pieces: list[list[str]] = []
    root: list[Node] = []

    def start(name: str, attributes: dict[str, str]) -> None:
        uri, _, local = name.rpartition(" ")
        plain = {key.rpartition(" ")[2]: value for key, value in attributes.items() if " " not in key}
        node = Node(local, plain, parser.CurrentLineNumber, foreign=uri not in ("", SCXML_NS), uri=uri)
        node.chart = attributes.get(f"{CHART_NS} chart")
        if stack:
            stack[-1].children.append(node)
            stack[-1].mixed.append(node)
        else:
            root.append(node)
        stack.append(node)
        pieces.append([])

    def end(_name: str) -> None:
        stack.pop().text = "".join(pieces.pop())

    def data(chars: str) -> None:
        if pieces:
            pieces[-1].append(chars)
            stack[-1].mixed.append(chars)

    def doctype(name: str, system_id: str | None, public_id: str | None, internal_subset: bool) -> None:
        found = f"<!DOCTYPE {name}"
        if public_id:
            found += f' PUBLIC "{public_id}" "{system_id}"'
        elif system_id:
            found += f' SYSTEM "{system_id}"'
        found += " [...]>" if internal_subset else ">"
        raise ScxmlError(
            source,
            [
                f"line {parser.CurrentLineNumber}: found a DOCTYPE declaration {found}; SCXML documents "
                "need no DOCTYPE or entity declarations: remove it (and write any entity's text in place)"
            ],
        )

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = data
    parser.StartDoctypeDeclHandler = doctype
    try:
        parser.Parse(text, True)
    except xml.parsers.expat.ExpatError as error:
        raise ScxmlError(source, [f"line {error.lineno}: not well-formed XML: {error}"]) from error
    if not root or root[0].tag != "scxml" or root[0].foreign:
        found = root[0].tag if root else "nothing"
        raise ScxmlError(source, [f"line 1: the root element must be <scxml> in {SCXML_NS}, found <{found}>"])
    return root[0]


# ---------------------------------------------------------------- markup


def markup(node: Node) -> str:
    """The XML text of ``node``'s content (its text and elements), the value of inline XML (SCXML B.2).

    The one text of the markup, whatever its layout in the document:
    attributes in document order, ``xmlns`` written where an element's
    namespace differs from its parent's, prefixes dropped, empty elements
    self-closed, and the outer whitespace stripped.
    """
    return "".join(_markup(piece, node.uri) for piece in node.mixed).strip()


def element_markup(node: Node) -> str:
    """The XML text of one element (a document given as text), as :func:`markup` writes it."""
    return _markup(node, node.uri)


def _markup(piece: str | Node, parent_uri: str) -> str:
    if isinstance(piece, str):
        return escape(piece)
    attributes = "".join(f' {k}="{escape(v, {chr(34): "&quot;"})}"' for k, v in piece.attrs.items())
    if piece.uri != parent_uri:
        attributes = f' xmlns="{escape(piece.uri, {chr(34): "&quot;"})}"' + attributes
    inner = "".join(_markup(child, piece.uri) for child in piece.mixed)
    return f"<{piece.tag}{attributes}>{inner}</{piece.tag}>" if inner else f"<{piece.tag}{attributes}/>"


def only_document(node: Node) -> Node | None:
    """The ``<scxml>`` element that is all of ``node``'s content (whitespace aside), if it is one."""
    elements = [piece for piece in node.mixed if isinstance(piece, Node)]
    texts = "".join(piece for piece in node.mixed if isinstance(piece, str))
    if len(elements) == 1 and not texts.strip() and elements[0].tag == "scxml" and not elements[0].foreign:
        return elements[0]
    return None


# ---------------------------------------------------------------- delays

_DELAY = re.compile(r"^\s*(\d*\.?\d+)\s*(ms|s|m|min|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_delay(text: object) -> float:
    """A CSS2 time (``"500ms"``, ``"2s"``, ``".5s"``) or a number of seconds, in seconds (SCXML 6.2.4)."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    match = _DELAY.match(str(text))
    if match is None:
        raise ValueError(f"{text!r} is not a delay; write a CSS2 time such as '500ms' or '2s'")
    return float(match.group(1)) * _UNITS[match.group(2)]


# --------------------------------------------------------- expressions


class _Expr:
    """A callable made from document code, keeping its source for :func:`~statechart.scxml.dump`."""

    __slots__ = ("code", "kind")

    def __init__(self, code: Code, kind: str) -> None:
        self.code = code
        self.kind = kind

    @property
    def __name__(self) -> str:
        """The expression as written, on one line: what a diagram shows for a ``cond``."""
        return " ".join(self.code.source.split())

    def __repr__(self) -> str:
        return f"<{self.kind} {self.code.source.strip()!r}>"


class Cond(_Expr):
    """A ``cond``: the expression's truth (a raising condition is false, with error.execution: 5.9)."""

    def __call__(self, model: Datamodel, event: Event) -> bool:
        return bool(evaluate(self.code, model, event))


class Value(_Expr):
    """An ``expr`` whose value is data (``<log>``, ``<content>``, ``<param>``)."""

    def __call__(self, model: Datamodel, event: Event) -> Any:
        return evaluate(self.code, model, event)


class LogValue(_Expr):
    """A ``<log expr=…>``: its value as JSON data, or its text when it is not JSON (an ``_event``…)."""

    def __call__(self, model: Datamodel, event: Event) -> JsonValue:
        value = evaluate(self.code, model, event)
        if isinstance(value, EventView):
            value = attrs.asdict(value)
        try:
            return check_json(value)
        except TypeError:
            return repr(value)


class Text(_Expr):
    """An ``eventexpr``, ``targetexpr``, ``typeexpr`` or ``sendidexpr``: it must give a string."""

    def __call__(self, model: Datamodel, event: Event) -> str:
        value = evaluate(self.code, model, event)
        if not isinstance(value, str):
            raise TypeError(f"{self.code.where}: expected a string, got {type(value).__name__} {value!r}")
        return value


class Delay(_Expr):
    """A ``delayexpr``: a CSS2 time string or a number of seconds."""

    def __call__(self, model: Datamodel, event: Event) -> float:
        return parse_delay(evaluate(self.code, model, event))


class Items(_Expr):
    """A ``<foreach array=…>``: the collection, which must be a list or a mapping (4.6)."""

    def __call__(self, model: Datamodel, event: Event) -> Any:
        value = evaluate(self.code, model, event)
        if not isinstance(value, list | dict | tuple):
            raise TypeError(
                f"{self.code.where}: foreach array must be a list (or a dict), got {type(value).__name__}"
            )
        return value


@attrs.frozen
class AssignExpr:
    """``<assign location=… expr=…>`` (5.4)."""

    location: str
    value: Callable[[Datamodel, Event], Any]
    where: str

    def __call__(self, model: Datamodel, event: Event) -> Datamodel:
        return assign(model, self.location, self.value(model, event), self.where)


@attrs.frozen
class Script:
    """``<script>`` (4.8)."""

    code: Code

    def __call__(self, model: Datamodel, event: Event) -> Datamodel:
        return run_script(self.code, model, event)


@attrs.frozen
class DataInit:
    """The initial value of one ``<data>`` (5.3): its expression, inline content or file."""

    id: str
    value: Callable[[Datamodel, Event], Any] | None
    where: str

    def __call__(self, model: Datamodel, event: Event) -> Datamodel:
        if preset(model, self.id):
            return model
        if self.value is None:
            return model
        # 5.3: a failing initial value leaves the variable declared and unassigned (error.execution)
        return assign(model, self.id, self.value(model, event), self.where)


@attrs.frozen
class Bound:
    """Marks a state's late-bound data as assigned (first entry only, 5.3)."""

    state: str

    def __call__(self, model: Datamodel, event: Event) -> Datamodel:
        return attrs.evolve(model, bound=[*model.bound, self.state])


@attrs.frozen
class Unbound:
    """True until the state's late-bound data has been assigned."""

    state: str

    def __call__(self, model: Datamodel, event: Event) -> bool:
        return self.state not in model.bound


@attrs.frozen
class IdLocation:
    """Stores a generated send or invoke id at ``location`` (``idlocation``, 6.2.4, 6.4)."""

    location: str
    where: str

    def __call__(self, model: Datamodel, event: Event, send_id: str) -> Datamodel:
        return assign(model, self.location, send_id, self.where)


@attrs.frozen
class Payload:
    """A send's or done data's data: namelist and params as a dict, or the content's value (5.7, 6.2).

    Every name/value pair is kept: a name given more than once (two
    ``<param>`` of one name, or a ``<param>`` naming a ``namelist``
    variable) has the list of its values, in document order (W3C 178).
    """

    names: tuple[str, ...] = ()
    params: tuple[tuple[str, Callable[[Datamodel, Event], Any]], ...] = ()
    content: Callable[[Datamodel, Event], Any] | None = None
    where: str = ""

    def __call__(self, model: Datamodel, event: Event) -> JsonValue:
        if self.content is not None:
            return _json(self.content(model, event), self.where)
        pairs: list[tuple[str, JsonValue]] = []
        for name in self.names:
            if name not in model.vars:
                raise ExpressionError(f"{self.where}: namelist names {name!r}, which the datamodel lacks")
            pairs.append((name, model.vars[name]))
        for name, value in self.params:
            pairs.append((name, _json(value(model, event), f"{self.where} param {name}")))
        grouped: dict[str, list[JsonValue]] = {}
        for name, item in pairs:
            grouped.setdefault(name, []).append(item)
        data: dict[str, JsonValue] = {
            name: values[0] if len(values) == 1 else values for name, values in grouped.items()
        }
        return data


def _json(value: object, where: str) -> JsonValue:
    """``value`` if it is JSON data (event data is stored with the event), else error.execution."""
    if isinstance(value, EventView):
        value = value.as_json()  # _event as data: its JSON object (5.10.1)
    try:
        return check_json(value)
    except TypeError as error:
        raise ExpressionError(f"{where}: event data must be JSON: {error}") from error


@attrs.frozen
class InvokeInput:
    """A child's input (6.4): its namelist and params by name, after checking a ``typeexpr``."""

    payload: Payload | None
    kind: Text | None

    def __call__(self, model: Datamodel) -> JsonValue:
        if self.kind is not None:
            kind = self.kind(model, _NO_EVENT)
            if kind not in INVOKE_TYPES:
                raise ValueError(f"invoke type {kind!r} is not supported; invoke SCXML documents ('scxml')")
        if self.payload is None:
            return None
        return self.payload(model, _NO_EVENT)


@attrs.frozen
class SrcChoice:
    """``<invoke srcexpr>``: the chart of the document the expression names, among those loaded with it."""

    code: Code
    folder: str
    charts: dict[str, str]
    """Each loadable document beside the invoking one (normalised path) -> its chart's name."""
    unloadable: dict[str, str]
    """The documents beside it that did not load -> why."""

    def __call__(self, model: Datamodel) -> str:
        src = evaluate(self.code, model, None)
        if not isinstance(src, str):
            raise TypeError(f"{self.code.where}: srcexpr must give a path or file: URI, got {src!r}")
        key = document_key(self.folder, src)
        if key in self.charts:
            return self.charts[key]
        if key in self.unloadable:
            raise ValueError(f"{self.code.where}: {src!r} did not load: {self.unloadable[key]}")
        raise ValueError(
            f"{self.code.where}: srcexpr gave {src!r}, which names no SCXML document in {self.folder}"
        )


@attrs.frozen
class Constant:
    """Inline content: JSON text as its value, other text as a string (SCXML B.2 for JSON datamodels)."""

    value: JsonValue

    def __call__(self, model: Datamodel, event: Event) -> JsonValue:
        return self.value


@attrs.frozen
class Markup:
    """Inline XML markup: its XML text (:func:`markup`) as a string, the JSON form of XML (SCXML B.2)."""

    value: str

    def __call__(self, model: Datamodel, event: Event) -> JsonValue:
        return self.value


@attrs.frozen
class ContentChoice:
    """``<invoke><content expr>``: the chart of the document the expression gives (6.4, W3C 530).

    The engine records which chart a child runs before the child is born,
    so the documents an expression may give are those written as XML in
    the invoking document (in a ``<data>`` or an ``<assign>``), each loaded
    with it as a companion chart; the expression's value, an SCXML
    document's text, is matched by its markup (:func:`element_markup`).
    """

    code: Code
    documents: dict[str, str]
    """The markup of each document written in the invoking one -> its chart's name."""

    def __call__(self, model: Datamodel) -> str:
        value = evaluate(self.code, model, None)
        if not isinstance(value, str):
            raise TypeError(
                f"{self.code.where}: content expr must give an SCXML document's text, got {value!r}"
            )
        try:
            key = element_markup(parse(value, self.code.where))
        except ScxmlError as error:
            raise ValueError(f"{self.code.where}: content expr gave no SCXML document: {error}") from error
        if key not in self.documents:
            raise ValueError(
                f"{self.code.where}: content expr gave a document that is not written in the invoking "
                "one; write each document it may give as XML in a <data> or <assign> of this document"
            )
        return self.documents[key]


def _bind(model: Datamodel, name: str, value: JsonValue) -> Datamodel:
    """``<foreach item=… index=…>``: declare (if needed) and set the variable (4.6)."""
    if not name.isidentifier() or name in SYSTEM_VARIABLES:
        raise ExpressionError(f"foreach cannot bind {name!r}: it is not a legal variable name")
    return attrs.evolve(model, vars={**model.vars, name: value})


# --------------------------------------------------------------- loader


class _Names:
    """The chart names of one load, each given to one source (a file's path, an inline document's place).

    A companion's chart is named by where it stands, never by its
    ``<scxml name>``, which two documents may share (an editor's default):
    an inline document by its invoking chart and site, a file by its stem.
    A name another source holds gets a numbered suffix, in the order the
    loader meets the sources, so the same documents always get the same names.
    """

    def __init__(self) -> None:
        self.by_source: dict[str, str] = {}
        self.taken: set[str] = set()

    def claim(self, source: str, wanted: str) -> str:
        known = self.by_source.get(source)
        if known is not None:
            return known
        name, count = wanted, 1
        while name in self.taken:
            count += 1
            name = f"{wanted}-{count}"
        self.taken.add(name)
        self.by_source[source] = name
        return name


class _Loader:
    """Walks the document and builds the chart, collecting every problem before refusing it."""

    def __init__(
        self, source: str, base: Folder, loading: tuple[str, ...] = (), names: _Names | None = None
    ) -> None:
        self.source = source
        self.base = base
        self.loading = (*loading, canonical(source))
        self.names = _Names() if names is None else names
        self.chart_name = "scxml"
        self.document_name: str | None = None
        self.documents: dict[str, str] = {}
        self.companions: list[Chart[Any]] = []
        self.by_path: dict[str, Chart[Any]] = {}
        self.problems: list[str] = []
        self.data_ids: list[str] = []
        self.setup: list[Action] = []
        self.late = False
        self.generated = 0
        self.ids: set[str] = set()

    def problem(self, node: Node, message: str) -> None:
        self.problems.append(f"line {node.line}: <{node.tag}>: {message}")

    def where(self, node: Node, what: str = "") -> str:
        label = f"<{node.tag}{' ' + what if what else ''}>"
        return f"{self.source}:{node.line} {label}"

    def code(self, node: Node, attribute: str, mode: str = "eval") -> Code:
        return Code(node.attrs[attribute], self.where(node, attribute), mode, self.document_name)

    def fresh_id(self, tag: str) -> str:
        while True:
            self.generated += 1
            candidate = f"_{tag}{self.generated}"
            if candidate not in self.ids:
                return candidate

    def read(self, node: Node, src: str) -> str | None:
        text, problem = read_relative(self.base, src)
        if problem is not None:
            self.problem(node, problem)
        return text

    # ------------------------------------------------------------ document

    def document(self, root: Node, name: str | None, document_name: str | None = None) -> Chart[Datamodel]:
        """The chart of ``root``, named ``name``; its code reads ``document_name`` (or ``name``) as _name."""
        self.chart_name = name or root.attrs.get("name") or "scxml"
        self.document_name = document_name or self.chart_name
        datamodel = root.attrs.get("datamodel", "python")
        if datamodel not in SUPPORTED_DATAMODELS:
            raise ScxmlError(
                self.source,
                [
                    f"line {root.line}: datamodel={datamodel!r} is not supported; this loader runs "
                    "datamodel='python' (expressions and scripts in Python): rewrite the expressions "
                    "in Python and set datamodel='python'"
                ],
            )
        binding = root.attrs.get("binding", "early")
        if binding not in ("early", "late"):
            self.problem(root, f"binding={binding!r} must be 'early' or 'late'")
        self.late = binding == "late"
        self.collect_ids(root)
        self.collect_documents(root)
        for child in root.elements("datamodel"):
            self.setup.extend(self.datamodel(child))
        if not self.late:
            for node in self.walk(root):
                if node is not root and node.tag in ("state", "parallel", "final"):
                    for child in node.elements("datamodel"):
                        self.setup.extend(self.datamodel(child))
        for child in root.elements("script"):
            script = self.script(child)
            if script is not None:
                self.setup.append(Block((script,)))
        states = [self.state(child) for child in root.elements("state", "parallel", "final")]
        for child in root.elements():
            if child.tag not in ("state", "parallel", "final", "datamodel", "script"):
                self.problem(
                    child, "not allowed in <scxml>; use <state>, <parallel>, <final>, <datamodel>, <script>"
                )
        if self.problems:
            raise ScxmlError(self.source, self.problems)
        initial = root.attrs.get("initial")
        try:
            return Chart(
                self.chart_name,
                *states,
                context=Datamodel,
                initial=initial.split() if initial else None,
                context_from_input=from_input(list(self.data_ids), self.document_name),
                setup=self.setup,
                companions=self.companions,
                # SCXML allows states nothing enters (authors' scaffolding); the API's check is a lint
                allow_unreachable=sorted(self.ids),
                description=f"loaded from SCXML {self.source}",
            )
        except errors.ChartInvalid as error:
            raise ScxmlError(self.source, [str(p) for p in error.exceptions]) from error

    def walk(self, node: Node) -> list[Node]:
        """The element and its descendants, leaving out inline documents and markup (data, not states)."""
        found = [node]
        for child in node.elements():
            if child.tag not in ("content", "data", "assign"):
                found.extend(self.walk(child))
            elif child.tag != "content":
                found.append(child)
        return found

    def collect_documents(self, root: Node) -> None:
        """Load each SCXML document written as XML in a ``<data>`` or ``<assign>``: what a
        ``<content expr>`` may invoke (W3C 530)."""
        for node in self.walk(root):
            if node.tag not in ("data", "assign"):
                continue
            document = only_document(node)
            if document is None:
                continue
            key = element_markup(document)
            if key in self.documents:
                continue
            wanted = f"{self.chart_name}.document{len(self.documents) + 1}"
            name = self.names.claim(f"{self.source}#{wanted}", wanted)
            try:
                loader = _Loader(self.source, self.base, self.loading, self.names)
                chart = loader.document(document, name, document.attrs.get("name"))
            except ScxmlError as error:
                self.problems.extend(f"in the document at line {node.line}: {p}" for p in error.problems)
                continue
            self.companions.append(chart)
            self.documents[key] = chart.name

    def collect_ids(self, root: Node) -> None:
        for node in self.walk(root):
            if node.tag in ("state", "parallel", "final", "history") and "id" in node.attrs:
                self.ids.add(node.attrs["id"])
            if node.tag == "data" and node.attrs.get("id", "") not in ("", *self.data_ids):
                self.data_ids.append(node.attrs["id"])

    # ---------------------------------------------------------------- data

    def datamodel(self, node: Node) -> list[Action]:
        blocks: list[Action] = []
        for data in node.elements():
            if data.tag != "data":
                self.problem(data, "only <data> is allowed in <datamodel>")
                continue
            init = self.data(data)
            if init is not None:
                blocks.append(Block((Assign(init, f"data {init.id}"),)))
        return blocks

    def data(self, node: Node) -> DataInit | None:
        data_id = node.attrs.get("id")
        if not data_id:
            self.problem(node, "needs an id")
            return None
        if not data_id.isidentifier() or data_id in SYSTEM_VARIABLES or data_id == "In":
            self.problem(node, f"id={data_id!r} must be a Python identifier that is not a system variable")
            return None
        sources = [key for key in ("expr", "src") if key in node.attrs] + (
            ["content"] if node.text.strip() or node.children else []
        )
        if len(sources) > 1:
            self.problem(node, f"give at most one of expr, src and content, not {' and '.join(sources)}")
            return None
        value: Callable[[Datamodel, Event], Any] | None = None
        if "expr" in node.attrs:
            value = Value(self.code(node, "expr"), "expr")
        elif "src" in node.attrs:
            text = self.read(node, node.attrs["src"])
            value = None if text is None else _content(text)
        elif node.children:
            value = Markup(markup(node))
        elif node.text.strip():
            value = _content(node.text)
        return DataInit(data_id, value, self.where(node, data_id))

    # -------------------------------------------------------------- states

    def state(self, node: Node) -> StateNode[Datamodel]:
        state_id = node.attrs.get("id") or self.fresh_id(node.tag)
        self.ids.add(state_id)
        entry = self.handlers(node, "onentry")
        exit_ = self.handlers(node, "onexit")
        sites: list[Site[Datamodel]] = []
        for element in node.elements("invoke"):
            site = self.invoke(element, state_id, len(sites))
            if site is not None:
                sites.append(site)
        if self.late and node.elements("datamodel"):
            inits: list[Action] = []
            for child in node.elements("datamodel"):
                inits.extend(self.datamodel(child))
            inits.append(Assign(Bound(state_id), f"bind {state_id}"))
            entry = (If((Branch(Unbound(state_id), tuple(inits)),)), *entry)
        transitions = tuple(self.transition(t) for t in node.elements("transition"))
        if node.tag == "final":
            for child in node.elements():
                if child.tag not in ("onentry", "onexit", "donedata"):
                    self.problem(child, "not allowed in <final>; use <onentry>, <onexit>, <donedata>")
            done = node.elements("donedata")
            done_data = self.payload(done[0]) if done else None
            return StateNode(state_id, StateKind.FINAL, entry=entry, exit=exit_, done_data=done_data)
        children = [self.state(c) for c in node.elements("state", "parallel", "final")]
        children.extend(self.history(c) for c in node.elements("history"))
        allowed = {
            "onentry",
            "onexit",
            "transition",
            "invoke",
            "datamodel",
            "state",
            "parallel",
            "final",
            "history",
        }
        if node.tag == "state":
            allowed.add("initial")
        for child in node.elements():
            if child.tag not in allowed:
                self.problem(child, f"not allowed in <{node.tag}>")
        if node.tag == "parallel":
            return StateNode(
                state_id, StateKind.PARALLEL, tuple(children), (), transitions, entry, exit_, tuple(sites)
            )
        initial: tuple[str, ...] = tuple(node.attrs.get("initial", "").split())
        initial_actions: tuple[Action, ...] = ()
        for element in node.elements("initial"):
            if initial:
                self.problem(element, "a state takes an initial attribute or an <initial> element, not both")
            targets = element.elements("transition")
            if len(targets) != 1 or not targets[0].attrs.get("target"):
                self.problem(element, "needs exactly one <transition target=...> (SCXML 3.6)")
                continue
            initial = tuple(targets[0].attrs["target"].split())
            initial_actions = self.content(targets[0])
        kind = StateKind.COMPOUND if children else StateKind.ATOMIC
        if initial and kind is StateKind.ATOMIC:
            self.problem(node, "an atomic state has no initial state")
        return StateNode(
            state_id,
            kind,
            tuple(children),
            initial,
            transitions,
            entry,
            exit_,
            tuple(sites),
            initial_actions=initial_actions,
        )

    def history(self, node: Node) -> StateNode[Datamodel]:
        state_id = node.attrs.get("id") or self.fresh_id("history")
        kind = node.attrs.get("type", "shallow")
        if kind not in ("shallow", "deep"):
            self.problem(node, f"type={kind!r} must be 'shallow' or 'deep'")
        transitions = node.elements("transition")
        default: Transition[Datamodel] = Transition((), ())
        if len(transitions) > 1:
            self.problem(node, "takes at most one <transition> (its default, SCXML 3.10)")
        elif transitions:
            t = transitions[0]
            default = Transition((), tuple(t.attrs.get("target", "").split()), None, self.content(t))
        return StateNode(state_id, StateKind.HISTORY, transitions=(default,), deep=kind == "deep")

    def invoke(self, node: Node, state_id: str, position: int) -> Site[Datamodel] | None:
        """``<invoke>`` (6.4): a site whose child chart is the document ``src`` names or the inline one.

        An ``<invoke>`` without ``id`` gets a site id of the loader's (one
        token, naming the site and its children's Refs) and the site names
        each invocation ``<state>.<generation>`` (6.4.1); ``idlocation``
        receives that name when the child is born.
        """
        a = node.attrs
        for first, second in (("type", "typeexpr"), ("src", "srcexpr"), ("id", "idlocation")):
            if first in a and second in a:
                self.problem(node, f"takes {first}= or {second}=, not both (SCXML 6.4)")
        if "type" in a and a["type"] not in INVOKE_TYPES:
            self.problem(node, f"type={a['type']!r} is not supported; invoke SCXML documents (type='scxml')")
        site_id = a.get("id") or generated_invoke_id(state_id, position)
        contents = node.elements("content")
        child: Chart[Any] | None = None
        choice: SrcChoice | ContentChoice | None = None
        if "src" in a:
            if contents:
                self.problem(node, "takes src= or <content>, not both (SCXML 6.4)")
            child = self.child_document(node, a["src"])
        elif contents:
            inline = contents[0].elements("scxml")
            if "expr" in contents[0].attrs:
                if inline or contents[0].text.strip():
                    self.problem(contents[0], "takes expr= or an inline <scxml> document, not both")
                elif not self.documents:
                    self.problem(
                        contents[0],
                        "content expr= may only give a document written as XML in a <data> or <assign> "
                        "of this document (the engine registers every chart a child may run before it "
                        "starts); write the document there, or inline in this <content>",
                    )
                else:
                    choice = ContentChoice(self.code(contents[0], "expr"), self.documents)
            elif len(inline) != 1:
                self.problem(contents[0], "must hold one inline <scxml> document, or take expr=")
            else:
                child = self.inline_document(inline[0], f"{self.chart_name}.{site_id}")
        elif "srcexpr" in a:
            choice = self.src_choice(node)
        else:
            self.problem(
                node, "needs src=, srcexpr= or an inline <content><scxml>...</scxml></content> (6.4)"
            )
        finalize: tuple[Action, ...] = ()
        finalizers = node.elements("finalize")
        if len(finalizers) > 1:
            self.problem(finalizers[1], "an <invoke> takes at most one <finalize> (SCXML 6.5)")
        if finalizers:
            finalize = self.content(finalizers[0])
        autoforward = a.get("autoforward", "false")
        if autoforward not in ("true", "false"):
            self.problem(node, f"autoforward={autoforward!r} must be 'true' or 'false'")
        id_location = (
            IdLocation(a["idlocation"], self.where(node, "idlocation")) if "idlocation" in a else None
        )
        generated = "id" not in a
        payload = self.payload(node, allow_content=False)
        kind = Text(self.code(node, "typeexpr"), "typeexpr") if "typeexpr" in a else None
        if choice is not None:
            choices = choice.charts if isinstance(choice, SrcChoice) else choice.documents
            site: Site[Datamodel] = Site(
                site_id,
                None,
                None,
                InvokeInput(payload, kind),
                finalize=finalize,
                autoforward=autoforward == "true",
                choose=choice,
                charts=tuple(sorted(set(choices.values()))),
                generated_id=generated,
                id_location=id_location,
            )
            return site
        if child is None:
            return None
        return Site(
            site_id,
            child.name,
            None,
            InvokeInput(payload, kind),
            finalize=finalize,
            autoforward=autoforward == "true",
            generated_id=generated,
            id_location=id_location,
        )

    def src_choice(self, node: Node) -> SrcChoice | None:
        """``srcexpr``: the documents beside this one are loaded with it, and the expression picks one (6.4).

        The engine records which chart a child runs before the child is born,
        so every document a ``srcexpr`` may name is loaded (and registered)
        with the invoking document: the ``*.scxml`` files of its folder.
        """
        if self.base is None:
            self.problem(
                node, "srcexpr= needs the document's folder; load it from a file or pass load(base=...)"
            )
            return None
        charts: dict[str, str] = {}
        unloadable: dict[str, str] = {}
        for path in sibling_documents(self.base):
            if path in self.loading:
                continue
            chart, problems = self.load_file(path)
            if chart is None:
                unloadable[path] = "; ".join(problems)
            else:
                charts[path] = chart.name
        if not charts:
            self.problem(
                node, f"srcexpr= may only name SCXML documents beside this one, and {self.base} has none"
            )
            return None
        return SrcChoice(self.code(node, "srcexpr"), str(self.base), charts, unloadable)

    def child_document(self, node: Node, src: str) -> Chart[Any] | None:
        path = document_key(self.base, src)
        if path is None:
            self.problem(node, f"src={src!r} is relative and the document has no folder; pass load(base=...)")
            return None
        if path in self.loading:
            self.problem(node, f"src={src!r} invokes a document that is already being loaded (a cycle)")
            return None
        chart, problems = self.load_file(path)
        if chart is None:
            self.problems.extend(f"in {path} invoked at line {node.line}: {p}" for p in problems)
        return chart

    def load_file(self, path: str) -> tuple[Chart[Any] | None, list[str]]:
        """The chart of the document at the real ``path``, loaded once per document; else its problems."""
        known = self.by_path.get(path)
        if known is not None:
            return known, []
        text, problem = read_relative(None, path)
        if text is None:
            return None, [problem or f"cannot read {path}"]
        try:
            root = parse(text, path)
            name = self.names.claim(path, _stable(stem_of(path)))
            loader = _Loader(path, folder_of(path), self.loading, self.names)
            chart = loader.document(root, name, root.attrs.get("name"))
        except ScxmlError as error:
            return None, list(error.problems)
        self.companions.append(chart)
        self.by_path[path] = chart
        return chart, []

    def inline_document(self, root: Node, name: str) -> Chart[Any] | None:
        """An inline ``<content><scxml>``: its chart is named by its place (``name``), not by its ``name``."""
        try:
            where = f"{self.source}#{name}"  # the invoking chart and site: one inline document
            wanted = root.chart or name  # a name ``dump`` kept (see CHART_NS), else its place
            chart = _Loader(self.source, self.base, self.loading, self.names).document(
                root, self.names.claim(where, wanted), root.attrs.get("name")
            )
        except ScxmlError as error:
            self.problems.extend(error.problems)
            return None
        self.companions.append(chart)
        return chart

    def handlers(self, node: Node, tag: str) -> tuple[Action, ...]:
        blocks = [self.content(handler) for handler in node.elements(tag)]
        if len(blocks) == 1:
            return blocks[0]
        return tuple(Block(block) for block in blocks)

    def transition(self, node: Node) -> Transition[Datamodel]:
        events = tuple(node.attrs.get("event", "").split())
        targets = tuple(node.attrs.get("target", "").split())
        kind = node.attrs.get("type", "external")
        if kind not in ("external", "internal"):
            self.problem(node, f"type={kind!r} must be 'external' or 'internal'")
        guard = Cond(self.code(node, "cond"), "cond") if "cond" in node.attrs else None
        if "event" in node.attrs and not events:
            self.problem(node, "event='' names no event; leave the attribute out for an eventless transition")
        return Transition(events, targets, guard, self.content(node), kind == "internal")

    # ------------------------------------------------ executable content

    def content(self, node: Node) -> tuple[Action, ...]:
        actions: list[Action] = []
        for child in node.elements():
            action = self.action(child)
            if action is not None:
                actions.append(action)
        return tuple(actions)

    def action(self, node: Node) -> Action | None:
        tag = node.tag
        if tag == "raise":
            event = node.attrs.get("event")
            if not event:
                self.problem(node, "needs event=")
                return None
            return Raise(event)
        if tag == "log":
            label = node.attrs.get("label", "")
            return Log(label, LogValue(self.code(node, "expr"), "expr") if "expr" in node.attrs else None)
        if tag == "assign":
            return self.assign(node)
        if tag == "script":
            return self.script(node)
        if tag == "if":
            return self.if_(node)
        if tag == "foreach":
            return self.foreach(node)
        if tag == "send":
            return self.send(node)
        if tag == "cancel":
            return self.cancel(node)
        self.problem(node, "is not executable content (SCXML 4)")
        return None

    def script(self, node: Node) -> Action | None:
        if "src" in node.attrs:
            if node.text.strip():
                self.problem(node, "takes src= or inline code, not both")
            text = self.read(node, node.attrs["src"])
            if text is None:
                return None
        else:
            text = node.text
        return Assign(Script(Code(text, self.where(node), "exec", self.document_name)), "script")

    def assign(self, node: Node) -> Action | None:
        location = node.attrs.get("location")
        if not location:
            self.problem(node, "needs location=")
            return None
        if "expr" in node.attrs and (node.text.strip() or node.children):
            self.problem(node, "takes expr= or content, not both")
            return None
        value: Callable[[Datamodel, Event], Any]
        if "expr" in node.attrs:
            value = Value(self.code(node, "expr"), "expr")
        elif node.children:
            value = Markup(markup(node))
        elif node.text.strip():
            value = _content(node.text)
        else:
            value = Constant(None)
        return Assign(AssignExpr(location, value, self.where(node, location)), f"assign {location}")

    def if_(self, node: Node) -> Action | None:
        if "cond" not in node.attrs:
            self.problem(node, "needs cond=")
            return None
        branches: list[Branch[Datamodel]] = []
        guard: Cond | None = Cond(self.code(node, "cond"), "cond")
        actions: list[Action] = []
        seen_else = False
        for child in node.elements():
            if child.tag in ("elseif", "else"):
                branches.append(Branch(guard, tuple(actions)))
                actions = []
                if seen_else:
                    self.problem(child, "nothing may follow <else> in an <if>")
                if child.tag == "else":
                    seen_else = True
                    guard = None
                elif "cond" not in child.attrs:
                    self.problem(child, "needs cond=")
                    guard = None
                else:
                    guard = Cond(self.code(child, "cond"), "cond")
                continue
            action = self.action(child)
            if action is not None:
                actions.append(action)
        branches.append(Branch(guard, tuple(actions)))
        return If(tuple(branches))

    def foreach(self, node: Node) -> Action | None:
        array, item = node.attrs.get("array"), node.attrs.get("item")
        if not array or not item:
            self.problem(node, "needs array= and item=")
            return None
        return ForEach(
            Items(self.code(node, "array"), "array"), item, self.content(node), node.attrs.get("index"), _bind
        )

    def send(self, node: Node) -> Action | None:
        a = node.attrs
        for first, second in (
            ("event", "eventexpr"),
            ("target", "targetexpr"),
            ("type", "typeexpr"),
            ("id", "idlocation"),
            ("delay", "delayexpr"),
        ):
            if first in a and second in a:
                self.problem(node, f"takes {first}= or {second}=, not both (SCXML 6.2)")
        event: Any = Text(self.code(node, "eventexpr"), "eventexpr") if "eventexpr" in a else a.get("event")
        target: Any = (
            Text(self.code(node, "targetexpr"), "targetexpr") if "targetexpr" in a else a.get("target")
        )
        kind: Any = Text(self.code(node, "typeexpr"), "typeexpr") if "typeexpr" in a else a.get("type")
        delay: Any = 0.0
        if "delayexpr" in a:
            delay = Delay(self.code(node, "delayexpr"), "delayexpr")
        elif "delay" in a:
            try:
                delay = parse_delay(a["delay"])
            except ValueError as error:
                self.problem(node, str(error))
        if target == "#_internal" and delay:
            self.problem(node, "a send to #_internal cannot be delayed (SCXML 6.2.4)")
        # SCXML 6.2: only the SCXML processor needs a name; a Basic HTTP send without one is
        # named by its _scxmleventname param, else HTTP.POST, at the receiver (C.2, W3C 531).
        named_elsewhere = "typeexpr" in a or a.get("type") in HTTP_SEND_TYPES
        if event is None and not node.elements("content") and not named_elsewhere:
            self.problem(node, "needs event=, eventexpr= or <content> (SCXML 6.2)")
        id_location = (
            IdLocation(a["idlocation"], self.where(node, "idlocation")) if "idlocation" in a else None
        )
        data = self.payload(node)
        return Send(event, data, delay, a.get("id"), target, kind, id_location)

    def payload(self, node: Node, *, allow_content: bool = True) -> Payload | None:
        names = tuple(node.attrs.get("namelist", "").split())
        params: list[tuple[str, Callable[[Datamodel, Event], Any]]] = []
        for param in node.elements("param"):
            name = param.attrs.get("name")
            if not name:
                self.problem(param, "needs name=")
                continue
            if ("expr" in param.attrs) == ("location" in param.attrs):
                self.problem(param, "takes exactly one of expr= and location=")
                continue
            source = param.attrs["expr"] if "expr" in param.attrs else param.attrs["location"]
            code = Code(source, self.where(param, name), "eval", self.document_name)
            params.append((name, Value(code, "expr" if "expr" in param.attrs else "location")))
        contents = node.elements("content") if allow_content else []
        content: Callable[[Datamodel, Event], Any] | None = None
        if len(contents) > 1:
            self.problem(contents[1], "at most one <content> is allowed")
        if contents:
            if names or params:
                self.problem(
                    contents[0], "<content> cannot be combined with namelist= or <param> (SCXML 5.6)"
                )
            element = contents[0]
            if "expr" in element.attrs:
                if element.text.strip():
                    self.problem(element, "takes expr= or inline content, not both")
                content = Value(self.code(element, "expr"), "expr")
            elif element.children:
                content = Markup(markup(element))
            else:
                content = _content(element.text)
        for child in node.elements():
            if child.tag not in ("param", "content", "finalize"):
                self.problem(child, f"not allowed in <{node.tag}>")
        if not names and not params and content is None:
            return None
        return Payload(names, tuple(params), content, self.where(node))

    def cancel(self, node: Node) -> Action | None:
        if ("sendid" in node.attrs) == ("sendidexpr" in node.attrs):
            self.problem(node, "takes exactly one of sendid= and sendidexpr= (SCXML 6.3)")
            return None
        if "sendid" in node.attrs:
            return Cancel(node.attrs["sendid"])
        return Cancel(Text(self.code(node, "sendidexpr"), "sendidexpr"))


def _content(text: str) -> Constant:
    """Inline content: its JSON value if it parses as JSON, else the text (whitespace-normalised)."""
    stripped = text.strip()
    try:
        return Constant(json.loads(stripped))
    except ValueError:
        return Constant(" ".join(stripped.split()))


def load(source: Source, *, name: str | None = None, base: Source | None = None) -> Chart[Datamodel]:
    """Load an SCXML document (a path, or the document's text) as a chart with the Python datamodel.

    ``name`` names the chart (default: the document's ``name`` attribute,
    else the file's stem, else ``"scxml"``). The document is code: its
    expressions and scripts run as Python with the interpreter's rights, so
    load only documents you trust. Raises :class:`ScxmlError` listing every
    problem with its line. ``base`` is the folder relative ``src``
    attributes are read from (default: the document's folder; a document
    given as text has none unless ``base`` is given).
    """
    document = read_document(source, base)
    if document.text is None:
        raise ScxmlError(document.label, [document.error or "cannot read the document"])
    root = parse(document.text, document.label)
    fallback = root.attrs.get("name") or (_stable(document.stem) if document.stem else "scxml")
    loader = _Loader(document.label, document.folder)
    chart_name = name or fallback
    loader.names.claim(canonical(document.label), chart_name)
    return loader.document(root, chart_name)


def generated_invoke_id(state_id: str, position: int) -> str:
    """The site id of the ``position``-th ``<invoke>`` of a state that gives none: one token.

    It names the site and its children (their Refs, the inline child
    chart's name); each invocation of the site is named
    ``<state>.<generation>`` (6.4.1, :attr:`~statechart.model.Site.generated_id`).
    """
    token = re.sub(r"[^A-Za-z0-9_-]", "_", state_id)
    return f"{token}-invoke{position or ''}"


def _stable(stem: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", stem).strip("._-")
    return cleaned or "scxml"

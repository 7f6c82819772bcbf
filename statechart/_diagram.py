"""Diagrams of a chart: Mermaid ``stateDiagram-v2`` and Graphviz DOT text.

Both renderers read the compiled tables of a :class:`~statechart.Chart`, so
what is drawn is what the interpreter runs: initial states as resolved,
delayed transitions as ``after`` triggers, history defaults as edges. The
output follows document order and depends on nothing else, so a diagram can
be committed next to its chart and reviewed as a diff.

Transition labels read ``trigger [guard] / actions``:

- the trigger is the event descriptors, ``after 5s`` for a delayed
  transition, or ``always`` for an eventless one;
- the guard is the guard function's ``__name__`` (for a chart loaded from
  SCXML, the ``cond`` expression as written, on one line), or ``in(state)``
  for an :func:`~statechart.in_state` guard; a guard longer than 40
  characters is cut and ends in ``…``;
- actions are short names: an assigner's name, ``raise(e)``, ``send(e)``,
  ``send(e, 5s)``, ``cancel(id)``, ``send_parent(e)``, ``send_child(site, e)``,
  ``log(label)``.

A targetless transition runs its actions without leaving its state. It is
drawn as a self-loop whose label ends in ``(targetless)``; a real self-loop
(a transition targeting its own source) has no such suffix, because it
exits and re-enters the state.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, assert_never

from statechart._chart import ROOT, Chart, CompiledTransition
from statechart._model import (
    Action,
    Assign,
    Block,
    Cancel,
    ForEach,
    Guard,
    If,
    InState,
    Log,
    Raise,
    Send,
    SendChild,
    SendParent,
    Site,
    StateKind,
    for_every_action,
)

C = TypeVar("C")

_COMPOSITE = (StateKind.COMPOUND, StateKind.PARALLEL)

# ------------------------------------------------------------------ labels


def _seconds(value: float) -> str:
    return f"{value:g}s"


def _trigger(t: CompiledTransition) -> str:
    if t.delay is not None:
        return f"after {_seconds(t.delay)}"
    if not t.events:
        return "always"
    return " ".join(t.events)


_GUARD_WIDTH = 40
"""The most characters a guard takes in a label; a longer one is cut and ends in ``…``."""


def _guard(guard: Guard) -> str:
    if isinstance(guard, InState):
        return f"in({guard.state})"
    # An SCXML cond's __name__ is its expression, which may be long.
    name = str(getattr(guard, "__name__", type(guard).__name__))
    return name if len(name) <= _GUARD_WIDTH else name[: _GUARD_WIDTH - 1].rstrip() + "…"


def _text(expr: object) -> str:
    """A name as authored: the string, or ``<expr>`` when it is computed."""
    return expr if isinstance(expr, str) else "<expr>"


def _action(action: Action) -> str:
    """An action as a transition label shows it (every action class has a describer: ``_DESCRIBE``)."""
    return _DESCRIBE[type(action)](action)


def _actions(actions: tuple[Action, ...]) -> str:
    return ", ".join(_action(a) for a in actions)


def _describe_assign(action: Assign) -> str:
    # Assigners default to their __qualname__; the enclosing function adds only noise.
    return action.name.rpartition("<locals>.")[2]


def _describe_send(action: Send) -> str:
    event = _text(action.event)
    if action.target is not None:
        event += f" to {_text(action.target)}"
    if callable(action.delay):
        return f"send({event}, delayed)"
    if action.delay:
        return f"send({event}, {_seconds(action.delay)})"
    return f"send({event})"


def _describe_raise(action: Raise) -> str:
    return f"raise({action.event})"


def _describe_cancel(action: Cancel) -> str:
    return f"cancel({_text(action.send_id)})"


def _describe_send_parent(action: SendParent) -> str:
    return f"send_parent({action.event})"


def _describe_send_child(action: SendChild) -> str:
    return f"send_child({action.site}, {action.event})"


def _describe_log(action: Log) -> str:
    return f"log({action.label})"


def _describe_if(action: If) -> str:
    return "if(" + " | ".join(_actions(branch.actions) for branch in action.branches) + ")"


def _describe_foreach(action: ForEach) -> str:
    return f"foreach({action.item}: {_actions(action.actions)})"


def _describe_block(action: Block) -> str:
    return "{" + _actions(action.actions) + "}"


_DESCRIBE: dict[type[Any], Callable[[Any], str]] = for_every_action(
    "the diagram (statechart._diagram._DESCRIBE)",
    {
        Assign: _describe_assign,
        Raise: _describe_raise,
        Send: _describe_send,
        Cancel: _describe_cancel,
        SendParent: _describe_send_parent,
        SendChild: _describe_send_child,
        Log: _describe_log,
        If: _describe_if,
        ForEach: _describe_foreach,
        Block: _describe_block,
    },
)


def _label_parts(t: CompiledTransition, *, default: bool = False) -> tuple[str, str]:
    """The ``trigger [guard]`` part and the ``/ actions`` part of a transition label."""
    head = "" if default else _trigger(t)
    if t.guard is not None:
        head += f" [{_guard(t.guard)}]"
    if not t.targets and not default:
        head += " (targetless)"
    tail = ("/ " + ", ".join(_action(a) for a in t.actions)) if t.actions else ""
    return head.strip(), tail


def _site(site: Site) -> tuple[str, str]:
    """What a site invokes (``packer invokes chart 'packer'``) and its options (``map, 3 attempts``)."""
    if site.task is not None:
        what = f"task '{site.task}'"
    else:
        what = "chart " + " or ".join(f"'{name}'" for name in site.chart_names)
    options: list[str] = []
    if site.members is not None:
        options.append("map")
    if site.retry.max_attempts > 1:
        options.append(f"{site.retry.max_attempts} attempts")
    if site.group is not None:
        options.append(f"group {site.group}" + (f" ≤ {site.max_depth}" if site.max_depth is not None else ""))
    elif site.max_depth is not None:
        options.append(f"depth ≤ {site.max_depth}")
    return f"{site.id} invokes {what}", ", ".join(options)


def _site_text(site: Site, separator: str) -> str:
    invokes, options = _site(site)
    return f"{invokes}{separator}({options})" if options else invokes


def _edges(chart: Chart[C]) -> Iterator[tuple[int, int, CompiledTransition, bool]]:
    """Every drawn edge as (source, target, transition, is history default), in document order."""
    for i in range(1, len(chart.ids)):
        default = chart.history_default[i]
        if default is not None:
            for target in default.targets:
                yield i, target, default, True
        for t in chart.transitions[i]:
            for target in t.targets or (i,):
                yield i, target, t, False


# ----------------------------------------------------------------- Mermaid

_MERMAID_WORDS = frozenset(
    {
        "state",
        "note",
        "class",
        "classdef",
        "scale",
        "direction",
        "statediagram",
        "hide",
        "end",
        "as",
        "click",
        "style",
    }
)
"""Words the Mermaid lexer reads as keywords at the start of a line."""

_MERMAID_ESCAPES = {
    "#": "#35;",
    ";": "#59;",
    ":": "#58;",
    "<": "#lt;",
    ">": "#gt;",
    '"': "#quot;",
    "%": "#37;",
}


def _mermaid_text(text: str) -> str:
    # ':' and ';' end a label and '<' starts HTML; Mermaid decodes these entity codes after parsing.
    return "".join(_MERMAID_ESCAPES.get(char, char) for char in text.replace("\n", " "))


def _mermaid_aliases(chart: Chart[C]) -> tuple[str, ...]:
    """A unique Mermaid identifier per state index (index 0, the root, maps to ``[*]``).

    Ids made of letters, digits and ``_`` keep their name; others have every
    other character replaced by ``_``, with a numeric suffix when that
    collides. Words Mermaid reads as keywords get an ``s_`` prefix.
    """

    def safe(name: str) -> str:
        lowered = name.lower()
        return "s_" + name if lowered in _MERMAID_WORDS or lowered.startswith("default") else name

    aliases: list[str | None] = [None] * len(chart.ids)
    used: set[str] = set()
    for i, state_id in enumerate(chart.ids[1:], start=1):
        if re.fullmatch(r"\w+", state_id, re.ASCII) and safe(state_id) == state_id:
            aliases[i] = state_id
            used.add(state_id)
    for i, state_id in enumerate(chart.ids[1:], start=1):
        if aliases[i] is not None:
            continue
        base = safe(re.sub(r"\W", "_", state_id, flags=re.ASCII))
        alias, n = base, 2
        while alias in used:
            alias, n = f"{base}_{n}", n + 1
        aliases[i] = alias
        used.add(alias)
    return ("[*]", *(a for a in aliases[1:] if a is not None))


def _scope(chart: Chart[C], source: int, target: int) -> int:
    """The block an edge is written in: its ends' parent when they are siblings, else the top level.

    Mermaid moves a state into the last nested block that mentions it, so an
    edge may only appear in the block that declares both its ends; a mention
    at the top level moves nothing. The regions of a parallel block are
    separate documents, so edges between them go to the top level too.
    """
    parent = chart.parent[source]
    if parent == chart.parent[target] and chart.kind[parent] is not StateKind.PARALLEL:
        return parent
    return ROOT


def _initial_markers(chart: Chart[C], i: int, alias: tuple[str, ...]) -> list[str]:
    """``[*] --> child`` for each child of ``i`` that holds an initial target.

    An initial target deeper than a child cannot be named inside this block
    (see :func:`_scope`); the marker points at the child that holds it and
    its label names the target.
    """
    deeper: dict[int, list[str]] = {}
    for target in chart.initial[i]:
        child = (
            target
            if chart.parent[target] == i
            else next(a for a in chart.ancestors[target] if chart.parent[a] == i)
        )
        deeper.setdefault(child, [])
        if child != target:
            deeper[child].append(chart.ids[target])
    return [
        f"[*] --> {alias[child]}" + (f" : {_mermaid_text('enters ' + ', '.join(ids))}" if ids else "")
        for child, ids in deeper.items()
    ]


def to_mermaid(chart: Chart[C]) -> str:
    """The chart as a Mermaid ``stateDiagram-v2``, titled with the chart name.

    Compound and parallel states are nested ``state X { … }`` blocks, the
    regions of a parallel state separated by ``--``. A block declares its
    children, marks its initial state with ``[*] --> initial``, lists the
    edges between its children, and ends with ``final --> [*]`` for each
    final child. Edges between states of different blocks are written at the
    top level, after every declaration, because Mermaid moves a state into
    any nested block that mentions it.

    States whose id Mermaid cannot parse (dots, dashes) are declared as
    ``state "b1.1" as b1_1``. A history state is a state labelled ``H``
    (``H*`` when deep) with an unlabelled edge to its default target. A state
    with child sites gets a note with one line per site, such as
    ``packer invokes chart 'packer' (map, 3 attempts, group g ≤ 4)``: the site
    id, what it starts, whether it fans out, how many attempts each child
    gets, and its recursive group and depth limit.
    """
    alias = _mermaid_aliases(chart)
    edges: dict[int, list[str]] = {}
    for source, target, t, default in _edges(chart):
        head, tail = _label_parts(t, default=default)
        text = " ".join(part for part in (head, tail) if part)
        line = f"{alias[source]} --> {alias[target]}" + (f" : {_mermaid_text(text)}" if text else "")
        edges.setdefault(_scope(chart, source, target), []).append(line)

    def declare(i: int, depth: int) -> list[str]:
        pad = "    " * depth
        kind = chart.kind[i]
        if kind is StateKind.HISTORY:
            name = f'state "{"H*" if chart.deep[i] else "H"}" as {alias[i]}'
        elif alias[i] != chart.ids[i]:
            name = f'state "{_mermaid_text(chart.ids[i])}" as {alias[i]}'
        else:
            name = f"state {alias[i]}" if kind in _COMPOSITE else alias[i]
        if kind not in _COMPOSITE:
            lines = [pad + name]
        else:
            lines = [f"{pad}{name} {{", *block(i, depth + 1), pad + "}"]
        sites = chart.sites[i]
        if len(sites) == 1:
            lines.append(f"{pad}note right of {alias[i]} : {_mermaid_text(_site_text(sites[0], ' '))}")
        elif sites:
            lines.append(f"{pad}note right of {alias[i]}")
            lines.extend(f"{pad}    {_mermaid_text(_site_text(site, ' '))}" for site in sites)
            lines.append(f"{pad}end note")
        return lines

    def block(i: int, depth: int) -> list[str]:
        pad = "    " * depth
        if chart.kind[i] is StateKind.PARALLEL:
            regions = [declare(c, depth) for c in chart.children[i]]
            regions.extend(declare(h, depth) for h in chart.histories[i])
            lines: list[str] = []
            for n, region in enumerate(regions):
                if n:
                    lines.append(pad + "--")
                lines.extend(region)
            return lines
        lines = []
        for child in (*chart.children[i], *chart.histories[i]):
            lines.extend(declare(child, depth))
        lines.extend(pad + marker for marker in _initial_markers(chart, i, alias))
        lines.extend(pad + edge for edge in edges.get(i, ()))
        lines.extend(
            f"{pad}{alias[c]} --> [*]" for c in chart.children[i] if chart.kind[c] is StateKind.FINAL
        )
        return lines

    header = ["---", f"title: {chart.name}", "---", "stateDiagram-v2"]
    return "\n".join([*header, *block(ROOT, 1)]) + "\n"


# --------------------------------------------------------------------- DOT


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _statement(depth: int, subject: str, **attributes: str) -> str:
    """One DOT statement (a node, or ``graph``/``node``/``edge`` defaults) with quoted attributes."""
    listed = ", ".join(f"{key}={_quote(value)}" for key, value in attributes.items())
    return "    " * depth + subject + (f" [{listed}]" if listed else "")


def _cluster(chart: Chart[C], i: int) -> str:
    return f"cluster {chart.ids[i]}"


# '#' cannot occur in a state or site id, so these node names never collide with a state's.
def _initial_node(chart: Chart[C], i: int) -> str:
    return "#initial" if i == ROOT else f"{chart.ids[i]}#initial"


def _site_node(site: Site) -> str:
    return f"{site.id}#site"


_ANCHOR = {"shape": "point", "style": "invis", "width": "0", "height": "0", "label": ""}
"""An invisible node inside each cluster: edges to a composite state start or end on it."""


def _dot_state(chart: Chart[C], i: int) -> dict[str, str]:
    """The node attributes of a state that is not drawn as a cluster."""
    kind = chart.kind[i]
    if kind is StateKind.FINAL:
        return {"shape": "doublecircle", "width": "0.3", "margin": "0.02"}
    if kind is StateKind.HISTORY:
        return {
            "shape": "circle",
            "label": "H*" if chart.deep[i] else "H",
            "width": "0.3",
            "fixedsize": "true",
        }
    if kind is StateKind.ATOMIC or kind is StateKind.COMPOUND or kind is StateKind.PARALLEL:
        return {}  # the default box (a composite state's node is its cluster's anchor)
    assert_never(kind)


def _dot_edge(chart: Chart[C], source: str, target: str, tail: int, head: int, **attributes: str) -> str:
    """An edge between two nodes standing for states ``tail`` and ``head``.

    When an end is a composite state (drawn as its cluster's invisible
    anchor), the edge is clipped at the cluster border, unless the other end
    lies inside that cluster, where Graphviz cannot clip.
    """
    if chart.kind[head] in _COMPOSITE and tail != head and tail not in chart.descendants[head]:
        attributes["lhead"] = _cluster(chart, head)
    if chart.kind[tail] in _COMPOSITE and head != tail and head not in chart.descendants[tail]:
        attributes["ltail"] = _cluster(chart, tail)
    return _statement(1, f"{_quote(source)} -> {_quote(target)}", **attributes)


def to_dot(chart: Chart[C]) -> str:
    """The chart as a Graphviz ``digraph`` (render it with ``dot -Tsvg``).

    Compound and parallel states are clusters (``compound=true``); the
    regions of a parallel state are clusters with dashed borders. Each
    cluster holds an invisible anchor node named after its state, so an edge
    to or from a composite state attaches to the cluster border through
    ``lhead``/``ltail``. Initial states are marked by a point node, final
    states are double circles, history states circles labelled ``H`` or
    ``H*``, and each child site a note node tied to its state by a dotted
    line. Every id is quoted, so ids with dots and dashes need no aliases.
    Targetless transitions are dashed self-loops.
    """
    lines = [
        f"digraph {_quote(chart.name)} {{",
        _statement(
            1, "graph", compound="true", rankdir="LR", label=chart.name, labelloc="t", fontname="Helvetica"
        ),
        _statement(1, "node", shape="box", style="rounded", fontname="Helvetica", fontsize="11"),
        _statement(1, "edge", fontname="Helvetica", fontsize="9"),
    ]

    def contents(i: int, depth: int) -> None:
        if chart.initial[i]:
            lines.append(_statement(depth, _quote(_initial_node(chart, i)), shape="point", width="0.12"))
        for child in (*chart.children[i], *chart.histories[i]):
            declare(child, depth)

    def declare(i: int, depth: int) -> None:
        if chart.kind[i] in _COMPOSITE:
            region = chart.kind[chart.parent[i]] is StateKind.PARALLEL
            lines.append(_statement(depth, f"subgraph {_quote(_cluster(chart, i))} {{"))
            lines.append(
                _statement(
                    depth + 1, "graph", label=chart.ids[i], style="rounded,dashed" if region else "rounded"
                )
            )
            lines.append(_statement(depth + 1, _quote(chart.ids[i]), **_ANCHOR))
            contents(i, depth + 1)
            lines.append(_statement(depth, "}"))
        else:
            lines.append(_statement(depth, _quote(chart.ids[i]), **_dot_state(chart, i)))
        for site in chart.sites[i]:
            label = _site_text(site, "\n")
            lines.append(_statement(depth, _quote(_site_node(site)), shape="note", label=label, fontsize="9"))

    contents(ROOT, 1)
    for i, targets in enumerate(chart.initial):
        lines.extend(_dot_edge(chart, _initial_node(chart, i), chart.ids[x], i, x) for x in targets)
    for source, target, t, default in _edges(chart):
        attributes: dict[str, str] = {}
        label = "\n".join(part for part in _label_parts(t, default=default) if part)
        if label:
            attributes["label"] = label
        if not t.targets and not default:
            attributes["style"] = "dashed"
        lines.append(_dot_edge(chart, chart.ids[source], chart.ids[target], source, target, **attributes))
    for i, sites in enumerate(chart.sites):
        for site in sites:
            lines.append(
                _statement(
                    1,
                    f"{_quote(chart.ids[i])} -> {_quote(_site_node(site))}",
                    style="dotted",
                    arrowhead="none",
                    **({"ltail": _cluster(chart, i)} if chart.kind[i] in _COMPOSITE else {}),
                )
            )
    lines.append("}")
    return "\n".join(lines) + "\n"

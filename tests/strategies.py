"""Hypothesis strategies: random valid charts, the scripts that drive them, and a script runner.

:func:`charts` draws a state tree (atomic, compound, parallel, final and
history states), then child sites, initial states and history defaults, then
transitions and entry/exit actions whose targets may be any state of the
tree. Every callable a generated chart uses is a named, deterministic
function of a small frozen context (:class:`Counter`), so two runs of one
chart on one script must agree exactly. A generated chart carries its own
source text in ``chart.description``, ready to paste into a regression test.

:func:`event_scripts` draws inputs that are resolved against the snapshot
they meet (which timer, which child slot) by index, so a script stays
meaningful while Hypothesis shrinks the chart under it. :func:`trace_script`
and :func:`run_script` apply a script.

:func:`altered_birth_facts` corrupts one fact of a stored birth, for the
properties that tamper with stored event streams.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import FrameType
from typing import Generic, TypeAlias, TypeVar

import attrs
import hypothesis
from hypothesis import strategies as st

from aggregates import AncestryFrame, BirthFacts, InstanceKind
from statechart import (
    Chart,
    Event,
    JsonValue,
    RetryPolicy,
    after,
    always,
    assign,
    cancel,
    final,
    fire,
    history,
    in_state,
    invoke,
    log,
    parallel,
    raise_event,
    send,
    send_child,
    send_parent,
    start,
    state,
    step,
    stop,
    transition,
)
from statechart.effects import BirthChild, Effect, ResumeChild
from statechart.errors import ChartInvalid, RunawayMacrostep, UnreachableState
from statechart.event import InvokeId, child_message_event, done_invoke_event, error_invoke_event
from statechart.model import Action, InState, Site, StateKind, StateNode, Transition
from statechart.snapshot import Snapshot, Status

T_co = TypeVar("T_co", covariant=True)
F = TypeVar("F", bound=Callable[..., object])
GuardFunction: TypeAlias = Callable[["Counter", Event], bool]
Guard: TypeAlias = GuardFunction | InState
DataExpr: TypeAlias = JsonValue | Callable[["Counter", Event], JsonValue]
DelayExpr: TypeAlias = float | Callable[["Counter", Event], float]
InputExpr: TypeAlias = JsonValue | Callable[["Counter"], JsonValue]
MembersExpr: TypeAlias = Callable[["Counter"], Mapping[str, JsonValue]]
OutputExpr: TypeAlias = Callable[["Counter", Event], "Counter"]

ALPHABET: tuple[str, ...] = ("e0", "e1", "e2", "e3", "e4")
"""The events charts raise, send and listen for."""

EXTERNAL_NAMES: tuple[str, ...] = (*ALPHABET, "e0.a")
"""The names a script sends; ``e0.a`` exercises prefix matching (SCXML 3.12.1)."""

DESCRIPTORS: tuple[str, ...] = (*ALPHABET, *ALPHABET, "*", "done.invoke", "done.state", "error")
"""Transition descriptors: the alphabet (twice as likely), the wildcard and prefixes of platform events."""

SEND_IDS: tuple[str, ...] = ("t0", "t1")
MAX_STATES = 25
MAX_DEPTH = 4
MAX_MICROSTEPS = 40
"""Low, so that a chart whose eventless transitions or raised events loop fails fast."""

_HYPOTHESIS = os.path.dirname(hypothesis.__file__)

MACROSTEP_SECONDS = 2.0
"""How long one interpreter call may take before the run is declared hung (normal: milliseconds)."""


@attrs.frozen
class Counter:
    """The context of every generated chart: a counter and the member keys of fan-out sites."""

    count: int = 0
    keys: tuple[str, ...] = ("k0", "k1")


# ------------------------------------------------------ author callables


def increment(context: Counter, event: Event) -> Counter:
    """Add one to the counter."""
    return attrs.evolve(context, count=context.count + 1)


MEMBERSHIPS: tuple[tuple[str, ...], ...] = (("k0", "k1"), ("k1", "k2"), ("k2",), (), ("k0", "k1", "k2"))
"""The fan-out memberships :func:`rekey` cycles through: keys leave, join, and all go."""


def rekey(context: Counter, event: Event) -> Counter:
    """Move the fan-out membership to the next one of :data:`MEMBERSHIPS`."""
    position = MEMBERSHIPS.index(context.keys) if context.keys in MEMBERSHIPS else -1
    return attrs.evolve(context, keys=MEMBERSHIPS[(position + 1) % len(MEMBERSHIPS)])


def keep(context: Counter, event: Event) -> None:
    """Keep the context (an assigner may return None)."""
    return None


def fail_on_two(context: Counter, event: Event) -> Counter:
    """Add one, except when the counter is 2 modulo 3: then fail."""
    if context.count % 3 == 2:
        raise ValueError(f"count {context.count} is refused")
    return attrs.evolve(context, count=context.count + 1)


def misassign(context: Counter, event: Event) -> object:
    """Return something that is not a context (an author's mistake: error.execution)."""
    return {"count": context.count + 1}


def is_even(context: Counter, event: Event) -> bool:
    """Whether the counter is even."""
    return context.count % 2 == 0


def is_odd(context: Counter, event: Event) -> bool:
    """Whether the counter is odd."""
    return context.count % 2 == 1


def below_three(context: Counter, event: Event) -> bool:
    """Whether the counter is below three."""
    return context.count < 3


def has_data(context: Counter, event: Event) -> bool:
    """Whether the event carries data."""
    return event.data is not None


def fails_when_odd(context: Counter, event: Event) -> bool:
    """True when the counter is even; fails when it is odd."""
    if context.count % 2:
        raise ValueError(f"count {context.count} is odd")
    return True


def count_data(context: Counter, event: Event) -> JsonValue:
    """Event data built from the context (fresh mutable lists each time)."""
    return {"count": context.count, "keys": list(context.keys)}


def refuse_odd_data(context: Counter, event: Event) -> JsonValue:
    """Event data that cannot be built while the counter is odd."""
    if context.count % 2:
        raise ValueError(f"no data for count {context.count}")
    return [context.count]


def count_delay(context: Counter, event: Event) -> float:
    """A delay that depends on the counter: negative (an error) when it is 3 modulo 4."""
    return -1.0 if context.count % 4 == 3 else float(context.count % 3)


def count_input(context: Counter) -> JsonValue:
    """A child input built from the context."""
    return {"count": context.count}


def refuse_odd_input(context: Counter) -> JsonValue:
    """A child input that cannot be built while the counter is odd."""
    if context.count % 2:
        raise ValueError(f"no input for count {context.count}")
    return [context.count]


def key_members(context: Counter) -> Mapping[str, JsonValue]:
    """One fan-out member per key of the context."""
    return {key: {"key": key} for key in context.keys}


def members_unless_three(context: Counter) -> Mapping[str, JsonValue]:
    """Like :func:`key_members`, but fails when the counter is 3 modulo 4."""
    if context.count % 4 == 3:
        raise ValueError(f"no members for count {context.count}")
    return key_members(context)


def count_output(context: Counter, event: Event) -> Counter:
    """Fold a child's completion into the counter."""
    return attrs.evolve(context, count=context.count + 1)


def refuse_odd_output(context: Counter, event: Event) -> Counter:
    """Fold a child's completion into the counter, failing while the counter is odd."""
    if context.count % 2:
        raise ValueError(f"no output for count {context.count}")
    return attrs.evolve(context, count=context.count + 1)


# ------------------------------------------------------------ source text


@attrs.frozen
class _Name:
    """A name printed bare in generated source (a function, not a string)."""

    name: str

    def __repr__(self) -> str:
        return self.name


def _source(function: str, *args: object, **kwargs: object) -> str:
    """Call text; keyword arguments left at their defaults (None, False, []) are left out."""
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items() if v not in (None, False, [])]
    return f"{function}({', '.join(parts)})"


@attrs.frozen
class Piece(Generic[T_co]):
    """An authored value with the source text that builds it."""

    value: T_co
    text: str

    def __repr__(self) -> str:
        return self.text


def _ref(function: F) -> Piece[F]:
    return Piece(function, function.__name__)


def _constant(value: JsonValue) -> Piece[JsonValue]:
    return Piece(value, repr(value))


# ------------------------------------------------------------------ tree


@attrs.define(eq=False)
class _Node:
    """A state of the tree being drawn; built into a StateNode at the end."""

    id: str
    kind: StateKind
    parent: _Node | None
    depth: int
    children: list[_Node] = attrs.Factory(list)
    initial: str | None = None
    deep: bool = False
    default: str | None = None
    default_actions: list[Piece[Action]] = attrs.Factory(list)
    transitions: list[Piece[Transition]] = attrs.Factory(list)
    entry: list[Piece[Action]] = attrs.Factory(list)
    exit: list[Piece[Action]] = attrs.Factory(list)
    sites: list[Piece[Site]] = attrs.Factory(list)
    done_data: Piece[DataExpr] | None = None

    def walk(self) -> Iterator[_Node]:
        yield self
        for child in self.children:
            yield from child.walk()

    def proper_descendants(self) -> list[_Node]:
        """Descendants that are not history states."""
        return [n for n in self.walk() if n is not self and n.kind is not StateKind.HISTORY]

    def regions(self) -> list[_Node]:
        return [c for c in self.children if c.kind is not StateKind.HISTORY]


@attrs.define
class _Budget:
    left: int
    states: int = 0
    histories: int = 0

    def state_id(self) -> str:
        self.states += 1
        return f"s{self.states}"

    def history_id(self) -> str:
        self.histories += 1
        return f"h{self.histories}"


def _draw_node(
    draw: st.DrawFn, budget: _Budget, parent: _Node | None, depth: int, allow_final: bool
) -> _Node:
    budget.left -= 1
    kinds = [StateKind.ATOMIC, StateKind.ATOMIC]
    if allow_final:
        kinds.append(StateKind.FINAL)
    if depth < MAX_DEPTH and budget.left >= 1:
        kinds += [StateKind.COMPOUND, StateKind.COMPOUND]
    if depth < MAX_DEPTH and budget.left >= 2:
        kinds.append(StateKind.PARALLEL)
    kind = draw(st.sampled_from(kinds))
    node = _Node(budget.state_id(), kind, parent, depth)
    if kind is StateKind.COMPOUND:
        count = draw(st.integers(1, min(4, budget.left)))
        for n in range(count):
            if budget.left < 1:
                break
            # a first child that is final would finish the compound on entry, every time
            node.children.append(_draw_node(draw, budget, node, depth + 1, allow_final=n > 0))
    elif kind is StateKind.PARALLEL:
        # SCXML 3.4: a parallel state's children are states, parallels and histories, not finals
        count = draw(st.integers(2, max(2, min(3, budget.left))))
        for _ in range(count):
            if budget.left < 1:
                break
            node.children.append(_draw_node(draw, budget, node, depth + 1, allow_final=False))
    if kind in (StateKind.COMPOUND, StateKind.PARALLEL) and budget.left >= 1 and draw(st.booleans()):
        budget.left -= 1
        marker = _Node(budget.history_id(), StateKind.HISTORY, node, depth + 1, deep=draw(st.booleans()))
        node.children.insert(draw(st.integers(0, len(node.children))), marker)
    return node


def _draw_tree(draw: st.DrawFn) -> list[_Node]:
    budget = _Budget(draw(st.integers(1, MAX_STATES)))
    roots: list[_Node] = []
    for n in range(draw(st.integers(1, 3))):
        if budget.left < 1:
            break
        roots.append(_draw_node(draw, budget, None, 1, allow_final=n > 0))
    if budget.left >= 1 and draw(st.booleans()):
        # a top-level final state, so that instances also complete
        roots.append(_Node(budget.state_id(), StateKind.FINAL, None, 1))
    return roots


# --------------------------------------------------------------- actions

_ASSIGNERS: tuple[Callable[[Counter, Event], object], ...] = (
    increment,
    increment,
    rekey,
    rekey,
    keep,
    fail_on_two,
    misassign,
)
_GUARDS: tuple[GuardFunction, ...] = (is_even, is_odd, below_three, has_data, fails_when_odd)
_COUNTER_GUARDS: tuple[GuardFunction, ...] = (is_even, is_odd, below_three)
_DELAYS = (0.0, 0.5, 1.0, 2.0)


def _data(draw: st.DrawFn, quiet: bool = False) -> Piece[DataExpr]:
    choices: list[Piece[DataExpr]] = [_constant(None), _ref(count_data), _constant({"fixed": [1, 2]})]
    if not quiet:
        choices.append(_ref(refuse_odd_data))
    return draw(st.sampled_from(choices))


def _action(draw: st.DrawFn, site_ids: Sequence[str], quiet: bool = False) -> Piece[Action]:
    """An action; a ``quiet`` one raises no event, neither by ``raise_event`` nor by failing."""
    kinds = ["assign", "assign", "send", "cancel", "log", "send_parent"]
    if not quiet:
        kinds += ["raise", "send_child"] if site_ids else ["raise"]
    kind = draw(st.sampled_from(kinds))
    if kind == "assign":
        fn = draw(st.sampled_from(_ASSIGNERS[:-2] if quiet else _ASSIGNERS))
        return Piece(assign(fn), _source("assign", _Name(fn.__name__)))
    if kind == "raise":
        name = draw(st.sampled_from(ALPHABET))
        return Piece(raise_event(name), _source("raise_event", name))
    if kind == "send":
        name = draw(st.sampled_from(ALPHABET))
        data = _data(draw, quiet)
        delays: list[Piece[DelayExpr]] = [Piece(d, repr(d)) for d in _DELAYS]
        delay = draw(st.sampled_from(delays if quiet else [*delays, _ref(count_delay)]))
        send_id = draw(st.sampled_from((None, *SEND_IDS)))
        return Piece(
            send(name, data.value, delay=delay.value, id=send_id),
            _source("send", name, data, delay=delay, id=send_id),
        )
    if kind == "cancel":
        send_id = draw(st.sampled_from(SEND_IDS))
        return Piece(cancel(send_id), _source("cancel", send_id))
    if kind == "log":
        data = _data(draw, quiet)
        return Piece(log("note", data.value), _source("log", "note", data))
    if kind == "send_parent":
        name = draw(st.sampled_from(ALPHABET))
        return Piece(send_parent(name), _source("send_parent", name))
    site_id = draw(st.sampled_from(site_ids))
    key = draw(st.sampled_from((None, "k0")))
    return Piece(send_child(site_id, "e2", key=key), _source("send_child", site_id, "e2", key=key))


def _actions(draw: st.DrawFn, site_ids: Sequence[str], most: int, quiet: bool = False) -> list[Piece[Action]]:
    return [_action(draw, site_ids, quiet) for _ in range(draw(st.integers(0, most)))]


def _site(draw: st.DrawFn, number: int) -> Piece[Site]:
    site_id = f"w{number}"
    inputs: list[Piece[InputExpr]] = [
        _constant(None),
        _constant({"n": number}),
        _ref(count_input),
        _ref(refuse_odd_input),
    ]
    input_ = draw(st.sampled_from(inputs))
    member_functions: list[Piece[MembersExpr] | None] = [
        None,
        None,
        _ref(key_members),
        _ref(members_unless_three),
    ]
    members = draw(st.sampled_from(member_functions))
    outputs: list[Piece[OutputExpr] | None] = [None, None, _ref(count_output), _ref(refuse_odd_output)]
    output = draw(st.sampled_from(outputs))
    attempts = draw(st.sampled_from((1, 2, 3, 3)))
    backoff = draw(st.sampled_from((0.0, 0.0, 0.5, 1.0)))
    retry = Piece(
        RetryPolicy(max_attempts=attempts, backoff=backoff),
        _source("RetryPolicy", max_attempts=attempts, backoff=backoff),
    )
    task = draw(st.sampled_from((None, "work")))
    chart = None if task else "child"
    depth = draw(st.sampled_from((None, None, None, 1, 2)))
    group = None if depth is None else "g"
    site = invoke(
        site_id,
        chart=chart,
        task=task,
        input=input_.value,
        map=None if members is None else members.value,
        output=None if output is None else output.value,
        retry=retry.value,
        group=group,
        max_depth=depth,
    )
    text: dict[str, object] = {
        "chart": chart,
        "task": task,
        "input": input_,
        "map": members,
        "output": output,
    }
    text |= {"retry": retry, "group": group, "max_depth": depth}
    return Piece(site, _source("invoke", site_id, **{k: v for k, v in text.items() if v is not None}))


def _guard(draw: st.DrawFn, state_ids: Sequence[str], may_raise: bool) -> Piece[Guard] | None:
    choice = draw(st.integers(0, 5))
    if choice < 3:
        return None
    if choice == 3:
        target = draw(st.sampled_from(state_ids))
        return Piece(in_state(target), _source("in_state", target))
    guard: Piece[Guard] = _ref(draw(st.sampled_from(_GUARDS if may_raise else _GUARDS[:-1])))
    return guard


def _targets(draw: st.DrawFn, nodes: Sequence[_Node]) -> tuple[str, ...]:
    """No target, one state, or two states in distinct regions of a parallel (histories included)."""
    parallels = [n for n in nodes if n.kind is StateKind.PARALLEL and len(n.regions()) >= 2]
    shapes = ["none", "one", "one", "one", "two"] if parallels else ["none", "one", "one"]
    shape = draw(st.sampled_from(shapes))
    if shape == "none":
        return ()
    if shape == "one":
        return (draw(st.sampled_from([n.id for n in nodes])),)
    owner = draw(st.sampled_from(parallels))
    first, second = draw(st.permutations(owner.regions()))[:2]
    return tuple(draw(st.sampled_from([n.id for n in region.walk()])) for region in (first, second))


def _transition(
    draw: st.DrawFn, nodes: Sequence[_Node], site_ids: Sequence[str], error_loops: bool
) -> Piece[Transition]:
    state_ids = [n.id for n in nodes]
    form = draw(st.sampled_from(["event"] * 6 + ["after", "after", "always"]))
    targets = _targets(draw, nodes)
    target = " ".join(targets) if targets else None
    if form == "always":
        # eventless: guarded on the counter and always changing it, so most settle;
        # those that ping-pong between states run away, deterministically
        guards = (*_COUNTER_GUARDS, fails_when_odd) if error_loops else _COUNTER_GUARDS
        counter_guard: Piece[Guard] = _ref(draw(st.sampled_from(guards)))
        actions = [Piece[Action](assign(increment), "assign(increment)"), *_actions(draw, site_ids, 1)]
        internal = draw(st.booleans())
        return Piece(
            always(target, guard=counter_guard.value, actions=[a.value for a in actions], internal=internal),
            _source("always", target, guard=counter_guard, actions=actions, internal=internal),
        )
    events = " ".join(draw(st.lists(st.sampled_from(DESCRIPTORS), min_size=1, max_size=2, unique=True)))
    # a transition that error events can take, and whose guard or actions raise errors, takes
    # them forever: a runaway macrostep, so kept to the property that looks for those
    quiet = form == "event" and any(d in ("*", "error") for d in events.split()) and not error_loops
    guard = _guard(draw, state_ids, may_raise=not quiet)
    guard_value = None if guard is None else guard.value
    actions = _actions(draw, site_ids, 2, quiet)
    if form == "after":
        delay = draw(st.sampled_from(_DELAYS))
        return Piece(
            after(delay, target, guard=guard_value, actions=[a.value for a in actions]),
            _source("after", delay, target, guard=guard, actions=actions),
        )
    internal = draw(st.booleans())
    return Piece(
        transition(events, target, guard=guard_value, actions=[a.value for a in actions], internal=internal),
        _source("transition", events, target, guard=guard, actions=actions, internal=internal),
    )


# ---------------------------------------------------------------- charts


def _build(node: _Node) -> StateNode:
    children = [_build(c) for c in node.children]
    entry = [a.value for a in node.entry]
    exit = [a.value for a in node.exit]
    if node.kind is StateKind.HISTORY:
        return history(node.id, node.default, deep=node.deep, actions=[a.value for a in node.default_actions])
    if node.kind is StateKind.FINAL:
        done_data = None if node.done_data is None else node.done_data.value
        return final(node.id, done_data=done_data, entry=entry, exit=exit)
    on = [t.value for t in node.transitions]
    sites = [s.value for s in node.sites]
    if node.kind is StateKind.PARALLEL:
        return parallel(node.id, *children, on=on, entry=entry, exit=exit, invoke=sites)
    return state(node.id, *children, initial=node.initial, on=on, entry=entry, exit=exit, invoke=sites)


def _render(node: _Node, indent: int) -> str:
    pad = "    " * indent
    if node.kind is StateKind.HISTORY:
        return pad + _source("history", node.id, node.default, deep=node.deep, actions=node.default_actions)
    kwargs: dict[str, object] = {
        "initial": node.initial,
        "done_data": node.done_data,
        "on": node.transitions,
        "entry": node.entry,
        "exit": node.exit,
        "invoke": node.sites,
    }
    function = {StateKind.FINAL: "final", StateKind.PARALLEL: "parallel"}.get(node.kind, "state")
    if not node.children:
        return pad + _source(function, node.id, **kwargs)
    inner = "".join(f"{_render(c, indent + 1)},\n" for c in node.children)
    options = "".join(f"{pad}    {k}={v!r},\n" for k, v in kwargs.items() if v not in (None, []))
    return f"{pad}{function}(\n{pad}    {node.id!r},\n{inner}{options}{pad})"


@st.composite
def charts(draw: st.DrawFn, error_loops: bool = False) -> Chart[Counter]:
    """A random valid chart over :class:`Counter` (its source text is its ``description``).

    Transitions on ``*`` or ``error`` neither raise events nor fail, and
    eventless guards never fail, so that few macrosteps run away, unless
    ``error_loops``: then any guard or action may sit anywhere.
    """
    roots = _draw_tree(draw)
    nodes = [n for root in roots for n in root.walk()]
    proper = [n for n in nodes if n.kind is not StateKind.HISTORY]
    site_ids: list[str] = []
    for node in proper:
        if node.kind is not StateKind.FINAL and draw(st.integers(0, 3)) == 0:
            node.sites.append(_site(draw, len(site_ids) + 1))
            site_ids.append(f"w{len(site_ids) + 1}")
    for node in nodes:
        if node.kind is StateKind.COMPOUND and draw(st.integers(0, 2)) == 0:
            node.initial = draw(st.sampled_from(node.proper_descendants())).id
        elif node.kind is StateKind.HISTORY:
            assert node.parent is not None
            node.default = draw(st.sampled_from(node.parent.proper_descendants())).id
            node.default_actions = _actions(draw, site_ids, 1)
        elif node.kind is StateKind.FINAL:
            node.done_data = _data(draw)
        if node.kind is not StateKind.HISTORY:
            if node.kind is not StateKind.FINAL:
                node.transitions = [
                    _transition(draw, nodes, site_ids, error_loops) for _ in range(draw(st.integers(0, 3)))
                ]
            if draw(st.integers(0, 3)) == 0:
                node.entry = _actions(draw, site_ids, 2)
            if draw(st.integers(0, 3)) == 0:
                node.exit = _actions(draw, site_ids, 2)
    starters = [n for n in proper if not (n.kind is StateKind.FINAL and n.parent is None)]
    initial = draw(st.sampled_from([None, None, None] + [n.id for n in starters]))
    return _chart(roots, initial)


def rebuild(chart: Chart[Counter]) -> Chart[Counter]:
    """A fresh chart from the same authored states (its caches cold)."""
    return Chart(
        chart.name,
        *chart.roots,
        context=Counter,
        initial=chart.initial_ids,
        max_microsteps=chart.max_microsteps,
        allow_unreachable=chart.allow_unreachable,
        description=chart.description,
    )


def _chart(roots: list[_Node], initial: str | None) -> Chart[Counter]:
    """Build the chart; the validator decides reachability and we waive exactly what it reports."""
    states = [_build(root) for root in roots]
    waived: list[str] = []
    by_where = {f"state {n.id!r}": n.id for root in roots for n in root.walk()}
    for _ in range(2):
        text = _render_chart(roots, initial, waived)
        try:
            return Chart(
                "generated",
                *states,
                context=Counter,
                initial=initial,
                max_microsteps=MAX_MICROSTEPS,
                allow_unreachable=waived,
                description=text,
            )
        except ChartInvalid as group:
            unreachable = [e for e in group.exceptions if isinstance(e, UnreachableState)]
            if waived or len(unreachable) != len(group.exceptions):
                raise AssertionError(f"the generator drew an invalid chart:\n{text}") from group
            waived = [by_where[e.where] for e in unreachable]
    raise AssertionError("unreachable")  # pragma: no cover


def _render_chart(roots: list[_Node], initial: str | None, waived: list[str]) -> str:
    body = ",\n".join(_render(root, 1) for root in roots)
    return (
        f'Chart(\n    "generated",\n{body},\n    context=Counter,\n    initial={initial!r},\n'
        f"    max_microsteps={MAX_MICROSTEPS},\n    allow_unreachable={waived!r},\n)"
    )


# --------------------------------------------------------------- scripts


@attrs.frozen
class Deliver:
    """Send the external event ``name`` with ``data``."""

    name: str
    data: JsonValue = None


@attrs.frozen
class FireTimer:
    """Fire armed timer number ``choice`` (modulo the armed ones), at its deadline if that is later."""

    choice: int


@attrs.frozen
class Report:
    """Report an outcome of child slot number ``choice``: ``done``, ``error`` or a ``message``.

    ``stale`` names an earlier incarnation instead (see ``_report_event``).
    """

    choice: int
    outcome: str
    stale: bool
    data: JsonValue = None


@attrs.frozen
class Advance:
    """Move the clock forward."""

    seconds: float


@attrs.frozen
class Stop:
    """Stop the instance from outside (the last input of a script that has one)."""

    reason: str = "stopped"


ScriptItem = Deliver | FireTimer | Report | Advance | Stop

_EVENT_DATA = st.one_of(st.none(), st.fixed_dictionaries({"n": st.lists(st.integers(0, 3), max_size=2)}))


def event_scripts(chart: Chart[Counter], max_size: int = 40) -> st.SearchStrategy[tuple[ScriptItem, ...]]:
    """Sequences of inputs for ``chart``; child reports only when it declares sites."""
    options: list[st.SearchStrategy[ScriptItem]] = [
        st.builds(Deliver, st.sampled_from(EXTERNAL_NAMES), _EVENT_DATA),
        st.builds(FireTimer, st.integers(0, 7)),
        st.builds(Advance, st.sampled_from((0.25, 0.5, 1.0, 2.0, 5.0))),
    ]
    if chart.site_by_id:
        options.append(
            st.builds(
                Report,
                st.integers(0, 7),
                st.sampled_from(("done", "error", "error", "message")),
                st.sampled_from((False, False, False, True)),
                _EVENT_DATA,
            )
        )
    return _sequences(st.one_of(options), max_size)


@st.composite
def _sequences(
    draw: st.DrawFn, items: st.SearchStrategy[ScriptItem], max_size: int
) -> tuple[ScriptItem, ...]:
    # a uniform length: st.lists favours short lists, and most behaviour needs a few steps
    script = [draw(items) for _ in range(draw(st.integers(0, max_size)))]
    if draw(st.integers(0, 4)) == 0:
        script.append(Stop())
    return tuple(script)


@st.composite
def scenarios(draw: st.DrawFn, error_loops: bool = False) -> tuple[Chart[Counter], tuple[ScriptItem, ...]]:
    """A chart and a script for it."""
    chart = draw(charts(error_loops))
    return chart, draw(event_scripts(chart))


# ---------------------------------------------------------------- running

Outcome = tuple[Snapshot[Counter], tuple[Effect, ...]]


@attrs.frozen
class Call:
    """One resolved interpreter call.

    ``start`` uses ``input`` and ``lineage``, ``step`` its ``event``, ``fire``
    its ``timer_id`` and ``stop`` its ``reason``; all but ``start`` apply to ``before``.
    """

    operation: str
    before: Snapshot[Counter] | None
    now: float
    event: Event | None = None
    timer_id: str | None = None
    input: JsonValue = None
    lineage: tuple[str, ...] = ()
    reason: str = ""


@attrs.frozen
class Runaway:
    """A macrostep that did not settle: which call, on what event, in what configuration."""

    call: int
    event: str
    limit: int
    configuration: tuple[str, ...]


@attrs.frozen
class Trace:
    """What a script did: the calls made, their outcomes, and a runaway macrostep if one ended it."""

    calls: tuple[Call, ...]
    outcomes: tuple[Outcome, ...]
    runaway: Runaway | None


class MacrostepHung(AssertionError):
    """An interpreter call neither returned nor raised within :data:`MACROSTEP_SECONDS`."""


@contextlib.contextmanager
def watchdog(what: str, seconds: float = MACROSTEP_SECONDS) -> Iterator[None]:
    """Raise :class:`MacrostepHung` in the block if it runs longer than ``seconds``.

    The alarm repeats until the block ends, and lets a tick pass when it
    lands in Hypothesis's garbage-collector callback, where an exception
    would be printed and dropped.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def alarm(signum: int, frame: FrameType | None) -> None:
        if frame is not None and frame.f_code.co_filename.startswith(_HYPOTHESIS):
            return  # Hypothesis's own bookkeeping (a gc callback) is running: wait for the next tick
        raise MacrostepHung(f"{what} did not return within {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.1)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def perform(chart: Chart[Counter], call: Call) -> Outcome:
    """Make one interpreter call."""
    if call.operation == "start":
        return start(chart, input=call.input, now=call.now, lineage=call.lineage)
    assert call.before is not None
    if call.operation == "stop":
        return stop(chart, call.before, now=call.now, reason=call.reason)
    if call.operation == "fire":
        assert call.timer_id is not None
        return fire(chart, call.before, call.timer_id, now=call.now)
    assert call.event is not None
    return step(chart, call.before, call.event, now=call.now)


def _report_event(item: Report, snapshot: Snapshot[Counter], born: Sequence[InvokeId]) -> Event | None:
    """The reported outcome: of a current slot's incarnation, or of an older one when ``stale``.

    A stale report names an incarnation born earlier in the run that no slot
    holds any more (its slot may be gone), else the generation before a slot's.
    """
    slots = snapshot.children
    current = {slot.invoke_id for slot in slots}
    older = [i for i in born if i not in current]
    if item.stale and older:
        invoke_id = older[item.choice % len(older)]
    elif slots:
        slot = slots[item.choice % len(slots)]
        invoke_id = slot.invoke_id
        if item.stale:
            invoke_id = InvokeId(slot.site, slot.key, slot.generation - 1)
    else:
        return None
    if item.outcome == "done":
        return done_invoke_event(invoke_id, item.data)
    if item.outcome == "error":
        return error_invoke_event(invoke_id, item.data)
    return child_message_event(invoke_id, "e3", item.data)


def _resolve(
    item: ScriptItem, snapshot: Snapshot[Counter], now: float, born: Sequence[InvokeId]
) -> Call | None:
    if isinstance(item, Deliver):
        return Call("step", snapshot, now, event=Event(item.name, item.data))
    if isinstance(item, FireTimer):
        if not snapshot.timers:
            return None
        timer = snapshot.timers[item.choice % len(snapshot.timers)]
        return Call("fire", snapshot, max(now, timer.deadline), timer_id=timer.id)
    if isinstance(item, Report):
        event = _report_event(item, snapshot, born)
        return None if event is None else Call("step", snapshot, now, event=event)
    if isinstance(item, Stop):
        return Call("stop", snapshot, now, reason=item.reason)
    return None


def trace_script(
    chart: Chart[Counter],
    script: Sequence[ScriptItem],
    call: Callable[[Chart[Counter], Call], Outcome] = perform,
) -> Trace:
    """Start ``chart`` and apply ``script``, resolving each input against the current snapshot.

    Inputs that find nothing to act on (no armed timer, no child slot) are
    skipped, and the script ends when the instance finishes or a macrostep
    runs away. ``call`` makes each interpreter call (a test may wrap it); a
    call that hangs raises :class:`MacrostepHung`.
    """
    calls: list[Call] = []
    outcomes: list[Outcome] = []
    born: list[InvokeId] = []
    now = 0.0
    # started as a child one level deep in group "g", so that sites with max_depth=1 refuse births
    pending: Call | None = Call("start", None, now, input={"count": 0, "keys": ["k0", "k1"]}, lineage=("g",))
    items = iter(script)
    while pending is not None:
        calls.append(pending)
        try:
            with watchdog(f"call #{len(calls) - 1} ({pending.operation})"):
                snapshot, effects = call(chart, pending)
        except RunawayMacrostep as error:
            runaway = Runaway(len(calls) - 1, error.event, error.limit, error.configuration)
            return Trace(tuple(calls), tuple(outcomes), runaway)
        outcomes.append((snapshot, effects))
        born.extend(e.invoke_id for e in effects if isinstance(e, BirthChild | ResumeChild))
        now = pending.now
        pending = None
        while pending is None and snapshot.status is Status.RUNNING:
            item = next(items, None)
            if item is None:
                break
            if isinstance(item, Advance):
                now += item.seconds
                continue
            pending = _resolve(item, snapshot, now, born)
    return Trace(tuple(calls), tuple(outcomes), None)


def run_script(chart: Chart[Counter], script: Sequence[ScriptItem]) -> list[Outcome]:
    """The snapshot and effects after each macrostep of ``script`` (up to a runaway one, if any)."""
    return list(trace_script(chart, script).outcomes)


# ---------------------------------------------------------------- corrupted birth facts

BIRTH_FACT_FIELDS = ("parent_type", "root", "kind", "name", "state", "ancestry")
"""The birth facts that say what an incarnation runs and where it sits in its call tree."""

_NAMES = ("kid", "parent", "tree", "loop", "charging", "charge", "middle", "Instance", "Aggregate")
"""Names of the sample charts, tasks, states and aggregate types: the likeliest wrong values."""


def _other_names(current: str) -> st.SearchStrategy[str]:
    known = st.sampled_from([name for name in _NAMES if name != current])
    return st.one_of(known, st.text(min_size=1, max_size=8).filter(lambda name: name != current))


def altered_birth_facts(facts: BirthFacts, field: str) -> st.SearchStrategy[BirthFacts]:
    """Copies of ``facts`` with the fact ``field`` (one of :data:`BIRTH_FACT_FIELDS`) changed.

    Names are drawn from the sample charts first (another chart is the
    likeliest corruption), an ancestry gains, loses or re-points a frame.
    """
    if field == "kind":
        other = InstanceKind.TASK if facts.kind is InstanceKind.CHART else InstanceKind.CHART
        return st.just(attrs.evolve(facts, kind=other))
    if field == "root":
        return (
            st.uuids()
            .filter(lambda root: root != facts.root)
            .map(lambda root: attrs.evolve(facts, root=root))
        )
    if field == "ancestry":
        ancestry = facts.ancestry
        gained = st.sampled_from(["tree", "other"]).map(
            lambda group: (*ancestry, AncestryFrame(group, facts.ref))
        )
        options = [gained]
        if ancestry:
            last = ancestry[-1]
            elsewhere = attrs.evolve(last.ref, generation=last.ref.generation + 1)
            options += [st.just(ancestry[:-1]), st.just((*ancestry[:-1], attrs.evolve(last, ref=elsewhere)))]
        return st.one_of(options).map(lambda frames: attrs.evolve(facts, ancestry=frames))
    if field == "parent_type":
        return _other_names(facts.parent_type).map(lambda value: attrs.evolve(facts, parent_type=value))
    if field == "name":
        return _other_names(facts.name).map(lambda value: attrs.evolve(facts, name=value))
    if field == "state":
        return _other_names(facts.state).map(lambda value: attrs.evolve(facts, state=value))
    raise ValueError(f"no alteration of birth fact {field!r}; pick one of {BIRTH_FACT_FIELDS}")


__all__ = [
    "ALPHABET",
    "BIRTH_FACT_FIELDS",
    "Advance",
    "Call",
    "Counter",
    "Deliver",
    "FireTimer",
    "MacrostepHung",
    "Outcome",
    "Report",
    "Runaway",
    "ScriptItem",
    "Stop",
    "Trace",
    "altered_birth_facts",
    "charts",
    "event_scripts",
    "perform",
    "rebuild",
    "run_script",
    "scenarios",
    "trace_script",
    "watchdog",
]

"""A chart: the validated, compiled form of an authored state tree."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, Never, TypeAlias, TypeVar, cast, overload

import attrs

from statechart import errors
from statechart._event import JsonValue
from statechart._model import (
    Action,
    ActionLike,
    DataExpr,
    Guard,
    Site,
    StateKind,
    StateNode,
    Transition,
    _actions,
    _targets,
)
from statechart._plan import Plan, PlanKey
from statechart._shape import Shape, SiteShape, StateShape, TransitionShape
from statechart._snapshot import HistoryEntry
from statechart._validate import STATE_ID, Validator, walk

C = TypeVar("C", covariant=True)  # noqa: PLC0105 - one name for the context type throughout

StateArgument: TypeAlias = "StateNode[C] | Callable[[C], Never]"
"""A state given to ``Chart(..., context=Ctx)``: a ``StateNode[Ctx]``.

The second member matches no state; it is there for mypy's inference. mypy
infers the type variables of a call from the arguments whose parameter
types hold no callable of them first, then checks the others against the
result (the second pass it keeps for lambdas). With a callable in this
type, ``context=Ctx`` alone binds ``C``, and every state is then checked
against ``StateNode[Ctx]``: the factories nested in it are inferred in that
context, so an unannotated ``Chart(...)`` is a ``Chart[Ctx]``, an
unannotated lambda inside it takes a ``Ctx``, and a callable written for
another class is reported where it is passed. Otherwise the states take
part in inferring ``C``, and a state built without any callable
(``final("done")``, typed ``StateNode[Any]``) makes ``C`` ``Any``.
"""

ROOT = 0
"""Index of the implicit root (the SCXML ``<scxml>`` element)."""

ROOT_ID = "(root)"


@attrs.frozen
class NoContext:
    """The context of a chart that declares none."""


def _normalise_descriptor(descriptor: str) -> str:
    """SCXML 3.12.1: ``*`` and ``.*`` match every event; ``foo.*`` is the same as ``foo``."""
    if descriptor in ("*", ".*"):
        return "*"
    return descriptor.removesuffix(".*").removesuffix(".")


class CompiledTransition:
    """A transition with its states resolved to indices (see :class:`Chart`)."""

    __slots__ = (
        "actions",
        "delay",
        "domain",
        "entry_plan",
        "events",
        "guard",
        "history_targets",
        "internal",
        "label",
        "order",
        "position",
        "source",
        "targets",
        "timer_id",
    )

    def __init__(
        self,
        source: int,
        position: int,
        order: int,
        authored: Transition,
        targets: tuple[int, ...],
        history_targets: bool,
        label: str,
    ) -> None:
        self.source = source
        self.position = position
        self.order = order
        self.events = tuple(_normalise_descriptor(e) for e in authored.events)
        self.targets = targets
        self.guard: Guard | None = authored.guard
        self.actions: tuple[Action, ...] = authored.actions
        self.internal = authored.internal
        self.delay = authored.delay
        self.history_targets = history_targets
        self.domain: int | None = None  # filled in when no target is a history state
        self.label = label
        self.timer_id: str | None = None
        self.entry_plan: tuple[int, ...] | None = None  # filled by the interpreter

    def matches(self, name: str) -> bool:
        """SCXML 3.12.1: a descriptor matches a name it equals or token-prefixes.

        A delayed transition's timer event matches exactly, so that the timer
        of a state nested in another (``a`` and ``a.1``) never takes the
        outer state's transition.
        """
        if self.timer_id is not None:
            return name == self.timer_id
        for descriptor in self.events:
            if descriptor == "*" or name == descriptor or name.startswith(descriptor + "."):
                return True
        return False


class Chart(Generic[C]):
    """An authored statechart, validated and compiled.

    ``Chart(name, *states, context=Ctx)`` checks the whole definition and
    raises :class:`~statechart.errors.ChartInvalid` listing every problem.
    For a type checker ``context=Ctx`` alone binds ``C`` to ``Ctx``, with or
    without an annotation on the chart: every state's guards, actions, done
    data and child mappers must accept a ``Ctx`` (states are
    ``StateNode[Ctx]``), assigners must return a ``Ctx`` or ``None``, and
    unannotated lambdas written inside the call take a ``Ctx``. Without
    ``context`` the chart is a ``Chart[NoContext]``.
    The compiled tables below are what the interpreter walks; states are
    numbered in document order, the implicit root being 0.

    ``setup`` is executable content run once when an instance starts,
    before its initial states are entered (the content of the chart's
    initial transition): SCXML's top-level data initialisation and
    ``<script>`` (5.2.2, 5.8). An error in it raises ``error.execution``,
    processed once the initial configuration is entered.

    ``companions`` are charts defined with this one that its sites invoke
    (the documents an SCXML document invokes): a registry, and so an
    engine, that adds this chart adds them too.

    ``allow_unreachable`` names states (with their descendants) that no
    transition enters yet and that validation should accept, such as
    placeholders in a chart under construction.
    """

    @overload
    def __init__(
        self: Chart[NoContext],
        name: str,
        *states: StateNode[NoContext],
        initial: str | Sequence[str] | None = None,
        context_from_input: Callable[[JsonValue], NoContext] | None = None,
        max_microsteps: int = 1000,
        description: str = "",
        allow_unreachable: Sequence[str] = (),
        setup: Sequence[ActionLike[NoContext]] = (),
        companions: Sequence[Chart[Any]] = (),
    ) -> None: ...

    @overload
    def __init__(
        self,
        name: str,
        *states: StateArgument[C],
        context: type[C],
        initial: str | Sequence[str] | None = None,
        context_from_input: Callable[[JsonValue], C] | None = None,
        max_microsteps: int = 1000,
        description: str = "",
        allow_unreachable: Sequence[str] = (),
        setup: Sequence[ActionLike[C]] = (),
        companions: Sequence[Chart[Any]] = (),
    ) -> None: ...

    def __init__(
        self,
        name: str,
        *states: StateArgument[Any],
        context: type[C] | type[NoContext] = NoContext,
        initial: str | Sequence[str] | None = None,
        context_from_input: Callable[[JsonValue], Any] | None = None,
        max_microsteps: int = 1000,
        description: str = "",
        allow_unreachable: Sequence[str] = (),
        setup: Sequence[ActionLike[Any]] = (),
        companions: Sequence[Chart[Any]] = (),
    ) -> None:
        self.name = name
        self.setup: tuple[Action, ...] = _actions(setup)
        self.companions: tuple[Chart[Any], ...] = tuple(companions)
        self.context_type: type[C] = context  # type: ignore[assignment]
        # The other member of ``StateArgument`` only steers inference: states are what is passed.
        self.roots = cast("tuple[StateNode[Any], ...]", states)
        self.initial_ids = _targets(initial)
        self.context_from_input: Callable[[JsonValue], C] | None = context_from_input
        self.max_microsteps = max_microsteps
        self.description = description
        self.allow_unreachable = tuple(allow_unreachable)
        problems = self._validate()
        if problems:
            raise errors.ChartInvalid(f"chart {name!r} has {len(problems)} definition problem(s)", problems)
        self._compile()
        self.shape = self._shape()
        self.fingerprint = self.shape.fingerprint

    def __repr__(self) -> str:
        return f"<Chart {self.name!r} {len(self.ids) - 1} states {self.fingerprint[:12]}>"

    # ---------------------------------------------------------- validation

    def _validate(self) -> list[errors.DefinitionError]:
        problems: list[errors.DefinitionError] = []
        if not isinstance(self.name, str) or not self.name or not _is_stable_name(self.name):
            problems.append(
                errors.UnstableId(
                    str(self.name),
                    "the chart name",
                    f"{self.name!r} is not a stable name",
                    "name the chart with letters, digits, '_', '-' and '.', e.g. 'order'",
                )
            )
        if self.max_microsteps < 1:
            problems.append(
                errors.InvalidDefinition(
                    self.name, "max_microsteps", f"{self.max_microsteps} is below 1", "use a positive cap"
                )
            )
        problems.extend(
            Validator(self.name, self.roots, self.initial_ids, self.allow_unreachable).run(self.context_type)
        )
        return problems

    # --------------------------------------------------------- compilation

    def _compile(self) -> None:
        nodes: list[StateNode | None] = [None]
        parents: list[int] = [-1]
        for located in walk(self.roots):
            nodes.append(located.node)
        self.ids: tuple[str, ...] = (ROOT_ID,) + tuple(n.id for n in nodes[1:] if n is not None)
        self.index: dict[str, int] = {state_id: i for i, state_id in enumerate(self.ids)}
        for located in walk(self.roots):
            parents.append(self.index[located.parent.id] if located.parent else ROOT)
        count = len(self.ids)
        self.parent: tuple[int, ...] = tuple(parents)
        self.kind: tuple[StateKind, ...] = (StateKind.COMPOUND,) + tuple(
            n.kind for n in nodes[1:] if n is not None
        )
        children: list[list[int]] = [[] for _ in range(count)]
        histories: list[list[int]] = [[] for _ in range(count)]
        for i in range(1, count):
            (histories if self.kind[i] is StateKind.HISTORY else children)[self.parent[i]].append(i)
        self.children: tuple[tuple[int, ...], ...] = tuple(tuple(c) for c in children)
        self.histories: tuple[tuple[int, ...], ...] = tuple(tuple(h) for h in histories)
        ancestors: list[tuple[int, ...]] = [()]
        for i in range(1, count):
            p = self.parent[i]
            ancestors.append((p,) + ancestors[p])
        self.ancestors: tuple[tuple[int, ...], ...] = tuple(ancestors)
        self.ancestor_sets: tuple[frozenset[int], ...] = tuple(frozenset(a) for a in ancestors)
        self.descendants: tuple[frozenset[int], ...] = tuple(
            frozenset(j for j in range(count) if i in self.ancestor_sets[j]) for i in range(count)
        )
        self.deep: tuple[bool, ...] = (False,) + tuple(n.deep for n in nodes[1:] if n is not None)
        self.entry: tuple[tuple[Action, ...], ...] = ((),) + tuple(n.entry for n in nodes[1:] if n)
        self.exit: tuple[tuple[Action, ...], ...] = ((),) + tuple(n.exit for n in nodes[1:] if n)
        self.sites: tuple[tuple[Site, ...], ...] = ((),) + tuple(n.sites for n in nodes[1:] if n)
        self.done_data: tuple[DataExpr, ...] = (None,) + tuple(n.done_data for n in nodes[1:] if n)
        self.site_state: dict[str, int] = {}
        self.site_by_id: dict[str, Site] = {}
        for i in range(1, count):
            for site in self.sites[i]:
                self.site_state[site.id] = i
                self.site_by_id[site.id] = site
        self.site_states: tuple[int, ...] = tuple(i for i in range(count) if self.sites[i])
        self.autoforward_states: tuple[int, ...] = tuple(
            i for i in self.site_states if any(site.autoforward for site in self.sites[i])
        )

        initial: list[tuple[int, ...]] = [() for _ in range(count)]
        root_initial = self.initial_ids or (self.ids[self.children[ROOT][0]],)
        initial[ROOT] = tuple(self.index[t] for t in root_initial)
        for i in range(1, count):
            node = nodes[i]
            assert node is not None
            if self.kind[i] is StateKind.COMPOUND:
                ids = node.initial or (self.ids[self.children[i][0]],)
                initial[i] = tuple(self.index[t] for t in ids)
        self.initial: tuple[tuple[int, ...], ...] = tuple(initial)

        transitions: list[tuple[CompiledTransition, ...]] = [() for _ in range(count)]
        order = 0
        self.all_transitions: list[CompiledTransition] = []
        history_default: list[CompiledTransition | None] = [None] * count
        for i in range(1, count):
            node = nodes[i]
            assert node is not None
            if self.kind[i] is StateKind.HISTORY:
                t = node.transitions[0]
                targets = tuple(self.index[x] for x in t.targets)
                history_default[i] = CompiledTransition(i, 0, -1, t, targets, False, f"{node.id}#default")
                continue
            compiled: list[CompiledTransition] = []
            for position, t in enumerate(node.transitions):
                targets = tuple(self.index[x] for x in t.targets)
                history = any(self.kind[x] is StateKind.HISTORY for x in targets)
                label = t.id or f"{node.id}#{position}"
                ct = CompiledTransition(i, position, order, t, targets, history, label)
                if t.delay is not None:
                    ct.timer_id = f"after.{node.id}.{position}"
                    ct.events = (ct.timer_id,)
                order += 1
                compiled.append(ct)
                self.all_transitions.append(ct)
            transitions[i] = tuple(compiled)
        self.transitions: tuple[tuple[CompiledTransition, ...], ...] = tuple(transitions)
        self.history_default: tuple[CompiledTransition | None, ...] = tuple(history_default)
        # The <initial> transitions that carry executable content (3.6), run on default entry.
        initial_content: list[CompiledTransition | None] = [None] * count
        for i in range(1, count):
            node = nodes[i]
            assert node is not None
            if node.initial_actions and self.kind[i] is StateKind.COMPOUND:
                initial_ids = tuple(self.ids[x] for x in self.initial[i])
                authored = Transition((), initial_ids, None, node.initial_actions)
                initial_content[i] = CompiledTransition(
                    i, 0, -1, authored, self.initial[i], False, f"{node.id}#initial"
                )
        self.initial_content: tuple[CompiledTransition | None, ...] = tuple(initial_content)
        self.eventless: tuple[tuple[CompiledTransition, ...], ...] = tuple(
            tuple(t for t in ts if not t.events) for ts in transitions
        )
        self.afters: tuple[tuple[CompiledTransition, ...], ...] = tuple(
            tuple(t for t in ts if t.delay is not None) for ts in transitions
        )
        self.has_eventless = any(self.eventless)
        for ct in self.all_transitions:
            if ct.targets and not ct.history_targets:
                ct.domain = self.static_domain(ct)
        # Caches filled lazily, by several runner threads at once: a miss computes
        # the value, then publishes it with ``setdefault``, so every thread uses
        # the first value published and a read never needs a lock.
        self._match_cache: dict[str, tuple[tuple[CompiledTransition, ...], ...]] = {}
        # Tables that let the interpreter skip work: what entering or leaving a
        # state must do, and sets for exit sets and history.
        self.inclusive_descendants: tuple[frozenset[int], ...] = tuple(
            self.descendants[i] | {i} for i in range(count)
        )
        atomic = (StateKind.ATOMIC, StateKind.FINAL)
        self.atomic_descendants: tuple[frozenset[int], ...] = tuple(
            frozenset(j for j in self.descendants[i] if self.kind[j] in atomic) for i in range(count)
        )
        self.child_set: tuple[frozenset[int], ...] = tuple(frozenset(c) for c in self.children)
        self.enter_work: tuple[bool, ...] = tuple(
            bool(self.entry[i] or self.afters[i] or self.sites[i]) or self.kind[i] is StateKind.FINAL
            for i in range(count)
        )
        self.exit_work: tuple[bool, ...] = tuple(
            bool(self.exit[i] or self.afters[i] or self.sites[i]) for i in range(count)
        )
        self._config_indices: dict[tuple[str, ...], frozenset[int]] = {}
        self._config_ids: dict[frozenset[int], tuple[str, ...]] = {}
        self._entry_orders: dict[frozenset[int], tuple[int, ...]] = {}
        self._entering_works: dict[tuple[int, ...], bool] = {}
        self._history_indices: dict[tuple[HistoryEntry, ...], dict[int, tuple[int, ...]]] = {}
        self.history_entries: dict[
            tuple[int, tuple[tuple[int, tuple[int, ...]], ...]],
            tuple[tuple[int, ...], dict[int, tuple[CompiledTransition, ...]]],
        ] = {}
        # The outcomes of plain macrosteps (see ``statechart._plan``); a chart with
        # sites has none, since a macrostep there also reconciles the child slots.
        self.plans: dict[PlanKey, Plan | None] | None = None if self.site_states else {}

    def static_domain(self, t: CompiledTransition) -> int:
        """SCXML ``getTransitionDomain`` for targets known at compile time."""
        targets = t.targets
        if (
            t.internal
            and self.kind[t.source] is StateKind.COMPOUND
            and all(t.source in self.ancestor_sets[s] for s in targets)
        ):
            return t.source
        return self.lcca((t.source, *targets))

    def lcca(self, states: tuple[int, ...]) -> int:
        """The least common compound ancestor (SCXML ``findLCCA``)."""
        head, tail = states[0], states[1:]
        for anc in self.ancestors[head]:
            compound = anc == ROOT or self.kind[anc] is StateKind.COMPOUND
            if compound and all(anc in self.ancestor_sets[s] for s in tail):
                return anc
        return ROOT

    def configuration_indices(self, configuration: tuple[str, ...]) -> frozenset[int]:
        """State indices of a stored configuration (cached: configurations repeat)."""
        found = self._config_indices.get(configuration)
        if found is None:
            index = self.index
            found = frozenset(index[s] for s in configuration)
            if len(self._config_indices) < 4096:
                found = self._config_indices.setdefault(configuration, found)
        return found

    def history_indices(self, history: tuple[HistoryEntry, ...]) -> dict[int, tuple[int, ...]]:
        """Stored history values as state indices (cached; callers must not mutate the result)."""
        found = self._history_indices.get(history)
        if found is None:
            index = self.index
            found = {index[h.id]: tuple(index[s] for s in h.states) for h in history}
            if len(self._history_indices) < 4096:
                found = self._history_indices.setdefault(history, found)
        return found

    def configuration_ids(self, states: set[int] | frozenset[int]) -> tuple[str, ...]:
        """The stored form of a configuration: ids in document order (cached)."""
        key = frozenset(states)
        found = self._config_ids.get(key)
        if found is None:
            ids = self.ids
            found = tuple(ids[i] for i in sorted(key))
            if len(self._config_ids) < 4096:
                found = self._config_ids.setdefault(key, found)
        return found

    def entering_works(self, entered: tuple[int, ...]) -> bool:
        """Whether entering any of these states does something beyond joining the configuration."""
        found = self._entering_works.get(entered)
        if found is None:
            found = any(self.enter_work[s] for s in entered)
            if len(self._entering_works) < 4096:
                found = self._entering_works.setdefault(entered, found)
        return found

    def entry_order(self, states: set[int]) -> tuple[int, ...]:
        """States in entry order (document order), cached per set."""
        key = frozenset(states)
        found = self._entry_orders.get(key)
        if found is None:
            found = tuple(sorted(key))
            if len(self._entry_orders) < 4096:
                found = self._entry_orders.setdefault(key, found)
        return found

    def matching(self, name: str) -> tuple[tuple[CompiledTransition, ...], ...]:
        """Per state, the transitions whose descriptors match event ``name``."""
        cached = self._match_cache.get(name)
        if cached is None:
            cached = tuple(tuple(t for t in ts if t.events and t.matches(name)) for ts in self.transitions)
            if len(self._match_cache) < 4096:
                cached = self._match_cache.setdefault(name, cached)
        return cached

    # --------------------------------------------------------------- shape

    def _shape(self) -> Shape:
        states = []
        for i in range(1, len(self.ids)):
            parent = self.parent[i]
            initial: tuple[str, ...] = ()
            if self.kind[i] is StateKind.COMPOUND:
                initial = tuple(self.ids[x] for x in self.initial[i])
            default = self.history_default[i]
            if default is not None:
                initial = tuple(self.ids[x] for x in default.targets)
            states.append(
                StateShape(
                    self.ids[i],
                    self.kind[i].value,
                    None if parent == ROOT else self.ids[parent],
                    initial,
                    self.deep[i],
                )
            )
        transitions = [
            TransitionShape(
                self.ids[t.source],
                t.position,
                t.label if t.label != f"{self.ids[t.source]}#{t.position}" else None,
                () if t.delay is not None else t.events,
                tuple(self.ids[x] for x in t.targets),
                t.internal,
                t.delay,
                t.guard is not None,
            )
            for t in self.all_transitions
        ]
        sites = [
            SiteShape(
                site.id,
                self.ids[self.site_state[site.id]],
                site.chart if site.choose is None else "|".join(site.charts),
                site.task,
                site.members is not None,
                site.group,
                site.max_depth,
            )
            for site in self.site_by_id.values()
        ]
        return Shape(self.name, tuple(states), tuple(transitions), tuple(sites))

    # ------------------------------------------------------------ queries

    @property
    def state_ids(self) -> tuple[str, ...]:
        """Every state id (history states included) in document order."""
        return self.ids[1:]

    def kind_of(self, state: str) -> StateKind:
        """The kind of state ``state``."""
        return self.kind[self.index[state]]

    def parent_of(self, state: str) -> str | None:
        """The parent state id, or None for a top-level state."""
        parent = self.parent[self.index[state]]
        return None if parent == ROOT else self.ids[parent]

    def atomic(self, configuration: Sequence[str]) -> tuple[str, ...]:
        """The atomic (and final) states of a configuration, in document order."""
        return tuple(
            s for s in configuration if self.kind[self.index[s]] in (StateKind.ATOMIC, StateKind.FINAL)
        )

    def child_charts(self) -> tuple[tuple[Site, str], ...]:
        """Every site with the state it sits on."""
        return tuple((site, self.ids[self.site_state[site.id]]) for site in self.site_by_id.values())


def _is_stable_name(name: str) -> bool:
    return bool(STATE_ID.match(name))

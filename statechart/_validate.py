"""Definition-time validation of one chart: every problem, reported at once."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import assert_never

import attrs

from statechart import errors
from statechart._model import (
    Action,
    InState,
    SendChild,
    StateKind,
    StateNode,
    Transition,
    blocks,
)

STATE_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*(\.[A-Za-z0-9_\-]+)*$")
"""Letters, digits, ``_`` and ``-`` in dot-separated tokens: safe in event names."""

SITE_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
"""Site ids are one token: ``done.invoke.<site>`` must not prefix-match another site."""


def is_descriptor(descriptor: str) -> bool:
    """Whether ``descriptor`` is an SCXML event descriptor (SCXML 3.12.1, ``EventTypes.datatype``).

    The schema allows ``*`` and ``.*`` (any event), and dot-separated tokens
    optionally ending in the wildcard ``.*`` (``order.*``, which means
    ``order``). A ``*`` anywhere else is not a wildcard, so it is refused
    rather than silently matching nothing.
    """
    if descriptor in ("*", ".*"):
        return True
    tokens = descriptor.removesuffix(".*").split(".")
    return all(token and "*" not in token for token in tokens)


@attrs.frozen
class Located:
    """A node with its parent, as the validator walks the tree."""

    node: StateNode
    parent: StateNode | None


def walk(roots: tuple[StateNode, ...], parent: StateNode | None = None) -> Iterator[Located]:
    """Every node in document order (pre-order)."""
    for node in roots:
        yield Located(node, parent)
        yield from walk(node.children, node)


def _transition_label(source: str, position: int, t: Transition) -> str:
    if t.id:
        return f"transition {t.id!r} of state {source!r}"
    if t.delay is not None:
        trigger = f"after {t.delay}s"
    elif t.events:
        trigger = "on " + " ".join(t.events)
    else:
        trigger = "eventless"
    return f"transition #{position} ({trigger}) of state {source!r}"


class Validator:
    """Collects definition errors for one chart."""

    def __init__(
        self,
        chart: str,
        roots: tuple[StateNode, ...],
        initial: tuple[str, ...],
        allow_unreachable: tuple[str, ...] = (),
    ) -> None:
        self.chart = chart
        self.allow_unreachable = allow_unreachable
        self.roots = roots
        self.initial = initial
        self.problems: list[errors.DefinitionError] = []
        self.nodes = list(walk(roots))
        self.by_id: dict[str, Located] = {}
        self.parent_of: dict[str, str | None] = {}

    def add(self, kind: type[errors.DefinitionError], where: str, problem: str, fix: str) -> None:
        self.problems.append(kind(self.chart, where, problem, fix))

    def run(self, context: type) -> list[errors.DefinitionError]:
        self.check_context(context)
        self.check_ids()
        self.check_structure()
        self.check_transitions()
        self.check_sites()
        for waived in self.allow_unreachable:
            if waived not in self.by_id:
                self.add(
                    errors.UnknownTarget,
                    "allow_unreachable",
                    f"state {waived!r} does not exist",
                    "list only existing states that are deliberately unreachable",
                )
        # Reachability is computed even when other problems were found (an
        # unresolvable target counts as absent), so one run lists everything.
        self.check_reachability()
        return self.problems

    # ------------------------------------------------------------- context

    def check_context(self, context: type) -> None:
        if not attrs.has(context):
            self.add(
                errors.InvalidDefinition,
                "context",
                f"{context!r} is not an attrs class",
                "declare the context with @attrs.frozen",
            )
            return
        setattr_ = getattr(context, "__setattr__", None)
        if getattr(setattr_, "__name__", "") != "_frozen_setattrs":
            self.add(
                errors.InvalidDefinition,
                "context",
                f"{context.__qualname__} is mutable, so actions could change a snapshot in place",
                "declare it with @attrs.frozen and return a new value from assign() (attrs.evolve)",
            )

    # ----------------------------------------------------------------- ids

    def check_ids(self) -> None:
        if not self.roots:
            self.add(
                errors.MissingInitial, "the chart", "it has no states", "give Chart(...) at least one state"
            )
        for located in self.nodes:
            node = located.node
            parent = located.parent.id if located.parent else None
            if not isinstance(node.id, str) or not STATE_ID.match(node.id):
                self.add(
                    errors.UnstableId,
                    f"state {node.id!r}",
                    "the id is not a stable name (letters, digits, '_' and '-' in "
                    "dot-separated tokens, starting with a letter or '_')",
                    "pin an explicit id such as 'awaiting_payment'",
                )
            if node.id in self.by_id:
                self.add(
                    errors.AmbiguousId,
                    f"state {node.id!r}",
                    "the id is used by more than one state",
                    "give every state, history and final state its own id",
                )
            else:
                self.by_id[node.id] = located
                self.parent_of[node.id] = parent
        transition_ids: set[str] = set()
        for located in self.nodes:
            for position, t in enumerate(located.node.transitions):
                if t.id is None:
                    continue
                label = _transition_label(located.node.id, position, t)
                if not STATE_ID.match(t.id):
                    self.add(
                        errors.UnstableId,
                        label,
                        "the transition id is not a stable name",
                        "use letters, digits, '_', '-' and '.'",
                    )
                if t.id in transition_ids:
                    self.add(
                        errors.AmbiguousId,
                        label,
                        f"transition id {t.id!r} is used twice",
                        "give each transition its own id",
                    )
                transition_ids.add(t.id)

    # ----------------------------------------------------------- structure

    def check_structure(self) -> None:
        for located in self.nodes:
            node = located.node
            where = f"state {node.id!r}"
            if node.kind is StateKind.FINAL:
                if node.children:
                    self.add(
                        errors.FinalWithChildren,
                        where,
                        f"a final state has children {[c.id for c in node.children]}",
                        "make it a compound state and put a final state inside it",
                    )
                if node.transitions or node.sites:
                    self.add(
                        errors.InvalidDefinition,
                        where,
                        "a final state has transitions or child sites",
                        "move them to a non-final state; a final state only signals completion",
                    )
            if node.kind is StateKind.HISTORY:
                self.check_history(located)
                continue
            if node.kind is StateKind.ATOMIC and node.initial:
                self.add(
                    errors.MissingInitial,
                    where,
                    f"initial {list(node.initial)} is given to a state with no children",
                    "remove initial= or add the child states",
                )
            if node.kind is not StateKind.COMPOUND and node.initial_actions:
                self.add(
                    errors.InvalidDefinition,
                    where,
                    "initial_actions are given to a state with no child states",
                    "move them to the state's entry actions, or add child states",
                )
            if node.kind is StateKind.COMPOUND:
                self.check_initial(where, node.id, node.initial, node.children)
            if node.kind is StateKind.PARALLEL:
                for child in node.children:
                    if child.kind is StateKind.FINAL:
                        self.add(
                            errors.InvalidDefinition,
                            where,
                            f"final state {child.id!r} is a region of the parallel state; it would "
                            "count as finished from the start",
                            f"wrap it in a compound state: state('{child.id}_region', final({child.id!r}))",
                        )
            if node.kind is StateKind.PARALLEL and not [
                c for c in node.children if c.kind is not StateKind.HISTORY
            ]:
                self.add(
                    errors.MissingInitial,
                    where,
                    "a parallel state has no regions",
                    "give it child states (one per region)",
                )
        self.check_initial("the chart", None, self.initial, self.roots)

    def check_initial(
        self, where: str, owner: str | None, initial: tuple[str, ...], children: tuple[StateNode, ...]
    ) -> None:
        proper = [c for c in children if c.kind is not StateKind.HISTORY]
        if not proper:
            if children:
                self.add(
                    errors.MissingInitial,
                    where,
                    "it has only history children, so there is no initial state",
                    "add a child state",
                )
            return
        for target in initial:
            if target not in self.by_id:
                self.add(
                    errors.MissingInitial,
                    where,
                    f"initial state {target!r} does not exist",
                    f"name one of its descendants, e.g. {proper[0].id!r}",
                )
            elif owner is not None and not self.is_descendant(target, owner):
                self.add(
                    errors.MissingInitial,
                    where,
                    f"initial state {target!r} is not one of its descendants",
                    f"name one of its descendants, e.g. {proper[0].id!r}",
                )
        if len(initial) > 1:
            self.check_configuration(where, initial)

    def check_history(self, located: Located) -> None:
        node, parent = located.node, located.parent
        where = f"history {node.id!r}"
        if parent is None or parent.kind not in (StateKind.COMPOUND, StateKind.PARALLEL):
            self.add(
                errors.HistoryOutsideCompound,
                where,
                "a history pseudo-state must be the child of a compound or parallel state, "
                f"but its parent is {'the chart' if parent is None else repr(parent.id)}",
                "move it inside the compound state whose history it records",
            )
        if node.children:
            self.add(errors.InvalidDefinition, where, "a history state has children", "remove them")
        default = node.transitions[0] if node.transitions else None
        if default is None or not default.targets:
            self.add(
                errors.MissingInitial,
                where,
                "it has no default target for when no history was recorded yet",
                "pass history(id, default=...) naming a child of its parent state"
                if parent is None
                else f"pass history({node.id!r}, default=...) naming a child of {parent.id!r}",
            )
            return
        for target in default.targets:
            if target not in self.by_id:
                self.add(
                    errors.UnknownTarget,
                    where,
                    f"its default target {target!r} does not exist",
                    "name an existing state" if parent is None else f"name a descendant of {parent.id!r}",
                )
            elif parent is not None and not self.is_descendant(target, parent.id):
                self.add(
                    errors.UnknownTarget,
                    where,
                    f"its default target {target!r} is not a descendant of {parent.id!r}",
                    f"name a descendant of {parent.id!r}",
                )

    def is_descendant(self, state: str, ancestor: str) -> bool:
        current = self.parent_of.get(state)
        while current is not None:
            if current == ancestor:
                return True
            current = self.parent_of.get(current)
        return False

    def check_configuration(self, where: str, targets: tuple[str, ...]) -> None:
        """Several targets must lie in distinct regions of a parallel state."""
        known = [t for t in targets if t in self.by_id]
        for i, first in enumerate(known):
            for second in known[i + 1 :]:
                if first == second or self.is_descendant(first, second) or self.is_descendant(second, first):
                    if first == second:
                        self.add(
                            errors.InvalidDefinition,
                            where,
                            f"target {first!r} is named twice",
                            "name it once",
                        )
                    continue
                common = self.common_ancestor(first, second)
                kind = self.by_id[common].node.kind if common else StateKind.COMPOUND
                if kind is not StateKind.PARALLEL:
                    self.add(
                        errors.InvalidDefinition,
                        where,
                        f"targets {first!r} and {second!r} cannot be active together "
                        f"(their common ancestor {common or 'the chart'!r} is not parallel)",
                        "target states in different regions of a parallel state",
                    )

    def common_ancestor(self, first: str, second: str) -> str | None:
        chain: list[str] = []
        current = self.parent_of.get(first)
        while current is not None:
            chain.append(current)
            current = self.parent_of.get(current)
        current = self.parent_of.get(second)
        while current is not None:
            if current in chain:
                return current
            current = self.parent_of.get(current)
        return None

    # --------------------------------------------------------- transitions

    def check_transitions(self) -> None:
        site_ids = {site.id for located in self.nodes for site in located.node.sites}
        for located in self.nodes:
            node = located.node
            if node.kind is StateKind.HISTORY:
                self.check_actions(
                    f"history {node.id!r}", node.transitions[0].actions if node.transitions else (), site_ids
                )
                continue
            for position, t in enumerate(node.transitions):
                label = _transition_label(node.id, position, t)
                for target in t.targets:
                    if target not in self.by_id:
                        self.add(
                            errors.UnknownTarget,
                            label,
                            f"target {target!r} does not exist",
                            f"name an existing state (known: {sorted(self.by_id)[:8]}…)"
                            if len(self.by_id) > 8
                            else f"name an existing state (known: {sorted(self.by_id)})",
                        )
                if len(t.targets) > 1:
                    self.check_configuration(label, t.targets)
                for event in t.events:
                    if not is_descriptor(event):
                        self.add(
                            errors.InvalidDefinition,
                            label,
                            f"event descriptor {event!r} is malformed",
                            "use dot-separated tokens ('order.paid'), a prefix ending '.*' "
                            "('order.*'), or '*' (also written '.*') for every event",
                        )
                if isinstance(t.guard, InState) and t.guard.state not in self.by_id:
                    self.add(
                        errors.UnknownTarget,
                        label,
                        f"guard in_state({t.guard.state!r}) names no state",
                        "name an existing state",
                    )
                elif t.guard is not None and not isinstance(t.guard, InState) and not callable(t.guard):
                    self.add(
                        errors.InvalidDefinition,
                        label,
                        f"guard {t.guard!r} is not callable",
                        "pass a function (context, event) -> bool",
                    )
                self.check_actions(label, t.actions, site_ids)
            self.check_actions(f"entry of state {node.id!r}", node.entry, site_ids)
            self.check_actions(f"exit of state {node.id!r}", node.exit, site_ids)
            self.check_actions(f"initial actions of state {node.id!r}", node.initial_actions, site_ids)

    def check_actions(self, where: str, actions: tuple[Action, ...], site_ids: set[str]) -> None:
        for action in actions:
            for guard, block in blocks(action):
                if isinstance(guard, InState) and guard.state not in self.by_id:
                    self.add(
                        errors.UnknownTarget,
                        where,
                        f"if condition in_state({guard.state!r}) names no state",
                        "name an existing state",
                    )
                self.check_actions(where, block, site_ids)
            if isinstance(action, SendChild) and action.site not in site_ids:
                self.add(
                    errors.UnknownTarget,
                    where,
                    f"send_child names site {action.site!r}, which the chart does not declare",
                    f"name one of {sorted(site_ids)}" if site_ids else "declare the site with invoke(...)",
                )

    # --------------------------------------------------------------- sites

    def check_sites(self) -> None:
        seen: set[str] = set()
        for located in self.nodes:
            node = located.node
            for site in node.sites:
                where = f"site {site.id!r} on state {node.id!r}"
                if not isinstance(site.id, str) or not SITE_ID.match(site.id):
                    self.add(
                        errors.UnstableId,
                        where,
                        "a site id must be one stable token (letters, digits, '_', '-'; no dots), "
                        "since it names the events done.invoke.<site> and error.invoke.<site>",
                        "pin an id such as 'payment'",
                    )
                if site.id in seen:
                    self.add(
                        errors.AmbiguousId, where, "the site id is used twice", "give each site its own id"
                    )
                seen.add(site.id)
                if sum(x is not None for x in (site.chart, site.task, site.choose)) != 1:
                    self.add(
                        errors.InvalidDefinition,
                        where,
                        "a site needs exactly one of chart=, task= and choose=",
                        "invoke(id, chart='name') for a child chart, or task='name' for a task",
                    )
                elif site.choose is not None and not site.charts:
                    self.add(
                        errors.InvalidDefinition,
                        where,
                        "choose= needs the charts it may return",
                        "list them: invoke(id, choose=fn, charts=['a', 'b'])",
                    )
                elif site.choose is not None and (site.members is not None or site.retry.max_attempts > 1):
                    self.add(
                        errors.InvalidDefinition,
                        where,
                        "choose= picks the chart of one child, born once: it takes no map= and no retries",
                        "name the chart with chart= to fan out or retry",
                    )
                if site.retry.max_attempts < 1 or site.retry.backoff < 0 or site.retry.multiplier < 1:
                    self.add(
                        errors.InvalidDefinition,
                        where,
                        f"retry policy {site.retry!r} is invalid",
                        "use max_attempts >= 1, backoff >= 0 and multiplier >= 1",
                    )
                if (site.group is None) != (site.max_depth is None):
                    self.add(
                        errors.UnboundedRecursion,
                        where,
                        "a recursive site needs both group= and max_depth=",
                        "declare invoke(..., group='name', max_depth=N)",
                    )
                if site.max_depth is not None and site.max_depth < 1:
                    self.add(
                        errors.UnboundedRecursion,
                        where,
                        f"max_depth={site.max_depth} is below 1",
                        "use max_depth >= 1",
                    )
                if site.members is not None and not callable(site.members):
                    self.add(
                        errors.InvalidDefinition,
                        where,
                        "map= is not callable",
                        "pass a function context -> {key: input}",
                    )

    # -------------------------------------------------------- reachability

    def check_reachability(self) -> None:
        """Report states nothing enters; names that resolve to no state are skipped.

        It runs whatever else is wrong, so that an unknown target does not
        hide an unreachable state until it is fixed: a transition target or
        history default that names no state enters nothing here, and an
        initial that names no state (or, for a compound state, none of its
        descendants) is treated as absent, so the first child is entered.
        """
        reached: set[str] = set()
        pending: list[str] = []

        def enter(state_id: str) -> None:
            """Add a state, its ancestors, and what entering it enters by default."""
            located = self.by_id.get(state_id)
            if located is None:
                return  # reported as an unknown target, initial or default
            node = located.node
            if node.kind is StateKind.HISTORY:
                if state_id in reached:
                    return  # a default that leads back here enters nothing new
                reached.add(state_id)
                for target in node.transitions[0].targets if node.transitions else ():
                    enter(target)
                reach_ancestors(state_id)  # entering a history enters its parent
                return
            if state_id in reached:
                return  # its ancestors were walked when it was first reached
            reached.add(state_id)
            pending.append(state_id)
            if node.kind is StateKind.COMPOUND:
                proper = [c.id for c in node.children if c.kind is not StateKind.HISTORY]
                valid = [t for t in node.initial if t in self.by_id and self.is_descendant(t, state_id)]
                for target in valid or proper[:1]:
                    enter(target)
            elif node.kind is StateKind.PARALLEL:
                for child in node.children:
                    if child.kind is not StateKind.HISTORY:
                        enter(child.id)
            elif node.kind is not StateKind.ATOMIC and node.kind is not StateKind.FINAL:
                assert_never(node.kind)  # an atomic or final state enters nothing below it
            reach_ancestors(state_id)

        def reach_ancestors(state_id: str) -> None:
            """Add the ancestors of an entered state and the other regions of parallel ones."""
            below, current = state_id, self.parent_of.get(state_id)
            while current is not None:
                ancestor = self.by_id[current].node
                if current not in reached:
                    reached.add(current)
                    pending.append(current)
                if ancestor.kind is StateKind.PARALLEL:
                    for child in ancestor.children:
                        if child.id != below and child.kind is not StateKind.HISTORY:
                            enter(child.id)
                below, current = current, self.parent_of.get(current)

        proper_roots = [n.id for n in self.roots if n.kind is not StateKind.HISTORY]
        for target in [t for t in self.initial if t in self.by_id] or proper_roots[:1]:
            enter(target)
        while pending:
            node = self.by_id[pending.pop()].node
            for t in node.transitions:
                for target in t.targets:
                    enter(target)
        for located in self.nodes:
            node = located.node
            if node.kind is StateKind.HISTORY or node.id in reached:
                continue
            if located.parent is not None and located.parent.id not in reached:
                continue  # reported with its unreachable ancestor
            if node.id in self.allow_unreachable:
                continue
            self.add(
                errors.UnreachableState,
                f"state {node.id!r}",
                "no initial, transition or history default ever enters it",
                "add a transition that targets it, make it an initial state, or remove it",
            )

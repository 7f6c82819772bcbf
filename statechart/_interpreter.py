"""The interpreter: one macrostep at a time, following the SCXML algorithm.

The public functions (:func:`start`, :func:`step`, :func:`fire`,
:func:`stop`) are pure: they read a snapshot, compute the next one on a
private working copy (:class:`Run`), and return it with the effects the
engine must enact. Phases follow W3C SCXML 1.0 Appendix D: select
transitions, remove conflicts, compute the exit set, exit, execute, enter,
and stabilise (eventless transitions and internal events), then start the
child sites of the states that stay active. A macrostep that runs no
executable content is computed this way once, then answered from the
chart's plans (see :mod:`statechart._plan`; whether a macrostep is plain is
decided here, by ``_plain`` and ``_settled``, which read the working copy).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, assert_never
from urllib.parse import urlsplit

import attrs

from statechart import errors
from statechart._chart import ROOT, Chart, CompiledTransition
from statechart._children import (
    Verdict,
    absorb_child_event,
    autoforward,
    cancel_state_children,
    invocation_named,
    presented,
    reconcile_sites,
    send_to_children,
    send_to_invocation,
)
from statechart._codec import context_from_input
from statechart._effects import (
    ActionFailed,
    ArmTimer,
    CancelTimer,
    Completed,
    Effect,
    Ignored,
    Logged,
    SendHttp,
    SendToParent,
    Stopped,
)
from statechart._event import Event, EventKind, JsonValue, Timer
from statechart._model import (
    HTTP_SEND_TYPES,
    SEND_TYPES,
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
    StateKind,
    Transition,
    for_every_action,
)
from statechart._plan import PLAN_LIMIT, Plan, PlanKey, remember
from statechart._scope import _CURRENT, Scope
from statechart._snapshot import (
    ChildSlot,
    HistoryEntry,
    SlotChanges,
    SlotKey,
    SlotStatus,
    SlotTable,
    Snapshot,
    Status,
    derived,
)

C = TypeVar("C")

_ATOMIC = (StateKind.ATOMIC, StateKind.FINAL)
_NO_EVENT = Event("")
_UNPLANNED = Plan((), None)
"""What a chart's plans give for a key not yet seen (``None`` means: seen, and not plain)."""
_NO_SLOT_CHANGES = SlotChanges()
"""A macrostep that touched no child slot (SlotChanges is frozen: one value serves all)."""


class _BlockStopped(Exception):
    """An error inside nested content (already reported) stops the enclosing block."""


class _SendFailed(Exception):
    """A ``<send>`` that failed: its error event carries the send's id (SCXML 5.10.1, W3C 332)."""

    def __init__(self, send_id: str | None, error: Exception) -> None:
        super().__init__(str(error))
        self.send_id = send_id
        self.error = error


def _timer_order(timer: Timer) -> tuple[float, int]:
    return (timer.deadline, timer.sequence)


class Run:
    """The mutable working copy of one macrostep. Never escapes this package."""

    __slots__ = (
        "base",
        "chart",
        "config",
        "context",
        "effects",
        "entered",
        "event",
        "firing",
        "has_sites",
        "history",
        "history_changed",
        "http_location",
        "ignored",
        "internal",
        "lineage",
        "microsteps",
        "next_generation",
        "now",
        "output",
        "reconciled_context",
        "rejected",
        "running",
        "saw_history",
        "sequence",
        "session",
        "slot_base",
        "slot_dropped",
        "slot_inserted",
        "slot_touched",
        "slot_unfinished",
        "slots",
        "status",
        "steps",
        "timers",
        "timers_changed",
    )

    def __init__(
        self,
        chart: Chart[C],
        snapshot: Snapshot[C],
        now: float,
        session: str | None = None,
        http_location: str | None = None,
    ) -> None:
        self.chart = chart
        self.session = session
        self.http_location = http_location
        self.base = snapshot
        self.config: set[int] = set(chart.configuration_indices(snapshot.configuration))
        # Shared with the chart's cache until this macrostep records a history.
        self.history: dict[int, tuple[int, ...]] = (
            chart.history_indices(snapshot.history) if snapshot.history else {}
        )
        self.history_changed = False
        self.context: object = snapshot.context
        self.internal: deque[Event] = deque(snapshot.internal_queue)
        self.timers: dict[str, Timer] = {t.id: t for t in snapshot.timers} if snapshot.timers else {}
        self.timers_changed = False
        # The snapshot's slots, shared until this macrostep changes one (see SlotTable);
        # what it puts and drops is recorded, so its changes cost O(changed).
        self.slot_base: Mapping[SlotKey, ChildSlot] = snapshot.slot_index() if snapshot.children else {}
        self.slots = SlotTable(snapshot.children, snapshot.slot_positions() if snapshot.children else None)
        self.slot_unfinished: dict[str, int] = dict(snapshot.unfinished_counts()) if snapshot.children else {}
        self.slot_inserted: dict[SlotKey, None] = {}
        self.slot_touched: dict[SlotKey, None] = {}
        self.slot_dropped: dict[SlotKey, None] = {}
        self.effects: list[Effect] = []
        self.sequence = snapshot.sequence
        self.next_generation = snapshot.next_generation
        self.steps = snapshot.steps
        self.lineage = snapshot.lineage
        self.output: JsonValue = snapshot.output
        self.status = snapshot.status
        self.now = now
        self.running = True
        self.event = _NO_EVENT
        # The timer whose event this macrostep delivers (see ``fire``): a
        # delayed transition is taken by its own timer only, never by an
        # event that merely shares its name.
        self.firing: str | None = None
        self.entered: set[int] = set()
        self.reconciled_context: object = snapshot.context
        self.has_sites = bool(chart.site_states)
        self.saw_history = False
        self.rejected = False
        self.ignored = False
        self.microsteps = 0

    # -------------------------------------------------------------- scope

    @property
    def chart_name(self) -> str:
        return self.chart.name

    def is_active(self, state: str) -> bool:
        index = self.chart.index.get(state)
        return index is not None and index in self.config

    def active_ids(self) -> tuple[str, ...]:
        return self.chart.configuration_ids(self.config)

    # -------------------------------------------------------------- slots

    def put_slot(self, slot: ChildSlot) -> None:
        """Set the slot of ``(slot.site, slot.key)``: replaced where it stands, or appended."""
        key = (slot.site, slot.key)
        unfinished = self.slot_unfinished
        old = self.slots.put(slot)
        if old is not None:
            self.slot_touched[key] = None
            if old.status is not SlotStatus.DONE:
                unfinished[old.site] -= 1
        else:
            self.slot_inserted[key] = None
        if slot.status is not SlotStatus.DONE:
            unfinished[slot.site] = unfinished.get(slot.site, 0) + 1

    def drop_slot(self, key: SlotKey) -> None:
        """Forget the slot of ``key``."""
        old = self.slots.pop(key)
        if old.status is not SlotStatus.DONE:
            self.slot_unfinished[old.site] -= 1
        self.slot_inserted.pop(key, None)
        self.slot_dropped[key] = None

    def slot_changes(self) -> SlotChanges:
        """What this macrostep did to the slots, relative to the snapshot it started from."""
        if not (self.slot_inserted or self.slot_touched or self.slot_dropped):
            return _NO_SLOT_CHANGES
        base, slots, dropped = self.slot_base, self.slots, self.slot_dropped
        removed = tuple(key for key in dropped if key in base)
        changed = tuple(
            slots[key]
            for key in self.slot_touched
            if key in base and key not in dropped and slots[key] != base[key]
        )
        added = tuple(slots[key] for key in self.slot_inserted)
        return SlotChanges(added, changed, removed)

    # ------------------------------------------------------------- result

    def recorded_history(self) -> tuple[HistoryEntry, ...]:
        """The history values as the snapshot stores them, ordered by history state."""
        ids = self.chart.ids
        return tuple(
            HistoryEntry(ids[h], tuple(ids[s] for s in states)) for h, states in sorted(self.history.items())
        )

    def snapshot(self) -> Snapshot[C]:
        chart, base = self.chart, self.base
        changes = self.slot_changes()  # before finishing: it compares the table with the base
        children, positions = self.slots.finish()
        history = self.recorded_history() if self.history_changed else base.history
        timers = base.timers
        if self.timers_changed:
            timers = tuple(sorted(self.timers.values(), key=_timer_order))
        snapshot: Snapshot[C] = Snapshot(
            chart.name,
            self.status,
            chart.configuration_ids(self.config),
            history,
            self.context,  # type: ignore[arg-type]
            tuple(self.internal) if self.internal else (),
            timers,
            children,
            self.output,
            self.now,
            self.steps,
            self.sequence,
            self.next_generation,
            self.lineage,
        )
        return derived(snapshot, positions, self.slot_unfinished, base, changes)

    # ---------------------------------------------------------- execution

    def fail(self, where: str, what: str, error: BaseException, transition: str | None = None) -> None:
        """SCXML 5.10: a failed action raises ``error.execution`` and stops its block.

        ``where`` is the state whose entry, exit, transition (``transition``,
        its id or ``<state>#<position>``), done data or site ran ``what``.
        """
        send_id = None
        if isinstance(error, _SendFailed):
            send_id, error = error.send_id, error.error
        failure = ActionFailed(where, what, type(error).__name__, str(error), transition)
        self.effects.append(failure)
        self.internal.append(
            Event(
                "error.execution",
                {
                    "state": where,
                    "transition": transition,
                    "action": what,
                    "error": failure.error,
                    "message": failure.message,
                },
                EventKind.PLATFORM,
                send_id,
            )
        )

    def data(self, expr: object) -> JsonValue:
        if callable(expr):
            result: JsonValue = expr(self.context, self.event)
            return result
        return expr  # type: ignore[return-value]

    def text(self, expr: object, what: str) -> str:
        """A computed name (``eventexpr``, ``targetexpr``…): it must come out as a string."""
        value = expr(self.context, self.event) if callable(expr) else expr
        if not isinstance(value, str):
            raise TypeError(f"{what} must be a string, got {type(value).__name__} {value!r}")
        return value

    def execute(self, where: str, actions: tuple[Action, ...], transition: str | None = None) -> None:
        """Run a block of executable content; an error stops the block (SCXML 4.9, 5.12.2)."""
        for action in actions:
            try:
                self.perform(action, where, transition)
            except _BlockStopped:
                return
            except Exception as error:  # noqa: BLE001 - any author error becomes error.execution
                self.fail(where, _action_name(action), error, transition)
                return

    def perform_all(self, actions: tuple[Action, ...], where: str, transition: str | None) -> None:
        """The actions nested in an ``if`` or ``foreach``: an error stops the enclosing block too."""
        for action in actions:
            try:
                self.perform(action, where, transition)
            except _BlockStopped:
                raise
            except Exception as error:
                self.fail(where, _action_name(action), error, transition)
                raise _BlockStopped from error

    def perform(self, action: Action, where: str = "", transition: str | None = None) -> None:
        """Run one action with its handler (every action class has one: see ``_PERFORM``)."""
        _PERFORM[type(action)](self, action, where, transition)

    def branch(self, action: If, where: str, transition: str | None) -> None:
        """SCXML 4.3: the first branch whose condition holds runs; a raising condition is false (5.9)."""
        for branch in action.branches:
            guard = branch.guard
            if guard is not None:
                if type(guard) is InState:
                    holds = self.chart.index[guard.state] in self.config
                else:
                    try:
                        holds = bool(guard(self.context, self.event))
                    except Exception as error:  # noqa: BLE001
                        self.fail(where, "if condition", error, transition)
                        holds = False
                if not holds:
                    continue
            self.perform_all(branch.actions, where, transition)
            return

    def foreach(self, action: ForEach, where: str, transition: str | None) -> None:
        """SCXML 4.6: iterate over a shallow copy; item and index stay set afterwards."""
        collection = action.items(self.context, self.event)
        if isinstance(collection, str | bytes) or not hasattr(collection, "__iter__"):
            raise TypeError(f"foreach needs a list to iterate over, got {type(collection).__name__}")
        items = list(collection.values() if isinstance(collection, Mapping) else collection)
        for index, item in enumerate(items):
            self.context = action.bind(self.context, action.item, item)
            if action.index is not None:
                self.context = action.bind(self.context, action.index, index)
            self.perform_all(action.actions, where, transition)

    def send(self, action: Send) -> None:
        """SCXML 6.2: evaluate the send's attributes, then queue, deliver or arm it.

        The send's id is settled first (the author's, else a generated one,
        stored at ``idlocation``), so that an error the send raises carries
        it as ``_event.sendid`` (5.10.1: the send id of the triggering send).
        """
        # SCXML 6.2 (_event.sendid): the author's id, else blank. The timer
        # still needs a key in the snapshot; that one stays out of the event.
        timer_id = action.id or f"send.{self.sequence}"
        send_id = action.id
        if action.id_location is not None:
            # the generated id was given to the author, so the event carries it (5.10.1, 6.2.4)
            self.context = action.id_location(self.context, self.event, timer_id)
            send_id = timer_id
        try:
            self.dispatch(action, timer_id, send_id)
        except Exception as error:
            raise _SendFailed(send_id, error) from error

    def dispatch(self, action: Send, timer_id: str, send_id: str | None) -> None:
        """The rest of :meth:`send`, once its id is known."""
        if action.type is not None:
            kind = self.text(action.type, "send type")
            if kind in HTTP_SEND_TYPES:
                self.send_http(action, send_id)
                return
            if kind not in SEND_TYPES:
                raise ValueError(
                    f"send type {kind!r} is not supported; the event I/O processors are "
                    f"{SEND_TYPES[0]!r} ('scxml') and {HTTP_SEND_TYPES[0]!r} ('basichttp')"
                )
        target = None if action.target is None else self.text(action.target, "send target")
        name = None if action.event is None else self.text(action.event, "send event")
        if not name:
            raise ValueError("send needs an event name (event=, or an eventexpr that gives a non-empty name)")
        expr: Callable[..., float] | float = action.delay
        delay = float(expr(self.context, self.event) if callable(expr) else expr)
        if not delay >= 0:
            raise ValueError(f"send {name!r} has a negative delay {delay}")
        data = self.data(action.data)
        own = self.session is not None and target == f"#_scxml_{self.session}"
        if target is None or own:
            origin = f"#_scxml_{self.session}" if self.session is not None else None
            event = Event(name, data, EventKind.EXTERNAL, send_id, None, origin)
            self.arm_timer(timer_id, self.now + delay, event)
            return
        if target == "#_internal":
            if delay:
                raise ValueError("a send to #_internal cannot be delayed; send it to this instance instead")
            self.internal.append(Event(name, data, EventKind.INTERNAL, send_id))
            return
        if not target.startswith("#_"):
            raise ValueError(
                f"send target {target!r} is not supported: use #_internal, #_parent, #_<invokeid> "
                "or #_scxml_<sessionid>, or no target for this instance"
            )
        if target.startswith("#_scxml_"):
            self.unreachable(target, name, "no event I/O processor reaches another session", send_id)
            return
        if target != "#_parent" and invocation_named(self.chart, target[2:]) is None:
            self.unreachable(target, name, "no such invoke id", send_id)
            return
        event = Event(name, data, EventKind.EXTERNAL, send_id)
        if delay:
            self.arm_timer(timer_id, self.now + delay, event, target)
        else:
            self.deliver(target, event)

    def send_http(self, action: Send, send_id: str | None) -> None:
        """SCXML C.2: a send to a URL becomes a :class:`SendHttp` effect; this step performs no I/O.

        A missing target, or one that is not an ``http://`` or ``https://``
        URL, cannot be dispatched: ``error.communication`` is raised at once
        (W3C 577). A delay is refused (``error.execution``): delayed HTTP
        sends are not supported yet. A failed delivery is reported later,
        by the engine, as an ``error.communication`` event.
        """
        target = None if action.target is None else self.text(action.target, "send target")
        name = None if action.event is None else self.text(action.event, "send event")
        expr: Callable[..., float] | float = action.delay
        if float(expr(self.context, self.event) if callable(expr) else expr):
            raise ValueError(
                "a Basic HTTP send cannot be delayed yet; send a delayed event to this instance "
                "and post from its transition"
            )
        data = self.data(action.data)
        if not target or urlsplit(target).scheme not in ("http", "https") or not urlsplit(target).netloc:
            reason = "no target URL" if not target else "the target is not an http:// or https:// URL"
            self.unreachable(target or "", name, f"Basic HTTP send: {reason}", send_id)
            return
        self.effects.append(SendHttp(target, name or None, data, send_id, self.http_location))

    def deliver(self, target: str, event: Event) -> None:
        """Hand a send's event to the parent or to the live children of a site."""
        if target == "#_parent":
            self.effects.append(SendToParent(event))
        else:
            send_to_invocation(self, target[2:], attrs.evolve(event, origin="#_parent"))

    def unreachable(self, target: str, name: str | None, reason: str, send_id: str | None = None) -> None:
        """SCXML 6.2: a send the processor cannot dispatch raises ``error.communication``."""
        self.internal.append(
            Event(
                "error.communication",
                {"target": target, "event": name, "reason": reason},
                EventKind.PLATFORM,
                send_id,
            )
        )

    def arm_timer(self, timer_id: str, deadline: float, event: Event, target: str | None = None) -> None:
        if timer_id in self.timers:
            self.cancel_timer(timer_id)
        timer = Timer(timer_id, deadline, self.sequence, event, target)
        self.sequence += 1
        self.timers[timer_id] = timer
        self.timers_changed = True
        self.effects.append(ArmTimer(timer))

    def cancel_timer(self, timer_id: str) -> None:
        if self.timers.pop(timer_id, None) is not None:
            self.timers_changed = True
            self.effects.append(CancelTimer(timer_id))

    def guard(self, t: CompiledTransition) -> bool:
        if t.timer_id is not None and self.firing != t.timer_id:
            return False  # a delayed transition is taken by its own timer only
        guard = t.guard
        if guard is None:
            return True
        if type(guard) is InState:
            return self.chart.index[guard.state] in self.config
        try:
            return bool(guard(self.context, self.event))
        except Exception as error:  # noqa: BLE001 - SCXML 5.9: a failing condition is false
            self.fail(self.chart.ids[t.source], f"guard of {t.label}", error, t.label)
            return False

    # ---------------------------------------------------------- selection

    def select(self, table: tuple[tuple[CompiledTransition, ...], ...]) -> list[CompiledTransition]:
        """Optimal enabled transitions in document order of their atomic sources."""
        chart = self.chart
        kind, ancestors = chart.kind, chart.ancestors
        enabled: list[CompiledTransition] = []
        for state in sorted(self.config):
            if kind[state] not in _ATOMIC:
                continue
            found = False
            for t in table[state]:
                if self.guard(t):
                    if t not in enabled:
                        enabled.append(t)
                    found = True
                    break
            if found:
                continue
            for source in ancestors[state]:
                for t in table[source]:
                    if self.guard(t):
                        if t not in enabled:
                            enabled.append(t)
                        found = True
                        break
                if found:
                    break
        if len(enabled) > 1:
            return self.remove_conflicts(enabled)
        return enabled

    def remove_conflicts(self, enabled: list[CompiledTransition]) -> list[CompiledTransition]:
        """SCXML ``removeConflictingTransitions``: descendants preempt, else document order."""
        chart = self.chart
        kept: list[tuple[CompiledTransition, set[int]]] = []
        for t1 in enabled:
            exit1 = self.exit_set((t1,))
            preempted = False
            remove: list[int] = []
            for n, (t2, exit2) in enumerate(kept):
                if exit1 & exit2:
                    if t2.source in chart.ancestor_sets[t1.source]:
                        remove.append(n)
                    else:
                        preempted = True
                        break
            if not preempted:
                for n in reversed(remove):
                    del kept[n]
                kept.append((t1, exit1))
        return [t for t, _ in kept]

    # -------------------------------------------------------------- exits

    def effective_targets(self, t: CompiledTransition) -> list[int]:
        if not t.history_targets:
            return list(t.targets)
        out: list[int] = []
        chart = self.chart
        for s in t.targets:
            if chart.kind[s] is StateKind.HISTORY:
                stored = self.history.get(s)
                if stored:
                    extra: list[int] = list(stored)
                else:
                    default = chart.history_default[s]
                    assert default is not None
                    extra = self.effective_targets(default)
                for x in extra:
                    if x not in out:
                        out.append(x)
            elif s not in out:
                out.append(s)
        return out

    def domain(self, t: CompiledTransition) -> int | None:
        if t.domain is not None:
            return t.domain
        targets = self.effective_targets(t)
        if not targets:
            return None
        chart = self.chart
        if (
            t.internal
            and chart.kind[t.source] is StateKind.COMPOUND
            and all(t.source in chart.ancestor_sets[s] for s in targets)
        ):
            return t.source
        return chart.lcca((t.source, *targets))

    def exit_set(self, transitions: tuple[CompiledTransition, ...] | list[CompiledTransition]) -> set[int]:
        out: set[int] = set()
        descendants = self.chart.descendants
        for t in transitions:
            if t.targets:
                domain = self.domain(t)
                if domain is not None:
                    out |= self.config & descendants[domain]
        return out

    def exit_states(self, transitions: list[CompiledTransition]) -> None:
        chart = self.chart
        to_exit = sorted(self.exit_set(transitions), reverse=True)
        if self.has_sites:
            self.entered.difference_update(to_exit)
        for s in to_exit:
            for h in chart.histories[s]:
                if not self.history_changed:
                    self.history = dict(self.history)  # copy on first write
                    self.history_changed = True
                remembered = chart.atomic_descendants[s] if chart.deep[h] else chart.child_set[s]
                self.history[h] = tuple(sorted(self.config & remembered))
        for s in to_exit:
            if chart.exit_work[s]:
                self.leave(s)
            else:
                self.config.discard(s)

    def leave(self, s: int) -> None:
        chart = self.chart
        self.execute(chart.ids[s], chart.exit[s])
        for t in chart.afters[s]:
            assert t.timer_id is not None
            self.cancel_timer(t.timer_id)
        if chart.sites[s]:
            cancel_state_children(self, s)
        self.config.discard(s)

    # ------------------------------------------------------------ entries

    def entry_set(
        self, transitions: list[CompiledTransition]
    ) -> tuple[tuple[int, ...], dict[int, tuple[CompiledTransition, ...]]]:
        """SCXML ``computeEntrySet``, in entry order, with the history defaults to run.

        The entry set of a single transition that meets no history state
        depends on the transition alone, so it is computed once and kept;
        one that meets history states depends on the transition and the
        recorded history values, and is kept per pair.
        """
        single = len(transitions) == 1
        if single and transitions[0].entry_plan is not None:
            return transitions[0].entry_plan, {}
        key: tuple[int, tuple[tuple[int, tuple[int, ...]], ...]] | None = None
        if single and transitions[0].history_targets:
            key = (transitions[0].order, tuple(sorted(self.history.items())))
            cached = self.chart.history_entries.get(key)
            if cached is not None:
                return cached
        to_enter: set[int] = set()
        default_entry: set[int] = set()
        history_content: dict[int, tuple[CompiledTransition, ...]] = {}
        self.saw_history = False
        for t in transitions:
            for s in t.targets:
                self.add_descendants(s, to_enter, default_entry, history_content)
            ancestor = self.domain(t)
            for s in self.effective_targets(t):
                self.add_ancestors(s, ancestor, to_enter, default_entry, history_content)
        entered = self.chart.entry_order(to_enter)
        if single and not self.saw_history:
            transitions[0].entry_plan = entered
        elif key is not None and len(self.chart.history_entries) < 4096:
            # Published once: a thread that lost the race uses the winner's value.
            entered, history_content = self.chart.history_entries.setdefault(key, (entered, history_content))
        return entered, history_content

    def enter_states(self, transitions: list[CompiledTransition]) -> None:
        chart = self.chart
        entered, history_content = self.entry_set(transitions)
        if not self.has_sites and not history_content and not chart.entering_works(entered):
            self.config.update(entered)
            return
        for s in entered:
            self.config.add(s)
            self.entered.add(s)
            if not chart.enter_work[s] and s not in history_content:
                continue
            self.execute(chart.ids[s], chart.entry[s])
            for t in chart.afters[s]:
                assert t.timer_id is not None and t.delay is not None
                event = Event(t.timer_id, None, EventKind.PLATFORM)
                self.arm_timer(t.timer_id, self.now + t.delay, event)
            # Appendix D enterStates: onentry, then the <initial> transition's
            # content, then a default history's content (test 579)
            for default in history_content.get(s, ()):
                self.execute(chart.ids[s], default.actions)
            if chart.kind[s] is StateKind.FINAL:
                self.reached_final(s)

    def reached_final(self, s: int) -> None:
        chart = self.chart
        parent = chart.parent[s]
        if parent == ROOT:
            self.running = False
            return
        try:
            data = self.data(chart.done_data[s])
        except Exception as error:  # noqa: BLE001
            self.fail(chart.ids[s], "done_data", error)
            data = None
        self.internal.append(Event(f"done.state.{chart.ids[parent]}", data, EventKind.PLATFORM))
        grandparent = chart.parent[parent]
        if chart.kind[grandparent] is StateKind.PARALLEL and all(
            self.in_final(c) for c in chart.children[grandparent]
        ):
            self.internal.append(Event(f"done.state.{chart.ids[grandparent]}", None, EventKind.PLATFORM))

    def in_final(self, s: int) -> bool:
        chart = self.chart
        kind = chart.kind[s]
        if kind is StateKind.COMPOUND:
            return any(chart.kind[c] is StateKind.FINAL and c in self.config for c in chart.children[s])
        if kind is StateKind.PARALLEL:
            return all(self.in_final(c) for c in chart.children[s])
        if kind is StateKind.ATOMIC or kind is StateKind.FINAL or kind is StateKind.HISTORY:
            return False
        assert_never(kind)

    def add_descendants(
        self,
        s: int,
        to_enter: set[int],
        default_entry: set[int],
        history_content: dict[int, tuple[CompiledTransition, ...]],
    ) -> None:
        chart = self.chart
        kind = chart.kind[s]
        if kind is StateKind.HISTORY:
            self.saw_history = True
            parent = chart.parent[s]
            stored = self.history.get(s)
            if stored:
                for x in stored:
                    self.add_descendants(x, to_enter, default_entry, history_content)
                for x in stored:
                    self.add_ancestors(x, parent, to_enter, default_entry, history_content)
            else:
                default = chart.history_default[s]
                assert default is not None
                # after the parent's <initial> content, if that is what led here (Appendix D)
                history_content[parent] = (*history_content.get(parent, ()), default)
                for x in default.targets:
                    self.add_descendants(x, to_enter, default_entry, history_content)
                for x in default.targets:
                    self.add_ancestors(x, parent, to_enter, default_entry, history_content)
            return
        to_enter.add(s)
        if kind is StateKind.COMPOUND:
            default_entry.add(s)
            content = chart.initial_content[s]
            if content is not None:
                # run after the state's entry actions (3.6); never cached as a plain plan
                history_content[s] = (*history_content.get(s, ()), content)
                self.saw_history = True
            for x in chart.initial[s]:
                self.add_descendants(x, to_enter, default_entry, history_content)
            for x in chart.initial[s]:
                self.add_ancestors(x, s, to_enter, default_entry, history_content)
        elif kind is StateKind.PARALLEL:
            self.enter_regions(s, to_enter, default_entry, history_content)
        elif kind is not StateKind.ATOMIC and kind is not StateKind.FINAL:
            assert_never(kind)  # an atomic or final state has no descendants to enter

    def enter_regions(
        self,
        s: int,
        to_enter: set[int],
        default_entry: set[int],
        history_content: dict[int, tuple[CompiledTransition, ...]],
    ) -> None:
        inclusive = self.chart.inclusive_descendants
        for child in self.chart.children[s]:
            if to_enter.isdisjoint(inclusive[child]):
                self.add_descendants(child, to_enter, default_entry, history_content)

    def add_ancestors(
        self,
        s: int,
        ancestor: int | None,
        to_enter: set[int],
        default_entry: set[int],
        history_content: dict[int, tuple[CompiledTransition, ...]],
    ) -> None:
        chart = self.chart
        for anc in chart.ancestors[s]:
            if anc == ancestor or anc == ROOT:
                break
            to_enter.add(anc)
            if chart.kind[anc] is StateKind.PARALLEL:
                self.enter_regions(anc, to_enter, default_entry, history_content)

    # ---------------------------------------------------------- microstep

    def count_microstep(self) -> None:
        """Count one microstep (or one internal event taken off the queue) against the cap."""
        self.microsteps += 1
        if self.microsteps > self.chart.max_microsteps:
            raise errors.RunawayMacrostep(
                self.chart.name,
                self.event.name,
                self.chart.max_microsteps,
                tuple(self.chart.ids[i] for i in sorted(self.config)),
            )

    def microstep(self, enabled: list[CompiledTransition]) -> None:
        self.count_microstep()
        if len(enabled) == 1 and not enabled[0].targets:
            t = enabled[0]
            self.execute(self.chart.ids[t.source], t.actions, t.label)
            return
        self.exit_states(enabled)
        for t in enabled:
            if t.actions:
                self.execute(self.chart.ids[t.source], t.actions, t.label)
        self.enter_states(enabled)

    def stabilise(self) -> None:
        """Eventless transitions and internal events until stable, then start sites."""
        chart = self.chart
        while self.running:
            enabled: list[CompiledTransition] = []
            if chart.has_eventless:
                enabled = self.select(chart.eventless)
            if not enabled:
                if not self.internal:
                    if not self.has_sites:
                        break
                    reconcile_sites(self)
                    if not self.internal:
                        break
                    continue
                self.event = self.internal.popleft()
                enabled = self.select(chart.matching(self.event.name))
                if not enabled:
                    # An internal event that enables nothing still counts toward
                    # the cap: a raising guard re-queues error.execution forever.
                    self.count_microstep()
            if enabled:
                self.microstep(enabled)

    def finish(self) -> None:
        """SCXML ``exitInterpreter``: leave every state, cancel children and timers."""
        chart = self.chart
        for s in sorted(self.config, reverse=True):
            self.execute(chart.ids[s], chart.exit[s])
            if chart.sites[s]:
                cancel_state_children(self, s)
            if chart.kind[s] is StateKind.FINAL and chart.parent[s] == ROOT:
                try:
                    self.output = self.data(chart.done_data[s])
                except Exception as error:  # noqa: BLE001
                    self.fail(chart.ids[s], "done_data", error)
                    self.output = None
        for timer_id in list(self.timers):
            self.cancel_timer(timer_id)
        for key, slot in list(self.slots.items()):
            if not slot.live:
                self.drop_slot(key)
        self.internal.clear()

    def macrostep(self, event: Event | None) -> None:
        chart = self.chart
        if event is None:
            initial = _initial_transition(chart)
            if initial.actions:
                self.execute(chart.ids[ROOT], initial.actions, initial.label)
            self.enter_states([initial])
        else:
            self.event = presented(chart, event)
            verdict = Verdict.DELIVER
            if event.invoke_id is not None:
                verdict = absorb_child_event(self, event)
                if verdict is Verdict.REJECTED:
                    self.rejected = True
                    return
            forwarded = len(self.effects)
            if chart.autoforward_states and event.kind is EventKind.EXTERNAL:
                autoforward(self, event)
            if verdict is Verdict.DELIVER:
                enabled = self.select(chart.matching(self.event.name))
                if enabled:
                    self.microstep(enabled)
                elif event.invoke_id is None and len(self.effects) == forwarded:
                    self.ignored = True
            self.firing = None  # only the timer's own event takes its delayed transition
        self.stabilise()
        self.steps += 1
        if not self.running:
            self.finish()
            self.status = Status.DONE
            self.effects.append(Completed(self.output))


def _initial_transition(chart: Chart[C]) -> CompiledTransition:
    cached = getattr(chart, "_initial_transition", None)
    if cached is None:
        authored = Transition((), tuple(chart.ids[i] for i in chart.initial[ROOT]), actions=chart.setup)
        cached = CompiledTransition(ROOT, 0, -1, authored, chart.initial[ROOT], False, "initial")
        cached.domain = ROOT
        published: CompiledTransition = vars(chart).setdefault("_initial_transition", cached)
        cached = published  # one per chart, whichever thread built it first
    return cached


def _action_name(action: Action) -> str:
    """How ``error.execution`` names a failing action (stored in events: keep each name stable)."""
    match action:
        case Assign():
            return f"assign {action.name}"
        case ForEach():
            return "foreach"
        case Raise() | Send() | Cancel() | SendParent() | SendChild() | Log() | If() | Block():
            return type(action).__name__.lower()
        case _:
            assert_never(action)


# ------------------------------------------------------------ actions
# One handler per action class, (run, action, where, transition) -> None;
# ``for_every_action`` refuses the table at import if a class has none.


def _perform_assign(run: Run, action: Assign, where: str, transition: str | None) -> None:
    result = action.fn(run.context, run.event)
    if result is not None:
        expected = run.chart.context_type
        if not isinstance(result, expected):
            raise TypeError(
                f"assign {action.name} returned {type(result).__name__}, expected "
                f"{expected.__name__} (or None to keep the context)"
            )
        run.context = result


def _perform_raise(run: Run, action: Raise, where: str, transition: str | None) -> None:
    run.internal.append(Event(action.event, run.data(action.data), EventKind.INTERNAL))


def _perform_send(run: Run, action: Send, where: str, transition: str | None) -> None:
    run.send(action)


def _perform_cancel(run: Run, action: Cancel, where: str, transition: str | None) -> None:
    run.cancel_timer(run.text(action.send_id, "cancel's send id"))


def _perform_send_parent(run: Run, action: SendParent, where: str, transition: str | None) -> None:
    run.effects.append(SendToParent(Event(action.event, run.data(action.data))))


def _perform_send_child(run: Run, action: SendChild, where: str, transition: str | None) -> None:
    send_to_children(run, action.site, action.key, Event(action.event, run.data(action.data)))


def _perform_log(run: Run, action: Log, where: str, transition: str | None) -> None:
    run.effects.append(Logged(action.label, run.data(action.data)))


def _perform_if(run: Run, action: If, where: str, transition: str | None) -> None:
    run.branch(action, where, transition)


def _perform_foreach(run: Run, action: ForEach, where: str, transition: str | None) -> None:
    run.foreach(action, where, transition)


def _perform_block(run: Run, action: Block, where: str, transition: str | None) -> None:
    run.execute(where, action.actions, transition)


_PERFORM: dict[type[Any], Callable[[Run, Any, str, str | None], None]] = for_every_action(
    "the interpreter (statechart._interpreter._PERFORM)",
    {
        Assign: _perform_assign,
        Raise: _perform_raise,
        Send: _perform_send,
        Cancel: _perform_cancel,
        SendParent: _perform_send_parent,
        SendChild: _perform_send_child,
        Log: _perform_log,
        If: _perform_if,
        ForEach: _perform_foreach,
        Block: _perform_block,
    },
)


# ------------------------------------------------------------------ public


_OUTCOMES = ("done.invoke.", "error.invoke.", "retry.invoke.")


def _check_event(chart: Chart[C], snapshot: Snapshot[C], event: Event) -> None:
    if not isinstance(event, Event) or not isinstance(event.name, str) or not event.name:
        raise errors.InvalidEvent(
            f"chart {chart.name!r}: expected an Event with a non-empty name, got {event!r}"
        )
    if snapshot.status is not Status.RUNNING:
        raise errors.InstanceFinished(chart.name, snapshot.status.value, event.name)
    if snapshot.chart != chart.name:
        raise errors.InvalidEvent(
            f"snapshot belongs to chart {snapshot.chart!r}, not {chart.name!r}; step it with its own chart"
        )
    if event.invoke_id is None and event.invoke_name is None and event.name.startswith(_OUTCOMES):
        raise errors.InvalidEvent(
            f"chart {chart.name!r}: event {event.name!r} reports a child outcome but carries no "
            "invoke_id; build it with done_invoke_event()/error_invoke_event()"
        )


def start(
    chart: Chart[C],
    context: C | None = None,
    *,
    input: JsonValue = None,
    now: float = 0.0,
    lineage: tuple[str, ...] = (),
    session: str | None = None,
    http_location: str | None = None,
) -> tuple[Snapshot[C], tuple[Effect, ...]]:
    """Enter the chart's initial configuration: the first macrostep.

    The context is ``context`` if given, else built from ``input`` (the
    chart's ``context_from_input``, or the context class structured from the
    input mapping), else the context class's defaults. ``session`` is the
    instance's id (SCXML ``_sessionid``): a send to ``#_scxml_<session>``
    reaches this instance, and events it sends itself carry it as origin.
    ``http_location`` is the instance's Basic HTTP access URL (SCXML C.2,
    ``_ioprocessors['basichttp']['location']``), which the engine derives
    from its HTTP ingress; ``None`` when it has none.
    """
    if context is None:
        context = context_from_input(chart, input)
    elif not isinstance(context, chart.context_type):
        raise errors.InvalidEvent(
            f"chart {chart.name!r} expects a {chart.context_type.__name__} context, got "
            f"{type(context).__name__}"
        )
    empty: Snapshot[C] = Snapshot(chart.name, Status.RUNNING, (), (), context, time=now, lineage=lineage)
    run = Run(chart, empty, now, session, http_location)
    _scoped(run, run.macrostep, None)
    return run.snapshot(), tuple(run.effects)


def step(
    chart: Chart[C],
    snapshot: Snapshot[C],
    event: Event,
    *,
    now: float | None = None,
    session: str | None = None,
    http_location: str | None = None,
) -> tuple[Snapshot[C], tuple[Effect, ...]]:
    """Process one external event to a stable configuration (one macrostep).

    ``now`` is the caller's clock (seconds); delayed sends get deadlines
    relative to it. It defaults to the snapshot's ``time``. ``session`` and
    ``http_location`` are as for :func:`start`.
    """
    _check_event(chart, snapshot, event)
    plans = chart.plans
    learn: PlanKey | None = None
    # a queued internal event, a child slot or a child's outcome makes a macrostep read more
    if plans is not None and event.invoke_id is None and not (snapshot.internal_queue or snapshot.children):
        key = (snapshot.configuration, snapshot.history, event.name)
        plan = plans.get(key, _UNPLANNED)
        if plan is _UNPLANNED:
            learn = key if len(plans) < PLAN_LIMIT else None
        elif plan is not None:
            return plan.apply(snapshot, now), (Ignored(event.name),) if plan.ignored else ()
    run = Run(chart, snapshot, snapshot.time if now is None else now, session, http_location)
    if learn is None:
        _scoped(run, run.macrostep, event)
    else:
        _scoped(run, _learn, run, snapshot, event, learn)
    if run.rejected:
        return snapshot, tuple(run.effects)
    if run.ignored:
        # reported after the macrostep, so that an ignored event can still be planned
        run.effects.append(Ignored(event.name))
    return run.snapshot(), tuple(run.effects)


def _learn(run: Run, snapshot: Snapshot[C], event: Event, key: PlanKey) -> None:
    """The macrostep of ``event``, kept as the chart's plan for ``key`` when it proves plain."""
    admitted = _plain(run, event.name)
    run.macrostep(event)
    plan: Plan | None = None
    if admitted and _settled(run, snapshot):
        configuration = run.chart.configuration_ids(run.config)
        plan = Plan(configuration, run.recorded_history() if run.history_changed else None, run.ignored)
    remember(run.chart.plans, key, plan)


def _plain(run: Run, name: str) -> bool:
    """Whether the macrostep ``run`` is about to take for event ``name`` runs no executable content.

    ``run`` must still hold the snapshot's configuration. Selection reads no
    guard when the first transition each atomic state meets (on itself,
    else on its nearest ancestor that has one) is unguarded and not delayed:
    that transition is then the one selected for it.
    """
    chart = run.chart
    table = chart.matching(name)
    kind, ancestors = chart.kind, chart.ancestors
    for state in run.config:
        if kind[state] not in _ATOMIC:
            continue
        for source in (state, *ancestors[state]):
            candidates = table[source]
            if candidates:
                first = candidates[0]
                if first.guard is not None or first.timer_id is not None:
                    return False
                break
    enabled = run.select(table)
    if not enabled:
        return True
    if any(t.actions for t in enabled):
        return False
    if len(enabled) == 1 and not enabled[0].targets:
        return True
    exit_work = chart.exit_work
    if any(exit_work[s] for s in run.exit_set(enabled)):
        return False
    entered, history_content = run.entry_set(enabled)
    if any(t.actions for ts in history_content.values() for t in ts):
        return False
    return not chart.entering_works(entered)


def _settled(run: Run, snapshot: Snapshot[Any]) -> bool:
    """Whether ``run``, a macrostep :func:`_plain` admitted, changed only what a plan holds.

    It must have raised and armed nothing, kept the context, stopped in a
    configuration where no eventless transition waits, and still be running.
    """
    chart = run.chart
    if run.effects or run.internal or run.timers_changed or run.slots or run.rejected:
        return False
    if run.context is not snapshot.context or not run.running or run.status is not Status.RUNNING:
        return False
    if run.microsteps > 1:
        return False
    eventless = chart.eventless
    return not chart.has_eventless or not any(eventless[s] for s in run.config)


def fire(
    chart: Chart[C],
    snapshot: Snapshot[C],
    timer_id: str,
    *,
    now: float | None = None,
    session: str | None = None,
    http_location: str | None = None,
) -> tuple[Snapshot[C], tuple[Effect, ...]]:
    """Deliver the armed timer ``timer_id``: disarm it and process its event.

    A timer of a delayed send to the parent or a child (``Timer.target``)
    hands its event over as an effect and steps nothing here (an
    ``error.communication`` it raises is processed).
    """
    timer = next((t for t in snapshot.timers if t.id == timer_id), None)
    if timer is None:
        raise errors.UnknownTimer(chart.name, timer_id, tuple(t.id for t in snapshot.timers))
    _check_event(chart, snapshot, timer.event)
    run = Run(chart, snapshot, snapshot.time if now is None else now, session, http_location)
    del run.timers[timer_id]
    run.timers_changed = True
    _scoped(run, _fire, run, timer)
    return run.snapshot(), tuple(run.effects)


def _scoped(run: Run, work: Callable[..., None], *args: Any) -> None:
    """``work(*args)`` with ``run`` as the scope its callables see (:func:`statechart.current`)."""
    token = _CURRENT.set(Scope(run))
    try:
        work(*args)
    finally:
        _CURRENT.reset(token)


def _fire(run: Run, timer: Timer) -> None:
    if timer.target is not None:
        run.deliver(timer.target, timer.event)
        run.stabilise()
        run.steps += 1
        if not run.running:
            run.finish()
            run.status = Status.DONE
            run.effects.append(Completed(run.output))
        return
    run.firing = timer.id
    run.macrostep(timer.event)
    if run.rejected:
        # the timer is spent even though its event no longer applies
        run.rejected = False
        run.steps += 1


def stop(
    chart: Chart[C],
    snapshot: Snapshot[C],
    *,
    now: float | None = None,
    reason: str = "stopped",
    session: str | None = None,
    http_location: str | None = None,
) -> tuple[Snapshot[C], tuple[Effect, ...]]:
    """Stop a running instance from outside: exit every state, cancel children and timers."""
    if snapshot.status is not Status.RUNNING:
        raise errors.InstanceFinished(chart.name, snapshot.status.value, "stop")
    run = Run(chart, snapshot, snapshot.time if now is None else now, session, http_location)
    run.event = Event("stop", reason, EventKind.PLATFORM)
    _scoped(run, run.finish)
    run.steps += 1
    run.status = Status.STOPPED
    run.effects.append(Stopped(reason))
    return run.snapshot(), tuple(run.effects)


def due_timers(snapshot: Snapshot[C], now: float) -> tuple[Timer, ...]:
    """The timers due at ``now``, in the order they must fire (deadline, then arming order)."""
    return tuple(t for t in snapshot.timers if t.deadline <= now)

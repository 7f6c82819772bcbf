"""Child sites inside a macrostep: births, fan-out membership, outcomes, retries.

The interpreter never runs a child. It keeps one :class:`ChildSlot` per
``(site, key)`` in the snapshot and returns effects (birth, retry, resume,
cancel) that the engine commits and enacts. Outcomes come back as events
carrying the child's :class:`InvokeId`; any that name an older generation
than the slot's current one are stale and rejected.

These functions work on the interpreter's working copy of a macrostep
through :class:`SiteRun`, the part of it they read and change; the
interpreter's ``Run`` is one, and the interpreter calls them at the points
of the SCXML algorithm where sites act.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Mapping, Set
from typing import Any, Protocol

import attrs

from statechart._chart import Chart
from statechart._codec import check_json, context_from_input
from statechart._effects import (
    BirthChild,
    CancelChild,
    Effect,
    RejectedEvent,
    ResumeChild,
    RetryChild,
    SendToChild,
)
from statechart._event import Event, EventKind, InvokeId, JsonValue
from statechart._model import Action, Site
from statechart._registry import registered_chart
from statechart._snapshot import ChildSlot, SlotKey, SlotStatus, SlotTable


class SiteRun(Protocol):
    """What the child sites read and change of a macrostep's working copy, and nothing more."""

    context: object
    """The chart's context; a site's ``output`` may replace it."""
    next_generation: int
    """The generation the next incarnation of any slot gets."""
    reconciled_context: object
    """The context the fan-out memberships were last followed for."""

    @property
    def chart(self) -> Chart[Any]:
        """The chart being run."""
        ...

    @property
    def event(self) -> Event:
        """The event being processed (``_event``), as the chart sees it."""
        ...

    @property
    def config(self) -> Set[int]:
        """The active states (indices)."""
        ...

    @property
    def entered(self) -> set[int]:
        """The states entered since the sites were last reconciled (cleared by :func:`reconcile_sites`)."""
        ...

    @property
    def lineage(self) -> tuple[str, ...]:
        """The recursive groups of the instance's ancestors."""
        ...

    @property
    def steps(self) -> int:
        """Macrosteps taken before this one (a slot records the one it was armed in)."""
        ...

    @property
    def now(self) -> float:
        """The macrostep's time (retry deadlines are relative to it)."""
        ...

    @property
    def effects(self) -> list[Effect]:
        """The effects returned to the engine, in order."""
        ...

    @property
    def internal(self) -> deque[Event]:
        """The internal event queue."""
        ...

    @property
    def slots(self) -> SlotTable:
        """The child slots by ``(site, key)``; changed through :meth:`put_slot` and :meth:`drop_slot` only."""
        ...

    @property
    def slot_unfinished(self) -> Mapping[str, int]:
        """Per site, how many slots are not done."""
        ...

    def put_slot(self, slot: ChildSlot) -> None:
        """Set the slot of ``(slot.site, slot.key)``."""
        ...

    def drop_slot(self, key: SlotKey) -> None:
        """Forget the slot of ``key``."""
        ...

    def arm_timer(self, timer_id: str, deadline: float, event: Event) -> None:
        """Arm (or re-arm) the timer ``timer_id`` to deliver ``event`` at ``deadline``."""
        ...

    def cancel_timer(self, timer_id: str) -> None:
        """Disarm the timer ``timer_id`` if it is armed."""
        ...

    def execute(self, where: str, actions: tuple[Action, ...]) -> None:
        """Run a block of executable content on behalf of state ``where``."""
        ...

    def fail(self, where: str, what: str, error: BaseException) -> None:
        """Report that ``what`` of state ``where`` raised ``error`` (SCXML ``error.execution``)."""
        ...


class Verdict(enum.Enum):
    """What to do with an event that came from a child."""

    DELIVER = "deliver"
    """Select transitions on it as usual."""
    ABSORBED = "absorbed"
    """Handled by the site itself (retry, fan-out member); only stabilise."""
    REJECTED = "rejected"
    """Stale or unknown: the snapshot must not change."""


def _lineage(run: SiteRun, site: Site) -> tuple[str, ...]:
    return run.lineage + ((site.group,) if site.group is not None else ())


def _failed_slot(run: SiteRun, state: int, site: Site, key: str, input: JsonValue) -> None:
    run.put_slot(ChildSlot(site.id, key, 0, 0, SlotStatus.FAILED, run.chart.ids[state], input, run.steps))


def birth(run: SiteRun, state: int, site: Site, key: str, input: JsonValue, chart: str | None = None) -> None:
    """Decide a first incarnation for ``(site, key)``, or refuse it past ``max_depth``."""
    if site.group is not None and site.max_depth is not None:
        depth = run.lineage.count(site.group) + 1
        if depth > site.max_depth:
            _failed_slot(run, state, site, key, input)
            run.internal.append(
                Event(
                    f"error.invoke.{site.id}",
                    {
                        "reason": "max_depth",
                        "group": site.group,
                        "depth": depth,
                        "max_depth": site.max_depth,
                        "key": key,
                    },
                    EventKind.PLATFORM,
                    invoke_id=InvokeId(site.id, key, 0),
                )
            )
            return
    generation = run.next_generation
    run.next_generation += 1
    invoke_id = InvokeId(site.id, key, generation)
    state_id = run.chart.ids[state]
    if site.id_location is not None:
        # SCXML 6.4: idlocation receives this invocation's id, which its generation completes
        try:
            run.context = site.id_location(run.context, run.event, invoke_name(run.chart, invoke_id))
        except Exception as error:  # noqa: BLE001 - reported as error.execution; the child is still born
            run.fail(state_id, f"idlocation of site {site.id}", error)
    run.put_slot(ChildSlot(site.id, key, generation, 1, SlotStatus.RUNNING, state_id, input, run.steps))
    child = chart if chart is not None else site.chart
    run.effects.append(BirthChild(invoke_id, child, site.task, input, 1, _lineage(run, site), state_id))


def _drop(run: SiteRun, slot: ChildSlot) -> None:
    """Forget a slot; a live one (running, or waiting for its retry) is cancelled."""
    if slot.status is SlotStatus.RETRYING:
        run.cancel_timer(_retry_timer(slot))
    if slot.live:
        run.effects.append(CancelChild(slot.invoke_id))
    run.drop_slot((slot.site, slot.key))


def _retry_timer(slot: ChildSlot) -> str:
    return f"retry.{slot.site}.{slot.key}" if slot.key else f"retry.{slot.site}"


def _members(run: SiteRun, state: int, site: Site) -> Mapping[str, JsonValue] | None:
    assert site.members is not None
    try:
        members = site.members(run.context)
        if isinstance(members, str | bytes | bytearray):
            # Never a fan-out over characters: "alice" is one name, not five members.
            raise TypeError(
                f"map of site {site.id!r} returned {type(members).__name__} {members!r}, which is not "
                "a collection of member keys; return a mapping {member key: input}, e.g. "
                "{name: {'name': name} for name in context.names}"
            )
        if not isinstance(members, Mapping) or not all(isinstance(k, str) for k in members):
            raise TypeError(
                f"map of site {site.id!r} must return a mapping of str member keys to inputs, got {members!r}"
            )
        return members
    except Exception as error:  # noqa: BLE001 - reported as error.execution
        run.fail(run.chart.ids[state], f"map of site {site.id}", error)
        return None


def check_child_input(
    run: SiteRun, site: Site, value: JsonValue, key: str = "", *, chart: str | None = None
) -> None:
    """Raise unless ``value`` is JSON and fits the context of the child chart (``chart``, else the site's)."""
    chart = chart if chart is not None else site.chart
    member = f" member {key!r}" if key else ""
    try:
        check_json(value, "input")
    except TypeError as error:
        raise TypeError(
            f"the input of site {site.id!r}{member} is not JSON data: {error}; return lists and "
            "dicts with str keys"
        ) from error
    if chart is None:
        return
    child = registered_chart(run.chart, chart)
    if child is not None:
        context_from_input(child, value)


def chart_of(run: SiteRun, site: Site) -> str | None:
    """The chart a birth of ``site`` runs: its ``chart``, or what ``choose`` picks (one of ``charts``)."""
    if site.choose is None:
        return site.chart
    name = site.choose(run.context)
    if name not in site.charts:
        raise ValueError(
            f"site {site.id!r} chose chart {name!r}, which is not one of the charts it may run "
            f"({', '.join(site.charts)})"
        )
    return name


def _input(run: SiteRun, state: int, site: Site) -> tuple[bool, JsonValue, str | None]:
    where = f"input of site {site.id}"
    try:
        chart = chart_of(run, site)
        if callable(site.input):
            mapper: Callable[..., JsonValue] = site.input
            value = mapper(run.context)
        else:
            value = site.input
        check_child_input(run, site, value, chart=chart)
    except Exception as error:  # noqa: BLE001 - reported as error.execution
        run.fail(run.chart.ids[state], where, error)
        return False, None, None
    return True, value, chart


def _member_inputs_fit(run: SiteRun, state: int, site: Site, members: Mapping[str, JsonValue]) -> bool:
    """Whether every member about to be born has a valid input; else error.execution, no births."""
    for key, value in members.items():
        if (site.id, key) in run.slots:
            continue
        try:
            check_child_input(run, site, value, key)
        except Exception as error:  # noqa: BLE001 - reported as error.execution
            run.fail(run.chart.ids[state], f"input of member {key!r} of site {site.id}", error)
            return False
    return True


def reconcile_sites(run: SiteRun) -> None:
    """Start the sites of active states (SCXML's ``statesToInvoke``) and follow fan-out membership.

    A state entered in this macrostep births its children. A fan-out site of
    a state that stays active follows its membership when the context
    changed: new keys are born, removed keys are cancelled and forgotten (a
    re-added key is a fresh generation at attempt 1).
    """
    chart = run.chart
    context_changed = run.context is not run.reconciled_context
    for state in chart.site_states:
        if state not in run.config:
            continue
        entered = state in run.entered
        for site in chart.sites[state]:
            if site.members is None:
                if (site.id, "") not in run.slots:
                    ok, value, child = _input(run, state, site)
                    if ok:
                        birth(run, state, site, "", value, child)
                    else:
                        _failed_slot(run, state, site, "", None)
                continue
            if not (entered or context_changed):
                continue
            members = _members(run, state, site)
            if members is None or not _member_inputs_fit(run, state, site, members):
                continue
            current = [slot for slot in run.slots.values() if slot.site == site.id]
            dropped_live = False
            for slot in current:
                if slot.key not in members:
                    dropped_live = dropped_live or slot.live
                    _drop(run, slot)
            for key, value in members.items():
                if (site.id, key) not in run.slots:
                    birth(run, state, site, key, value)
            if entered or dropped_live:
                # Entered with no members, or the last unfinished members were
                # removed: the family is complete now.
                _complete_family(run, site)
    run.entered.clear()
    run.reconciled_context = run.context


def _complete_family(run: SiteRun, site: Site) -> None:
    """Raise ``done.invoke.<site>`` with every output if every member is done."""
    # The counts make the test O(1); the outputs are gathered once, when it passes.
    if not run.slot_unfinished.get(site.id, 0):
        members = [s for s in run.slots.values() if s.site == site.id]
        outputs: dict[str, JsonValue] = {s.key: s.output for s in members}
        run.internal.append(Event(f"done.invoke.{site.id}", outputs, EventKind.PLATFORM))


def cancel_state_children(run: SiteRun, state: int) -> None:
    """Cancel and forget every slot of the sites on ``state`` (it is being exited)."""
    for site in run.chart.sites[state]:
        for slot in [s for s in run.slots.values() if s.site == site.id]:
            _drop(run, slot)


def send_to_children(
    run: SiteRun, site_id: str, key: str | None, event: Event, generation: int | None = None
) -> None:
    """Deliver ``event`` to the running incarnations of a site (one key, or all; one generation, or any)."""
    targets = [
        slot
        for slot in run.slots.values()
        if slot.site == site_id
        and slot.status is SlotStatus.RUNNING
        and (key is None or slot.key == key)
        and (generation is None or slot.generation == generation)
    ]
    if not targets:
        run.internal.append(
            Event(
                "error.communication",
                {"site": site_id, "key": key, "event": event.name, "reason": "no running child"},
                EventKind.PLATFORM,
            )
        )
        return
    for slot in targets:
        run.effects.append(SendToChild(slot.invoke_id, event))


def invoke_name(chart: Chart[Any], invoke_id: InvokeId) -> str:
    """The invocation's id as the chart sees it (SCXML's invoke id, 6.4.1).

    The site's id, unless the site's id was generated (an ``<invoke>`` that
    gives none): then ``<state>.<generation>``, the id of the site's state
    and the incarnation's generation, which the parent allocated and
    recorded with the birth, so recovery names it the same.
    """
    site = chart.site_by_id.get(invoke_id.site)
    if site is None or not site.generated_id:
        return invoke_id.site
    return f"{chart.ids[chart.site_state[site.id]]}.{invoke_id.generation}"


def invocation_named(chart: Chart[Any], name: str) -> tuple[tuple[Site, ...], int | None] | None:
    """The sites an invoke id names (``#_<name>``), and the generation a generated one names.

    ``None`` when no site can have an invocation of that name: neither a
    site's own id nor ``<state>.<generation>`` for a state with a site
    whose id was generated.
    """
    site = chart.site_by_id.get(name)
    if site is not None and not site.generated_id:
        return (site,), None
    state, dot, number = name.rpartition(".")
    index = chart.index.get(state) if dot else None
    if index is None or not (number.isascii() and number.isdigit()) or number != str(int(number)):
        return None
    generated = tuple(site for site in chart.sites[index] if site.generated_id)
    return (generated, int(number)) if generated else None


def send_to_invocation(run: SiteRun, name: str, event: Event) -> None:
    """Deliver ``event`` to the running invocation ``name`` (a ``<send target="#_<name>">``, 6.2.4).

    Like :func:`send_to_children`, an invocation that is not running (any
    more) raises ``error.communication``.
    """
    named = invocation_named(run.chart, name)
    if named is None:  # checked when the send ran; a delayed one may outlive a change of the chart
        run.internal.append(
            Event(
                "error.communication",
                {"site": name, "key": None, "event": event.name, "reason": "no such invoke id"},
                EventKind.PLATFORM,
            )
        )
        return
    sites, generation = named
    site_ids = {site.id for site in sites}
    holder = next(
        (slot.site for slot in run.slots.values() if slot.site in site_ids and slot.generation == generation),
        sites[0].id,
    )
    send_to_children(run, holder, None, event, generation)


def presented(chart: Chart[Any], event: Event) -> Event:
    """``event`` as the chart processes it: an event from a child names its invocation (6.4.1).

    For a site whose id was generated, ``_event.invokeid`` is the
    invocation's name and the child's outcome events are
    ``done.invoke.<name>`` and ``error.invoke.<name>``; the event as stored
    names the site (its ``invoke_id`` is what the slot is checked against).
    Any other event is returned as it is.
    """
    invoke_id = event.invoke_id
    if invoke_id is None:
        return event
    site = chart.site_by_id.get(invoke_id.site)
    if site is None or not site.generated_id:
        return event
    name = invoke_name(chart, invoke_id)
    renamed = event.name
    for outcome in ("done.invoke.", "error.invoke."):
        if event.name == outcome + site.id:
            renamed = outcome + name
    return attrs.evolve(event, name=renamed, invoke_name=name)


def detach(chart: Chart[Any], event: Event) -> Event:
    """An event from one of ``chart``'s children as an ordinary event: no longer evidence about a slot.

    It keeps what the chart saw of it (its name, ``_event.invokeid`` and
    ``_event.origin``) but not its ``invoke_id``, so no slot is checked or
    changed when it is processed. SCXML processes such events: the copy an
    autoforwarding parent sends the child of every external event, the
    child's own included (6.4), and an event the child sent that was queued
    before its invocation was cancelled (6.4: only events that arrive after
    the cancellation are ignored). Any other event is returned as it is.
    """
    if event.invoke_id is None:
        return event
    shown = presented(chart, event)
    return attrs.evolve(shown, invoke_id=None, invoke_name=shown.invocation)


def autoforward(run: SiteRun, event: Event) -> None:
    """SCXML 6.4: send a copy of an external event to the running children of autoforward sites.

    Every external event is forwarded, those the site's own children sent
    included (W3C 229): the child receives it as the parent did, with the
    same name, ``_event.invokeid`` and ``_event.origin`` (W3C 230). An event
    from a child is forwarded detached (:func:`detach`): to the receiving
    child it is an ordinary event, not evidence about a slot of its own.
    """
    chart = run.chart
    event = detach(chart, event)
    for state in chart.autoforward_states:
        if state not in run.config:
            continue
        for site in chart.sites[state]:
            if not site.autoforward:
                continue
            for slot in list(run.slots.values()):
                if slot.site == site.id and slot.status is SlotStatus.RUNNING:
                    run.effects.append(SendToChild(slot.invoke_id, event))


def _reject(run: SiteRun, event: Event, reason: str) -> Verdict:
    run.effects.append(RejectedEvent(event, reason))
    return Verdict.REJECTED


def resume(run: SiteRun, slot: ChildSlot, site: Site) -> None:
    """Arm a fresh incarnation of a retried slot: new generation, next attempt."""
    generation = run.next_generation
    run.next_generation += 1
    fresh = ChildSlot(
        slot.site,
        slot.key,
        generation,
        slot.attempt + 1,
        SlotStatus.RUNNING,
        slot.state,
        slot.input,
        run.steps,
    )
    run.put_slot(fresh)
    run.effects.append(
        ResumeChild(
            fresh.invoke_id,
            slot.invoke_id,
            site.chart,
            site.task,
            slot.input,
            fresh.attempt,
            _lineage(run, site),
            slot.state,
        )
    )


def _retry(run: SiteRun, slot: ChildSlot, site: Site, error: JsonValue) -> None:
    attempt = slot.attempt + 1
    delay = site.retry.delay(attempt)
    deadline = run.now + delay
    run.effects.append(RetryChild(slot.invoke_id, attempt, deadline, error))
    retrying = attrs.evolve(slot, status=SlotStatus.RETRYING, retry_deadline=deadline)
    run.put_slot(retrying)
    if delay <= 0:
        resume(run, retrying, site)
        return
    run.arm_timer(
        _retry_timer(slot),
        deadline,
        Event(f"retry.invoke.{site.id}", None, EventKind.PLATFORM, invoke_id=slot.invoke_id),
    )


def absorb_child_event(run: SiteRun, event: Event) -> Verdict:
    """Check an event from a child against its slot and apply what the site does with it."""
    invoke_id = event.invoke_id
    assert invoke_id is not None
    site = run.chart.site_by_id.get(invoke_id.site)
    slot = run.slots.get((invoke_id.site, invoke_id.key))
    if site is None:
        return _reject(run, event, f"the chart has no site {invoke_id.site!r}")
    if slot is None:
        return _reject(run, event, f"site {invoke_id.site!r} has no live slot for key {invoke_id.key!r}")
    if slot.generation != invoke_id.generation:
        return _reject(
            run,
            event,
            f"stale: generation {invoke_id.generation} of {invoke_id.site!r}"
            f"{'[' + invoke_id.key + ']' if invoke_id.key else ''} was superseded by generation "
            f"{slot.generation}",
        )
    name = event.name
    if name == f"retry.invoke.{site.id}":
        if slot.status is not SlotStatus.RETRYING:
            return _reject(run, event, f"slot is {slot.status.value}, not retrying")
        resume(run, slot, site)
        return Verdict.ABSORBED
    if slot.status is not SlotStatus.RUNNING:
        return _reject(run, event, f"slot {invoke_id} is {slot.status.value}, not running")
    final_error = name == f"error.invoke.{site.id}" and slot.attempt >= site.retry.max_attempts
    if site.finalize and (final_error or not name.startswith("error.invoke.")):
        # SCXML 6.5: before the event is processed; a retried failure is not the child's last word
        run.execute(slot.state, site.finalize)
    if name == f"done.invoke.{site.id}":
        if site.output is not None:
            try:
                result = site.output(run.context, event)
                if result is not None:
                    if not isinstance(result, run.chart.context_type):
                        raise TypeError(
                            f"output of site {site.id!r} returned {type(result).__name__}, expected "
                            f"{run.chart.context_type.__name__}"
                        )
                    run.context = result
            except Exception as error:  # noqa: BLE001 - reported as error.execution
                run.fail(slot.state, f"output of site {site.id}", error)
        run.put_slot(attrs.evolve(slot, status=SlotStatus.DONE, output=event.data))
        if site.members is None:
            return Verdict.DELIVER
        _complete_family(run, site)
        return Verdict.ABSORBED
    if name == f"error.invoke.{site.id}":
        if slot.attempt < site.retry.max_attempts:
            _retry(run, slot, site, event.data)
            return Verdict.ABSORBED
        run.put_slot(attrs.evolve(slot, status=SlotStatus.FAILED))
        return Verdict.DELIVER
    return Verdict.DELIVER

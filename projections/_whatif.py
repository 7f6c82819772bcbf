"""What-if replay: an instance's recorded external inputs run through another chart, and compared.

:func:`recorded_run` reads what an instance was given from its stored events
— its input, then each macrostep's trigger (an accepted inbox event, a
child's outcome, a timer firing) with its recorded time, and the
configuration the recorded chart reached — and the messages it refused.
It reads the events by what they carry (a macrostep is an event that can
say its configuration after; an acceptance carries the message), not by a
list of event classes, so merged or new event kinds that carry the same
facts read the same.

:func:`replay` runs those inputs, in their recorded order and at their
recorded times, through a chart with the pure interpreter
(:func:`statechart.start`, :func:`~statechart.step`, :func:`~statechart.fire`)
and classifies the instance: the new chart takes the **same** path, it
**diverges** at event *k* (both configurations given), it **strands** (it
ends waiting for something that can never come) or it **parks** (the chart
cannot run the inputs: it raises, or fails the instance). Nothing is
written anywhere: the interpreter is pure.

Times are replayed as recorded; the instance's session id is the one given
(instances grouped by identical inputs share one replay, see
:meth:`RecordedRun.key`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from statechart import Chart, Event, JsonValue, fire, start, step, stop
from statechart.effects import RejectedEvent
from statechart.event import EventKind
from statechart.snapshot import SlotStatus, Snapshot, Status

_OUTCOME_PREFIXES = ("done.invoke", "error.invoke")
_PLATFORM_PREFIXES = ("done.", "error.")


class Replayed(enum.Enum):
    """How a chart takes an instance's recorded inputs."""

    SAME = "same"
    """Every recorded input leads to the configuration recorded; it ends able to go on."""
    DIVERGES = "diverges"
    """At event ``at`` the chart reaches another configuration than the one recorded (or finishes)."""
    STRANDS = "strands"
    """It follows the recorded path but ends waiting for something that can never come."""
    PARKS = "parks"
    """The chart cannot run the inputs (it raises: the engine would fail or park the instance)."""


@attrs.frozen
class RecordedInput:
    """One recorded input: a macrostep's trigger (or a refused message) and what the chart made of it."""

    version: int
    """The position of the event that recorded it in the instance's history (``k``)."""
    trigger: Event | None
    """The event processed; None for the first macrostep."""
    timer: str | None
    """The timer fired, when the input was a timer firing."""
    now: float
    """The time the macrostep was computed at."""
    configuration: tuple[str, ...]
    """The configuration the recorded chart reached (that of the step before, for a refused message)."""
    refused: bool = False
    """The message was refused (stale evidence) without a macrostep."""
    sent_at: float | None = None
    """When the consumed message was accepted, if it was a message."""


@attrs.frozen
class RecordedRun:
    """What an instance was given and what its recorded chart made of it, oldest first."""

    name: str
    input: JsonValue
    lineage: tuple[str, ...]
    inputs: tuple[RecordedInput, ...]
    children: tuple[tuple[str, str, int], ...] = ()
    """The child incarnations the instance retains now: (site, key, generation)."""

    def key(self) -> tuple[Any, ...]:
        """What makes two replays identical: inputs, configurations and times relative to the first.

        Absolute times differ between instances started at different
        moments; a chart's behaviour depends on time differences only (its
        timers' deadlines are relative to the macrostep that armed them).
        """
        origin = self.inputs[0].now if self.inputs else 0.0
        steps = tuple(
            (
                i.trigger.name if i.trigger is not None else None,
                repr(i.trigger.data) if i.trigger is not None else None,
                i.trigger.invoke_id if i.trigger is not None else None,
                i.trigger.invoke_name if i.trigger is not None else None,
                i.trigger.kind if i.trigger is not None else None,
                i.timer,
                i.now - origin,
                None if i.sent_at is None else i.sent_at - origin,
                i.configuration,
                i.refused,
            )
            for i in self.inputs
        )
        return (self.name, repr(self.input), self.lineage, steps, self.children)


def recorded_run(events: Iterable[Any], children: Sequence[tuple[str, str, int]] = ()) -> RecordedRun:
    """The recorded inputs of one instance, from its stored events (all of them, oldest first).

    ``children`` are the incarnations the instance retains now (its
    activations), which a replay must find waiting to count as able to go on.
    """
    name = ""
    input: JsonValue = None
    lineage: tuple[str, ...] = ()
    inputs: list[RecordedInput] = []
    sent: dict[int, float] = {}
    configuration: tuple[str, ...] = ()
    for event in events:
        if hasattr(event, "configuration_after"):  # a macrostep
            configuration = tuple(event.configuration_after(configuration))
            consumed = getattr(event, "consumed", None)
            inputs.append(
                RecordedInput(
                    event.originator_version,
                    event.trigger,
                    event.timer,
                    event.now,
                    configuration,
                    sent_at=sent.get(consumed) if consumed is not None else None,
                )
            )
        elif hasattr(event, "message") and hasattr(event.message, "sent_at"):  # an acceptance
            sent[event.message.seq] = event.message.sent_at
        elif hasattr(event, "consumed") and hasattr(event, "event") and hasattr(event, "reason"):  # a refusal
            consumed = event.consumed
            inputs.append(
                RecordedInput(
                    event.originator_version,
                    event.event,
                    None,
                    sent.get(consumed, inputs[-1].now if inputs else 0.0),
                    configuration,
                    refused=True,
                    sent_at=sent.get(consumed),
                )
            )
        elif hasattr(event, "mapping") and isinstance(getattr(event, "snapshot", None), dict):  # a migration
            configuration = tuple(event.snapshot.get("configuration", ()))
        elif hasattr(event, "input") and hasattr(event, "ancestry"):  # the instance's creation
            name, input = event.name, event.input
            lineage = tuple(frame.group for frame in event.ancestry)
    return RecordedRun(name, input, lineage, tuple(inputs), tuple(children))


@attrs.frozen
class ReplayVerdict:
    """How a chart takes one instance's recorded inputs."""

    outcome: Replayed
    reason: str
    at: int | None = None
    """The event position (``k``) where the replay diverged, for *diverges*."""
    recorded: tuple[str, ...] = ()
    """The recorded configuration at ``at`` (or at the end)."""
    replayed: tuple[str, ...] = ()
    """The configuration the chart reached at ``at`` (or at the end)."""
    steps: int = 0
    """How many recorded inputs were replayed."""

    def to_json(self) -> dict[str, JsonValue]:
        """The verdict as JSON (keys: see ``docs/reference/cli.md``, ``incarnate check --replay``)."""
        return {
            "replay": self.outcome.value,
            "reason": self.reason,
            "at": self.at,
            "recorded": list(self.recorded),
            "replayed": list(self.replayed),
            "steps": self.steps,
        }


def replay(chart: Chart[Any], run: RecordedRun, *, session: str | None = None) -> ReplayVerdict:
    """Run ``run``'s recorded inputs through ``chart`` from the recorded input, and classify the result.

    Any exception the chart raises while replaying (a step error, a context
    that does not build from the input) makes the verdict *parks*, naming it.
    """
    if not run.inputs:
        return ReplayVerdict(Replayed.SAME, "it has not stepped yet: it starts under the new chart")
    try:
        return _replay(chart, run, session)
    except Exception as error:  # noqa: BLE001 - whatever the chart raises is the verdict
        return ReplayVerdict(
            Replayed.PARKS, f"the new chart raises while replaying: {type(error).__name__}: {error}"
        )


def _diverges(
    k: int, why: str, recorded: tuple[str, ...], replayed: tuple[str, ...], n: int
) -> ReplayVerdict:
    return ReplayVerdict(Replayed.DIVERGES, why, k, recorded, replayed, n)


def _replay(chart: Chart[Any], run: RecordedRun, session: str | None) -> ReplayVerdict:
    first, *rest = run.inputs
    if first.trigger is not None:
        return ReplayVerdict(Replayed.PARKS, "its history does not begin with a first macrostep")
    snapshot, _ = start(chart, input=run.input, now=first.now, lineage=run.lineage, session=session)
    if snapshot.configuration != first.configuration:
        return _diverges(first.version, "it starts elsewhere", first.configuration, snapshot.configuration, 1)
    for n, recorded in enumerate(rest, start=2):
        if snapshot.status is not Status.RUNNING:
            return _diverges(
                recorded.version,
                f"the new chart had finished ({snapshot.status.value}); the recorded instance went on",
                recorded.configuration,
                snapshot.configuration,
                n,
            )
        early = _timer_first(snapshot, recorded)
        if early is not None:
            return _diverges(
                recorded.version,
                f"the new chart's timer {early!r} fires before this input",
                recorded.configuration,
                snapshot.configuration,
                n,
            )
        snapshot, why = _take(chart, snapshot, recorded, session)
        if why:
            return _diverges(recorded.version, why, recorded.configuration, snapshot.configuration, n)
        if snapshot.configuration != recorded.configuration:
            return _diverges(
                recorded.version,
                f"{_label(recorded)} leads elsewhere",
                recorded.configuration,
                snapshot.configuration,
                n,
            )
    last = run.inputs[-1]
    if snapshot.status is not Status.RUNNING:
        return _diverges(
            last.version,
            f"the new chart finishes ({snapshot.status.value}); the recorded instance is still running",
            last.configuration,
            snapshot.configuration,
            len(run.inputs),
        )
    stranded = strands(chart, snapshot, run.children)
    if stranded:
        return ReplayVerdict(
            Replayed.STRANDS, stranded, None, last.configuration, snapshot.configuration, len(run.inputs)
        )
    return ReplayVerdict(
        Replayed.SAME,
        f"all {len(run.inputs)} recorded input(s) lead where they led",
        None,
        last.configuration,
        snapshot.configuration,
        len(run.inputs),
    )


def _label(recorded: RecordedInput) -> str:
    if recorded.timer is not None:
        return f"timer {recorded.timer!r}"
    return f"event {recorded.trigger.name!r}" if recorded.trigger is not None else "the first macrostep"


def _timer_first(snapshot: Snapshot[Any], recorded: RecordedInput) -> str | None:
    """A timer of the new chart that the engine would fire before this recorded message, if any."""
    if recorded.timer is not None or recorded.sent_at is None:
        return None
    for timer in snapshot.timers:
        if timer.deadline <= recorded.now and timer.deadline <= recorded.sent_at:
            return timer.id
    return None


def _take(
    chart: Chart[Any], snapshot: Snapshot[Any], recorded: RecordedInput, session: str | None
) -> tuple[Snapshot[Any], str]:
    """The snapshot after one recorded input, or the one before and why the chart does not take it."""
    if recorded.timer is not None:
        if not any(t.id == recorded.timer for t in snapshot.timers):
            return snapshot, f"the new chart has no timer {recorded.timer!r} armed here"
        after, _ = fire(chart, snapshot, recorded.timer, now=recorded.now, session=session)
        return after, ""
    trigger = recorded.trigger
    if trigger is None:
        return snapshot, "a second first macrostep is recorded here"
    if trigger.kind is EventKind.PLATFORM and trigger.name == "cancel" and trigger.invoke_id is None:
        after, _ = stop(chart, snapshot, now=recorded.now, reason=str(trigger.data), session=session)
        return after, ""
    after, effects = step(chart, snapshot, trigger, now=recorded.now, session=session)
    refused = after is snapshot and len(effects) == 1 and isinstance(effects[0], RejectedEvent)
    if refused and not recorded.refused:
        reason = effects[0].reason if isinstance(effects[0], RejectedEvent) else ""
        return snapshot, f"the new chart refuses event {trigger.name!r}: {reason}"
    if recorded.refused and not refused:
        return after, f"the new chart takes event {trigger.name!r}, which the recorded chart refused"
    return after, ""


def strands(chart: Chart[Any], snapshot: Snapshot[Any], children: Sequence[tuple[str, str, int]]) -> str:
    """Why a running snapshot can never move again, or ``""`` when some transition can still fire.

    What can still arrive: any event from outside (a send), the events of
    the timers armed, and the outcomes of the children it waits for that
    really run (``children``: the instance's retained incarnations). A
    configuration none of whose transitions matches any of those strands.
    """
    running = {(c[0], c[1], c[2]) for c in children}
    outcomes: list[str] = []
    awaited: list[str] = []
    for slot in snapshot.children:
        if slot.status is SlotStatus.RETRYING:
            outcomes += [f"done.invoke.{slot.site}", f"error.invoke.{slot.site}"]
        elif slot.status is SlotStatus.RUNNING:
            if (slot.site, slot.key, slot.generation) in running:
                outcomes += [f"done.invoke.{slot.site}", f"error.invoke.{slot.site}"]
            else:
                member = f"[{slot.key}]" if slot.key else ""
                awaited.append(f"child {slot.site}{member} gen {slot.generation}, which never ran")
    timer_names = {t.id for t in snapshot.timers if t.target is None}
    timer_names.update(t.event.name for t in snapshot.timers if t.target is None)
    active = chart.configuration_indices(snapshot.configuration)
    wanted: list[str] = []
    for state in sorted(active):
        for transition in chart.transitions[state]:
            if transition.timer_id is not None:
                if transition.timer_id in timer_names:
                    return ""
                wanted.append(f"timer {transition.timer_id!r}, which is not armed")
                continue
            for descriptor in transition.events:
                if descriptor == "*":
                    return ""
                if descriptor.startswith(_OUTCOME_PREFIXES):
                    if any(transition.matches(name) for name in outcomes):
                        return ""
                    wanted.append(f"{descriptor}, from no running child")
                elif descriptor.startswith(_PLATFORM_PREFIXES):
                    wanted.append(f"{descriptor}, which nothing raises from here")
                else:
                    return ""  # an event anyone may send
    where = ", ".join(chart.atomic(snapshot.configuration)) or ", ".join(snapshot.configuration)
    if not wanted and not awaited:
        return f"in {where} no transition can ever fire (nothing leaves it)"
    waits = "; ".join(dict.fromkeys([*wanted, *awaited]))
    return f"in {where} it waits for what can never come: {waits}"

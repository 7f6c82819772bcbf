"""Plans: macrosteps whose outcome the configuration, the history and the event name decide alone.

Many macrosteps run no executable content at all: the transitions they take
have no guard and no actions; the states they leave and enter have no
``onexit``/``onentry``, no delayed transition and no site, none is final,
and none is entered through a history default or an ``<initial>`` that
carries content; and no eventless transition waits in the configuration
they reach.
Such a macrostep reads nothing but the snapshot's configuration and history
and the event's name, and changes nothing but the configuration, the
history, the clock and the step count. Its outcome for one
``(configuration, history, event name)`` is therefore computed once, by the
interpreter's ordinary SCXML algorithm, kept on the chart as a :class:`Plan`
and reused; charts are immutable, so a plan never goes stale.

Whether a macrostep qualifies is decided from the chart before it runs
(:func:`plain`) and confirmed from what it did (:func:`settled`); anything
that could make the outcome depend on the context, the event's data, the
clock or the child slots keeps the macrostep on the ordinary path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from statechart._model import StateKind
from statechart._snapshot import HistoryEntry, Snapshot, Status

if TYPE_CHECKING:
    from statechart._chart import Chart
    from statechart._interpreter import Run

C = TypeVar("C")

PlanKey = tuple[tuple[str, ...], tuple[HistoryEntry, ...], str]
"""A snapshot's configuration and history, and the name of the event it takes."""

PLAN_LIMIT = 4096
"""Past this many keys a chart keeps no more plans (its caches stay bounded)."""

_ATOMIC = (StateKind.ATOMIC, StateKind.FINAL)


class Plan:
    """The outcome of one plain macrostep: the configuration it reaches and the history it leaves.

    ``history`` is ``None`` when the macrostep records no history, so that
    the snapshot's own history carries over unchanged. ``ignored`` is true
    when the event took no transition (the step reports it as
    :class:`~statechart.effects.Ignored`).
    """

    __slots__ = ("configuration", "history", "ignored")

    def __init__(
        self,
        configuration: tuple[str, ...],
        history: tuple[HistoryEntry, ...] | None,
        ignored: bool = False,
    ) -> None:
        self.configuration = configuration
        self.history = history
        self.ignored = ignored

    def apply(self, chart: Chart[C], snapshot: Snapshot[C], now: float | None) -> Snapshot[C]:
        """The snapshot after taking this plan's event in ``snapshot`` at ``now``."""
        return Snapshot(
            chart.name,
            Status.RUNNING,
            self.configuration,
            snapshot.history if self.history is None else self.history,
            snapshot.context,
            (),
            snapshot.timers,
            (),
            snapshot.output,
            snapshot.time if now is None else now,
            snapshot.steps + 1,
            snapshot.sequence,
            snapshot.next_generation,
            snapshot.lineage,
        )


def plain(run: Run, name: str) -> bool:
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
    if any(t.actions for t in history_content.values()):
        return False
    return not chart.entering_works(entered)


def settled(run: Run, snapshot: Snapshot[Any]) -> bool:
    """Whether ``run``, a macrostep :func:`plain` admitted, changed only what a plan holds.

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


def remember(chart: Chart[Any], key: PlanKey, plan: Plan | None) -> None:
    """Keep ``plan`` for ``key`` (``None``: that macrostep is not plain), unless the chart holds enough."""
    plans = chart.plans
    if plans is not None and len(plans) < PLAN_LIMIT:
        plans.setdefault(key, plan)

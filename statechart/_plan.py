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

Whether a macrostep qualifies is decided by the interpreter, which alone
knows its working copy: from the chart before it runs (``plain`` in
:mod:`statechart._interpreter`) and confirmed from what it did
(``settled``); anything that could make the outcome depend on the context,
the event's data, the clock or the child slots keeps the macrostep on the
ordinary path. This module holds what the chart keeps: the plans
themselves, below the chart and the interpreter that both use them.
"""

from __future__ import annotations

from typing import TypeVar

from statechart._snapshot import HistoryEntry, Snapshot, Status

C = TypeVar("C")

PlanKey = tuple[tuple[str, ...], tuple[HistoryEntry, ...], str]
"""A snapshot's configuration and history, and the name of the event it takes."""

PLAN_LIMIT = 4096
"""Past this many keys a chart keeps no more plans (its caches stay bounded)."""


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

    def apply(self, snapshot: Snapshot[C], now: float | None) -> Snapshot[C]:
        """The snapshot after taking this plan's event in ``snapshot`` (of the plan's chart) at ``now``."""
        return Snapshot(
            snapshot.chart,
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


def remember(plans: dict[PlanKey, Plan | None] | None, key: PlanKey, plan: Plan | None) -> None:
    """Keep ``plan`` for ``key`` (``None``: that macrostep is not plain) in a chart's ``plans``.

    Nothing is kept for a chart without plans (``None``) or once it holds :data:`PLAN_LIMIT`.
    """
    if plans is not None and len(plans) < PLAN_LIMIT:
        plans.setdefault(key, plan)

"""Does a decoded snapshot belong to this chart? (Revalidation after a chart change.)

A snapshot decodes structurally whatever the chart's states are (state ids
are strings). Before a stored snapshot is trusted under the registered
chart, :func:`check_snapshot` confirms that every state, history and site it
names exists, and that the configuration is legal for the chart.
"""

from __future__ import annotations

from typing import TypeVar

from statechart import errors
from statechart._chart import ROOT, Chart
from statechart._model import StateKind
from statechart._snapshot import Snapshot, Status

C = TypeVar("C")


def snapshot_problems(chart: Chart[C], snapshot: Snapshot[C]) -> list[str]:
    """Every way ``snapshot`` does not fit ``chart`` (empty when it fits)."""
    problems: list[str] = []
    if snapshot.chart != chart.name:
        problems.append(f"the snapshot belongs to chart {snapshot.chart!r}")
    if not isinstance(snapshot.context, chart.context_type):
        problems.append(
            f"the context is a {type(snapshot.context).__name__}, not {chart.context_type.__name__}"
        )
    index = chart.index
    unknown = [s for s in snapshot.configuration if s not in index]
    if unknown:
        problems.append(f"the configuration names states the chart no longer has: {unknown}")
    active = {index[s] for s in snapshot.configuration if s in index}
    if not unknown and snapshot.status is Status.RUNNING:
        problems.extend(_configuration_problems(chart, active))
    for entry in snapshot.history:
        if entry.id not in index or chart.kind[index[entry.id]] is not StateKind.HISTORY:
            problems.append(f"history {entry.id!r} is not a history state of the chart")
        gone = [s for s in entry.states if s not in index]
        if gone:
            problems.append(f"history {entry.id!r} remembers states the chart no longer has: {gone}")
    for slot in snapshot.children:
        site = chart.site_by_id.get(slot.site)
        if site is None:
            problems.append(f"child slot {slot.site}[{slot.key}] names a site the chart no longer has")
            continue
        state = chart.ids[chart.site_state[slot.site]]
        if state != slot.state:
            problems.append(f"site {slot.site!r} moved from state {slot.state!r} to {state!r}")
        elif snapshot.status is Status.RUNNING and index[state] not in active:
            problems.append(f"child slot {slot.site}[{slot.key}] belongs to inactive state {state!r}")
    return problems


def _configuration_problems(chart: Chart[C], active: set[int]) -> list[str]:
    problems: list[str] = []
    if not active:
        return ["the configuration is empty"]
    for s in sorted(active):
        kind = chart.kind[s]
        name = chart.ids[s]
        if kind is StateKind.HISTORY:
            problems.append(f"history state {name!r} is active")
            continue
        parent = chart.parent[s]
        if parent != ROOT and parent not in active:
            problems.append(f"state {name!r} is active but its parent {chart.ids[parent]!r} is not")
        children = [c for c in chart.children[s] if c in active]
        if kind is StateKind.COMPOUND and len(children) != 1:
            problems.append(f"compound state {name!r} has {len(children)} active children, not one")
        if kind is StateKind.PARALLEL and len(children) != len(chart.children[s]):
            problems.append(f"parallel state {name!r} does not have every region active")
    top = [s for s in chart.children[ROOT] if s in active]
    if len(top) != 1:
        problems.append(f"{len(top)} top-level states are active, not one")
    return problems


def check_snapshot(chart: Chart[C], snapshot: Snapshot[C]) -> None:
    """Raise :class:`~statechart.errors.SnapshotMismatch` unless ``snapshot`` fits ``chart``."""
    problems = snapshot_problems(chart, snapshot)
    if problems:
        raise errors.SnapshotMismatch(chart.name, "snapshot", "; ".join(problems))

"""A registry of charts and task names, validated as a whole.

Sites name child charts and tasks by stable names. The registry checks
that every name resolves and that every site on a cycle of charts (direct
or mutual recursion) declares a recursive group and ``max_depth``.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from statechart import errors
from statechart._chart import Chart

_REGISTRY_OF: weakref.WeakKeyDictionary[Chart[Any], weakref.ref[Registry]] = weakref.WeakKeyDictionary()
"""The registry each chart was last added to, where its sites find their child charts."""


def registered_chart(chart: Chart[Any], name: str) -> Chart[Any] | None:
    """The chart named ``name`` in the registry ``chart`` was last added to (None: no such registry or chart).

    Sites use it to check their children's inputs against the child charts'
    contexts. A chart in no registry births children unchecked; such a child
    fails at its own start with the same error instead.
    """
    link = _REGISTRY_OF.get(chart)
    registry = link() if link is not None else None
    if registry is None or name not in registry:
        return None
    return registry.chart(name)


class Registry:
    """Charts by name, plus the names of tasks a site may invoke."""

    def __init__(self, charts: Iterable[Chart[object]] = (), tasks: Iterable[str] = ()) -> None:
        self._charts: dict[str, Chart[object]] = {}
        self._tasks: set[str] = set()
        for chart in charts:
            self.add(chart)
        for task in tasks:
            self.add_task(task)

    def add(self, chart: Chart[object]) -> None:
        """Register ``chart`` under its name; a different chart of the same name is refused."""
        existing = self._charts.get(chart.name)
        if existing is not None and existing is not chart and existing.fingerprint != chart.fingerprint:
            raise errors.ChartInvalid(
                f"chart {chart.name!r} is registered twice",
                [
                    errors.AmbiguousId(
                        chart.name,
                        "the registry",
                        f"a different chart named {chart.name!r} is already registered "
                        f"(fingerprint {existing.fingerprint[:12]} vs {chart.fingerprint[:12]})",
                        "give each chart its own name",
                    )
                ],
            )
        self._charts[chart.name] = chart
        _REGISTRY_OF[chart] = weakref.ref(self)
        for companion in chart.companions:
            if self._charts.get(companion.name) is not companion:
                self.add(companion)

    def add_task(self, name: str) -> None:
        """Declare a task name that sites may invoke."""
        self._tasks.add(name)

    def chart(self, name: str) -> Chart[object]:
        """The chart registered as ``name``."""
        try:
            return self._charts[name]
        except KeyError:
            raise errors.UnknownChart("chart", name, tuple(self._charts)) from None

    def has_task(self, name: str) -> bool:
        """Whether ``name`` is a declared task."""
        return name in self._tasks

    def __contains__(self, name: object) -> bool:
        return name in self._charts

    def __iter__(self) -> Iterator[Chart[object]]:
        return iter(self._charts.values())

    @property
    def names(self) -> tuple[str, ...]:
        """Registered chart names."""
        return tuple(self._charts)

    @property
    def tasks(self) -> tuple[str, ...]:
        """Declared task names."""
        return tuple(sorted(self._tasks))

    def problems(self, *, tasks: bool = True) -> list[errors.DefinitionError]:
        """Every cross-chart problem: unregistered children and tasks, unbounded recursion.

        With ``tasks=False``, a task a site invokes need not be declared (a
        registry of an engine that runs no work).
        """
        found: list[errors.DefinitionError] = []
        for chart in self._charts.values():
            for site, state in chart.child_charts():
                where = f"site {site.id!r} on state {state!r}"
                for name in site.chart_names:
                    if name not in self._charts:
                        found.append(
                            errors.UnregisteredChart(
                                chart.name,
                                where,
                                f"child chart {name!r} is not registered",
                                f"register it (known charts: {sorted(self._charts)})",
                            )
                        )
                if tasks and site.task is not None and site.task not in self._tasks:
                    found.append(
                        errors.UnregisteredChart(
                            chart.name,
                            where,
                            f"task {site.task!r} is not registered",
                            f"register it (known tasks: {sorted(self._tasks)})",
                        )
                    )
        cyclic = self._cyclic_charts()
        for chart in self._charts.values():
            for site, state in chart.child_charts():
                for name in site.chart_names:
                    if name not in self._charts:
                        continue
                    recursive = cyclic.get(name) is not None and cyclic.get(name) == cyclic.get(chart.name)
                    if recursive and (site.group is None or site.max_depth is None):
                        found.append(
                            errors.UnboundedRecursion(
                                chart.name,
                                f"site {site.id!r} on state {state!r}",
                                f"it invokes {name!r}, which leads back to {chart.name!r}, "
                                "with no recursion bound",
                                "declare invoke(..., group='<name>', max_depth=N)",
                            )
                        )
        return found

    def validate(self, *, tasks: bool = True) -> None:
        """Raise :class:`~statechart.errors.ChartInvalid` listing every problem :meth:`problems` finds."""
        found = self.problems(tasks=tasks)
        if found:
            raise errors.ChartInvalid(f"the registry has {len(found)} problem(s)", found)

    def _cyclic_charts(self) -> dict[str, int]:
        """Charts on a cycle, mapped to their strongly connected component (Tarjan)."""
        edges: dict[str, list[str]] = {
            name: [child for s, _ in chart.child_charts() for child in s.chart_names if child in self._charts]
            for name, chart in self._charts.items()
        }
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        component: dict[str, int] = {}
        counter = [0, 0]

        def visit(node: str) -> None:
            index[node] = low[node] = counter[0]
            counter[0] += 1
            stack.append(node)
            on_stack.add(node)
            for nxt in edges[node]:
                if nxt not in index:
                    visit(nxt)
                    low[node] = min(low[node], low[nxt])
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if low[node] == index[node]:
                members = []
                while True:
                    item = stack.pop()
                    on_stack.discard(item)
                    members.append(item)
                    if item == node:
                        break
                if len(members) > 1 or node in edges[node]:
                    for item in members:
                        component[item] = counter[1]
                    counter[1] += 1

        for name in edges:
            if name not in index:
                visit(name)
        return component

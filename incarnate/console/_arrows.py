"""The transitions of a chart for the console: arrows over the state boxes, and rows for a table.

Each transition of a :class:`~statechart.Shape` with a target becomes a
curved arrow from its source box to its target box, labelled with its
trigger (``event``, ``after 5s`` or ``always``) and ``[guard]`` when it has
one; the guard's name is known only from a registered chart (a recorded
shape says only that there is a guard). Every label is escaped.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from html import escape
from typing import Any

from statechart import Chart
from statechart.shape import Shape, TransitionShape

_GUARD_WIDTH = 40


def guard_names(chart: Chart[Any] | None) -> dict[tuple[str, int], str]:
    """The name of each guarded transition's guard, by (source state, position), from a registered chart."""
    if chart is None:
        return {}
    names: dict[tuple[str, int], str] = {}
    for t in chart.all_transitions:
        if t.guard is None:
            continue
        name = str(getattr(t.guard, "__name__", type(t.guard).__name__))
        state = getattr(t.guard, "state", None)
        if type(t.guard).__name__ == "InState" and state is not None:
            name = f"in({state})"
        if len(name) > _GUARD_WIDTH:
            name = name[: _GUARD_WIDTH - 1].rstrip() + "…"
        names[(chart.ids[t.source], t.position)] = name
    return names


def trigger(t: TransitionShape) -> str:
    """What fires the transition: its events, ``after Ns`` or ``always``."""
    if t.delay is not None:
        return f"after {t.delay:g}s"
    return " ".join(t.events) if t.events else "always"


def label(t: TransitionShape, guards: Mapping[tuple[str, int], str]) -> str:
    """``trigger [guard]``."""
    if not t.guarded:
        return trigger(t)
    return f"{trigger(t)} [{guards.get((t.source, t.position), 'guard')}]"


def rows(shape: Shape, guards: Mapping[tuple[str, int], str]) -> list[dict[str, str]]:
    """One row per transition: source, event, guard and target (``-`` when targetless)."""
    return [
        {
            "source": t.source,
            "event": trigger(t),
            "guard": guards.get((t.source, t.position), "guard") if t.guarded else "",
            "target": ", ".join(t.targets) or "- (targetless)",
        }
        for t in shape.transitions
    ]


def arrows(
    shape: Shape,
    places: Mapping[str, tuple[float, float, float, float]],
    guards: Mapping[tuple[str, int], str],
) -> Iterator[str]:
    """SVG for each transition with a target: a curved arrow and its label, after a marker definition."""
    yield (
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#1c7ed6"/>'
        "</marker></defs>"
    )
    for n, t in enumerate(shape.transitions):
        source = places.get(t.source)
        for target_id in t.targets:
            target = places.get(target_id)
            if source is None or target is None:
                continue
            yield _arrow(source, target, label(t, guards), n, t.source == target_id)


def _arrow(
    source: tuple[float, float, float, float],
    target: tuple[float, float, float, float],
    text: str,
    n: int,
    itself: bool,
) -> str:
    sx, sy, sw, sh = source
    tx, ty, tw, th = target
    bend = 18 + 7 * (n % 4)
    if itself:
        x1, y1 = sx + sw * 0.6, sy
        x2, y2 = sx + sw * 0.8, sy
        cx, cy = (x1 + x2) / 2, sy - bend
    else:
        x1, y1 = sx + sw / 2, sy + sh / 2
        x2, y2 = tx + tw / 2, ty + th / 2
        # leave the source and reach the target on the sides that face each other
        if abs(x2 - x1) >= abs(y2 - y1):
            x1, x2 = (sx + sw, tx) if x2 > x1 else (sx, tx + tw)
        else:
            y1, y2 = (sy + sh, ty) if y2 > y1 else (sy, ty + th)
        cx, cy = (x1 + x2) / 2, (y1 + y2) / 2 - bend
    quoted = escape(text)
    return (
        f'<g class="transition"><title>{quoted}</title>'
        f'<path d="M {x1:.1f} {y1:.1f} Q {cx:.1f} {cy:.1f} {x2:.1f} {y2:.1f}" fill="none" '
        f'stroke="#1c7ed6" stroke-width="1.2" marker-end="url(#arrow)"/>'
        f'<text x="{cx:.1f}" y="{cy + 4:.1f}" text-anchor="middle" class="transition-label" '
        f'font-size="10" fill="#1864ab">{quoted}</text></g>'
    )

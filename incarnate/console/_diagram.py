"""A chart's states as an SVG picture of nested boxes and transition arrows, laid out from the chart.

The picture is drawn from a :class:`~statechart.Shape` (a registered chart's
``shape``, or the shape an engine recorded with the instances), so a console
opened without ``--charts`` still draws what the store holds. A compound
state is a box holding its children in rows; a parallel state holds its
regions side by side, separated by dashed lines; a final state has a double
border. Active states get the CSS class ``active`` and a thicker, coloured
border drawn by presentation attributes, so the highlight shows without the
style sheet and without JavaScript. Nothing here reads text as markup: every
label is escaped.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from html import escape

import attrs

from incarnate.console._arrows import arrows
from statechart.shape import Shape

_CHAR = 7.2
"""Approximate width of one character of the 12px monospace label font."""
_LEAF_HEIGHT = 34
_HEADER = 22
_PAD = 10
_GAP = 12
_ROW_WIDTH = 720
"""Children wrap to a new row once a row is this wide."""


@attrs.frozen
class _Box:
    id: str
    kind: str
    width: float
    height: float
    children: tuple[tuple[float, float, _Box], ...] = ()
    """Each child with its offset from this box's top-left corner."""


def _label_width(text: str) -> float:
    return len(text) * _CHAR + 2 * _PAD


def _layout(
    state: str, kind: str, children: Mapping[str | None, list[tuple[str, str]]], extra: float
) -> _Box:
    """The box of ``state`` and its descendants; ``extra`` is room for a count beside each label."""
    kids = [_layout(child, child_kind, children, extra) for child, child_kind in children.get(state, [])]
    if not kids:
        width = max(84.0, _label_width(state) + extra + (8 if kind == "final" else 0))
        return _Box(state, kind, width, _LEAF_HEIGHT)
    return _arrange(state, kind, kids, extra)


def _arrange(state: str, kind: str, kids: list[_Box], extra: float = 0.0) -> _Box:
    """Place ``kids`` in rows inside a box for ``state`` (regions of a parallel state in one row)."""
    placed: list[tuple[float, float, _Box]] = []
    x, y, row_height, widest = float(_PAD), float(_HEADER + _PAD), 0.0, 0.0
    for kid in kids:
        if kind != "parallel" and x > _PAD and x + kid.width > _ROW_WIDTH:
            x, y, row_height = float(_PAD), y + row_height + _GAP, 0.0
        placed.append((x, y, kid))
        x += kid.width + _GAP
        row_height = max(row_height, kid.height)
        widest = max(widest, x - _GAP + _PAD)
    width = max(widest, _label_width(state) + extra + 16)
    return _Box(state, kind, width, y + row_height + _PAD, tuple(placed))


def _tree(shape: Shape) -> dict[str | None, list[tuple[str, str]]]:
    children: dict[str | None, list[tuple[str, str]]] = {}
    for state in shape.states:
        if state.kind != "history":
            children.setdefault(state.parent, []).append((state.id, state.kind))
    return children


def _draw(
    box: _Box,
    x: float,
    y: float,
    active: Collection[str],
    counts: Mapping[str, int] | None,
    out: list[str],
    places: dict[str, tuple[float, float, float, float]],
) -> None:
    places[box.id] = (x, y, box.width, box.height)
    on = box.id in active
    classes = f"state {box.kind}" + (" active" if on else "")
    stroke = ' stroke="#d9480f" stroke-width="3"' if on else ' stroke="#495057" stroke-width="1"'
    fill = "#fff4e6" if on else ("#f8f9fa" if box.children else "#ffffff")
    ident = escape(box.id, quote=True)
    out.append(f'<g class="{classes}" data-state="{ident}">')
    out.append(f"<title>{ident} ({escape(box.kind)}){' — active' if on else ''}</title>")
    out.append(
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{box.width:.1f}" height="{box.height:.1f}" '
        f'rx="8" fill="{fill}"{stroke}/>'
    )
    if box.kind == "final":
        out.append(
            f'<rect x="{x + 4:.1f}" y="{y + 4:.1f}" width="{box.width - 8:.1f}" '
            f'height="{box.height - 8:.1f}" rx="5" fill="none" stroke="#495057"/>'
        )
    text_y = y + (16 if box.children else box.height / 2 + 4)
    out.append(f'<text x="{x + _PAD:.1f}" y="{text_y:.1f}" class="label">{ident}</text>')
    if counts is not None:
        count = counts.get(box.id, 0)
        out.append(
            f'<text x="{x + box.width - 10:.1f}" y="{text_y:.1f}" text-anchor="end" '
            f'class="count{" some" if count else ""}">{count}</text>'
        )
    for n, (dx, dy, kid) in enumerate(box.children):
        if box.kind == "parallel" and n > 0:
            line_x = x + dx - _GAP / 2
            out.append(
                f'<line x1="{line_x:.1f}" y1="{y + _HEADER:.1f}" x2="{line_x:.1f}" '
                f'y2="{y + box.height - 4:.1f}" stroke="#868e96" stroke-dasharray="5 4"/>'
            )
        _draw(kid, x + dx, y + dy, active, counts, out, places)
    out.append("</g>")


def diagram_svg(
    shape: Shape,
    active: Collection[str] = (),
    *,
    counts: Mapping[str, int] | None = None,
    guards: Mapping[tuple[str, int], str] | None = None,
) -> str:
    """The states of ``shape`` and its transitions as an SVG document fragment; ``active`` states highlighted.

    With ``counts``, each state shows how many instances are in it. Each
    transition is an arrow from its source to its target labelled
    ``event [guard]``; ``guards`` names the guard of a transition by its
    (source, position) (see :func:`~incarnate.console._arrows.guard_names`;
    without a name a guarded transition reads ``[guard]``).
    """
    children = _tree(shape)
    extra = 0.0 if counts is None else 5 * _CHAR
    top = [_layout(state, kind, children, extra) for state, kind in children.get(None, [])]
    root = _arrange(shape.chart, "root", top)
    out: list[str] = []
    places: dict[str, tuple[float, float, float, float]] = {}
    for dx, dy, box in root.children:
        _draw(box, dx, dy - _HEADER, set(active), counts, out, places)
    out.extend(arrows(shape, places, guards or {}))
    width, height = root.width, root.height - _HEADER
    title = escape(shape.chart)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="diagram" role="img" '
        f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'font-family="monospace" font-size="12">'
        f"<title>states of chart {title}</title>" + "".join(out) + "</svg>"
    )

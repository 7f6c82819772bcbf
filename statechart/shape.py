"""Chart shapes: the structure of a chart as stored snapshots depend on it, and how two versions compare.

A :class:`Shape` lists a chart's states, transitions and sites;
:func:`compare` tells whether snapshots stored under one shape still fit
another (a :class:`Compatibility`), and names what was removed or changed.
"""

from statechart._shape import Compatibility, Shape, SiteShape, StateShape, TransitionShape, compare

__all__ = [
    "Shape",
    "StateShape",
    "TransitionShape",
    "SiteShape",
    "Compatibility",
    "compare",
]

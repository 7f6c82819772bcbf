"""The structural shape of a chart, its fingerprint, and compatibility checks.

A shape lists what a stored snapshot depends on: the states (id, kind,
parent, initial, history depth), the transitions (source, position, events,
targets) and the child sites. The fingerprint is a hash of the shape; two
charts with the same fingerprint decode each other's snapshots. When the
fingerprints differ, :func:`compare` tells whether old snapshots still decode
(additive change) or not (breaking change).
"""

from __future__ import annotations

import hashlib
import json

import attrs


@attrs.frozen
class StateShape:
    """One state as it matters to stored snapshots."""

    id: str
    kind: str
    parent: str | None
    initial: tuple[str, ...] = ()
    deep: bool = False


@attrs.frozen
class TransitionShape:
    """One transition: its source, position among the source's transitions, and route."""

    source: str
    position: int
    id: str | None
    events: tuple[str, ...]
    targets: tuple[str, ...]
    internal: bool
    delay: float | None
    guarded: bool


@attrs.frozen
class SiteShape:
    """One child site."""

    id: str
    state: str
    chart: str | None
    task: str | None
    fanout: bool
    group: str | None
    max_depth: int | None


@attrs.frozen
class Shape:
    """The structure of one chart."""

    chart: str
    states: tuple[StateShape, ...]
    transitions: tuple[TransitionShape, ...]
    sites: tuple[SiteShape, ...]

    def canonical(self) -> str:
        """A canonical JSON text of the shape (sorted keys, no whitespace)."""
        return json.dumps(attrs.asdict(self), sort_keys=True, separators=(",", ":"))

    @property
    def fingerprint(self) -> str:
        """A SHA-256 hex digest of the canonical shape."""
        return hashlib.sha256(self.canonical().encode()).hexdigest()


@attrs.frozen
class Compatibility:
    """The result of comparing a stored chart shape with the registered one."""

    breaking: tuple[str, ...]
    additive: tuple[str, ...]

    @property
    def compatible(self) -> bool:
        """Whether snapshots of the old shape decode under the new one."""
        return not self.breaking


def compare(old: Shape, new: Shape) -> Compatibility:
    """Compare two shapes of one chart.

    Breaking: a state removed or changed in kind, parent or history depth, a
    site removed or moved, or its child chart, task or fan-out changed.
    Additive: new states, sites and any transition change (snapshots hold no
    transitions, so they still decode).
    """
    breaking: list[str] = []
    additive: list[str] = []
    new_states = {s.id: s for s in new.states}
    old_states = {s.id: s for s in old.states}
    for state in old.states:
        now = new_states.get(state.id)
        if now is None:
            breaking.append(f"state {state.id!r} was removed")
            continue
        for field in ("kind", "parent", "deep"):
            before, after = getattr(state, field), getattr(now, field)
            if before != after:
                breaking.append(f"state {state.id!r} changed {field} from {before!r} to {after!r}")
        if state.initial != now.initial:
            additive.append(f"state {state.id!r} changed initial from {state.initial} to {now.initial}")
    for state in new.states:
        if state.id not in old_states:
            additive.append(f"state {state.id!r} was added")
    new_sites = {s.id: s for s in new.sites}
    old_sites = {s.id: s for s in old.sites}
    for site in old.sites:
        now_site = new_sites.get(site.id)
        if now_site is None:
            breaking.append(f"site {site.id!r} was removed")
            continue
        for field in ("state", "chart", "task", "fanout"):
            before, after = getattr(site, field), getattr(now_site, field)
            if before != after:
                breaking.append(f"site {site.id!r} changed {field} from {before!r} to {after!r}")
        for field in ("group", "max_depth"):
            before, after = getattr(site, field), getattr(now_site, field)
            if before != after:
                additive.append(f"site {site.id!r} changed {field} from {before!r} to {after!r}")
    for site in new.sites:
        if site.id not in old_sites:
            additive.append(f"site {site.id!r} was added")
    if old.transitions != new.transitions:
        additive.append(f"transitions changed ({len(old.transitions)} before, {len(new.transitions)} now)")
    return Compatibility(tuple(breaking), tuple(additive))

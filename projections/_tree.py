"""Call trees and timelines: read-only views of instances and their events."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

import attrs

from aggregates import Instance, InstanceStatus, Ref
from statechart.effects import ActionFailed


@attrs.frozen
class TreeNode:
    """One instance in a call tree, with the incarnation facts that identify it."""

    id: UUID
    kind: str
    name: str
    status: InstanceStatus
    ref: Ref | None
    attempt: int
    depth: int
    """How far below the tree's root this node is (the root is 0, its children 1)."""
    configuration: tuple[str, ...]
    children: tuple[TreeNode, ...] = ()
    missing: tuple[Ref, ...] = ()
    recursion: int = 0
    """The recursion depth the site's ``max_depth`` bounds: the ancestry frames of recursive births."""

    def walk(self) -> Iterable[TreeNode]:
        """This node and its descendants, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()

    @property
    def incarnation(self) -> tuple[Ref | None, int]:
        """What must not change across a restart: the Ref (with its generation) and the attempt."""
        return (self.ref, self.attempt)


def born(events: Iterable[Any]) -> list[UUID]:
    """The ids of the children an instance's history births, in order: one per ``Birth`` and ``ChildResume``.

    Finished children included: this is every incarnation the instance
    ever decided, read from its own events (no listing of the store).
    """
    return [
        event.facts.child_id for event in events if isinstance(event, (Instance.Birth, Instance.ChildResume))
    ]


def call_tree(
    load: Callable[[UUID], Instance | None],
    root: UUID,
    *,
    configuration: Callable[[Instance], tuple[str, ...]] | None = None,
    children: Callable[[Instance], Iterable[UUID]] | None = None,
) -> TreeNode:
    """The call tree under ``root``: each instance and the incarnations it retains.

    By default a node's children are the incarnations it retains (its
    activations); ``children`` may list others too, such as finished ones.
    A walk visits each id once, so a malformed record naming an ancestor
    cannot loop it.
    """
    seen: set[UUID] = set()

    def build(instance_id: UUID, depth: int) -> TreeNode | None:
        if instance_id in seen:
            return None
        seen.add(instance_id)
        instance = load(instance_id)
        if instance is None:
            return None
        record = instance.record
        kids: list[TreeNode] = []
        missing: list[Ref] = []
        for activation in record.activations:
            node = build(activation.child_id, depth + 1)
            if node is None:
                if activation.child_id not in seen or load(activation.child_id) is None:
                    missing.append(activation.ref)
            else:
                kids.append(node)
        for child_id in children(instance) if children is not None else ():
            node = build(child_id, depth + 1)
            if node is not None:
                kids.append(node)
        birth = record.birth
        return TreeNode(
            instance.id,
            record.kind.value,
            record.name,
            record.status,
            record.parent,
            birth.attempt if birth is not None else 1,
            depth,
            configuration(instance) if configuration is not None else (),
            tuple(kids),
            tuple(missing),
            len(record.ancestry),
        )

    node = build(root, 0)
    if node is None:
        raise LookupError(f"no instance {root}")
    return node


def render_tree(node: TreeNode, *, indent: str = "") -> str:
    """A call tree as indented text, one instance per line."""
    lines: list[str] = []

    def line(n: TreeNode, prefix: str) -> None:
        where = f" in {', '.join(n.configuration)}" if n.configuration else ""
        if n.ref is None:
            ident = f"root {str(n.id)[:8]}"
        else:
            member = f"[{n.ref.key}]" if n.ref.key else ""
            ident = f"{n.ref.site}{member} gen {n.ref.generation} attempt {n.attempt} id {str(n.id)[:8]}"
        lines.append(f"{prefix}{n.kind} {n.name!r} {ident}: {n.status.value}{where}")
        for ref in n.missing:
            lines.append(f"{prefix}  ! missing child {ref}")
        for child in n.children:
            line(child, prefix + "  ")

    line(node, indent)
    return "\n".join(lines)


@attrs.frozen
class TimelineEntry:
    """One stored event of one instance, summarised."""

    at: datetime
    instance: UUID
    version: int
    event: str
    summary: str


def _summary(event: Any, configurations: dict[UUID, tuple[str, ...]]) -> str:
    name = type(event).__name__
    if name == "Started":
        parent = ""
        if event.parent is not None:
            member = f"[{event.parent.key}]" if event.parent.key else ""
            parent = f" as {event.parent.site}{member} gen {event.parent.generation}"
        return f"started {event.kind.value} {event.name!r}{parent}"
    if name == "Stepped":
        if event.timer:
            trigger = f"timer {event.timer}"
        elif event.trigger is None:
            trigger = "initial macrostep"
        else:
            trigger = f"event {event.trigger.name!r}"
        configuration = event.configuration_after(configurations.get(event.originator_id, ()))
        configurations[event.originator_id] = configuration
        summary = f"{trigger} -> {', '.join(configuration)}"
        received = getattr(event, "received", None)
        if received is not None:
            summary = f"accepted and {summary} (#{received.seq})"
        for ref, settlement in getattr(event, "settled", ()):
            summary += f"; settled {ref.site}[{ref.key}] gen {ref.generation}: {settlement.value}"
        return summary
    if name in ("Birth", "ChildResume"):
        facts = event.facts
        return f"{name} {facts.ref.site}[{facts.ref.key}] gen {facts.ref.generation} attempt {facts.attempt}"
    if name == "ChildRetry":
        ref = event.ref
        return f"ChildRetry {ref.site}[{ref.key}] gen {ref.generation} -> attempt {event.attempt}"
    if name == "ChildSettled":
        ref = event.ref
        return f"ChildSettled {ref.site}[{ref.key}] gen {ref.generation}: {event.settlement.value}"
    if name == "Accepted":
        return f"accepted {event.message.event.name!r} (#{event.message.seq})"
    if name == "EvidenceRejected":
        return f"rejected {event.event.name!r}: {event.reason}"
    if name == "Completed":
        return f"completed with {event.output!r}"
    if name == "Failed":
        return f"failed: {event.error!r}"
    if name == "CancelRequested":
        return f"cancel requested: {event.reason}"
    if name == "Cancelled":
        return f"cancelled: {event.reason}"
    if name == "Claimed":
        return f"claimed by {event.owner} (incarnation {event.incarnation}): {event.reason}"
    if name == "Orphaned":
        return f"orphaned: {event.reason}"
    if name == "Forked":
        return f"forked from {event.source} at version {event.version}"
    if name == "Redriven":
        return f"redriven ({event.was} before) from version {event.version}: {event.reason}"
    if name == "IncidentRecorded":
        return f"incident {event.incident.kind}: {event.incident.detail}"
    return name


def timeline(events: Iterable[Any]) -> list[TimelineEntry]:
    """Stored events (of one or several instances) as a timeline, in the order given.

    A macrostep in which an action, guard or mapper raised is followed by one
    ``error.execution`` entry per failure, naming the state (and transition),
    the action and the exception, so that a failure the chart absorbed is
    still visible.
    """
    entries: list[TimelineEntry] = []
    configurations: dict[UUID, tuple[str, ...]] = {}
    for e in events:
        if type(e).__name__ == "Migrated":
            configurations[e.originator_id] = tuple(e.snapshot.get("configuration", ()))
        entries.append(
            TimelineEntry(
                e.timestamp,
                e.originator_id,
                e.originator_version,
                type(e).__name__,
                _summary(e, configurations),
            )
        )
        if type(e).__name__ == "Stepped":
            for effect in e.effects:
                if isinstance(effect, ActionFailed):
                    entries.append(
                        TimelineEntry(
                            e.timestamp,
                            e.originator_id,
                            e.originator_version,
                            "error.execution",
                            effect.describe(),
                        )
                    )
    return entries


def render_timeline(entries: Iterable[TimelineEntry], *, names: dict[UUID, str] | None = None) -> str:
    """A timeline as text, one event per line, times relative to the first."""
    rows = list(entries)
    if not rows:
        return "(no events)"
    first = rows[0].at
    out = []
    for entry in rows:
        who = (names or {}).get(entry.instance, str(entry.instance)[:8])
        seconds = (entry.at - first).total_seconds()
        out.append(f"{seconds:8.3f}s  {who:<22} v{entry.version:<3} {entry.summary}")
    return "\n".join(out)

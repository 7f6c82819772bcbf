"""Identity of child incarnations: Ref, ancestry frames and birth facts.

A child's instance id is derived from its :class:`Ref` with ``uuid5``, so
the same decision always names the same child, wherever and however often
it is enacted.
"""

from __future__ import annotations

import enum
import functools
from hashlib import sha1
from uuid import UUID

import attrs

from statechart import JsonValue
from statechart.event import InvokeId

NAMESPACE = UUID("6f1c1d1e-6d0b-5b8e-9a57-1c5a0e3c2f10")
"""The uuid5 namespace of child instance ids."""


_NAMESPACE_BYTES = NAMESPACE.bytes


@functools.lru_cache(maxsize=16_384)
def _child_id(parent: UUID, site: str, key: str, generation: int) -> UUID:
    """``uuid5`` of a Ref's parts, remembered for the refs met lately (a recovery derives each about
    four times: to read, walk, re-attach and arm the child).

    Computed as ``uuid.uuid5(NAMESPACE, name)`` computes it, without the
    import statement that function runs on every call (a third of its time
    on an engine's worker threads).
    """
    name = f"{parent}/{site}/{key}/{generation}"
    return UUID(bytes=sha1(_NAMESPACE_BYTES + name.encode()).digest()[:16], version=5)


@attrs.frozen
class Ref:
    """One incarnation of one child slot: (parent id, site, member key, generation)."""

    parent: UUID
    site: str
    key: str
    generation: int

    @property
    def child_id(self) -> UUID:
        """The child's instance id, derived deterministically from the Ref."""
        return _child_id(self.parent, self.site, self.key, self.generation)

    @property
    def invoke_id(self) -> InvokeId:
        """The parent interpreter's name for this incarnation."""
        return InvokeId(self.site, self.key, self.generation)

    def __str__(self) -> str:
        member = f"[{self.key}]" if self.key else ""
        return f"{self.parent}/{self.site}{member}#{self.generation}"


@attrs.frozen
class AncestryFrame:
    """One recursive birth on the path from the root: the group and the Ref it used."""

    group: str
    ref: Ref


class InstanceKind(enum.Enum):
    """What an instance runs: a chart, or a task (a registered callable)."""

    CHART = "chart"
    TASK = "task"


class Provenance(enum.Enum):
    """How an incarnation came to be."""

    BIRTH = "birth"
    """The first incarnation of its slot (a new key, or the site's state entered)."""
    RETRY = "retry"
    """A fresh incarnation after a failed attempt (``ChildRetry`` then ``ChildResume``)."""


@attrs.frozen
class BirthFacts:
    """The immutable facts of one child incarnation, recorded before it is enacted."""

    parent_type: str
    ref: Ref
    root: UUID
    kind: InstanceKind
    name: str
    state: str
    attempt: int
    input: JsonValue
    ancestry: tuple[AncestryFrame, ...]
    armed_step: int
    provenance: Provenance
    previous: Ref | None = None

    @property
    def child_id(self) -> UUID:
        """The child's instance id."""
        return self.ref.child_id

    @property
    def lineage(self) -> tuple[str, ...]:
        """The recursive groups of the ancestry, as the interpreter counts depth."""
        return tuple(frame.group for frame in self.ancestry)

    def differences(self, other: BirthFacts) -> tuple[str, ...]:
        """Human-readable differences from ``other`` (empty when identical)."""
        found = []
        for field in attrs.fields(BirthFacts):
            mine, theirs = getattr(self, field.name), getattr(other, field.name)
            if mine != theirs:
                found.append(f"{field.name}: {mine!r} != {theirs!r}")
        return tuple(found)

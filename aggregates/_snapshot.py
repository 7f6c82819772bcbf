"""Snapshots of Instance aggregates for ``eventsourcing``'s snapshot store.

The library's default snapshot keeps ``vars(aggregate)`` as an untyped
dictionary, which the cattrs codec could not structure back into the
record. :class:`InstanceSnapshot` keeps the typed record instead, so a
snapshot restores the aggregate exactly.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs
from eventsourcing.domain import Snapshot
from eventsourcing.utils import get_topic, resolve_topic

from aggregates._records import InstanceRecord


@attrs.frozen
class InstanceState:
    """What a snapshot keeps of an Instance: its record and its timestamps."""

    record: InstanceRecord
    created_on: datetime
    modified_on: datetime


class InstanceSnapshot(Snapshot):
    """A snapshot of an Instance aggregate at one version.

    Stored format 2 may hold activations of embedded task children (their
    ``embedded`` field); a format-1 snapshot holds none, and reads as one
    whose activations all have streams of their own.
    """

    class_version = 2

    state: InstanceState  # type: ignore[assignment]

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        """A format-1 snapshot is a format-2 one without embedded activations."""

    @classmethod
    def take(cls, aggregate: Any) -> InstanceSnapshot:
        """The snapshot of ``aggregate`` as it is now."""
        return cls(
            originator_id=aggregate.id,
            originator_version=aggregate.version,
            timestamp=cls.create_timestamp(),
            topic=get_topic(type(aggregate)),
            state=InstanceState(aggregate.record, aggregate.created_on, aggregate.modified_on),  # type: ignore[arg-type]
        )

    def mutate(self, _: None) -> Any:
        """The aggregate this snapshot was taken of."""
        cls = resolve_topic(self.topic)
        aggregate = object.__new__(cls)
        aggregate.__dict__.update(
            _id=self.originator_id,
            _version=self.originator_version,
            _created_on=self.state.created_on,
            _modified_on=self.state.modified_on,
            _pending_events=[],
            record=self.state.record,
        )
        return aggregate

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
    """A snapshot of an Instance aggregate at one version."""

    state: InstanceState  # type: ignore[assignment]

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

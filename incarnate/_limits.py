"""Limits on what the engine writes and how long it waits for its store.

The maximum payload size bounds one stored event, checked on the encoded
bytes in the save path before the recorder is called, so an oversized event
is refused with nothing written, on every store alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    AggregateRecorder,
    EventStore,
    Mapper,
    Notification,
    Recording,
    StoredEvent,
)

from incarnate.errors import ConfigurationError, PayloadTooLarge

DEFAULT_MAX_PAYLOAD_BYTES = 4 * 1024 * 1024
"""4 MiB: an event is history every replay and recovery reads again, so large
data belongs outside the engine (pass a reference). Temporal refuses payloads
over 2 MiB for the same reason; 4 MiB leaves room for JSON documents of a few
MB while keeping a replay of many events fast."""

MAX_PAYLOAD_VARIABLE = "INCARNATE_MAX_PAYLOAD_BYTES"


def positive_int(value: str | int, name: str) -> int:
    """``value`` as a whole number of at least 1, or a ConfigurationError naming the setting."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1:
        raise ConfigurationError(f"{name} must be a whole number of at least 1, got {value!r}")
    return number


def setting(value: int | None, variable: str, default: int, environ: Mapping[str, str]) -> int:
    """A setting: the explicit value, else the environment variable, else the default."""
    if value is not None:
        return positive_int(value, variable)
    raw = environ.get(variable, "")
    return positive_int(raw, variable) if raw.strip() else default


def _event_name(topic: str) -> str:
    return topic.rpartition(":")[2] or topic


class LimitedEventStore(EventStore[UUID]):
    """The library's event store, refusing any event whose encoded state exceeds the limit.

    The events are encoded once; the check runs before the recorder is
    called, so a refused save writes nothing (no half-committed macrostep).
    """

    def __init__(self, mapper: Mapper[UUID], recorder: AggregateRecorder, max_payload_bytes: int) -> None:
        super().__init__(mapper=mapper, recorder=recorder)
        self.max_payload_bytes = max_payload_bytes

    def put(self, domain_events: Sequence[Any], **kwargs: Any) -> list[Recording[UUID]]:
        """Encode, check every event's size, then store them all in one transaction."""
        stored_events = self._encode(domain_events)
        notification_ids = self.recorder.insert_events(stored_events, **kwargs)
        if not notification_ids:
            return []
        return [
            Recording(
                event,
                Notification(
                    originator_id=stored.originator_id,
                    originator_version=stored.originator_version,
                    topic=stored.topic,
                    state=stored.state,
                    id=notification_id,
                ),
            )
            for event, stored, notification_id in zip(
                domain_events, stored_events, notification_ids, strict=True
            )
        ]

    def store(self, domain_events: Sequence[Any]) -> None:
        """:meth:`put` for a caller that has no use for the recordings (none are built)."""
        self.recorder.insert_events(self._encode(domain_events))

    def _encode(self, domain_events: Sequence[Any]) -> list[StoredEvent]:
        """The events as stored events; :class:`PayloadTooLarge` for the first one over the limit."""
        stored_events = [self.mapper.to_stored_event(event) for event in domain_events]
        for stored in stored_events:
            size = len(stored.state)
            if size > self.max_payload_bytes:
                originator = stored.originator_id
                instance_id = originator if isinstance(originator, UUID) else UUID(str(originator))
                raise PayloadTooLarge(instance_id, _event_name(stored.topic), size, self.max_payload_bytes)
        return stored_events

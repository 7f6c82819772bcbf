"""Errors raised by the engine (the root and lower errors are reused, not redefined)."""

from __future__ import annotations

from uuid import UUID

from statechart.errors import IncarnateError


class EngineError(IncarnateError):
    """Something the engine cannot do; the message says what and how to fix it."""


class UnknownInstance(EngineError, LookupError):
    """No instance with this id exists in the store."""

    def __init__(self, instance_id: UUID) -> None:
        self.instance_id = instance_id
        super().__init__(
            f"no instance {instance_id} in this store; check the id, and that this engine "
            "uses the same database as the one that started it"
        )


class InstanceTerminated(EngineError, ValueError):
    """The instance has finished and accepts no further events."""

    def __init__(self, instance_id: UUID, status: str) -> None:
        self.instance_id = instance_id
        self.status = status
        super().__init__(f"instance {instance_id} is {status} and accepts no further events")


class ConfigurationError(EngineError, ValueError):
    """The storage or engine configuration is invalid."""


class StorageError(EngineError):
    """The event store failed; the operation did not commit."""


class TaskFailed(EngineError):
    """A task callable raised; carried as the child's failure."""


class PayloadTooLarge(StorageError, ValueError):
    """An event is larger, once encoded, than the engine's maximum payload size; nothing was written."""

    def __init__(self, instance_id: UUID, event: str, size: int, limit: int) -> None:
        self.instance_id = instance_id
        self.event = event
        self.size = size
        self.limit = limit
        super().__init__(
            f"event {event} of instance {instance_id} is {size:,} bytes once encoded, over the "
            f"maximum payload size of {limit:,} bytes, so nothing was written; keep large data "
            "outside the engine and pass a reference to it, or raise the limit with "
            "max_payload_bytes (Engine(max_payload_bytes=...) or Storage(max_payload_bytes=...)) "
            "or the INCARNATE_MAX_PAYLOAD_BYTES environment variable"
        )


class StoreUnreachable(StorageError):
    """The engine could not connect to its store; the message says why and what to check."""

    def __init__(self, message: str, *, host: str, port: int, dbname: str, user: str) -> None:
        self.host = host
        self.port = port
        self.dbname = dbname
        self.user = user
        super().__init__(message)

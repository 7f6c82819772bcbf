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

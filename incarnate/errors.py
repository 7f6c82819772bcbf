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


class InstanceExists(EngineError, ValueError):
    """``start`` was given the id of an instance the store already holds."""

    def __init__(self, instance_id: UUID, chart: str, detail: str = "") -> None:
        self.instance_id = instance_id
        self.chart = chart
        super().__init__(
            f"cannot start {chart!r} as {instance_id}: the store already holds an instance with that id"
            f"{detail}; leave the id out for a new one, or read the existing instance"
        )


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


class TreeHeld(EngineError):
    """A member of a call tree is owned by another live engine: nothing of the tree was claimed."""

    def __init__(self, root: UUID, instance_id: UUID, name: str, holder: str) -> None:
        self.root = root
        self.instance_id = instance_id
        self.holder = holder
        where = "its root" if instance_id == root else f"instance {instance_id} ({name!r})"
        super().__init__(
            f"cannot take over the call tree of {root}: {where} is held by live engine {holder!r}; "
            "a call tree is recovered as a unit, never in part (one live member keeps all of it "
            "where it is), so nothing of it was claimed. "
            f"Leave it to {holder!r}, or stop that engine (or let its heartbeat expire) and retry"
        )


class NotARoot(EngineError, ValueError):
    """A child was named where a call tree's root is needed: children recover only through their root."""

    def __init__(self, instance_id: UUID, parent: UUID, root: UUID) -> None:
        self.instance_id = instance_id
        self.parent = parent
        self.root = root
        super().__init__(
            f"instance {instance_id} is a child of {parent}, which still awaits it: a child is "
            f"recovered only through its call tree's root, with the whole tree, never on its own; "
            f"take over {root} instead"
        )


class Fenced(EngineError):
    """This engine no longer holds the instance it was about to write: another engine claimed it."""

    def __init__(
        self, instance_id: UUID, engine_id: str, held: int | None, owner: str, incarnation: int
    ) -> None:
        self.instance_id = instance_id
        self.engine_id = engine_id
        self.held = held
        self.owner = owner
        self.incarnation = incarnation
        mine = f"incarnation {held}" if held is not None else "no incarnation"
        super().__init__(
            f"instance {instance_id}: engine {engine_id!r} holds {mine}, but the store names "
            f"{owner!r} at incarnation {incarnation}; the write was refused and the instance "
            "dropped by this engine (its new owner runs it)"
        )

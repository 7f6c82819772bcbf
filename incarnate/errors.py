"""Every error of the ``incarnate`` package (the root and lower errors are reused, not redefined).

Each class carries a stable ``code`` (kebab-case, unique across the four
packages): the command line's ``--json`` errors and the console's error
answers show it, and ``docs/reference/errors.md`` lists every one. A code
never changes once released; a message may.
"""

from __future__ import annotations

from uuid import UUID

from statechart import JsonValue
from statechart.errors import IncarnateError


class EngineError(IncarnateError):
    """Something the engine cannot do; the message says what and how to fix it."""

    code = "engine-error"


class UnknownInstance(EngineError, LookupError):
    """No instance with this id exists in the store."""

    code = "unknown-instance"

    def __init__(self, instance_id: UUID) -> None:
        self.instance_id = instance_id
        super().__init__(
            f"no instance {instance_id} in this store; check the id, and that this engine "
            "uses the same database as the one that started it"
        )


class InstanceTerminated(EngineError, ValueError):
    """The instance has finished and accepts no further events."""

    code = "instance-terminated"

    def __init__(self, instance_id: UUID, status: str) -> None:
        self.instance_id = instance_id
        self.status = status
        super().__init__(f"instance {instance_id} is {status} and accepts no further events")


class InstanceExists(EngineError, ValueError):
    """``start`` was given the id of an instance the store already holds."""

    code = "instance-exists"

    def __init__(self, instance_id: UUID, chart: str, detail: str = "") -> None:
        self.instance_id = instance_id
        self.chart = chart
        super().__init__(
            f"cannot start {chart!r} as {instance_id}: the store already holds an instance with that id"
            f"{detail}; leave the id out for a new one, or read the existing instance"
        )


class ConfigurationError(EngineError, ValueError):
    """The storage or engine configuration is invalid."""

    code = "configuration-error"


class StorageError(EngineError):
    """The event store failed; the operation did not commit."""

    code = "storage-error"


class PayloadTooLarge(StorageError, ValueError):
    """An event is larger, once encoded, than the engine's maximum payload size; nothing was written."""

    code = "payload-too-large"

    def __init__(self, instance_id: UUID, event: str, size: int, limit: int) -> None:
        self.instance_id = instance_id
        self.event = event
        self.size = size
        self.limit = limit
        super().__init__(
            f"event {event} of instance {instance_id} is {size:,} bytes once encoded, over the "
            f"maximum payload size of {limit:,} bytes, so nothing was written; keep large data "
            "outside the engine and pass a reference to it, or raise the limit with "
            "max_payload_bytes (Engine(max_payload_bytes=...) or Storage.sqlite(..., max_payload_bytes=...)) "
            "or the INCARNATE_MAX_PAYLOAD_BYTES environment variable"
        )


class StoreUnreachable(StorageError):
    """The engine could not connect to its store; the message says why and what to check."""

    code = "store-unreachable"

    def __init__(self, message: str, *, host: str, port: int, dbname: str, user: str) -> None:
        self.host = host
        self.port = port
        self.dbname = dbname
        self.user = user
        super().__init__(message)


class UnreadableRow(StorageError):
    """A stored listing row (or the position) does not read back; the listing rebuilds itself from the log."""

    code = "unreadable-row"

    def __init__(self, key: object, error: Exception) -> None:
        self.key = key
        super().__init__(f"listing row {key}: {type(error).__name__}: {error}")


class TreeHeld(EngineError):
    """A member of a call tree is owned by another live engine: nothing of the tree was claimed."""

    code = "tree-held"

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

    code = "not-a-root"

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

    code = "fenced"

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


class MigrationRejected(EngineError, ValueError):
    """A state mapping does not produce a snapshot that fits the registered chart; nothing was written."""

    code = "migration-rejected"

    def __init__(self, instance_id: UUID, problems: list[str]) -> None:
        self.instance_id = instance_id
        self.problems = problems
        super().__init__(
            f"migrating {instance_id} would leave a snapshot that does not fit the chart: "
            + "; ".join(problems)
            + ". Map every removed state to an existing one, or terminate the instance"
        )


class PositionOutOfRange(EngineError, ValueError):
    """A time-travel or fork position is outside the instance's (or call tree's) history."""

    code = "position-out-of-range"

    def __init__(self, instance_id: UUID, position: int, last: int, what: str = "version") -> None:
        self.instance_id = instance_id
        self.position = position
        self.last = last
        super().__init__(
            f"instance {instance_id} has no {what} {position}: its history runs from 1 to {last}; "
            f"pick a {what} in that range (1 is its creation, {last} is now)"
        )


class ForkRefused(EngineError, ValueError):
    """An instance cannot be forked at the position asked for; nothing was written."""

    code = "fork-refused"

    def __init__(self, instance_id: UUID, version: int, why: str) -> None:
        self.instance_id = instance_id
        self.version = version
        self.why = why
        super().__init__(f"cannot fork {instance_id} at version {version}: {why}")


class RedriveRefused(EngineError, ValueError):
    """An instance cannot be redriven (it is running, finished well, or has no good checkpoint)."""

    code = "redrive-refused"

    def __init__(self, instance_id: UUID, why: str) -> None:
        self.instance_id = instance_id
        self.why = why
        super().__init__(f"cannot redrive {instance_id}: {why}")


class LoopGone(EngineError):
    """The event loop an async task ran on stopped before the task finished: no outcome is committed."""

    code = "loop-gone"


# ------------------------------------------------------ waiting for a result


def without_traceback(error: JsonValue) -> JsonValue:
    """A recorded failure without the ``traceback`` a failed task or macrostep keeps (too long to say)."""
    if isinstance(error, dict) and "traceback" in error:
        return {key: value for key, value in error.items() if key != "traceback"}
    return error


class InstanceFailed(EngineError):
    """The instance a handle waited for failed; ``error`` is its recorded failure."""

    code = "instance-failed"

    def __init__(self, instance_id: UUID, error: JsonValue) -> None:
        self.instance_id = instance_id
        self.error = error
        said = without_traceback(error)  # kept in ``error``; too long for a message
        super().__init__(
            f"instance {instance_id} failed: {said!r}; its events show why: incarnate timeline {instance_id}"
            + (f" (its traceback: incarnate show {instance_id})" if said is not error else "")
        )


class InstanceCancelled(EngineError):
    """The instance a handle waited for was cancelled (or orphaned); ``reason`` says why."""

    code = "instance-cancelled"

    def __init__(self, instance_id: UUID, reason: str, status: str = "cancelled") -> None:
        self.instance_id = instance_id
        self.reason = reason
        self.status = status
        super().__init__(f"instance {instance_id} was {status} ({reason}) and has no result")


# ------------------------------------------------------------ the testing kit


class RecoveryCheckFailed(EngineError, AssertionError):
    """A recovery invariant did not hold after a crash injected at a commit point.

    An ``AssertionError`` too, so that pytest reports it as a failed check.
    """

    code = "recovery-check-failed"

    def __init__(self, point: object, problem: str) -> None:
        self.point = point
        """The ``incarnate.testing.CommitPoint`` whose run broke the invariant."""
        self.problem = problem
        super().__init__(f"{point}: {problem}")


# ----------------------------------------------------------- the command line


class CommandError(EngineError):
    """A command could not run as asked; the message says why and, when known, what to do."""

    code = "command-error"

    status = 2
    """The exit status ``incarnate`` returns for this error (``USAGE_ERROR``)."""


class CommandFailed(CommandError):
    """A command ran as asked, but the operation failed (exit status 1)."""

    code = "command-failed"

    status = 1


class EventNotTaken(CommandError):
    """``incarnate send`` refused an event the instance would ignore (exit status 3)."""

    code = "event-not-taken"

    status = 3


class InvalidJson(CommandError, ValueError):
    """A JSON argument (``--data``, the console's data field) is not JSON data as RFC 8259 defines it."""

    code = "invalid-json"

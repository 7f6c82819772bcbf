"""Errors raised by the aggregates package (the root is reused from statechart)."""

from __future__ import annotations

from uuid import UUID

from statechart.errors import IncarnateError


class InputMismatch(IncarnateError, ValueError):
    """A birth was re-delivered for an existing child id with different facts."""

    code = "input-mismatch"

    def __init__(self, child_id: UUID, differences: tuple[str, ...]) -> None:
        self.child_id = child_id
        self.differences = differences
        super().__init__(
            f"child {child_id} already exists with other birth facts ({'; '.join(differences)}); "
            "the same Ref names one incarnation only: a different input, origin or delegation "
            "needs a new generation (a retry or a re-added key), not a second birth"
        )


class InvalidCommand(IncarnateError, ValueError):
    """A command does not apply to the instance in its current state."""

    code = "invalid-command"

    def __init__(self, instance_id: UUID, command: str, reason: str) -> None:
        self.instance_id = instance_id
        self.command = command
        self.reason = reason
        super().__init__(f"instance {instance_id}: cannot {command}: {reason}")


class DecodeError(IncarnateError, ValueError):
    """A stored record could not be decoded into its event class."""

    code = "decode-error"

    def __init__(self, topic: str, originator_id: object, version: int, problem: str) -> None:
        self.topic = topic
        self.originator_id = originator_id
        self.version = version
        self.problem = problem
        super().__init__(
            f"stored event {topic} of {originator_id} at version {version} does not decode: {problem}"
        )


class CorruptRecord(DecodeError):
    """A stored record of an instance does not decode, so the instance cannot be loaded.

    Recovery parks the call tree it belongs to (an incident names the
    instance, the version and what failed); an operator disposes of it with
    ``incarnate terminate`` or restores the record from a backup.
    """

    code = "corrupt-record"

    def __init__(self, instance_id: UUID, topic: str, version: int, problem: str) -> None:
        self.instance_id = instance_id
        DecodeError.__init__(self, topic, instance_id, version, problem)
        self.fact = str(self)
        """What failed, without the advice (recorded as the incident's detail)."""
        self.args = (
            f"instance {instance_id}: {self.fact}; the instance cannot be loaded. Recovery parks its "
            "call tree: see `incarnate parked`, then dispose of the tree with `incarnate terminate ROOT` "
            "(or restore the record from a backup)",
        )

    @classmethod
    def of(cls, instance_id: UUID, error: BaseException) -> CorruptRecord:
        """The failure behind ``error`` (a mapper error raised from a DecodeError) for ``instance_id``."""
        cause: BaseException | None = error
        while cause is not None:
            if isinstance(cause, DecodeError):
                return cls(instance_id, cause.topic, cause.version, cause.problem)
            cause = cause.__cause__
        return cls(instance_id, "?", 0, f"{type(error).__name__}: {error}")

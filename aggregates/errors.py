"""Errors raised by the aggregates package (the root is reused from statechart)."""

from __future__ import annotations

from uuid import UUID

from statechart.errors import IncarnateError


class InputMismatch(IncarnateError, ValueError):
    """A birth was re-delivered for an existing child id with different facts."""

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

    def __init__(self, instance_id: UUID, command: str, reason: str) -> None:
        self.instance_id = instance_id
        self.command = command
        self.reason = reason
        super().__init__(f"instance {instance_id}: cannot {command}: {reason}")


class DecodeError(IncarnateError, ValueError):
    """A stored record could not be decoded into its event class."""

    def __init__(self, topic: str, originator_id: object, version: int, problem: str) -> None:
        self.topic = topic
        self.originator_id = originator_id
        self.version = version
        self.problem = problem
        super().__init__(
            f"stored event {topic} of {originator_id} at version {version} does not decode: {problem}"
        )

"""Errors raised by the projections package (the root is reused from statechart).

A :class:`CheckpointError` means an instance's stored events do not make an
exact checkpoint: :func:`~projections.resume_plan` names the instance, the
slot and what differs, and never approximates a child.
"""

from __future__ import annotations

from uuid import UUID

from statechart.errors import IncarnateError


class CheckpointError(IncarnateError, ValueError):
    """The stored events do not make an exact checkpoint; nothing may be resumed from them."""

    code = "checkpoint-error"
    kind = "invalid"
    subject = "activation"

    def __init__(self, instance_id: UUID, slot: str, problem: str, *, version: int | None = None) -> None:
        self.instance_id = instance_id
        self.slot = slot
        self.problem = problem
        self.version = version
        at = f" at version {version}" if version is not None else ""
        super().__init__(
            f"checkpoint of {instance_id}{at}, slot {slot}: {self.kind} {self.subject}: {problem}"
        )


class OmittedActivation(CheckpointError):
    """A live child slot has no activation."""

    code = "checkpoint-omitted-activation"
    kind = "omitted"


class DuplicatedActivation(CheckpointError):
    """A child slot has more than one activation, or one fact arrived twice."""

    code = "checkpoint-duplicated-activation"
    kind = "duplicated"


class ReorderedActivation(CheckpointError):
    """Activation facts arrived out of causal order, or activations are out of slot order."""

    code = "checkpoint-reordered-activation"
    kind = "reordered"


class MismatchedActivation(CheckpointError):
    """An activation disagrees with its slot (generation, Ref, attempt, state, step, input…)."""

    code = "checkpoint-mismatched-activation"
    kind = "mismatched"


class CorruptedDelta(CheckpointError):
    """A ``Stepped`` event's slot changes do not fit the snapshot (a slot removed twice, or missing)."""

    code = "checkpoint-corrupted-delta"
    kind = "corrupted"
    subject = "snapshot delta"


class CheckpointUndecodable(CheckpointError):
    """The snapshot does not decode under the registered chart (a state or site is gone)."""

    code = "checkpoint-undecodable"
    kind = "undecodable"

"""Small helpers shared by the statechart unit tests."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from statechart import log, parallel, state
from statechart.effects import Effect, Logged
from statechart.model import StateNode, Transition

E = TypeVar("E")


def of_type(effects: Iterable[Effect], kind: type[E]) -> list[E]:
    """The effects of one class, in the order they were returned."""
    return [effect for effect in effects if isinstance(effect, kind)]


def labels(effects: Iterable[Effect]) -> list[str]:
    """The labels of the ``Logged`` effects, in order: the trace of ``log`` actions."""
    return [effect.label for effect in effects if isinstance(effect, Logged)]


def traced(
    id: str,
    *children: StateNode,
    initial: str | Sequence[str] | None = None,
    on: Sequence[Transition] = (),
) -> StateNode:
    """A state (atomic or compound) whose entry and exit log ``enter:<id>`` and ``exit:<id>``."""
    return state(id, *children, initial=initial, on=on, entry=[log(f"enter:{id}")], exit=[log(f"exit:{id}")])


def traced_parallel(id: str, *children: StateNode, on: Sequence[Transition] = ()) -> StateNode:
    """A parallel state whose entry and exit log ``enter:<id>`` and ``exit:<id>``."""
    return parallel(id, *children, on=on, entry=[log(f"enter:{id}")], exit=[log(f"exit:{id}")])

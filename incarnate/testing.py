"""A test kit for users of incarnate: in-memory engines, restarts, crash injection.

``memory_engine`` builds an engine over a named in-memory store with a
virtual clock and the deterministic runner; ``restart`` closes an engine
and builds a fresh one over the same store, as a new process would;
``crash_at`` makes the next commit crash at a chosen point.
"""

from __future__ import annotations

import contextlib
import enum
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from incarnate._clock import Clock, VirtualClock
from incarnate._engine import Engine
from incarnate._runners import DeterministicRunner, Runner, ThreadedRunner
from incarnate._storage import Storage
from incarnate._tasks import TaskFunction
from incarnate._work import UnitOfWork
from statechart import Chart


class SimulatedCrash(BaseException):
    """Raised at an injected crash point.

    A ``BaseException``, like the interruption of a dying process, so that no
    ``except Exception`` on the way out can swallow it.
    """


class CrashPoint(enum.Enum):
    """Where, around a commit, a crash is injected."""

    BEFORE_COMMIT = "before-commit"
    """The macrostep is decided; nothing is written."""
    DURING_COMMIT = "during-commit"
    """The events are written inside the transaction, which never commits (SQL stores)."""
    AFTER_COMMIT = "after-commit"
    """Everything is committed; nothing is enacted yet."""


def memory_engine(
    charts: Iterable[Chart[Any]] = (),
    tasks: Mapping[str, TaskFunction] | None = None,
    *,
    name: str | None = None,
    clock: Clock | None = None,
) -> Engine:
    """An engine over a named in-memory store, with a virtual clock and the deterministic runner."""
    return Engine(
        charts,
        tasks,
        storage=Storage.popo(name or f"memory-{uuid.uuid4().hex}"),
        clock=clock or VirtualClock(0.0),
        runner=DeterministicRunner(),
    )


def restart(engine: Engine, *, clock: Clock | None = None) -> Engine:
    """Close ``engine`` and build a fresh one over the same store, charts and tasks.

    The new engine knows nothing but what is stored, like a new process; it
    hands every unfinished instance to its runner (a threaded runner is
    already working: it starts when the engine is built).
    """
    charts = list(engine.charts.values())
    tasks = dict(engine.tasks)
    storage = engine.storage
    old = engine.runner
    runner: Runner = ThreadedRunner(old.workers) if isinstance(old, ThreadedRunner) else DeterministicRunner()
    engine.close()
    fresh = Engine(charts, tasks, storage=storage, clock=clock or engine.clock, runner=runner)
    fresh.resume_all()
    return fresh


@contextlib.contextmanager
def crash_at(engine: Engine, point: CrashPoint, *, nth: int = 1) -> Iterator[list[UnitOfWork]]:
    """Crash the ``nth`` commit from now at ``point``; yields the crashed units of work."""
    crashed: list[UnitOfWork] = []
    seen = [0]

    def due() -> bool:
        seen[0] += 1
        return seen[0] == nth

    if point is CrashPoint.DURING_COMMIT:
        with _crash_inside_transaction(engine, due):
            yield crashed
        return

    def hook(where: str, uow: UnitOfWork) -> None:
        if where == point.value and due():
            crashed.append(uow)
            raise SimulatedCrash(f"simulated crash at {where}")

    engine.hooks.append(hook)
    try:
        yield crashed
    finally:
        engine.hooks.remove(hook)


@contextlib.contextmanager
def _crash_inside_transaction(engine: Engine, due: Callable[[], bool]) -> Iterator[None]:
    """Crash inside the transaction that inserts the *last* event of the chosen commit.

    The commit's last pending event is noted when the commit starts; the
    insert that writes it raises after writing. If the engine wrote a commit
    in several transactions, the earlier ones would stay committed — which
    is exactly what tests using this crash point detect.
    """
    recorder: Any = engine.recorder
    name = engine.store.crash_inside_commit(recorder)
    if name is None:
        raise ValueError(
            f"{engine.store.describe()} has no transaction to crash inside; use BEFORE_COMMIT or AFTER_COMMIT"
        )
    original = getattr(recorder, name)
    target: list[tuple[str, int]] = []

    def note(where: str, uow: UnitOfWork) -> None:
        if where == "before-commit" and due():
            last = [(i.id, e.originator_version) for i in uow.pending() for e in i.pending_events][-1]
            target.append((last[0].hex, last[1]))

    def crashing(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        stored = args[1] if len(args) > 1 else kwargs.get("stored_events", ())
        written = {(_hex(s.originator_id), s.originator_version) for s in stored}
        if target and target[0] in written:
            target.clear()
            raise SimulatedCrash("simulated crash inside the commit's transaction, after its inserts")
        return result

    engine.hooks.append(note)
    setattr(recorder, name, crashing)
    try:
        yield
    finally:
        setattr(recorder, name, original)
        engine.hooks.remove(note)


def _hex(originator_id: object) -> str:
    return originator_id.hex if isinstance(originator_id, uuid.UUID) else str(originator_id).replace("-", "")

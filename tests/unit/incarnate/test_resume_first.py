"""``resume_all`` lets the first trees run before it reads on.

After a restart with a backlog, the first save claims a few trees
(``RESUME_FIRST_BATCH``) and a threaded runner gets a bounded grace
(``RESUME_FIRST_GRACE``) to finish them before the claims of the next
batches and the fold of the rest of the log take the process's one core
of Python. The first results then land within milliseconds of the claim,
not after a share of the whole recovery.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from aggregates import InstanceStatus
from incarnate import DeterministicRunner, Engine, Storage, TaskCall, ThreadedRunner, _engine
from statechart import Chart, final, invoke, state, transition

STEP = Chart(
    "step",
    state("working", invoke=[invoke("work", task="work")], on=[transition("done.invoke.work", "done")]),
    final("done"),
)

TREES = 12


def work(call: TaskCall) -> str:
    return "worked"


def backlog(path: Path) -> tuple[Storage, list[Any]]:
    """A store holding ``TREES`` started trees whose task has not run, left by an engine that is gone."""
    storage = Storage.sqlite(str(path))
    with Engine(
        [STEP], {"work": work}, storage=storage, runner=DeterministicRunner(), engine_id="gone"
    ) as gone:
        roots = [gone.start(STEP) for _ in range(TREES)]
    return storage, roots


def test_the_first_trees_finish_before_the_rest_are_read(tmp_path: Path) -> None:
    storage, roots = backlog(tmp_path / "backlog.db")
    runner = ThreadedRunner(workers=2)
    seen: list[tuple[float, bool, int, int]] = []
    with Engine([STEP], {"work": work}, storage=storage, runner=runner, engine_id="gone") as restarted:
        wait = runner.wait_until_idle

        def watched(timeout: float = 10.0) -> bool:
            idle = wait(timeout)
            done = sum(restarted.ending(root) is not None for root in roots)
            seen.append((timeout, idle, restarted.parts.holdings.acquisitions(), done))
            return idle

        runner.wait_until_idle = watched  # type: ignore[method-assign]
        assert restarted.resume_all() == TREES  # each root (its task child is embedded in it)
        runner.wait_until_idle = wait  # type: ignore[method-assign]
        assert wait(30.0)
        assert all(restarted.ending(root).status is InstanceStatus.DONE for root in roots)  # type: ignore[union-attr]
    [(timeout, idle, acquired, done)] = seen  # once, after the first save only
    assert timeout == _engine.RESUME_FIRST_GRACE
    assert acquired == _engine.RESUME_FIRST_BATCH  # nothing more was claimed meanwhile
    # Idle within the grace (a loaded machine may take longer): the first save's trees had finished.
    assert done == _engine.RESUME_FIRST_BATCH if idle else done <= _engine.RESUME_FIRST_BATCH


def test_a_runner_that_works_only_when_asked_is_not_waited_for(tmp_path: Path) -> None:
    storage, roots = backlog(tmp_path / "backlog.db")
    with Engine(
        [STEP], {"work": work}, storage=storage, runner=DeterministicRunner(), engine_id="gone"
    ) as restarted:
        assert not hasattr(restarted.runner, "wait_until_idle")
        assert restarted.resume_all() == TREES
        assert all(restarted.ending(root) is None for root in roots)  # nothing ran yet
        restarted.run_until_idle()
        assert all(restarted.ending(root) is not None for root in roots)


def test_a_busy_runner_is_waited_for_no_longer_than_the_grace(tmp_path: Path) -> None:
    """A first tree whose task blocks keeps the runner busy: the recovery goes on after the grace."""
    storage, roots = backlog(tmp_path / "backlog.db")
    release = threading.Event()

    def blocking(call: TaskCall) -> str:
        release.wait(30.0)
        return "worked"

    runner = ThreadedRunner(workers=2)
    with Engine([STEP], {"work": blocking}, storage=storage, runner=runner, engine_id="gone") as restarted:
        try:
            assert restarted.resume_all() == TREES  # returns although the first tasks block
        finally:
            release.set()
        assert runner.wait_until_idle(30.0)
        assert all(restarted.ending(root) is not None for root in roots)

"""Embedded task children: a task with no stream of its own, born, run and recovered through its parent.

``Engine(embed_tasks=True)`` records a task child's birth as its parent's
``Birth`` (marked ``embedded``) and nothing else; the body's outcome is its
parent's message. These scenarios hold it to what a task with a stream
guarantees: commit before enact, the same incarnation after a crash (the
body again, with the same idempotency key, its outcome once), retries as
fresh incarnations, cancels, fencing, and every read (instance, events,
children, the listing) answering for the task by its id.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from aggregates import ActivationState, Instance, InstanceKind, InstanceStatus
from incarnate import DeterministicRunner, Engine, Storage, TaskCall, ThreadedRunner, VirtualClock
from incarnate.cli import main
from incarnate.console import create_app
from incarnate.errors import EngineError
from incarnate.testing import CrashPoint, SimulatedCrash, check_recovery, crash_at, memory_engine, restart
from projections import resume_plan
from statechart import Chart, JsonValue, RetryPolicy, always, final, invoke, raise_event, state, transition
from tests.scenarios.fleet import Fleet, fleet, fleet_storage, live, only_child

__all__ = ["fleet", "fleet_storage"]

ERRAND = Chart(
    "errand",
    state(
        "waiting",
        invoke=[invoke("charge", task="charge", input={"amount": 5}, retry=RetryPolicy(max_attempts=2))],
        on=[
            transition("done.invoke.charge", "paid"),
            transition("error.invoke.charge", "declined"),
            transition("leave", "away"),
        ],
    ),
    state("away", on=[transition("back", "waiting")]),
    final("paid", done_data=lambda c, e: e.data),
    final("declined", done_data=lambda c, e: e.data),
)


class Bank:
    """A task that declines its first attempts and records every call (its idempotency keys)."""

    def __init__(self, declines: int = 0) -> None:
        self.declines = declines
        self.keys: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, call: TaskCall) -> str:
        with self.lock:
            self.keys.append(call.idempotency_key)
        assert call.input == {"amount": 5}
        if call.attempt <= self.declines:
            raise RuntimeError(f"declined attempt {call.attempt}")
        return f"receipt-{call.attempt}"


@pytest.fixture
def bank() -> Bank:
    return Bank()


@pytest.fixture
def engine(bank: Bank) -> Iterator[Engine]:
    built = memory_engine([ERRAND], {"charge": bank}, embed_tasks=True)
    yield built
    built.close()


def _task_of(engine: Engine, parent: uuid.UUID) -> Instance:
    [task] = [child for child in engine.children(parent) if child.record.kind is InstanceKind.TASK]
    return task


def test_an_embedded_task_is_born_in_its_parents_commit_and_has_no_stream(engine: Engine, bank: Bank) -> None:
    errand = engine.start("errand")
    parent = engine.instance(errand)
    [activation] = parent.record.activations
    assert activation.embedded and activation.state is ActivationState.RUNNING
    assert [type(e).__name__ for e in engine.events_of(errand)] == ["Started", "Stepped", "Birth"]
    task_id = activation.child_id
    assert engine.parts.journal.recorder.select_events(task_id) == []  # no stream of its own
    assert bank.keys == []  # committed before enacted: the body runs after the commit
    born = engine.instance(task_id)
    assert born.record.status is InstanceStatus.BORN and born.record.parent == activation.ref
    engine.run_until_idle()
    assert engine.result(errand) == "receipt-1"
    task = engine.instance(task_id)
    assert task.record.status is InstanceStatus.DONE and task.record.output == "receipt-1"
    assert [type(e).__name__ for e in engine.events_of(task_id)] == ["Started", "Completed"]
    assert engine.ending(task_id) is not None and engine.ending(task_id).output == "receipt-1"  # type: ignore[union-attr]
    assert bank.keys == [f"{errand}/charge//1/attempt-1"]


def test_a_failure_keeps_its_traceback_out_of_the_charts_sight_and_a_retry_is_a_fresh_incarnation(
    bank: Bank,
) -> None:
    bank.declines = 1
    clock = VirtualClock(100.0)
    engine = Engine(
        [ERRAND],
        {"charge": bank},
        storage=Storage.popo(f"embedded-{uuid.uuid4().hex}"),
        clock=clock,
        runner=DeterministicRunner(),
        embed_tasks=True,
    )
    try:
        errand = engine.start("errand")
        engine.run_until_idle()
        clock.advance(60.0)
        engine.run_until_idle()
        assert engine.result(errand) == "receipt-2"
        first, second = [i for i in engine.instances() if i.record.kind is InstanceKind.TASK]
        assert first.record.status is InstanceStatus.FAILED
        error = first.record.error
        assert isinstance(error, dict) and error["message"] == "declined attempt 1"
        assert "RuntimeError: declined attempt 1" in str(error["traceback"])
        assert second.record.birth is not None and second.record.birth.attempt == 2
        assert second.record.birth.previous == first.record.parent
        assert second.record.status is InstanceStatus.DONE
        # The chart saw the error's type and message only.
        events = engine.events_of(errand)
        told = [e.trigger for e in events if type(e) is Instance.Stepped and e.trigger is not None]
        assert told[0].name == "error.invoke.charge"
        assert told[0].data == {"error": "RuntimeError", "message": "declined attempt 1"}
        assert [type(e).__name__ for e in events].count("ChildResume") == 1
        assert bank.keys == [f"{errand}/charge//1/attempt-1", f"{errand}/charge//2/attempt-2"]
    finally:
        engine.close()


def test_a_parent_that_leaves_before_the_body_runs_cancels_it_and_the_body_never_runs(
    engine: Engine, bank: Bank
) -> None:
    errand = engine.start("errand")
    task_id = _task_of(engine, errand).id
    engine.send(errand, "leave")
    while engine.process(errand) is not None:  # the parent steps before its task's turn
        pass
    engine.run_until_idle()
    assert bank.keys == []
    task = engine.instance(task_id)
    assert task.record.status is InstanceStatus.CANCELLED
    assert task.record.error == {"cancelled": "parent left state 'waiting'"}
    engine.send(errand, "back")  # a fresh incarnation of the slot
    engine.run_until_idle()
    assert engine.result(errand) == "receipt-1"
    assert len(bank.keys) == 1 and "/charge//2/" in bank.keys[0]


def test_an_operator_cancel_tells_the_parent_and_the_late_outcome_is_never_committed(
    engine: Engine, bank: Bank
) -> None:
    errand = engine.start("errand")
    task_id = _task_of(engine, errand).id
    assert engine.cancel(task_id, "stopped by an operator")
    assert not engine.cancel(task_id, "twice")  # its outcome (the cancel) waits already
    engine.run_until_idle()
    cancelled = engine.instance(task_id)
    assert cancelled.record.status is InstanceStatus.CANCELLED
    assert cancelled.record.error == {"cancelled": "stopped by an operator"}
    # The parent heard a failure and retried, with a fresh incarnation.
    assert engine.result(errand) == "receipt-2"
    assert bank.keys == [f"{errand}/charge//2/attempt-2"]


def test_writing_to_an_embedded_task_is_refused_naming_its_parent(engine: Engine) -> None:
    errand = engine.start("errand")
    task_id = _task_of(engine, errand).id
    with pytest.raises(EngineError, match=f"embedded in its parent {errand}"):
        engine.send(task_id, "hello")
    engine.run_until_idle()
    assert engine.result(errand) == "receipt-1"


def test_the_listing_lists_an_embedded_task_under_its_parent(engine: Engine) -> None:
    errand = engine.start("errand")
    task_id = _task_of(engine, errand).id
    listing = engine.parts.listing
    listing.catch_up()
    row = listing.get(task_id)
    assert row is not None and row.parent == errand and row.kind == "task" and row.status == "born"
    engine.run_until_idle()
    listing.catch_up()
    done = listing.get(task_id)
    assert done is not None and done.status == "done" and done.root == errand


FRAGILE = Chart(
    "fragile",
    state(
        "waiting",
        invoke=[invoke("charge", task="charge", input={"amount": 5})],
        on=[transition("done.invoke.charge", "paid"), transition("explode", "spin")],
    ),
    state("spin", on=[always("spin")]),
    final("paid"),
)
"""``explode`` enters a loop of eventless transitions that never settles: a runaway macrostep fails
the parent and leaves its activation running, as any step error does."""


@pytest.mark.parametrize("end", ["explode", "cancel"])
def test_a_parent_that_ends_with_its_task_running_ends_the_tasks_listing_row(end: str, bank: Bank) -> None:
    engine = memory_engine([FRAGILE], {"charge": bank}, embed_tasks=True)
    try:
        fragile = engine.start("fragile")
        task_id = _task_of(engine, fragile).id
        listing = engine.parts.listing
        listing.catch_up()
        if end == "explode":
            engine.send(fragile, "explode")
        else:
            engine.cancel(fragile, "stopped by an operator")
        while engine.process(fragile) is not None:  # the parent ends before its task's turn
            pass
        engine.run_until_idle()
        assert engine.instance(fragile).record.status in (InstanceStatus.FAILED, InstanceStatus.CANCELLED)
        task = engine.instance(task_id)
        assert task.record.status is InstanceStatus.CANCELLED
        listing.catch_up()
        row = listing.get(task_id)
        assert row is not None and row.status == "cancelled"
        assert task_id not in {r.id for r in listing.rows(in_flight=True)}
    finally:
        engine.close()


class _OlderTables:
    """Listing tables of a store adapter written before ``load_tasks`` (everything else delegated)."""

    def __init__(self, tables: object) -> None:
        self._tables = tables

    def __getattr__(self, name: str) -> object:
        if name == "load_tasks":
            raise AttributeError(name)
        return getattr(self._tables, name)


def test_listing_tables_without_load_tasks_still_fold_a_parents_end(bank: Bank) -> None:
    engine = memory_engine([FRAGILE], {"charge": bank}, embed_tasks=True)
    try:
        fragile = engine.start("fragile")
        task_id = _task_of(engine, fragile).id
        listing = engine.parts.listing
        listing.catch_up()
        listing.tables = _OlderTables(listing.tables)  # type: ignore[assignment]
        engine.send(fragile, "explode")
        while engine.process(fragile) is not None:
            pass
        assert listing.catch_up() > 0
        parent, task = listing.get(fragile), listing.get(task_id)
        assert parent is not None and parent.status == "failed"
        assert task is not None and task.status == "born"  # as before the port had load_tasks
    finally:
        engine.close()


LOOPING = {"now": True}
"""Whether the stubborn chart's ``explode`` raises itself forever (a runaway macrostep that fails it)."""

STUBBORN = Chart(
    "stubborn",
    state(
        "waiting",
        invoke=[invoke("charge", task="charge", input={"amount": 5})],
        on=[
            transition("done.invoke.charge", "paid"),
            transition("explode", guard=lambda c, e: LOOPING["now"], actions=[raise_event("explode")]),
        ],
    ),
    final("paid", done_data=lambda c, e: e.data),
)
"""While ``LOOPING``, ``explode`` fails the instance without leaving ``waiting``: its task stays retained."""


def test_a_failed_parents_task_does_not_run_and_runs_once_its_parent_is_redriven(bank: Bank) -> None:
    LOOPING["now"] = True
    engine = memory_engine([STUBBORN], {"charge": bank}, embed_tasks=True)
    try:
        stubborn = engine.start("stubborn")
        task_id = _task_of(engine, stubborn).id
        engine.send(stubborn, "explode")
        while engine.process(stubborn) is not None:  # the parent fails before its task's turn
            pass
        engine.run_until_idle()
        assert engine.instance(stubborn).record.status is InstanceStatus.FAILED
        assert bank.keys == []  # the task of a failed parent reads cancelled: its body does not run
        assert engine.instance(task_id).record.status is InstanceStatus.CANCELLED
        LOOPING["now"] = False  # fixed: the redrive processes ``explode`` again, harmlessly
        assert engine.redrive(stubborn, "fixed").written
        engine.run_until_idle()
        assert engine.result(stubborn) == "receipt-1"
        assert bank.keys == [f"{stubborn}/charge//1/attempt-1"]  # the same incarnation, run once
    finally:
        LOOPING["now"] = True
        engine.close()


def test_every_instance_lists_embedded_tasks_at_their_birth(engine: Engine) -> None:
    first = engine.start("errand")
    engine.run_until_idle()
    second = engine.start("errand")
    engine.run_until_idle()
    kinds = [(i.record.kind.value, i.record.root) for i in engine.instances()]
    assert kinds == [("chart", first), ("task", first), ("chart", second), ("task", second)]


def test_the_parents_resume_plan_holds_the_embedded_activation(engine: Engine) -> None:
    errand = engine.start("errand")
    plan = resume_plan(engine.events_of(errand), ERRAND)
    [activation] = plan.activations
    assert activation.embedded and activation == engine.instance(errand).record.activations[0]


# ------------------------------------------------------------------ crashes


def _errand(engine: Engine) -> None:
    engine.start("errand")
    engine.run_until_idle()


def _left_and_back(engine: Engine) -> None:
    errand = engine.start("errand")
    engine.send(errand, "leave")
    engine.send(errand, "back")
    engine.run_until_idle()


def _two_errands(engine: Engine) -> None:
    engine.start("errand")
    engine.start("errand")
    engine.run_until_idle()


@pytest.mark.parametrize("scenario", [_errand, _left_and_back, _two_errands])
def test_a_crash_at_every_commit_recovers_the_same_incarnations_in_memory(scenario: object) -> None:
    checked = check_recovery(scenario, [ERRAND], {"charge": Bank(declines=1)}, embed_tasks=True)  # type: ignore[arg-type]
    assert checked >= 6


def test_a_crash_at_every_commit_recovers_the_same_incarnations_on_sqlite(tmp_path: Path) -> None:
    files = iter(range(1_000))

    def storage() -> Storage:
        return Storage.sqlite(tmp_path / f"errand-{next(files)}.db")

    checked = check_recovery(_errand, [ERRAND], {"charge": Bank()}, storage=storage, embed_tasks=True)
    assert checked == 2 * 3  # two commits (the birth, the outcome with its step), at each point


def test_the_body_runs_again_after_a_crash_before_its_outcome_with_the_same_key(tmp_path: Path) -> None:
    bank = Bank()
    storage = Storage.sqlite(tmp_path / "crash.db")
    engine = Engine(
        [ERRAND],
        {"charge": bank},
        storage=storage,
        clock=VirtualClock(0.0),
        runner=DeterministicRunner(),
        embed_tasks=True,
    )
    errand = engine.start("errand")
    with crash_at(engine, CrashPoint.BEFORE_COMMIT), pytest.raises(SimulatedCrash):
        engine.run_until_idle()  # the body ran; its outcome's commit crashed
    assert len(bank.keys) == 1
    recovered = restart(engine)
    try:
        recovered.run_until_idle()
        assert recovered.result(errand) == "receipt-1"
        assert bank.keys == [bank.keys[0]] * 2  # at least once, the same incarnation
        outcomes = [
            e for e in recovered.events_of(errand) if type(e) is Instance.Stepped and e.received is not None
        ]
        assert len(outcomes) == 1  # its outcome committed once
    finally:
        recovered.close()


def test_an_outcome_committed_before_a_crash_is_not_run_again(tmp_path: Path) -> None:
    bank = Bank()
    engine = Engine(
        [ERRAND],
        {"charge": bank},
        storage=Storage.sqlite(tmp_path / "told.db"),
        clock=VirtualClock(0.0),
        runner=DeterministicRunner(),
        embed_tasks=True,
    )
    errand = engine.start("errand")
    with crash_at(engine, CrashPoint.AFTER_COMMIT), pytest.raises(SimulatedCrash):
        engine.run_until_idle()
    recovered = restart(engine)
    try:
        recovered.run_until_idle()
        assert recovered.result(errand) == "receipt-1"
        assert len(bank.keys) == 1
    finally:
        recovered.close()


def test_a_task_taken_over_mid_run_commits_its_outcome_only_on_the_new_owner(fleet: Fleet) -> None:
    """The new owner of its parent runs the incarnation again; the old owner's outcome is fenced."""
    calls: list[tuple[str, str]] = []
    b: list[Engine] = []

    def charge(call: TaskCall) -> JsonValue:
        calls.append((call.idempotency_key, "A" if not calls else "B"))
        if len(calls) == 1:
            b[0].take_over(call.ref.parent, reason="A stopped heartbeating")  # while A's body runs
        return {"receipt": len(calls)}

    a = fleet("A", tasks={"charge": charge}, embed_tasks=True)
    b.append(live(fleet("B", tasks={"charge": charge}, embed_tasks=True)))
    root = a.start("charging")
    task = only_child(a, root)
    a.run_until_idle()
    assert len(calls) == 1  # A ran the body (its side effect happened) ...
    assert a.instance(task).record.status is InstanceStatus.BORN  # ... and committed no outcome
    assert not a.owns(root) and a.parts.commits.embedded == {}
    b[0].run_until_idle()
    assert [key for key, _ in calls] == [calls[0][0]] * 2  # at least once: the same idempotency key
    assert b[0].instance(task).record.output == {"receipt": 2}  # the new owner's run
    assert b[0].instance(root).record.status is InstanceStatus.DONE
    outcomes = [e for e in b[0].events_of(root) if type(e) is Instance.Stepped and e.received is not None]
    assert len(outcomes) == 1


def test_a_task_taken_over_before_its_body_runs_is_not_run_by_the_old_owner(fleet: Fleet) -> None:
    calls: list[str] = []

    def charge(call: TaskCall) -> JsonValue:
        calls.append(call.idempotency_key)
        return "paid"

    a = fleet("A", tasks={"charge": charge}, embed_tasks=True)
    root = a.start("charging")
    task = only_child(a, root)  # born and queued on A
    b = live(fleet("B", tasks={"charge": charge}, embed_tasks=True))
    b.take_over(root, reason="A stopped heartbeating")
    assert a.process(task) is None
    assert calls == []  # no side effect on the engine that lost the tree
    b.run_until_idle()
    assert len(calls) == 1 and b.instance(root).record.status is InstanceStatus.DONE


def test_a_threaded_runner_runs_many_embedded_tasks_once_each(tmp_path: Path) -> None:
    bank = Bank()
    engine = Engine(
        [ERRAND],
        {"charge": bank},
        storage=Storage.sqlite(tmp_path / "many.db"),
        runner=ThreadedRunner(4),
        embed_tasks=True,
    )
    try:
        errands = [engine.start("errand") for _ in range(40)]
        assert [engine.result(errand, timeout=20) for errand in errands] == ["receipt-1"] * 40
        assert len(bank.keys) == len(set(bank.keys)) == 40
        assert engine.parts.commits.embedded == {}  # nothing of a finished task stays in memory
    finally:
        engine.close()


def test_time_travel_shows_an_embedded_task_alone_and_in_its_tree(engine: Engine) -> None:
    errand = engine.start("errand")
    task_id = _task_of(engine, errand).id
    engine.run_until_idle()
    assert engine.at(task_id, 1).instance.record.status is InstanceStatus.BORN
    done = engine.at(task_id, 2)
    assert done.instance.record.status is InstanceStatus.DONE and done.positions == 2
    assert [type(e).__name__ for e in done.events] == ["Started", "Completed"]
    tree = engine.at(errand, 1, tree=True)
    last = engine.at(errand, tree.positions, tree=True)
    assert last.instances[task_id].record.output == "receipt-1"
    assert last.positions == len(engine.events_of(errand)) + 2  # the parent's events and the task's two


def test_the_command_line_shows_an_embedded_task_in_its_tree_and_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cli.db"
    with Engine([ERRAND], {"charge": Bank()}, storage=Storage.sqlite(path), embed_tasks=True) as engine:
        errand = engine.start("errand")
        engine.run_until_idle()
        task_id = engine.children(errand)[0].id if engine.children(errand) else None
        [task] = [i for i in engine.instances() if i.record.kind is InstanceKind.TASK]
    assert task_id is None  # its outcome was consumed: the parent retains nothing
    assert main(["tree", str(errand), "--db", str(path)]) == 0
    tree = capsys.readouterr().out
    assert str(task.id)[:8] in tree and "charge" in tree and "done" in tree
    assert main(["show", str(task.id), "--db", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "done" in shown and "receipt-1" in shown
    assert main(["list", "--all", "--db", str(path)]) == 0
    listed = capsys.readouterr().out
    assert str(task.id)[:8] in listed


def test_the_command_line_cancels_an_embedded_task_through_its_parent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cancel.db"
    bank = Bank()
    with Engine([ERRAND], {"charge": bank}, storage=Storage.sqlite(path), embed_tasks=True) as engine:
        errand = engine.start("errand").id
        task_id = _task_of(engine, errand).id
    assert main(["cancel", str(task_id), "--db", str(path)]) == 0
    said = capsys.readouterr().out
    assert f"its parent {errand} hears it as the task's failure (error.invoke.charge)" in said
    # The cancel is its outcome, waiting in the parent's inbox: the task reads cancelled already,
    # and so does its listing row.
    assert main(["cancel", str(task_id), "--db", str(path)]) == 2
    assert "is cancelled; there is nothing to cancel" in capsys.readouterr().err
    assert main(["list", "--all", "--db", str(path)]) == 0
    [row] = [line for line in capsys.readouterr().out.splitlines() if line.startswith(str(task_id))]
    assert " cancelled " in row
    with Engine([ERRAND], {"charge": bank}, storage=Storage.sqlite(path), embed_tasks=True) as engine:
        engine.resume_all()
        engine.run_until_idle()
        assert engine.instance(task_id).record.status is InstanceStatus.CANCELLED
        assert engine.result(errand) == "receipt-2"  # the parent retried, with a fresh incarnation
    assert bank.keys == [f"{errand}/charge//2/attempt-2"]


def test_an_embedded_birth_is_logged_as_a_task_birth_with_its_fields(
    bank: Bank, caplog: pytest.LogCaptureFixture
) -> None:
    bank.declines = 1
    clock = VirtualClock(0.0)
    caplog.set_level(logging.INFO, logger="incarnate")
    engine = memory_engine([ERRAND], {"charge": bank}, clock=clock, embed_tasks=True)
    try:
        errand = engine.start("errand")
        engine.run_until_idle()
        clock.advance(60.0)
        engine.run_until_idle()
        births = [
            r for r in caplog.records if r.name == "incarnate.engine.birth" and r.__dict__["kind"] == "task"
        ]
        first, second = [i for i in engine.instances() if i.record.kind is InstanceKind.TASK]
        assert [r.__dict__["instance_id"] for r in births] == [str(first.id), str(second.id)]
        assert [r.__dict__["provenance"] for r in births] == ["birth", "retry"]
        assert all(r.__dict__["parent_id"] == str(errand) and r.__dict__["chart"] == "charge" for r in births)
        assert births[1].__dict__["attempt"] == 2 and births[1].__dict__["ref"] == str(second.record.parent)
        failed = [r for r in caplog.records if r.name == "incarnate.tasks" and r.levelno == logging.WARNING]
        assert [r.__dict__["instance_id"] for r in failed] == [str(first.id)]
    finally:
        engine.close()


def test_resume_all_reads_nothing_of_an_embedded_task(tmp_path: Path) -> None:
    """A pending tree's embedded task is recovered with its parent: no take-over, no read of its own."""
    path = tmp_path / "pending.db"
    with Engine([ERRAND], {"charge": Bank()}, storage=Storage.sqlite(path), embed_tasks=True) as dead:
        errands = [dead.start("errand") for _ in range(5)]  # born, never run
    bank = Bank()
    fresh = Engine(
        [ERRAND],
        {"charge": bank},
        storage=Storage.sqlite(path),
        runner=DeterministicRunner(),
        embed_tasks=True,
    )
    try:
        tasks = {i.id for i in fresh.instances() if i.record.kind is InstanceKind.TASK}
        assert len(tasks) == 5
        recorder = fresh.parts.journal.recorder
        asked: list[uuid.UUID] = []
        select = recorder.select_events

        def spying(originator_id: uuid.UUID, *args: object, **kwargs: object) -> object:
            asked.append(uuid.UUID(str(originator_id)))
            return select(originator_id, *args, **kwargs)  # type: ignore[arg-type]

        recorder.select_events = spying  # type: ignore[method-assign, assignment]
        assert fresh.resume_all() == 5  # the five parents; their tasks are theirs
        assert not tasks & set(asked)
        recorder.select_events = select  # type: ignore[method-assign]
        fresh.run_until_idle()
        assert [fresh.result(errand) for errand in errands] == ["receipt-1"] * 5
        assert len(bank.keys) == 5
    finally:
        fresh.close()


def test_the_console_shows_an_embedded_task_and_its_traceback(tmp_path: Path) -> None:
    bank = Bank(declines=1)
    path = tmp_path / "console.db"
    clock = VirtualClock(0.0)
    with Engine(
        [ERRAND], {"charge": bank}, storage=Storage.sqlite(path), clock=clock, embed_tasks=True
    ) as engine:
        errand = engine.start("errand")
        engine.run_until_idle()
        clock.advance(60.0)
        engine.run_until_idle()
        first, second = [i for i in engine.instances() if i.record.kind is InstanceKind.TASK]
    with TestClient(base_url="http://127.0.0.1", app=create_app(str(path), charts=[ERRAND])) as client:
        failed = client.get(f"/instances/{first.id}")
        parent = client.get(f"/instances/{errand}")
        done = client.get(f"/instances/{second.id}")
    assert failed.status_code == 200 and '<pre class="traceback" id="traceback">Traceback' in failed.text
    assert "declined attempt 1" in failed.text
    assert done.status_code == 200 and "receipt-2" in done.text
    assert parent.status_code == 200 and str(second.id)[:8] in parent.text

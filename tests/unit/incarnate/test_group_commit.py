"""The group committer: concurrent units share a transaction; each thread sees only its own outcome."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any, cast
from uuid import UUID, uuid4

import pytest

from aggregates import Instance
from incarnate._commits import GroupCommit
from incarnate.errors import ConfigurationError

WAIT = 10.0


def units(count: int) -> list[list[Instance]]:
    """``count`` units of work of one distinct instance each (only ids matter to the committer)."""
    return [[cast(Instance, SimpleNamespace(id=uuid4()))] for _ in range(count)]


class Store:
    """A write function that records its transactions and can hold the first one open."""

    def __init__(self, refuse: set[UUID] | None = None) -> None:
        self.transactions: list[list[UUID]] = []
        self.refuse = refuse or set()
        self.hold = threading.Event()
        self.holding = threading.Event()
        self.held = False

    def write(self, instances: Sequence[Instance]) -> None:
        ids = [instance.id for instance in instances]
        if self.held and not self.transactions:
            self.holding.set()
            assert self.hold.wait(WAIT)
        if self.refuse.intersection(ids):
            raise ValueError(f"refused {sorted(self.refuse.intersection(ids))}")
        self.transactions.append(ids)


def in_threads(committer: GroupCommit, work: list[list[Instance]]) -> dict[int, BaseException | None]:
    """Save every unit from a thread of its own; each thread's outcome."""
    return on_threads(len(work), lambda n: committer.save(work[n]))


def on_threads(
    count: int, body: Callable[[int], object], wait: float = WAIT
) -> dict[int, BaseException | None]:
    """``body(n)`` on ``count`` threads at once, joined within ``wait`` s; what each raised (or None)."""
    outcomes: dict[int, BaseException | None] = {}

    def run(n: int) -> None:
        try:
            body(n)
        except BaseException as error:  # noqa: BLE001 - reported to the test
            outcomes[n] = error
        else:
            outcomes[n] = None

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in range(count)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + wait
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads)
    return outcomes


def queued(committer: GroupCommit, count: int) -> bool:
    """Wait until ``count`` units are queued behind the transaction in flight."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if committer.queued() >= count:
            return True
        time.sleep(0.001)
    return False


def test_a_lone_unit_is_written_at_once_in_its_own_transaction() -> None:
    store = Store()
    committer = GroupCommit(store.write)
    (unit,) = units(1)
    committer.save(unit)
    assert store.transactions == [[unit[0].id]]
    assert (committer.transactions, committer.units) == (1, 1)


def test_units_queued_behind_a_transaction_share_the_next_one() -> None:
    """While the first transaction is in flight, five more units queue; they go in one transaction."""
    store = Store()
    store.held = True
    committer = GroupCommit(store.write)
    work = units(6)
    first = threading.Thread(target=committer.save, args=(work[0],))
    first.start()
    assert store.holding.wait(WAIT)
    later: dict[int, BaseException | None] = {}
    runner = threading.Thread(target=lambda: later.update(in_threads(committer, work[1:])))
    runner.start()
    assert queued(committer, 5)
    store.hold.set()
    first.join(WAIT)
    runner.join(WAIT)
    assert set(later.values()) == {None}
    assert len(store.transactions) == 2
    assert sorted(store.transactions[1]) == sorted(unit[0].id for unit in work[1:])
    assert (committer.transactions, committer.units) == (2, 6)


def test_a_refused_unit_fails_alone_and_the_others_are_stored() -> None:
    """The joint transaction fails for one unit's write: each is written again alone."""
    work = units(4)
    bad = work[2][0].id
    store = Store(refuse={bad})
    store.held = True
    committer = GroupCommit(store.write)
    first = threading.Thread(target=committer.save, args=(work[0],))
    first.start()
    assert store.holding.wait(WAIT)
    later: dict[int, BaseException | None] = {}
    runner = threading.Thread(target=lambda: later.update(in_threads(committer, work[1:])))
    runner.start()
    assert queued(committer, 3)
    store.hold.set()
    first.join(WAIT)
    runner.join(WAIT)
    assert later[0] is None and later[2] is None
    assert isinstance(later[1], ValueError) and str(bad) in str(later[1])
    stored = [ids for ids in store.transactions]
    assert [work[0][0].id] in stored and [work[1][0].id] in stored and [work[3][0].id] in stored
    assert all(bad not in ids for ids in stored)
    assert committer.units == 3


def test_two_units_writing_one_instance_never_share_a_transaction() -> None:
    """The second would fail its version check inside the joint one: it waits for the next batch."""
    store = Store()
    store.held = True
    committer = GroupCommit(store.write)
    (blocker,) = units(1)
    shared = cast(Instance, SimpleNamespace(id=uuid4()))
    other = units(1)[0]
    work = [[shared], [shared, *other]]
    first = threading.Thread(target=committer.save, args=(blocker,))
    first.start()
    assert store.holding.wait(WAIT)
    later: dict[int, BaseException | None] = {}
    runner = threading.Thread(target=lambda: later.update(in_threads(committer, work)))
    runner.start()
    assert queued(committer, 2)
    store.hold.set()
    first.join(WAIT)
    runner.join(WAIT)
    assert set(later.values()) == {None}
    assert len(store.transactions) == 3
    assert all(ids.count(shared.id) <= 1 for ids in store.transactions)


def test_a_transaction_carries_at_most_max_batch_units() -> None:
    store = Store()
    store.held = True
    committer = GroupCommit(store.write, max_batch=3)
    work = units(8)
    first = threading.Thread(target=committer.save, args=(work[0],))
    first.start()
    assert store.holding.wait(WAIT)
    later: dict[int, BaseException | None] = {}
    runner = threading.Thread(target=lambda: later.update(in_threads(committer, work[1:])))
    runner.start()
    assert queued(committer, 7)
    store.hold.set()
    first.join(WAIT)
    runner.join(WAIT)
    assert set(later.values()) == {None}
    assert [len(ids) for ids in store.transactions] == [1, 3, 3, 1]


def test_max_wait_lets_a_lone_leader_wait_for_company() -> None:
    """With ``max_wait``, two units arriving close together share a transaction with nothing in flight."""
    store = Store()
    committer = GroupCommit(store.write, max_wait=WAIT, max_batch=2)
    outcomes = in_threads(committer, units(2))
    assert set(outcomes.values()) == {None}
    assert [len(ids) for ids in store.transactions] == [2]  # the batch filled before the wait ended


def test_an_interrupt_in_the_joint_transaction_reaches_every_thread_of_it() -> None:
    """Not an ordinary failure (nothing is retried): no unit of the batch passes for stored."""

    class Stop(BaseException):
        pass

    calls: list[int] = []

    def write(instances: Sequence[Instance]) -> None:
        calls.append(len(instances))
        if len(instances) > 1:
            raise Stop

    committer = GroupCommit(write, max_wait=WAIT, max_batch=2)
    outcomes = in_threads(committer, units(2))
    assert all(isinstance(error, Stop) for error in outcomes.values())
    assert calls == [2]


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("max_batch", 0, "commit_batch must be a whole number of at least 1"),
        ("max_batch", 2.5, "commit_batch must be a whole number of at least 1"),
        ("max_batch", True, "commit_batch must be a whole number of at least 1"),
        ("max_wait", -1, "commit_wait must be a number of seconds of at least 0"),
        ("max_wait", float("nan"), "commit_wait must be a number of seconds of at least 0"),
        ("max_wait", "soon", "commit_wait must be a number of seconds of at least 0"),
    ],
)
def test_bad_settings_are_refused_by_name(option: str, value: Any, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        GroupCommit(Store().write, **{option: value})


def test_many_threads_saving_over_and_over_each_store_every_unit_once() -> None:
    """Leads handed on and units written by others, thousands of times: nothing lost, doubled or hung."""
    threads_count, rounds = 8, 150
    written: list[UUID] = []
    lock = threading.Lock()
    shared = [cast(Instance, SimpleNamespace(id=uuid4())) for _ in range(3)]

    def write(instances: Sequence[Instance]) -> None:
        if len(instances) > 2 and len(written) % 7 == 0:
            raise ValueError("a joint transaction refused: each unit again alone")
        time.sleep(0.0001 if len(instances) % 2 else 0)
        with lock:
            written.extend(instance.id for instance in instances)

    committer = GroupCommit(write, max_batch=4)
    mine: list[list[UUID]] = [[] for _ in range(threads_count)]

    def saver(n: int) -> None:
        for round_ in range(rounds):
            unit = [shared[round_ % 3]] if (n + round_) % 5 == 0 else units(1)[0]
            committer.save(unit)
            mine[n].extend(instance.id for instance in unit)

    assert on_threads(threads_count, saver, 60.0) == dict.fromkeys(range(threads_count))
    expected = sorted(str(i) for ids in mine for i in ids)
    assert sorted(str(i) for i in written) == expected
    assert committer.units == threads_count * rounds
    assert not committer.queued()

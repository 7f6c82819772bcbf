"""AsyncEngine: application calls from an event loop never block it, and async tasks run on the serving loop.

Every test runs on each store (POPO, a SQLite file, PostgreSQL).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import pytest

from aggregates import InstanceStatus
from incarnate import (
    AsyncEngine,
    AsyncInstanceHandle,
    ConfigurationError,
    Engine,
    EngineError,
    InstanceHandle,
    Storage,
    TaskCall,
    TaskFunction,
    ThreadedRunner,
)
from incarnate._engine import forget_memory_store
from statechart import Chart, JsonValue, final, invoke, state, transition
from tests.scenarios.conftest import EngineFactory

CONCURRENT = 200
"""Instances started and answered concurrently from one loop."""
LAG_BOUND = 1.0
"""The longest the loop may be kept from running a ready callback.

A coarse guard only: on a loaded two-core machine a dozen runner and pool
threads contend for the GIL and delay the loop by up to a quarter of a second
without any blocking call on it. Blocking calls are caught exactly by
:func:`spy_threads`, which records the thread every engine call runs on."""


@attrs.frozen
class Ask:
    """Who asked."""

    who: str = ""


APPROVAL = Chart(
    "approval",
    state(
        "asked",
        on=[
            transition("approve", "approved"),
            transition("hold", "held"),
        ],
    ),
    state("held", on=[transition("approve", "approved")]),
    final("approved", done_data=lambda a, e: {"who": a.who, "by": e.data}),
    context=Ask,
)


async def fetch(call: TaskCall) -> JsonValue:
    """An async task: reports the id of the loop it runs on (and which thread runs that loop)."""
    await asyncio.sleep(0.01)
    loop = asyncio.get_running_loop()
    return {"loop": id(loop), "thread": threading.get_ident()}


FETCHING = Chart(
    "fetching",
    state(
        "working",
        invoke=[invoke("fetch", task="fetch")],
        on=[transition("done.invoke.fetch", "done")],
    ),
    final("done", done_data=lambda c, e: e.data),
)


class LagProbe:
    """Sleeps 10 ms in a loop and records the largest overshoot: how long the loop was blocked."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.ticks = 0
        self._stop = asyncio.Event()

    async def run(self) -> None:
        """Tick until stopped (bounded: at most 60 s of ticks)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + 60
        while not self._stop.is_set() and loop.time() < until:
            before = loop.time()
            await asyncio.sleep(0.01)
            self.worst = max(self.worst, loop.time() - before - 0.01)
            self.ticks += 1

    def stop(self) -> None:
        """End the probe."""
        self._stop.set()


async def probed(work: Callable[[], Awaitable[None]]) -> LagProbe:
    """Run ``work`` with a lag probe beside it; the probe's findings."""
    probe = LagProbe()
    ticking = asyncio.create_task(probe.run())
    try:
        await asyncio.wait_for(work(), timeout=120)
    finally:
        probe.stop()
        await ticking
    return probe


def threaded(make_engine: EngineFactory, *charts: Chart[Any], **tasks: TaskFunction) -> Engine:
    """An engine over the test's store whose runner threads do the work."""
    return make_engine(list(charts), tasks or None, runner=ThreadedRunner(workers=4, poll_interval=0.01))


def spy_threads(engine: Engine, *methods: str) -> list[tuple[str, int]]:
    """Record (method, thread id) for every call of the engine's ``methods``; the growing record."""
    calls: list[tuple[str, int]] = []

    def recording(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append((name, threading.get_ident()))
            return method(*args, **kwargs)

        return call

    for name in methods:
        setattr(engine, name, recording(name, getattr(engine, name)))
    return calls


def test_many_concurrent_starts_and_sends_never_block_the_loop(make_engine: EngineFactory) -> None:
    """200 concurrent ``await start/send/result`` on one loop complete; no engine call runs on its thread."""
    engine = threaded(make_engine, APPROVAL)
    calls = spy_threads(engine, "start", "send", "ending")  # a handle's result reads ``ending``
    loop_thread = threading.get_ident()

    async def one(n: int, answers: AsyncEngine) -> JsonValue:
        handle = await answers.start("approval", {"who": f"user-{n}"})
        assert isinstance(handle, AsyncInstanceHandle)
        assert await answers.send(handle, "approve", f"boss-{n}", key=f"answer-{n}") == 1
        return await handle.result(timeout=90)

    results: list[JsonValue] = []

    async def work() -> None:
        answers = AsyncEngine(engine, max_workers=8)
        results.extend(await asyncio.gather(*(one(n, answers) for n in range(CONCURRENT))))
        await answers.aclose()

    probe = asyncio.run(probed(work))
    assert results == [{"who": f"user-{n}", "by": f"boss-{n}"} for n in range(CONCURRENT)]
    assert probe.ticks > 0
    called = {name for name, _ in calls}
    assert called == {"start", "send", "ending"}
    assert sum(name == "start" for name, _ in calls) == CONCURRENT
    on_loop = [name for name, thread in calls if thread == loop_thread]
    assert on_loop == [], f"engine calls ran on the event loop's thread: {sorted(set(on_loop))}"
    assert probe.worst < LAG_BOUND, f"the loop was blocked for {probe.worst:.3f}s"


def test_async_tasks_run_on_the_serving_loop(make_engine: EngineFactory) -> None:
    """While ``serve()`` runs, async task functions run on that loop (not a fresh loop per task)."""
    engine = threaded(make_engine, FETCHING, fetch=fetch)

    async def main() -> tuple[list[JsonValue], int, int]:
        answers = AsyncEngine(engine)
        serving = asyncio.create_task(answers.serve())
        await asyncio.sleep(0)
        handles = [await answers.start("fetching") for _ in range(10)]
        outputs = [await h.result(timeout=60) for h in handles]
        serving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await serving
        return outputs, id(asyncio.get_running_loop()), threading.get_ident()

    outputs, loop_id, thread = asyncio.run(main())
    assert outputs == [{"loop": loop_id, "thread": thread}] * 10
    assert engine.task_loop is None  # serving ended


def test_without_serving_async_tasks_run_on_their_own_loop(make_engine: EngineFactory) -> None:
    """Without ``serve()``, an async task runs to completion on a loop of its own in a runner thread."""
    engine = threaded(make_engine, FETCHING, fetch=fetch)

    async def main() -> tuple[JsonValue, int]:
        answers = AsyncEngine(engine)
        handle = await answers.start("fetching")
        return await handle.result(timeout=60), id(asyncio.get_running_loop())

    output, loop_id = asyncio.run(main())
    assert (
        isinstance(output, dict) and output["loop"] != loop_id and output["thread"] != threading.get_ident()
    )


def test_every_application_call_is_awaitable(make_engine: EngineFactory) -> None:
    """Every application call (start, send, waits, cancel, queries) is a coroutine that returns its result."""
    engine = make_engine([APPROVAL], runner=ThreadedRunner(workers=2, poll_interval=0.01))

    async def main() -> None:
        answers = AsyncEngine(engine, max_workers=2)
        handle = await answers.start("approval", {"who": "ann"})
        assert handle.chart == "approval" and isinstance(handle.sync, InstanceHandle)
        assert handle.id == handle and type(handle.id) is uuid.UUID
        assert await handle.status() is InstanceStatus.RUNNING
        outcome = await answers.send_and_wait(handle, "hold", key="h-1", timeout=30)
        assert outcome.configuration == ("held",)
        receipt = await answers.send_receipt(handle, "hold", key="h-1")
        assert await receipt.wait_async(timeout=5) == outcome
        assert (await answers.snapshot(handle)).configuration == ("held",)
        assert (await answers.snapshot(handle, APPROVAL)).context.who == "ann"
        assert (await answers.instance(handle)).record.status is InstanceStatus.RUNNING
        assert len(await answers.events_of(handle)) >= 3
        assert (await answers.plan(handle)).version >= 1
        assert await answers.parked() == []
        assert await answers.children(handle) == []
        assert handle.id in await answers.instance_ids()
        other = await answers.start(APPROVAL)
        assert await answers.cancel(other, "not needed")
        with pytest.raises(Exception, match="not needed"):
            await answers.result(other, timeout=30)
        assert await answers.send(handle, "approve", "bo") == 2
        assert await (await answers.handle(handle.id)).result(timeout=30) == {"who": "ann", "by": "bo"}

    asyncio.run(main())


def test_async_with_closes_the_engine() -> None:
    """``async with AsyncEngine.open(...)`` closes the engine; a later call raises EngineError saying so."""
    name = f"async-{uuid.uuid4().hex}"
    try:

        async def main() -> AsyncEngine:
            async with AsyncEngine.open([APPROVAL], storage=Storage.popo(name)) as answers:
                handle = await answers.start("approval")
                assert await answers.send(handle, "approve", "x") == 1
            return answers

        answers = asyncio.run(main())
        with pytest.raises(EngineError, match="is closed; build a new one"):
            asyncio.run(answers.parked())
    finally:
        forget_memory_store(name)


def test_max_workers_must_be_positive(make_engine: EngineFactory) -> None:
    """``AsyncEngine(engine, max_workers=0)`` raises ConfigurationError naming the fix."""
    with pytest.raises(ConfigurationError, match="pass max_workers=1 or more"):
        AsyncEngine(make_engine([APPROVAL]), max_workers=0)


def test_the_loop_is_not_blocked_while_a_result_is_awaited(make_engine: EngineFactory) -> None:
    """Awaiting a result that takes a while leaves the loop free (the probe keeps ticking)."""
    engine = threaded(make_engine, APPROVAL)

    async def work() -> None:
        answers = AsyncEngine(engine, max_workers=1)
        handle = await answers.start("approval", {"who": "z"})

        async def answer_later() -> None:
            await asyncio.sleep(0.5)
            await answers.send(handle, "approve", "later")

        later = asyncio.create_task(answer_later())
        started = time.monotonic()
        assert await handle.result(timeout=30) == {"who": "z", "by": "later"}
        assert time.monotonic() - started >= 0.5
        await later

    probe = asyncio.run(probed(work))
    assert probe.ticks >= 20 and probe.worst < LAG_BOUND

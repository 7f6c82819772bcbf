"""AsyncEngine: the engine for asyncio applications (FastAPI, Starlette, aiohttp handlers).

Every call an application makes is a coroutine that never blocks the event
loop. The ``eventsourcing`` recorders (SQLite, psycopg, in-memory) are
synchronous, so each store call runs in a bounded thread pool owned by the
:class:`AsyncEngine` (``max_workers`` threads, the ``asyncio.to_thread``
pattern with a limit of its own): the loop only awaits, and a burst of
requests queues for the pool instead of starving the loop's default
executor. Waiting for a result polls the store from the pool with
``asyncio.sleep`` pauses in between.

:meth:`AsyncEngine.serve` makes the wrapped engine run async task
functions on the serving loop (instead of ``asyncio.run`` per task).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, ParamSpec, Self, TypeVar, overload
from uuid import UUID

from aggregates import Instance, InstanceStatus
from incarnate._engine import Engine
from incarnate._handles import InstanceHandle, SendReceipt, StepOutcome, outcome, plain
from incarnate._recovery import ParkedRoot
from incarnate._tasks import TaskFunction
from incarnate.errors import ConfigurationError, EngineError
from projections import Checkpoint
from statechart import Chart, Event, JsonValue
from statechart.snapshot import Snapshot

P = ParamSpec("P")
T = TypeVar("T")
C = TypeVar("C")

DEFAULT_MAX_WORKERS = 8
"""Threads an :class:`AsyncEngine` runs store calls on, by default."""


class AsyncInstanceHandle(UUID):
    """An instance id whose ``await handle.result()`` waits without blocking the loop.

    Like :class:`InstanceHandle` it is a :class:`uuid.UUID` equal to the
    instance id; its reads run on its :class:`AsyncEngine`'s threads.
    """

    __slots__ = ("_owner", "_sync")

    _owner: AsyncEngine
    _sync: InstanceHandle

    def __init__(self, owner: AsyncEngine, handle: InstanceHandle) -> None:
        super().__init__(int=handle.int)
        object.__setattr__(self, "_owner", owner)
        object.__setattr__(self, "_sync", handle)

    def __repr__(self) -> str:
        return f"AsyncInstanceHandle('{self}', chart={self.chart!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        """A pickled or copied handle is the plain id (a handle is never stored)."""
        return (UUID, (str(self),))

    @property
    def id(self) -> UUID:
        """The instance id as a plain :class:`uuid.UUID`."""
        return UUID(int=self.int)

    @property
    def chart(self) -> str:
        """The name of the instance's chart (or task)."""
        return self._sync.chart

    @property
    def sync(self) -> InstanceHandle:
        """The blocking handle (for code outside the loop)."""
        return self._sync

    async def status(self) -> InstanceStatus:
        """The instance's status, as stored now."""
        return await self._owner.call(self._sync.status)

    async def result(self, timeout: float | None = None) -> JsonValue:
        """Wait for the instance's output (see :meth:`InstanceHandle.result`) without blocking the loop."""
        return await self._sync.result_async(timeout, run=self._owner.call)


class AsyncEngine:
    """An :class:`Engine` for asyncio code: every method is a coroutine that never blocks the loop.

    ``AsyncEngine(engine)`` wraps an engine built as usual (usually with a
    :class:`ThreadedRunner`, or served by a :class:`Worker`);
    :meth:`open` builds one. ``async with`` closes the pool and the engine.
    """

    def __init__(self, engine: Engine, *, max_workers: int = DEFAULT_MAX_WORKERS) -> None:
        if not isinstance(max_workers, int) or max_workers < 1:
            raise ConfigurationError(
                f"an AsyncEngine needs at least one thread for store calls, got max_workers={max_workers!r}; "
                f"pass max_workers=1 or more (the default is {DEFAULT_MAX_WORKERS})"
            )
        self.engine = engine
        self.max_workers = max_workers
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix="incarnate-async")
        self._closed = False
        self._serving: asyncio.Event | None = None

    @classmethod
    def open(
        cls,
        charts: Iterable[Chart[Any]] = (),
        tasks: Mapping[str, TaskFunction] | None = None,
        *,
        max_workers: int = DEFAULT_MAX_WORKERS,
        **engine_options: Any,
    ) -> AsyncEngine:
        """Build the :class:`Engine` (``storage=``, ``runner=``, ... as for ``Engine``) and wrap it."""
        return cls(Engine(charts, tasks, **engine_options), max_workers=max_workers)

    def __repr__(self) -> str:
        return f"AsyncEngine({self.engine.engine_id!r}, max_workers={self.max_workers})"

    # ------------------------------------------------------------ plumbing

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a blocking engine call on this engine's threads and await its result."""
        if self._closed:
            raise EngineError(
                f"async engine {self.engine.engine_id!r} is closed; build a new one "
                "(AsyncEngine.open(...)) or keep its `async with` block open"
            )
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    # ------------------------------------------------------------ commands

    async def start(
        self, chart: str | Chart[Any], input: JsonValue = None, *, id: UUID | None = None
    ) -> AsyncInstanceHandle:
        """Start a root instance of ``chart`` (see :meth:`Engine.start`); its awaitable handle."""
        handle = await self.call(self.engine.start, chart, input, id=id)
        return AsyncInstanceHandle(self, handle)

    async def send(
        self, instance_id: UUID, event: str | Event, data: JsonValue = None, *, key: str | None = None
    ) -> int | None:
        """Durably accept an event for an instance (see :meth:`Engine.send`)."""
        return await self.call(self.engine.send, instance_id, event, data, key=key)

    async def send_receipt(
        self, instance_id: UUID, event: str | Event, data: JsonValue = None, *, key: str | None = None
    ) -> SendReceipt:
        """Send, returning a receipt (``await receipt.wait_async()``; see :meth:`Engine.send_receipt`)."""
        return await self.call(self.engine.send_receipt, instance_id, event, data, key=key)

    async def send_and_wait(
        self,
        instance_id: UUID,
        event: str | Event,
        data: JsonValue = None,
        *,
        key: str | None = None,
        timeout: float | None = None,
    ) -> StepOutcome:
        """Send, then wait for the macrostep that consumed the message (see :meth:`Engine.send_and_wait`)."""
        receipt = await self.send_receipt(instance_id, event, data, key=key)
        return await receipt.wait_async(timeout, run=self.call)

    async def cancel(self, instance_id: UUID, reason: str = "cancelled by an operator") -> bool:
        """Ask an instance to stop (see :meth:`Engine.cancel`)."""
        return await self.call(self.engine.cancel, instance_id, reason)

    # ------------------------------------------------------------ queries

    async def handle(self, instance_id: UUID) -> AsyncInstanceHandle:
        """An awaitable handle on a stored instance (any engine's, any process's)."""
        return AsyncInstanceHandle(self, await self.call(self.engine.handle, instance_id))

    async def result(self, instance_id: UUID, timeout: float | None = None) -> JsonValue:
        """Wait for the output of an instance without blocking the loop (an ended one: from its ending)."""
        ended = await self.call(self.engine.ending, plain(instance_id))
        if ended is not None:
            return outcome(ended)
        return await (await self.handle(instance_id)).result(timeout)

    async def instance(self, instance_id: UUID) -> Instance:
        """The instance aggregate, as stored now."""
        return await self.call(self.engine.instance, plain(instance_id))

    @overload
    async def snapshot(self, instance_id: UUID) -> Snapshot[Any]: ...

    @overload
    async def snapshot(self, instance_id: UUID, chart: Chart[C]) -> Snapshot[C]: ...

    async def snapshot(self, instance_id: UUID, chart: Chart[Any] | None = None) -> Snapshot[Any]:
        """The decoded statechart snapshot of a chart instance (typed by ``chart`` when given)."""
        if chart is None:
            return await self.call(self.engine.snapshot, plain(instance_id))
        return await self.call(self.engine.snapshot, plain(instance_id), chart)

    async def events_of(self, instance_id: UUID) -> list[Any]:
        """Every stored event of an instance, oldest first."""
        return await self.call(self.engine.events_of, plain(instance_id))

    async def plan(self, instance_id: UUID, chart: Chart[Any] | None = None) -> Checkpoint:
        """The instance's resume plan (see :meth:`Engine.plan`)."""
        return await self.call(self.engine.plan, plain(instance_id), chart)

    async def parked(self) -> list[ParkedRoot]:
        """The roots held for an operator."""
        return await self.call(self.engine.parked)

    async def children(self, instance_id: UUID) -> list[Instance]:
        """The children of an instance."""
        return await self.call(self.engine.children, plain(instance_id))

    async def instance_ids(self) -> list[UUID]:
        """Every instance id in the store."""
        return await self.call(lambda: list(self.engine.parts.journal.instance_ids()))

    # ------------------------------------------------------------ serving

    async def serve(self) -> None:
        """Run the engine's async task functions on this loop until cancelled or closed.

        Typically ``asyncio.create_task(engine.serve())`` at application
        start-up. Runner threads hand each async task's coroutine to this
        loop and wait for it; sync tasks still run on the runner threads.
        """
        loop = asyncio.get_running_loop()
        if self.engine.task_loop is not None and self.engine.task_loop is not loop:
            raise EngineError(
                f"engine {self.engine.engine_id!r} already runs its async tasks on another event loop; "
                "serve it from one loop only"
            )
        self._serving = asyncio.Event()
        self.engine.run_tasks_on(loop)
        try:
            await self._serving.wait()
        finally:
            if self.engine.task_loop is loop:
                self.engine.run_tasks_on(None)

    # ------------------------------------------------------------ closing

    async def aclose(self) -> None:
        """Stop serving, close the engine (its runner finishes in-flight work) and the thread pool."""
        if self._closed:
            return
        if self._serving is not None:
            self._serving.set()
        # Closing the engine waits for runner threads, which may wait on async tasks on this loop.
        await asyncio.get_running_loop().run_in_executor(self._pool, self.engine.close)
        self._closed = True
        self._pool.shutdown(wait=False)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

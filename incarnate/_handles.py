"""Result handles: wait for what an instance, or one message sent to it, came to.

:meth:`Engine.start` returns an :class:`InstanceHandle`: a :class:`uuid.UUID`
(equal to, hashing and printing as the instance id, accepted wherever an id
is) that also knows its engine, so ``handle.result(timeout=...)`` waits for
the instance's output. :meth:`Engine.handle` builds one for any stored
instance, also one a worker in another process runs: waiting only reads the
store, so whichever engine runs the instance, the handle sees it finish.
When the handle's own engine commits the ending, that commit wakes it: it
reads at once (the ending, remembered, costs no read of the store) instead
of after its next pause.

:meth:`Engine.send_receipt` returns a :class:`SendReceipt` for one accepted
message; ``receipt.wait()`` returns the :class:`StepOutcome` of the macrostep
that consumed it. The aggregate records that fact: the ``Stepped`` event
names the inbox message it ``consumed`` (``EvidenceRejected`` names one
refused instead), so the outcome is read back from the stored events:
newest first, down to that event, so a wait costs the same on a long
history as on a short one. A save of the instance on the receipt's own
engine wakes a waiting receipt.

Handles are never stored: ids are normalised to plain UUIDs where they
enter the engine, and a pickled or copied handle is a plain UUID.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol, TypeAlias, TypeVar, overload
from uuid import UUID

import attrs

from aggregates import Instance, InstanceStatus, Message
from incarnate._reads import Ending
from incarnate.errors import EngineError, InstanceCancelled, InstanceFailed
from statechart import JsonValue
from statechart.effects import Ignored

T = TypeVar("T")


class InstanceSource(Protocol):
    """What a handle or a receipt reads through: an :class:`~incarnate.Engine`, or anything like it."""

    def instance(self, instance_id: UUID, *, fresh: bool = True) -> Instance:
        """The instance as stored now (``fresh=False``: the reader's last committed copy)."""
        ...

    @overload
    def events_of(self, instance_id: UUID, *, newest_first: Literal[False] = False) -> list[Any]: ...

    @overload
    def events_of(self, instance_id: UUID, *, newest_first: Literal[True]) -> Iterator[Any]: ...

    def events_of(self, instance_id: UUID, *, newest_first: bool = False) -> list[Any] | Iterator[Any]:
        """Every stored event of the instance, oldest first (``newest_first``: read backwards, lazily)."""
        ...

    def ending(self, instance_id: UUID) -> Ending | None:
        """How the instance ended (status, output, error), or None while it has not."""
        ...

    def watch(
        self, instance_id: UUID, wake: Callable[[], None], *, every_save: bool = False
    ) -> AbstractContextManager[None]:
        """Call ``wake`` when this reader's engine saves the instance's ending (``every_save``: any save)."""
        ...


FIRST_POLL = 0.01
"""Seconds before the first re-read of a waiting handle; doubled up to :data:`MAX_POLL`."""
MAX_POLL = 0.2
"""The longest pause between two reads of the store while waiting."""


def plain(instance_id: UUID) -> UUID:
    """``instance_id`` as a plain :class:`uuid.UUID` (a handle is never stored, queued or cached)."""
    if type(instance_id) is UUID:
        return instance_id
    if not isinstance(instance_id, UUID):
        raise EngineError(
            f"an instance id must be a uuid.UUID (or a handle), got {type(instance_id).__name__} "
            f"{instance_id!r}; pass the value start() returned, or uuid.UUID(text)"
        )
    return UUID(int=instance_id.int)


def outcome(ending: Ending) -> JsonValue:
    """The output of a finished instance, or the error that says why it has none."""
    status = ending.status
    if status is InstanceStatus.DONE:
        return ending.output
    instance_id = plain(ending.instance_id)
    if status is InstanceStatus.FAILED:
        raise InstanceFailed(instance_id, ending.error)
    error = ending.error
    reason = str(error.get("cancelled")) if isinstance(error, dict) and "cancelled" in error else str(error)
    if status is InstanceStatus.ORPHAN:
        raise InstanceCancelled(instance_id, reason, "orphaned")
    raise InstanceCancelled(instance_id, reason)


def _timed_out(what: str, timeout: float | None, state: str) -> TimeoutError:
    return TimeoutError(
        f"{what} is still {state} after {timeout}s; wait longer (timeout=None waits forever), or check "
        "that an engine runs it (a worker, or run_until_idle() on a deterministic engine)"
    )


def poll(
    read: Callable[[], T | None],
    timeout: float | None,
    expired: Callable[[], TimeoutError],
    woken: threading.Event | None = None,
) -> T:
    """Call ``read`` until it returns a value (:class:`TimeoutError` past ``timeout``).

    Between two reads it pauses (:data:`FIRST_POLL`, doubled up to
    :data:`MAX_POLL`), or less when ``woken`` is set meanwhile.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = FIRST_POLL
    while True:
        found = read()
        if found is not None:
            return found
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise expired()
            pause = min(pause, left)
        if woken is None:
            time.sleep(pause)
        elif woken.wait(pause):
            woken.clear()  # a wake-up is read once: an ending undone since (a redrive) waits again
        pause = min(pause * 2, MAX_POLL)


Reader: TypeAlias = Callable[[Callable[[], Any]], Awaitable[Any]]
"""Runs a blocking read off the event loop and awaits it (``asyncio.to_thread``, ``AsyncEngine.call``)."""


async def poll_async(
    read: Callable[[], T | None],
    timeout: float | None,
    expired: Callable[[], TimeoutError],
    run: Reader,
    woken: asyncio.Event | None = None,
) -> T:
    """:func:`poll` without blocking the loop: reads run through ``run`` (a thread), pauses are awaited.

    A pause ends early when ``woken`` is set meanwhile.
    """
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    pause = FIRST_POLL
    while True:
        found: T | None = await run(read)
        if found is not None:
            return found
        if deadline is not None:
            left = deadline - loop.time()
            if left <= 0:
                raise expired()
            pause = min(pause, left)
        if woken is None:
            await asyncio.sleep(pause)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), pause)
            woken.clear()  # a wake-up is read once (see poll)
        pause = min(pause * 2, MAX_POLL)


def _waker(loop: asyncio.AbstractEventLoop, woken: asyncio.Event) -> Callable[[], None]:
    """What sets ``woken`` on ``loop`` from another thread (nothing once the loop has closed)."""

    def wake() -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nothing waits any more
            loop.call_soon_threadsafe(woken.set)

    return wake


async def _in_thread(read: Callable[[], T | None]) -> T | None:
    return await asyncio.to_thread(read)


class InstanceHandle(UUID):
    """An instance id that can wait for the instance's result.

    It is a :class:`uuid.UUID` equal to the id (same hash and ``str``), so
    code that keeps, compares or passes the id on keeps working.
    """

    __slots__ = ("_chart", "_engine")

    _engine: InstanceSource
    _chart: str

    def __init__(self, engine: InstanceSource, instance_id: UUID, chart: str) -> None:
        super().__init__(int=instance_id.int)
        object.__setattr__(self, "_engine", engine)
        object.__setattr__(self, "_chart", chart)

    def __repr__(self) -> str:
        return f"InstanceHandle('{self}', chart={self._chart!r})"

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
        return self._chart

    @property
    def engine(self) -> InstanceSource:
        """The engine this handle reads through."""
        return self._engine

    def status(self) -> InstanceStatus:
        """The instance's status, as stored now."""
        return self._engine.instance(self.id).record.status

    def _finished(self) -> Ending | None:
        return self._engine.ending(self.id)

    def _expired(self, timeout: float | None) -> Callable[[], TimeoutError]:
        def expired() -> TimeoutError:
            state = self.status().value
            return _timed_out(f"instance {self.id} ({self._chart!r})", timeout, state)

        return expired

    def result(self, timeout: float | None = None) -> JsonValue:
        """Block until the instance finished; its output.

        Raises :class:`InstanceFailed` or :class:`InstanceCancelled` when it
        ended without one, and :class:`TimeoutError` after ``timeout`` seconds
        (None: wait as long as it takes). It only reads (the store, or the
        final ending the engine that finished the instance remembers), so
        some engine must run the instance: a worker, a threaded runner, or
        ``run_until_idle()`` called first on a deterministic engine. It
        reads again at once when this handle's engine commits the ending,
        else after a pause that grows from 10 ms to 200 ms.
        """
        woken = threading.Event()
        with self._engine.watch(self.id, woken.set):
            return outcome(poll(self._finished, timeout, self._expired(timeout), woken))

    async def result_async(self, timeout: float | None = None, *, run: Reader | None = None) -> JsonValue:
        """:meth:`result` without blocking the event loop.

        Each read of the store runs in a thread: ``run`` (an awaitable
        runner such as :meth:`AsyncEngine.call`), else ``asyncio.to_thread``.
        """
        woken = asyncio.Event()
        with self._engine.watch(self.id, _waker(asyncio.get_running_loop(), woken)):
            finished = await poll_async(
                self._finished, timeout, self._expired(timeout), run or _in_thread, woken
            )
        return outcome(finished)


@attrs.frozen
class StepOutcome:
    """What the macrostep that consumed one inbox message left behind."""

    instance_id: UUID
    seq: int
    """The message's inbox sequence number."""
    version: int | None
    """The version of the event that consumed it (None: the instance ended with it unprocessed)."""
    configuration: tuple[str, ...]
    """The active states right after that macrostep (empty when it was rejected or never processed)."""
    status: InstanceStatus
    """The instance's status when the outcome was read."""
    rejected: str | None = None
    """Why the message was refused instead of processed (stale evidence), or why it never was."""
    ignored: bool = False
    """Whether the macrostep took no transition for it: nothing in the configuration matched its name,
    or every matching transition's guard was false. It was consumed and changed nothing."""

    @property
    def processed(self) -> bool:
        """Whether a macrostep processed the message (also when it :attr:`ignored` it)."""
        return self.rejected is None


class SendReceipt:
    """One message accepted into an instance's inbox; :meth:`wait` for the step it caused."""

    def __init__(self, engine: InstanceSource, instance_id: UUID, seq: int, key: str | None) -> None:
        self.engine = engine
        self.instance_id = plain(instance_id)
        self.seq = seq
        self.key = key

    def __repr__(self) -> str:
        return f"SendReceipt({self.instance_id}, seq={self.seq}, key={self.key!r})"

    def _read(self) -> StepOutcome | None:
        """The outcome once the message has left the inbox; None while it waits there.

        The stored events are read newest first, down to the one that
        consumed the message (usually the last one), and no further unless
        a later event changed the configuration: then down to the nearest
        one that carries the configuration the consuming step left.
        """
        instance = self.engine.instance(self.instance_id)
        record = instance.record
        if any(message.seq == self.seq for message in record.inbox):
            if not record.status.finished:
                return None
            return StepOutcome(
                self.instance_id,
                self.seq,
                None,
                (),
                record.status,
                f"the instance ended ({record.status.value}) before processing it",
            )
        consumer: Any = None
        changed_since = False  # an event after the consumer carries another configuration
        for event in self.engine.events_of(self.instance_id, newest_first=True):
            if consumer is None:
                if getattr(event, "consumed", None) != self.seq:
                    changed_since = changed_since or _configuration_of(event) is not None
                    continue
                consumer = event
                if not isinstance(event, Instance.Stepped):
                    return StepOutcome(
                        self.instance_id,
                        self.seq,
                        event.originator_version,
                        (),
                        record.status,
                        str(getattr(event, "reason", "rejected")),
                    )
                if not changed_since:
                    parts = record.snapshot_parts or {}
                    return self._stepped(consumer, tuple(parts.get("configuration", ())), record.status)
            configuration = _configuration_of(event)
            if configuration is not None:
                return self._stepped(consumer, configuration, record.status)
        if consumer is not None:
            return self._stepped(consumer, (), record.status)  # no step before it carried one
        raise EngineError(
            f"message {self.seq} of instance {self.instance_id} left the inbox but no stored event "
            f"consumed it; its stored events are inconsistent: see incarnate timeline {self.instance_id}"
        )

    def _stepped(self, event: Any, configuration: tuple[str, ...], status: InstanceStatus) -> StepOutcome:
        """The outcome of the ``Stepped`` event that consumed the message."""
        ignored = any(type(effect) is Ignored for effect in event.effects)
        return StepOutcome(
            self.instance_id, self.seq, event.originator_version, configuration, status, ignored=ignored
        )

    def _expired(self, timeout: float | None) -> Callable[[], TimeoutError]:
        def expired() -> TimeoutError:
            state = self.engine.instance(self.instance_id).record.status.value
            what = f"message {self.seq} of instance {self.instance_id}"
            return _timed_out(what, timeout, f"unprocessed (the instance is {state})")

        return expired

    def wait(self, timeout: float | None = None) -> StepOutcome:
        """Wait for the macrostep that consumed the message (:class:`TimeoutError` past ``timeout``).

        When the receipt's engine saves the instance, the save wakes the
        wait and it reads at once; otherwise (another engine runs the
        instance) it reads again after pauses of 10 ms, doubled up to 200 ms.
        """
        woken = threading.Event()
        with self.engine.watch(self.instance_id, woken.set, every_save=True):
            return poll(self._read, timeout, self._expired(timeout), woken)

    async def wait_async(self, timeout: float | None = None, *, run: Reader | None = None) -> StepOutcome:
        """:meth:`wait` without blocking the event loop (reads run through ``run``, else a thread)."""
        woken = asyncio.Event()
        with self.engine.watch(self.instance_id, _waker(asyncio.get_running_loop(), woken), every_save=True):
            return await poll_async(self._read, timeout, self._expired(timeout), run or _in_thread, woken)


def _configuration_of(event: Any) -> tuple[str, ...] | None:
    """The configuration ``event`` leaves, when it carries one (None: it leaves the one before it)."""
    if isinstance(event, Instance.Stepped):
        if event.snapshot is not None:
            return tuple(event.snapshot.get("configuration", ()))
        if event.parts and "configuration" in event.parts:
            return tuple(event.parts["configuration"])
        return None
    if isinstance(event, Instance.Migrated):
        return tuple(event.snapshot.get("configuration", ()))
    return None


def receipt_for_key(engine: InstanceSource, instance_id: UUID, key: str) -> SendReceipt:
    """The receipt of the message accepted earlier under ``key``."""
    for event in engine.events_of(instance_id, newest_first=True):  # a repeat usually follows soon
        message: Message | None
        if isinstance(event, Instance.Accepted):
            message = event.message
        elif isinstance(event, Instance.Stepped):
            message = event.received  # accepted and consumed by one macrostep
        else:
            continue
        if message is not None and message.key == key:
            return SendReceipt(engine, instance_id, message.seq, key)
    raise EngineError(f"instance {instance_id} has no message accepted under key {key!r}")

"""The Engine: a small facade over the parts that run chart instances durably.

:class:`Engine` is what users call: register charts and tasks, start,
send, cancel, wait for results, read instances, recover, migrate. It
composes its parts (``incarnate._parts``) — the journal (a private
``eventsourcing`` Application), the copies, reads, holdings and the commit
path — and delegates to them; recovery, ownership and migration
(``incarnate._recovery``, ``incarnate._ownership``, ``incarnate._migration``)
work on the parts too. Nothing below this module imports it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Literal, Protocol, Self, TypeVar, overload
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from aggregates import ActivationState, Instance, InstanceKind
from aggregates.errors import CorruptRecord
from incarnate import _migration, _ownership, _recovery
from incarnate._clock import Clock, SystemClock
from incarnate._commits import DEFAULT_MAX_BATCH, DEFAULT_MAX_WAIT
from incarnate._committing import MAX_CONFLICT_RETRIES, CommitPath
from incarnate._copies import Catalog, Copies
from incarnate._handles import InstanceHandle, SendReceipt, StepOutcome, outcome, plain, receipt_for_key
from incarnate._holdings import Holdings
from incarnate._http import HttpConfig
from incarnate._journal import Journal
from incarnate._limits import positive_int
from incarnate._listing import Listing
from incarnate._migration import DEFAULT_BATCH_SIZE, InstanceVerdict, MigrationReport
from incarnate._ownership import TakeOver
from incarnate._parts import Parts
from incarnate._process import Decision, decide
from incarnate._reads import Ending, Reads, is_embedded_copy
from incarnate._recovery import ParkedRoot
from incarnate._redrive import Redrive
from incarnate._redrive import fork as fork_instance
from incarnate._redrive import redrive as redrive_instance
from incarnate._runners import DeterministicRunner
from incarnate._storage import Storage
from incarnate._tasks import TaskFunction
from incarnate._travel import History, Moment
from incarnate._work import UnitOfWork
from incarnate.errors import (
    ConfigurationError,
    EngineError,
    Fenced,
    InstanceExists,
    InstanceTerminated,
    NotARoot,
    StorageError,
    TreeHeld,
    UnknownInstance,
)
from incarnate.store import forget_memory_store as forget_named_memory_store
from projections import Checkpoint, is_embedded
from statechart import Chart, Event, JsonValue
from statechart.codec import check_json, check_text, context_from_input
from statechart.errors import CodecError, IncarnateError
from statechart.event import error_invoke_event
from statechart.snapshot import Snapshot

log = logging.getLogger("incarnate.engine")

_START_KEYS = UUID("6a1c3f0e-5b7d-4e0a-9d2c-3f8e1b7a4c55")
"""The namespace of the ids :meth:`Engine.start` derives from an idempotency key (uuid5)."""

C = TypeVar("C")

RESUME_BATCH = 100
"""Call trees :meth:`Engine.resume_all` claims in one save (each read once, acquired as soon as claimed)."""
RESUME_FIRST_BATCH = 4
"""The first batch is small (a tree per default worker thread), so the first trees run at once."""
RESUME_FIRST_CATCH_UP = 50
"""Notifications :meth:`Engine.resume_all` folds into the listing before it takes over the first trees.

A log of tens of thousands of unread notifications takes seconds to fold;
the trees found in its first part start running meanwhile."""
RESUME_FIRST_GRACE = 0.1
"""Seconds :meth:`Engine.resume_all` lets a threaded runner finish the first batch before it reads on.

The process has one core of Python: while the claims of the next batches
and the fold of the rest of the log run, the first trees get a share of it
only. Waiting for the runner to have nothing queued (at most this long)
lets the first results land within milliseconds of the claim."""
RESERVED_PREFIXES = ("done.invoke.", "error.invoke.", "retry.invoke.")
"""Event names that report a child's outcome: they must carry the invoke id of its incarnation."""
DEFAULT_CACHE_SIZE = 50_000
"""Instances an engine keeps in memory (committed copies, decoded snapshots, the library's cache)."""


class Runner(Protocol):
    """The port between the engine and whatever executes its work.

    A runner may say ``runs_work = False`` (a class attribute): it drops
    every notification and never runs anything (an operator's console).
    Its engine then beats no heartbeat, so what it creates or is left
    owning is taken over by the workers at once, never held by a process
    that will not run it. A runner with lanes of its own for task bodies
    may also have ``notify_task(instance_id)``: the engine then tells it
    of a task child just born (or a pending one recovery hands back) with
    that instead of :meth:`notify`.
    """

    def attach(self, engine: Engine) -> None:
        """Bind to an engine (called once by the engine)."""
        ...

    def notify(self, instance_id: UUID) -> None:
        """``instance_id`` may have work now."""
        ...

    def notify_at(self, deadline: float, instance_id: UUID) -> None:
        """``instance_id`` will have work at ``deadline`` (the engine's clock)."""
        ...

    def run_until_idle(self, max_units: int) -> int:
        """Do all due work now, if this runner supports it; returns units done."""
        ...

    def stop(self) -> None:
        """Finish in-flight work and start no more."""
        ...


def forget_memory_store(name: str) -> None:
    """Drop a named in-memory store (tests call this when done with it)."""
    forget_named_memory_store(name)


def _engine_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Engine:
    """Runs chart and task instances, parents and children, durably.

    Everything an instance decides is committed (one atomic save per
    macrostep) before anything is enacted; a :class:`Runner` then works
    through the instances that have something to do.
    """

    def __init__(
        self,
        charts: Iterable[Chart[Any]] = (),
        tasks: Mapping[str, TaskFunction] | None = None,
        *,
        storage: Storage | None = None,
        clock: Clock | None = None,
        runner: Runner | None = None,
        engine_id: str | None = None,
        env: Mapping[str, str] | None = None,
        snapshot_interval: int | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        max_payload_bytes: int | None = None,
        commit_batch: int = DEFAULT_MAX_BATCH,
        commit_wait: float = DEFAULT_MAX_WAIT,
        http: HttpConfig | None = None,
        embed_tasks: bool = True,
    ) -> None:
        self._storage = storage if storage is not None else Storage.from_env()
        store = self._storage.open()
        merged = self._storage.env()
        # Checked on each encoded event before the recorder is called (see incarnate._limits).
        payload_limit = (
            positive_int(max_payload_bytes, "max_payload_bytes")
            if max_payload_bytes is not None
            else self._storage.payload_limit()
        )
        if snapshot_interval is not None:
            if snapshot_interval < 1:
                raise ConfigurationError(f"snapshot_interval must be at least 1, got {snapshot_interval}")
            merged["IS_SNAPSHOTTING_ENABLED"] = "y"
        else:
            merged.setdefault("IS_SNAPSHOTTING_ENABLED", "y")  # spaced by size (incarnate._snapshots)
        # Instances are cached and fast-forwarded from the store before use, so a
        # unit of work reads only the events it has not seen (writes by other
        # engines included); commands always get a private copy.
        if cache_size < 1:
            raise ConfigurationError(
                f"cache_size must be at least 1 instance, got {cache_size}; "
                f"the default is {DEFAULT_CACHE_SIZE}"
            )
        merged.setdefault("AGGREGATE_CACHE_MAXSIZE", str(cache_size))
        if env:
            merged.update(env)
        # One direct connection first: an unreachable server, a missing database or a
        # refused user is reported at once, by name, instead of as a pool timeout.
        store.check()
        journal = Journal(
            store,
            env=merged,
            max_payload_bytes=payload_limit,
            snapshot_interval=snapshot_interval,
            describe=self._storage.describe(),
        )
        self.left_alone: tuple[TreeHeld, ...] = ()
        """The call trees the last :meth:`resume_all` left to their live owners."""
        engine_id = engine_id or _engine_id()
        clock = clock or SystemClock()
        catalog = Catalog()
        copies = Copies(catalog, cache_size)
        reads = Reads(journal, copies, catalog)
        # What this engine holds, has acquired and was fenced from, in one object with one lock.
        holdings = Holdings(fenced_limit=cache_size)
        self._runner: Runner = runner or DeterministicRunner()
        commits = CommitPath(
            engine_id=engine_id,
            clock=clock,
            catalog=catalog,
            journal=journal,
            copies=copies,
            reads=reads,
            holdings=holdings,
            runner=self._runner,
            commit_batch=commit_batch,
            commit_wait=commit_wait,
            http=http,
            embed_tasks=embed_tasks,
        )
        self.parts = Parts(
            engine_id=engine_id,
            clock=clock,
            storage=self._storage,
            catalog=catalog,
            journal=journal,
            copies=copies,
            reads=reads,
            holdings=holdings,
            commits=commits,
        )
        """The parts this engine is composed of (``incarnate._parts``), for the worker, tools and tests."""
        for chart in charts:
            catalog.register(chart)
        for name, fn in (tasks or {}).items():
            catalog.register_task(name, fn)
        # A task function is needed only where tasks run: the runner asks (require_tasks) before
        # it runs work, so an engine that only starts, sends and reads needs no task code.
        catalog.registry.validate(tasks=False)
        journal.record_chart_versions(catalog.charts.values())
        if not isinstance(self._runner, DeterministicRunner) and getattr(self._runner, "runs_work", True):
            self.require_tasks()  # any other runner works as soon as it is attached
            self.parts.heartbeat.start()  # live while it runs work: no other engine takes its trees
        reads.parent_of = self._parent_of
        self._history = History(journal, embedded=reads.embedded_events)
        self._runner.attach(self)

    # ----------------------------------------------------------- what it is

    @property
    def engine_id(self) -> str:
        """This engine's id: the owner its claims and new instances name."""
        return self.parts.engine_id

    @property
    def clock(self) -> Clock:
        """The clock every decision reads."""
        return self.parts.clock

    @property
    def storage(self) -> Storage:
        """Where this engine keeps its events."""
        return self._storage

    @property
    def runner(self) -> Runner:
        """What works through the instances that have something to do."""
        return self._runner

    @property
    def charts(self) -> Mapping[str, Chart[Any]]:
        """The registered charts by name (with the companions they invoke)."""
        return self.parts.catalog.charts

    @property
    def listing(self) -> Listing:
        """The recovery listing of in-flight instances (opened on first use)."""
        return self.parts.listing

    def register(self, chart: Chart[Any]) -> None:
        """Register a chart under its name, with the companion charts it invokes (``Chart.companions``)."""
        self.parts.catalog.register(chart)

    def register_task(self, name: str, fn: TaskFunction) -> None:
        """Register a task callable (sync or async) under ``name``."""
        self.parts.catalog.register_task(name, fn)

    def require_tasks(self) -> None:
        """Raise :class:`~statechart.errors.ChartInvalid` unless every task the charts invoke is registered.

        Runners call it before they run work: an engine that only starts
        roots, sends events and reads (a web handler, a command-line client)
        needs no task functions, but one that runs work needs all of them.
        """
        self.parts.catalog.require_tasks()

    # ----------------------------------------------------------- commands

    def start(
        self,
        chart: str | Chart[Any],
        input: JsonValue = None,
        *,
        id: UUID | None = None,
        key: str | None = None,
    ) -> InstanceHandle:
        """Start a root instance of ``chart``; its first macrostep is committed with its creation.

        ``chart`` is a registered chart's name, or the registered
        :class:`~statechart.Chart` object itself (which a type checker can
        check, unlike a name).

        Returns an :class:`InstanceHandle`: the new instance's id (a
        :class:`uuid.UUID`) that can also wait for its result.

        ``id`` names the new instance (default: a random UUID); an id the
        store already holds raises :class:`InstanceExists`. With ``key``
        (an idempotency key, instead of ``id``) the id is derived from the
        chart's name and the key (:meth:`id_for_key`), so a repeated start
        with the same key and input returns the instance the first one
        started and starts nothing; the same key with another input raises
        :class:`InstanceExists`.

        ``input`` is validated strictly against the chart's context class
        before anything is stored (see :func:`statechart.context_from_input`):
        an unknown field, a value of another type (no conversion between str,
        int, float and bool; an int is accepted for a float) or a str given
        for a collection raises :class:`~statechart.errors.CodecError`.
        """
        parts = self.parts
        chart = parts.catalog.name_of(chart, self.engine_id)
        found = parts.catalog.chart(chart)
        if key is not None:
            if id is not None:
                raise EngineError(f"start {chart!r} with an id or a key, not both (the key derives the id)")
            if not isinstance(key, str) or not key:
                raise EngineError(f"the key of a start must be a non-empty str, got {key!r}")
            try:
                check_text(key, "the start's key")
            except TypeError as error:
                raise EngineError(f"cannot start {chart!r}: {error}") from error
            id = self.id_for_key(chart, key)
        try:
            check_json(input, "input")
        except TypeError as error:
            raise CodecError(
                chart, "input", f"{error}; fix: pass plain JSON data (lists, not tuples or sets)"
            ) from error
        try:
            context_from_input(found, input)
        except IncarnateError:
            raise
        except Exception as error:  # the author's context_from_input refused it
            raise CodecError(
                chart,
                "input",
                f"context_from_input raised {type(error).__name__}: {error}; fix: pass an input it accepts",
            ) from error
        instance = Instance.start_root(
            id=plain(id) if id is not None else uuid.uuid4(),
            kind=InstanceKind.CHART,
            name=chart,
            fingerprint=found.fingerprint,
            input=input,
            owner=self.engine_id,
        )
        commits = parts.commits
        uow = UnitOfWork(commits)
        uow.created[instance.id] = instance
        decide(commits, uow, instance, careful=False)
        try:
            commits.commit(uow)
        except IntegrityError:
            existing = self._existing_start(instance.id, chart, input, key)
            if existing is None:
                raise
            return existing
        if commits.has_work(instance):
            uow.follow(instance.id)
        commits.enact(uow)
        return InstanceHandle(self, instance.id, chart)

    @staticmethod
    def id_for_key(chart: str, key: str) -> UUID:
        """The id :meth:`start` gives a root of ``chart`` started with idempotency key ``key``."""
        return uuid.uuid5(_START_KEYS, f"{chart}\x00{key}")

    def _existing_start(
        self, instance_id: UUID, chart: str, input: JsonValue, key: str | None
    ) -> InstanceHandle | None:
        """After a start's commit conflicted: the instance a repeated keyed start returns, else why not."""
        try:
            existing = self.parts.reads.instance(instance_id)
        except UnknownInstance:
            return None  # the conflict was not the id: the caller re-raises it
        record = existing.record
        if key is None:
            raise InstanceExists(instance_id, chart, f" (a {record.name!r}, {record.status.value})")
        if record.name != chart or record.parent is not None or record.input != input:
            raise InstanceExists(
                instance_id,
                chart,
                f", started earlier under key {key!r} with another chart or input "
                f"({record.name!r}, input {record.input!r})",
            )
        return InstanceHandle(self, instance_id, chart)

    def handle(self, instance_id: UUID) -> InstanceHandle:
        """A handle on a stored instance (any engine's, in any process); :class:`UnknownInstance` if none."""
        instance = self.parts.reads.instance(plain(instance_id))
        return InstanceHandle(self, instance.id, instance.record.name)

    def result(self, instance_id: UUID, timeout: float | None = None) -> JsonValue:
        """Wait for the output of an instance (see :meth:`InstanceHandle.result`).

        An instance that has ended answers from its ending (usually its last
        stored event alone), without reading the whole instance for a handle.
        """
        ended = self.ending(instance_id)
        if ended is not None:
            return outcome(ended)
        return self.handle(instance_id).result(timeout)

    def send_receipt(
        self, instance_id: UUID, event: str | Event, data: JsonValue = None, *, key: str | None = None
    ) -> SendReceipt:
        """:meth:`send`, returning a receipt that can wait for the macrostep that consumed the message.

        A repeated ``key`` returns the receipt of the message first accepted
        under it (nothing new is stored).
        """
        instance_id = plain(instance_id)
        seq = self.send(instance_id, event, data, key=key)
        if seq is None:
            assert key is not None  # only a repeated key is accepted without a new message
            return receipt_for_key(self, instance_id, key)
        return SendReceipt(self, instance_id, seq, key)

    def send_and_wait(
        self,
        instance_id: UUID,
        event: str | Event,
        data: JsonValue = None,
        *,
        key: str | None = None,
        timeout: float | None = None,
    ) -> StepOutcome:
        """:meth:`send_receipt`, then wait (up to ``timeout`` seconds) for the step it caused."""
        return self.send_receipt(instance_id, event, data, key=key).wait(timeout)

    @property
    def task_loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop async tasks run on (see :meth:`run_tasks_on`); None: ``asyncio.run`` per task."""
        return self.parts.commits.task_loop

    def run_tasks_on(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """Run async task functions on ``loop`` (a running loop of another thread); None to stop.

        A runner thread hands the task's coroutine to the loop and waits for
        it, so tasks share the loop's clients and connections instead of a
        fresh loop per task. :meth:`AsyncEngine.serve` does this for its loop.
        """
        self.parts.commits.task_loop = loop

    def send(
        self, instance_id: UUID, event: str | Event, data: JsonValue = None, *, key: str | None = None
    ) -> int | None:
        """Durably accept an event for an instance; returns its inbox sequence number.

        The event is in the store when this returns and is processed exactly
        once. When this engine runs the instance on a ``ThreadedRunner`` and
        no worker is on it, the calling thread also takes the macrostep the
        event causes, in the same commit (see ``ThreadedRunner.inline``).
        With ``key``, a repeated send with the same key is accepted once:
        every repeat returns None, whatever the instance's status (running,
        finished, cancelled, failed). A new key, or no key, to a finished
        instance raises :class:`InstanceTerminated`.

        The name must be a non-empty str and the data plain JSON (no tuple,
        set or object; nothing is converted), else :class:`EngineError` is
        raised and nothing is stored.
        """
        instance_id = plain(instance_id)
        if isinstance(event, str):
            name: object = event
            event = Event(event, data)
        else:
            name = event.name if isinstance(event, Event) else event
        if not isinstance(event, Event) or not isinstance(name, str) or not name:
            raise EngineError(
                f"cannot send {name!r} to instance {instance_id}: an event needs a non-empty str "
                "name; pass send(id, 'name', data) or send(id, Event('name', data))"
            )
        try:
            check_text(name, "the event's name")
            check_json(event.data, "data")
        except TypeError as error:
            raise EngineError(
                f"cannot send {name!r} to instance {instance_id}: {error}; event data must be "
                "plain JSON (None, bool, int, float, str, lists, dicts with str keys)"
            ) from error
        if key is not None and not isinstance(key, str):
            raise EngineError(f"the key of a send must be a str, got {type(key).__name__} {key!r}")
        if key is not None:
            try:
                check_text(key, "the send's key")
            except TypeError as error:
                raise EngineError(f"cannot send {name!r} to instance {instance_id}: {error}") from error
        if event.invoke_id is None and name.startswith(RESERVED_PREFIXES):
            raise EngineError(
                f"cannot send {name!r} to instance {instance_id}: names starting with "
                f"{', '.join(repr(p) for p in RESERVED_PREFIXES)} report a child's outcome and must "
                "name its incarnation; choose another event name, or build the outcome with "
                "done_invoke_event()/error_invoke_event()"
            )
        # Only the holder's last copy is likely current: another engine (a web handler's, a CLI
        # client's) reads fresh, or its save would fail the version check once per send.
        fresh = not self.parts.holdings.holds(instance_id)
        along = True  # consume it in the same commit when this engine runs the instance
        for _ in range(MAX_CONFLICT_RETRIES):
            instance = self.parts.reads.instance(instance_id, fresh=fresh)
            if fresh:
                _ownership.forget_if_claimed(self.parts, instance)
            if key is not None and key in instance.record.keys:
                # Keys are only ever added: even this engine's older copy proves the repeat.
                return None
            if instance.record.status.finished:
                if not fresh:
                    fresh = True
                    continue
                raise InstanceTerminated(instance_id, instance.record.status.value)
            message = instance.accept(event, source=None, sent_at=self.parts.clock.now(), key=key)
            if message is None:
                if not fresh:
                    fresh = True
                    continue
                return None
            uow = UnitOfWork(self.parts.commits, fresh=fresh)
            uow.include(instance)
            uow.sent = (instance_id, message.seq)
            uow.follow(instance_id)
            outcome = self.parts.commits.commit_along(uow, instance_id, along=along, careful=fresh)
            if outcome == "conflict":
                fresh = True
                continue
            if outcome == "alone":
                along = False
                continue
            return message.seq
        raise StorageError(f"could not accept an event for {instance_id}: too many concurrent writers")

    def cancel(self, instance_id: UUID, reason: str = "cancelled by an operator") -> bool:
        """Ask an instance to stop (its children are cancelled in cascade)."""
        instance_id = plain(instance_id)
        for _ in range(MAX_CONFLICT_RETRIES):
            instance = self.parts.reads.instance(instance_id)
            if is_embedded_copy(instance):
                return self._cancel_embedded(instance, reason)
            if not instance.request_cancel(None, reason):
                return False
            try:
                self.parts.commits.save_instances(instance)
            except IntegrityError:
                continue
            self._runner.notify(instance_id)
            return True
        raise StorageError(f"could not cancel {instance_id}: too many concurrent writers")

    def _parent_of(self, task_id: UUID) -> UUID | None:
        """The parent of an embedded task child: from the tasks running here, else from the listing."""
        parts = self.parts
        running = parts.commits.embedded.get(task_id)
        if running is not None:
            return running.parent
        listing = parts.listing
        row = listing.get(task_id)
        if row is None:
            listing.catch_up()
            row = listing.get(task_id)
        return row.parent if row is not None and is_embedded(row) else None

    def _cancel_embedded(self, task: Instance, reason: str) -> bool:
        """Cancel an embedded task: its parent hears of it as a failure, as of a task cancelled on its own.

        The parent's inbox gets the ``error.invoke`` a task with a stream
        reports when someone other than its parent cancels it, from the
        task's id; its body's outcome, if it ends later, is then never
        committed. False when the task has finished or its outcome waits.
        """
        ref = task.record.parent
        assert ref is not None
        parts = self.parts
        for _ in range(MAX_CONFLICT_RETRIES):
            parent = parts.reads.instance(ref.parent)
            activation = parent.record.activation(ref.site, ref.key)
            if (
                parent.record.status.finished
                or activation is None
                or activation.ref != ref
                or activation.state is not ActivationState.RUNNING
                or any(message.source == task.id for message in parent.record.inbox)
            ):
                return False
            cancelled: JsonValue = {"reason": "cancelled", "detail": reason}
            parent.accept(
                error_invoke_event(ref.invoke_id, cancelled), source=task.id, sent_at=parts.clock.now()
            )
            try:
                parts.commits.save_instances(parent)
            except IntegrityError:
                continue
            self._runner.notify(parent.id)
            return True
        raise StorageError(f"could not cancel {task.id}: too many concurrent writers")

    # ----------------------------------------------------------- queries

    def instance(self, instance_id: UUID, *, fresh: bool = True) -> Instance:
        """The instance aggregate, as stored now (``fresh=False``: this engine's last committed copy)."""
        return self.parts.reads.instance(instance_id, fresh=fresh)

    def instances(self) -> Iterator[Instance]:
        """Every instance in the store, in order of creation."""
        return self.parts.reads.instances()

    def children(self, instance_id: UUID) -> list[Instance]:
        """The current incarnations retained by an instance (its activations)."""
        return self.parts.reads.children(instance_id)

    def ending(self, instance_id: UUID) -> Ending | None:
        """How an instance ended (its status, output and error), or None while it has not.

        What ``handle.result()`` waits for: it reads the instance's last
        stored event (one row), not its whole history, whenever that event
        tells.
        """
        return self.parts.reads.ending(plain(instance_id))

    def watch(
        self, instance_id: UUID, wake: Callable[[], None], *, every_save: bool = False
    ) -> AbstractContextManager[None]:
        """A context manager: ``wake()`` is called when this engine saves the ending of ``instance_id``.

        With ``every_save``, it is called each time this engine saves the
        instance (the save that consumes a message is one). A waiting handle
        watches the ending, a waiting :class:`SendReceipt` every save.
        ``wake`` runs on the saving thread right after the save, so it must
        only signal (set an event, schedule a callback on a loop). An
        instance another engine runs never calls it.
        """
        return self.parts.copies.watching(plain(instance_id), wake, every_save=every_save)

    @overload
    def events_of(self, instance_id: UUID, *, newest_first: Literal[False] = False) -> list[Any]: ...

    @overload
    def events_of(self, instance_id: UUID, *, newest_first: Literal[True]) -> Iterator[Any]: ...

    def events_of(self, instance_id: UUID, *, newest_first: bool = False) -> list[Any] | Iterator[Any]:
        """Every stored event of an instance, oldest first (:class:`CorruptRecord` if one does not decode).

        With ``newest_first``, an iterator over them newest first, reading
        the store a page at a time as the iteration goes (the first page
        holds 8 events, each later one twice as many, up to 512): stop once
        the event sought is found, and only the pages up to it are read. It
        yields nothing for an unknown instance.
        """
        journal = self.parts.journal
        if newest_first:
            return self._newest_first(plain(instance_id))
        try:
            return journal.events_of(instance_id)
        except UnknownInstance:
            embedded = self.parts.reads.embedded_events(plain(instance_id))
            if not embedded:
                raise
            return embedded

    def _newest_first(self, instance_id: UUID) -> Iterator[Any]:
        found = False
        for event in self.parts.journal.events_newest_first(instance_id):
            found = True
            yield event
        if not found:
            yield from reversed(self.parts.reads.embedded_events(instance_id))

    @overload
    def snapshot(self, instance_id: UUID) -> Snapshot[Any]: ...

    @overload
    def snapshot(self, instance_id: UUID, chart: Chart[C]) -> Snapshot[C]: ...

    def snapshot(self, instance_id: UUID, chart: Chart[Any] | None = None) -> Snapshot[Any]:
        """The decoded current snapshot of a chart instance.

        Given the instance's ``chart`` (the registered object), the snapshot is
        typed by the chart's context class: ``snapshot(id, APPROVAL).context``
        is an ``Approval``. An instance of another chart raises
        :class:`~incarnate.errors.EngineError`.
        """
        if chart is None:
            return self.parts.reads.snapshot(instance_id)
        return self.parts.reads.snapshot(instance_id, chart)

    def plan(self, instance_id: UUID, chart: Chart[Any] | None = None) -> Checkpoint:
        """The ResumePlan of an instance: its checkpoint rebuilt from the store and validated.

        ``chart`` defaults to the registered chart of the instance.
        """
        return self.parts.reads.plan(instance_id, chart)

    def owns(self, instance_id: UUID) -> bool:
        """Whether this engine holds the instance's current incarnation (read from the store)."""
        return _ownership.owns(self.parts, instance_id)

    # ----------------------------------------------------------- running and recovery

    def run_until_idle(self, max_units: int = 100_000) -> int:
        """Process work until nothing is due (the deterministic runner); returns units done."""
        return self._runner.run_until_idle(max_units)

    def process(self, instance_id: UUID) -> Decision | None:
        """Commit the next unit of work of one instance, then enact it; None when it is idle.

        Only instances this engine holds are processed. One it does not hold
        is taken over through its root when no live engine owns it; one owned
        by another live engine, or dropped after a fenced write, is left alone
        (None).
        """
        parts = self.parts
        holdings = parts.holdings
        embedded = parts.commits.embedded.get(instance_id)
        if embedded is not None:
            return self._run_embedded(instance_id, embedded.parent)
        if holdings.is_fenced(instance_id):
            return None
        if not holdings.holds(instance_id) and not _ownership.adopt(
            parts, instance_id, "processed by a new owner"
        ):
            return None
        if not holdings.is_acquired(instance_id):
            try:
                if not _recovery.acquire(parts, instance_id):
                    return None
            except UnknownInstance:
                return None
        try:
            return parts.commits.work(instance_id)
        except Fenced as error:
            _ownership.drop(parts, instance_id, error)
            return None
        except CorruptRecord as error:
            # A record of this instance (or of one its unit of work reads) does not decode:
            # park the tree it belongs to instead of failing the runner.
            _recovery.park_corrupt(parts, error, instance_id)
            return None

    def _run_embedded(self, task_id: UUID, parent_id: UUID) -> Decision | None:
        """Run an embedded task's body for its parent, which this engine must hold and have acquired."""
        parts = self.parts
        holdings = parts.holdings
        if holdings.is_fenced(parent_id) or not holdings.is_acquired(parent_id):
            parts.commits.embedded.pop(task_id, None)  # its parent runs elsewhere, or not yet here
            return None
        try:
            return parts.commits.work(task_id)
        except Fenced as error:
            parts.commits.embedded.pop(task_id, None)
            _ownership.drop(parts, parent_id, error)
            return None
        except CorruptRecord as error:
            parts.commits.embedded.pop(task_id, None)
            _recovery.park_corrupt(parts, error, parent_id)
            return None

    def take_over(self, root_id: UUID, *, reason: str = "taken over") -> TakeOver:
        """Claim a whole call tree for this engine in one atomic save, then acquire it.

        Raises :class:`~incarnate.errors.TreeHeld` (writing nothing) when a
        member is owned by another live engine, and
        :class:`~incarnate.errors.NotARoot` for a child its caller still
        awaits. See ``docs/explanation/ownership.md``.
        """
        return _ownership.take_over(self.parts, root_id, reason=reason)

    def resume_all(self) -> int:
        """Take over every unfinished call tree no live engine holds; returns how many were acquired.

        Each in-flight root owned by no live engine is taken over with its
        retained children (:meth:`take_over`; a child is never revived on its
        own), 4 trees claimed in the first save and up to 100 in each
        later one; each tree goes to the runner as soon as its claim has
        landed and its ResumePlan is rebuilt, so the first trees run while
        later ones are read. A threaded runner is given up to
        :data:`RESUME_FIRST_GRACE` seconds to finish the first save's trees
        before anything more is read (it goes on as soon as the runner has
        nothing queued). The recovery listing is folded from the event log
        in two parts: the trees found in its first
        :data:`RESUME_FIRST_CATCH_UP` notifications are taken over before the
        rest of the log is read. Trees held by live engines are left alone,
        logged, and listed in :attr:`left_alone` (each a :class:`TreeHeld`
        naming the holder); a tree whose root a live engine owns is known
        from the listing and not read at all. A leftover child whose caller
        has ended is finished (its interrupted cancel cascade completes). A
        tree with a stored record that does not decode is parked with an
        incident naming it; the other trees recover as usual.
        """
        parts = self.parts
        holdings = parts.holdings
        before = holdings.acquisitions()
        held_elsewhere: list[TreeHeld] = []
        seen: set[UUID] = set()
        claimed: set[UUID] = set()
        # The first trees are taken over after a first part of the log is folded, so they run
        # while the rest is read; a root seen then is not taken over twice.
        whole = parts.listing.catch_up(RESUME_FIRST_CATCH_UP) < RESUME_FIRST_CATCH_UP
        children = self._resume_roots(seen, claimed, held_elsewhere, first=True)
        if not whole:
            parts.listing.catch_up()
            children = self._resume_roots(seen, claimed, held_elsewhere, first=False)
        for child_id in children:
            if child_id in claimed or holdings.holds(child_id):
                continue  # claimed above with its tree (it may have finished since)
            try:
                _ownership.take_over(
                    parts, child_id, reason="finishing the cancel cascade of an ended caller"
                )
            except (TreeHeld, NotARoot, UnknownInstance):
                continue  # reached through its root, or held by a live engine
        for held in held_elsewhere:
            log.info(
                "left to its live owner: %s",
                held,
                extra={"engine_id": self.engine_id, "instance_id": str(held.root), "holder": held.holder},
            )
        if held_elsewhere:
            log.info("%d call trees are held by live engines and were left alone", len(held_elsewhere))
        self.left_alone = tuple(held_elsewhere)
        return holdings.acquisitions() - before

    def _resume_roots(
        self, seen: set[UUID], claimed: set[UUID], held_elsewhere: list[TreeHeld], *, first: bool
    ) -> list[UUID]:
        """Take over the in-flight roots the listing holds that are not in ``seen``; the in-flight children.

        Every instance claimed with a tree is added to ``claimed``: a child
        claimed with its tree is not looked at again (one read less each),
        while a child its tree no longer retains (its parent left the state,
        and the cancel had not reached it) is, to finish the cascade.

        The first batch is small (:data:`RESUME_FIRST_BATCH`) when ``first``, so
        that the first trees run at once.
        """
        parts = self.parts
        holdings = parts.holdings
        roots: list[UUID] = []
        children: list[UUID] = []
        live: dict[str, bool] = {}  # each owner's liveness, looked up once
        for row in parts.listing.rows(in_flight=True):
            if row.id in seen or (holdings.is_acquired(row.id) and holdings.holds(row.id)):
                continue
            if is_embedded(row):
                continue  # its parent's: recovered with it (there is nothing of it to claim)
            owner = row.owner
            if owner not in live:
                live[owner] = _ownership.is_live(parts, owner)
            if row.parent is not None:
                if not live[owner]:  # a child a live engine holds is its to finish: never taken here
                    children.append(row.id)
                continue
            seen.add(row.id)
            if live[owner]:
                # Its root is held by a live engine, so the whole tree is (FR-3): left alone
                # without reading it, as a read would find.
                held_elsewhere.append(TreeHeld(row.id, row.id, row.name, owner))
                continue
            roots.append(row.id)
        begin, size = 0, RESUME_FIRST_BATCH if first else RESUME_BATCH
        while begin < len(roots):
            taken, refused = _ownership.take_over_batch(
                parts, roots[begin : begin + size], reason="resumed after a restart"
            )
            held_elsewhere.extend(refused)
            for tree in taken:
                claimed.update(tree.claimed)
            if first and begin == 0 and taken:
                self._let_the_first_trees_run()
            begin, size = begin + size, RESUME_BATCH
        return children

    def _let_the_first_trees_run(self) -> None:
        """Give a runner with threads of its own up to :data:`RESUME_FIRST_GRACE` s to finish what it has.

        A runner that works only when asked (``DeterministicRunner``) has no
        ``wait_until_idle`` and is not waited for.
        """
        wait = getattr(self.runner, "wait_until_idle", None)
        if wait is not None:
            wait(RESUME_FIRST_GRACE)

    def parked(self) -> list[ParkedRoot]:
        """Roots held for an operator, with their incidents."""
        return _recovery.parked(self.parts)

    def migrate(self, instance_id: UUID, mapping: Mapping[str, str]) -> Checkpoint | None:
        """Map a parked instance's stored states onto the registered chart, then unpark its root.

        The mapping is validated before anything is written; the new snapshot
        must fit the chart. Returns the root's checkpoint once it runs again.
        """
        return _migration.migrate(self.parts, instance_id, mapping)

    def check(
        self,
        *,
        chart: str | None = None,
        mapping: Mapping[str, str] | None = None,
        ids: Collection[UUID] | None = None,
    ) -> list[InstanceVerdict]:
        """What would become of every live chart instance under the charts registered here; writes nothing.

        Open an engine with the *new* charts over the store and ask before
        deploying them: each instance resumes, migrates (under ``mapping``),
        needs a mapping, parks, or is held by a live worker, with the reasons
        (see ``incarnate._migration``). ``chart`` and ``ids`` narrow it.
        """
        return _migration.check(self.parts, chart=chart, mapping=mapping, ids=ids)

    def migrate_all(
        self,
        chart: str,
        mapping: Mapping[str, str],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        reason: str = "migrated by an operator",
        progress: Callable[[int, int], None] | None = None,
    ) -> MigrationReport:
        """Migrate every live instance of ``chart`` that :meth:`check` judges *migrates*, in atomic batches.

        Each decision is recorded on its instance (a ``Migrated`` event with
        the batch id and ``reason``) in the commit that changes it; a batch of
        ``batch_size`` is one commit, so a crash leaves each instance migrated
        or untouched and running it again finishes the work. Parked roots
        whose trees then fit are resolved.
        """
        return _migration.apply(
            self.parts, chart=chart, mapping=mapping, batch_size=batch_size, reason=reason, progress=progress
        )

    def resolve(self, root_id: UUID, resolution: str = "resolved by an operator") -> Checkpoint | None:
        """Unpark a root whose tree now decodes (e.g. after registering a compatible chart)."""
        return _migration.resolve(self.parts, root_id, resolution)

    def terminate(self, root_id: UUID, reason: str = "terminated by an operator") -> int:
        """Dispose of a (parked) call tree without running it; returns how many instances ended."""
        return _recovery.terminate(self.parts, root_id, reason)

    # ----------------------------------------------------------- time travel, fork and redrive

    def at(
        self, instance_id: UUID, position: int, *, tree: bool = False, window: int | None = None
    ) -> Moment:
        """An instance (``tree``: its whole call tree) as it was at ``position`` of its history.

        ``position`` is a version of the instance (1 is its creation), or
        with ``tree`` a position in the call tree's events interleaved by
        time. Built from the latest stored snapshot at or before it and the
        events since, folded by the aggregate's own replay; nothing is
        written. A position outside the history raises
        :class:`~incarnate.errors.PositionOutOfRange`. ``Moment.events``
        holds the instance's whole history, or with ``window`` only that
        many events either side of the position (a call tree's moment
        always holds all of it).
        """
        instance_id = plain(instance_id)
        if tree:
            return self._history.tree_moment(instance_id, position)
        return self._history.moment(instance_id, position, window)

    def fork(self, instance_id: UUID, version: int) -> InstanceHandle:
        """Start a new root from ``instance_id``'s checkpoint at ``version``; the source is untouched.

        The new root has a new id (a uuid4), runs the source's chart on its
        input from that checkpoint (configuration, context, timers, and the
        messages waiting in its inbox then), and records its provenance as
        its first fact (``Forked``: the source id and version). A task, a
        version before the first macrostep or after the instance finished,
        a checkpoint with retained children, or one that does not fit the
        registered chart raises :class:`~incarnate.errors.ForkRefused`;
        nothing is written then.
        """
        found = fork_instance(self.parts, self._history, plain(instance_id), version)
        return InstanceHandle(self, found, self.parts.reads.instance(found).record.name)

    def redrive(
        self, instance_id: UUID, reason: str = "redriven by an operator", *, dry_run: bool = False
    ) -> Redrive:
        """Drive a failed or parked root again from its last good checkpoint, keeping its identity.

        The last good checkpoint is the version before the incident that
        failed or parked it; a ``Redriven`` event records the redrive (that
        version, the status it had, ``reason``) before anything runs, and the
        message whose macrostep failed is processed again. ``dry_run`` says
        what would happen and writes nothing. A running or finished
        instance, a child (a child runs again only as a retry its parent
        decides), or a checkpoint changed since raises
        :class:`~incarnate.errors.RedriveRefused`.
        """
        instance_id = plain(instance_id)
        done = redrive_instance(self.parts, self._history, instance_id, reason, dry_run=dry_run)
        if done.written:
            self._runner.notify(instance_id)
        return done

    # ----------------------------------------------------------- lifecycle

    def __enter__(self) -> Self:
        """``with Engine(...) as engine:`` closes the engine on the way out (see :meth:`close`)."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the engine, whether or not the block raised; an exception propagates."""
        self.close()

    def close(self) -> None:
        """Stop the runner gracefully, then close the listing, the coordination and the store."""
        self._runner.stop()
        self.parts.heartbeat.stop(retire=True)  # what it owned is claimable at once
        self.parts.close()

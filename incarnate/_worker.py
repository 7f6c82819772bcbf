"""The worker: an engine that serves a store for as long as it runs, one of a fleet.

A :class:`Worker` turns an :class:`~incarnate.Engine` (with a
:class:`~incarnate.ThreadedRunner`) into a member of an engine group:

- a **heartbeat** thread keeps the engine live (``coordination.beat`` every
  third of the lease), so no other engine takes over what it owns;
- a **follower** thread tails the store's notification log from where it
  stood when the worker started. It waits for new events
  (``coordination.wait``: PostgreSQL LISTEN/NOTIFY, the file's
  ``data_version`` looked at every 10 ms on SQLite), then
  wakes the runner for every instance this engine owns that another process
  sent an event to (or asked to cancel), and takes over every new root whose
  creator is not live (a web handler's plain engine, a CLI client);
- the **recovery manager** sweeps the call trees of engines that died.

Every heartbeat carries the worker's load (:meth:`Worker.load`: the units
of work its runner is on and has queued, whether it leads its group's
recovery, how far its follower stands behind the log), which
``incarnate workers`` and the console's ``/workers`` page read from the store.

A graceful :meth:`Worker.stop` stops taking work, lets the units of work in
progress commit, then retires the heartbeat, so whatever the engine owned is
claimable by the other workers at once.
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Self
from uuid import UUID

import attrs
from eventsourcing.persistence import IntegrityError, Notification
from eventsourcing.utils import get_topic

from aggregates import Instance
from incarnate import _ownership
from incarnate import _placement as placement
from incarnate._fleet import WorkerLoad
from incarnate._manager import DEFAULT_LOCK_ID, RecoveryManager, RecoverySettings
from incarnate._runners import ThreadedRunner
from incarnate.errors import ConfigurationError, EngineError

if TYPE_CHECKING:
    from incarnate._engine import Engine
    from incarnate.store import Coordination

log = logging.getLogger("incarnate.worker")

_SignalHandler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None

WATCHDOG_INTERVAL = 5.0
"""Seconds between two looks of the watchdog at the held instances (see :meth:`Worker._watch`)."""
WATCHDOG_BATCH = 500
"""The most held instances the watchdog looks at per look (the rest at the next ones, in turn)."""

PAST_LIFE_FIRST_BATCH = 10
"""Trees a restarted worker takes back in its first claim (small, so the first run at once)."""
PAST_LIFE_BATCH = 100
"""Trees a restarted worker takes back per claim after the first."""

PLACEMENT_GRACE = 0.5
"""Seconds a new root placed on another worker may stay unowned before it is placed again.

Workers wake within milliseconds of a commit (PostgreSQL's ``NOTIFY``,
SQLite's ``data_version``), so they see a burst of new roots in batches
cut at different places and may disagree on a root's place; the grace
bounds what such a disagreement costs.
"""
COUNTS_FRESH = 1.0
"""Seconds a worker places new roots by the counts it last read, plus its own placements since."""

PLACEMENT_ROUNDS = 2
"""Grace periods after which a new root still unowned is taken by whoever sees it first."""

BATCH = 500
"""Notifications the follower reads per query."""
MAX_FOLLOW_BACKOFF = 5.0
"""The longest the follower waits between attempts while the store keeps failing, in seconds.

Short, so that events sent while the store was away wake their instances
within seconds of its return (each attempt is one cheap query)."""

_STARTED = get_topic(Instance.Started)
_WAKE_TOPICS = tuple(
    get_topic(event)
    for event in (
        Instance.Accepted,
        Instance.CancelRequested,
        Instance.Resolved,
        Instance.Migrated,
        Instance.Redriven,
    )
)
"""Events another process appends to an instance it does not own, which its owner must act on."""

DEFAULT_RECOVERY = RecoverySettings()
"""The recovery manager's settings unless given (its group becomes the worker's)."""


class Worker:
    """Serves an engine's store as one member of an engine group, until stopped.

    ``Worker(engine, group="default", lease=30.0, poll_interval=0.5,
    recovery=RecoverySettings())``: ``lease`` is how long, in seconds, one
    heartbeat keeps the engine live; ``poll_interval`` bounds how long an
    event sent from another process may wait before the follower looks
    (PostgreSQL usually wakes it sooner); ``recovery=None`` runs no recovery
    manager. The engine's runner must be a :class:`ThreadedRunner`.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        group: str = "default",
        lease: float = 30.0,
        poll_interval: float = 0.5,
        recovery: RecoverySettings | None = DEFAULT_RECOVERY,
    ) -> None:
        if not isinstance(engine.runner, ThreadedRunner):
            raise ConfigurationError(
                f"a worker needs an engine with a ThreadedRunner, but engine {engine.engine_id} runs "
                f"{type(engine.runner).__name__}; build it as Engine(..., runner=ThreadedRunner(workers=N))"
            )
        if not group:
            raise ConfigurationError("a worker's group must be a non-empty name, e.g. group='default'")
        if not lease > 0:
            raise ConfigurationError(f"a worker's lease must be a positive number of seconds, got {lease}")
        if not poll_interval > 0:
            raise ConfigurationError(
                f"a worker's poll_interval must be a positive number of seconds, got {poll_interval}"
            )
        self.engine = engine
        self.runner: ThreadedRunner = engine.runner
        self.group = group
        self.lease = lease
        self.poll_interval = poll_interval
        self.recovery = recovery
        self.position = 0
        """The last notification id the follower has read."""
        self._head = 0
        """The head of the notification log when the follower last read it."""
        self._caught_up_at = time.monotonic()
        """When the follower last read the log up to that head."""
        self.manager: RecoveryManager | None = None
        self._watched_at = time.monotonic()
        self._watch_queue: list[UUID] = []
        self._past_life: list[UUID] | None = None
        """The roots a past life of this engine id left, to take back (None: not looked for yet)."""
        self._elsewhere: dict[UUID, tuple[float, int]] = {}
        self._counts: Counter[str] | None = None
        """The in-flight roots per member, as of :attr:`_counts_at`, plus the roots placed since."""
        self._counts_at = 0.0
        """New roots placed on another worker: when, and after how many grace periods (follower only)."""
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._state = "new"
        """``new``, ``running``, ``stopping`` or ``stopped``; a stopped worker may be started again."""

    # ------------------------------------------------------------ lifecycle

    @property
    def coordination(self) -> Coordination:
        """The fleet's shared facts, through the engine's store."""
        return self.engine.parts.coordination

    def _fields(self, instance_id: UUID | None = None) -> dict[str, object]:
        fields: dict[str, object] = {"engine_id": self.engine.engine_id, "group": self.group}
        if instance_id is not None:
            fields["instance_id"] = str(instance_id)
        return fields

    def start(self) -> None:
        """Beat once (the engine is live from now on), then start the threads; a no-op when started."""
        with self._lock:
            if self._state in ("running", "stopping"):
                return
            self._state = "running"
            self._stopping.clear()
            self._stopped.clear()
        engine = self.engine
        try:
            self.manager = self._manager()
            self.coordination.beat(engine.engine_id, self.group, self.lease)
            self.position = self._head = engine.parts.journal.recorder.max_notification_id() or 0
            self._caught_up_at = time.monotonic()
        except BaseException:
            with self._lock:
                self._state = "stopped"
            raise
        engine.parts.heartbeat.configure(group=self.group, lease=self.lease)
        engine.parts.heartbeat.reporting(lambda: self.load().to_json())
        engine.parts.heartbeat.start()
        self._past_life = None
        try:
            self._past_life = self._left_by_a_past_life()
        except Exception as error:  # noqa: BLE001 - the follower looks again, and takes them back then
            log.warning(
                "worker %s could not look for the call trees a past life of its id left (%s); "
                "the follower looks again",
                engine.engine_id,
                error,
                extra=self._fields(),
            )
        self.runner.start()
        self._spawn(self._follow, "incarnate-follower")
        if self.manager is not None:
            self.manager.start()
        log.info(
            "worker %s started on %s (group %s, %d threads, from notification %d)",
            engine.engine_id,
            engine.storage.describe(),
            self.group,
            self.runner.workers,
            self.position,
            extra=self._fields(),
        )

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _manager(self) -> RecoveryManager | None:
        if self.recovery is None or not self.recovery.enabled:
            return None
        return RecoveryManager(self.engine, recovery_settings(self.recovery, self.group))

    def stop(self, timeout: float = 10.0) -> None:
        """Stop gracefully: take no more work, let units in progress commit, retire the heartbeat.

        Whatever the engine owned is claimable by any other engine once this
        returns. The engine stays open (its queries still work); close it
        yourself, or build it with ``with Engine(...) as engine:``.
        """
        with self._lock:
            state = self._state
            if state == "running":
                self._state = "stopping"
        if state == "stopping":  # another thread is stopping it: wait for that
            self._stopped.wait(timeout)
            return
        if state != "running":
            return
        engine = self.engine
        log.info("worker %s stopping", engine.engine_id, extra=self._fields())
        self._stopping.set()
        for thread in self._threads:
            if thread.name == "incarnate-follower":
                thread.join(timeout)
        if self.manager is not None:
            self.manager.stop()
        self.runner.stop(timeout)
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()
        # Beats continued while the last units of work committed; now whatever the engine owned
        # is claimable at once (the recovery managers take a retired owner's trees without a ttl).
        engine.parts.heartbeat.stop(retire=True, timeout=timeout)
        engine.parts.heartbeat.reporting(None)
        with self._lock:
            self._state = "stopped"
        self._stopped.set()
        log.info("worker %s stopped", engine.engine_id, extra=self._fields())

    def serve(self) -> None:
        """Start, block until SIGTERM or SIGINT (or :meth:`stop` from another thread), then stop gracefully.

        The signal handlers are installed only on the main thread, and the
        previous ones are restored on the way out.
        """
        self.start()
        previous: dict[signal.Signals, _SignalHandler] = {}
        if threading.current_thread() is threading.main_thread():

            def handle(number: int, frame: FrameType | None) -> None:
                name = signal.Signals(number).name
                log.info("worker %s received %s", self.engine.engine_id, name, extra=self._fields())
                self._stopping.set()

            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, handle)
        try:
            while not self._stopping.wait(1.0):
                pass
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, signal.SIG_DFL if handler is None else handler)
            self.stop()

    def __enter__(self) -> Self:
        """``with Worker(engine) as worker:`` starts it, and stops it gracefully on the way out."""
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop gracefully (see :meth:`stop`)."""
        self.stop()

    def load(self) -> WorkerLoad:
        """What this worker is doing now: the report each of its heartbeats carries."""
        runner = self.runner.load()
        held, _, _ = self.engine.parts.holdings.sizes()
        manager = self.manager
        return WorkerLoad(
            running=runner.running,
            queued=runner.queued,
            retrying=runner.retrying,
            timers=runner.timers,
            held=held,
            threads=self.runner.workers,
            task_threads=self.runner.task_workers,
            leading=None if manager is None else manager.leading,
            position=self.position,
            behind=max(0, self._head - self.position),
            lag=round(max(0.0, time.monotonic() - self._caught_up_at), 3),
            pid=os.getpid(),
            host=socket.gethostname(),
        )

    # ------------------------------------------------------------- follower

    def _follow(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                self.coordination.wait(self.poll_interval)
                if self._stopping.is_set():
                    return
                self._take_back()
                self.catch_up()
                self._take_unclaimed()
                self._watch()
            except Exception as error:  # the follower outlives a store outage
                failures += 1
                # The first failure with its traceback; then one line each, ever less often.
                pause = min(self.poll_interval * 2**failures, MAX_FOLLOW_BACKOFF)
                log.warning(
                    "worker %s could not follow the store (%s); trying again in %.1fs",
                    self.engine.engine_id,
                    error,
                    pause,
                    exc_info=failures == 1,
                    extra=self._fields(),
                )
                self._stopping.wait(pause)
            else:
                failures = 0

    def _left_by_a_past_life(self) -> list[UUID]:
        """The in-flight roots this engine id owns but this engine does not hold: a past life's.

        A worker restarted with the id it had (``incarnate worker
        --engine-id``) finds its past life's call trees owned by its own id,
        whose heartbeat is live again: no other engine may take them, so it
        takes them back itself, at once. Looked for before this engine runs
        anything, so every root it does not hold is a past life's.
        """
        engine = self.engine
        listing = engine.listing
        listing.catch_up()
        holdings = engine.parts.holdings
        return [
            row.id
            for row in listing.rows(in_flight=True, roots=True)
            if row.owner == engine.engine_id and not holdings.holds(row.id)
        ]

    def _take_back(self) -> None:
        """Take over the trees a past life of this engine id left (once; again after a failure).

        A claim bumps each tree's incarnation, so a past life that is in
        fact still running (two workers given one id) is fenced, never
        doubled.
        """
        if self._past_life is None:
            self._past_life = self._left_by_a_past_life()
        if not self._past_life:
            return
        engine = self.engine
        log.info(
            "worker %s takes back %d call tree(s) a past life of its id left",
            engine.engine_id,
            len(self._past_life),
            extra=self._fields(),
        )
        size = PAST_LIFE_FIRST_BATCH
        while self._past_life and not self._stopping.is_set():
            batch = self._past_life[:size]
            _ownership.take_over_batch(engine.parts, batch, reason=f"taken back by worker {engine.engine_id}")
            del self._past_life[:size]
            size = PAST_LIFE_BATCH

    def catch_up(self) -> int:
        """Read the notification log up to its head and act on it; returns notifications acted on.

        The follower thread calls this after every wait; tests may call it directly.
        """
        recorder = self.engine.parts.journal.recorder
        head = self._head = recorder.max_notification_id() or 0
        acted = 0
        while self.position < head and not self._stopping.is_set():
            batch = recorder.select_notifications(
                self.position + 1, BATCH, stop=head, topics=(_STARTED, *_WAKE_TOPICS)
            )
            acted += self._act(batch)
            self.position = batch[-1].id if len(batch) == BATCH else head
        if self.position >= head:
            self._caught_up_at = time.monotonic()
        return acted

    def _act(self, batch: Sequence[Notification]) -> int:
        engine = self.engine
        woken: list[UUID] = []
        roots: list[UUID] = []
        for notification in batch:
            instance_id = _uuid(notification.originator_id)
            if notification.topic == _STARTED:
                if not engine.parts.holdings.holds(instance_id) and self._is_foreign_root(notification):
                    roots.append(instance_id)
            elif instance_id not in woken and engine.parts.holdings.holds(instance_id):
                # No store read here: processing checks the incarnation before it writes anything.
                woken.append(instance_id)
        for instance_id in woken:
            self.runner.notify(instance_id)
        if woken:
            log.debug(
                "worker %s woke %d instance(s) it owns for events appended to them",
                engine.engine_id,
                len(woken),
                extra={**self._fields(), "instances": ",".join(str(i) for i in woken)},
            )
        for root in self._mine(roots):
            if self._stopping.is_set():
                break
            self._take_over(root)
        return len(woken) + len(roots)

    def _placement_counts(self, among: list[str], batch: set[UUID], *, fresh: bool = False) -> Counter[str]:
        """The in-flight roots each member holds: read from the listing at most every :data:`COUNTS_FRESH` s.

        Workers wake at once, so new roots come a few at a time; reading every
        in-flight root for each of them would cost what the fleet holds, many
        times a second. In between, the roots this worker placed count for
        the member it placed them on. The batch's own roots are left out of a
        fresh count: workers that read the listing at other moments see them
        owned by whoever took them already, and would place them differently.
        ``fresh`` reads the listing whatever the age of the counts (a root
        placed again after a grace period: every worker sees the same owners).
        """
        now = time.monotonic()
        counts = self._counts
        if fresh or counts is None or now - self._counts_at >= COUNTS_FRESH or set(counts) != set(among):
            listing = self.engine.listing
            listing.catch_up()
            # In-flight roots only: the children (a fan-out's many) are not read.
            rows = listing.rows(in_flight=True, roots=True)
            counts = placement.load((row for row in rows if row.id not in batch), among)
            for member in among:
                counts.setdefault(member, 0)
            self._counts, self._counts_at = counts, now
        return counts

    def _mine(self, roots: list[UUID], rounds: int = 0) -> list[UUID]:
        """The new roots placed on this worker (see ``incarnate._placement``); the others wait a while.

        ``rounds`` is how many grace periods the roots have waited already.
        """
        if not roots:
            return roots
        engine = self.engine
        coordination = self.coordination
        group = engine.parts.heartbeat.group
        among = placement.members(coordination.heartbeats(group), group, coordination.now(), engine.engine_id)
        if len(among) == 1:
            return roots
        counts = self._placement_counts(among, set(roots), fresh=rounds > 0)
        placed = placement.place(roots, among, counts)
        for root in roots:  # counted until the next read of the listing, as if already taken
            counts[placed[root]] += 1
        now = time.monotonic()
        mine = []
        for root in roots:
            if placed[root] == engine.engine_id:
                mine.append(root)
            else:
                self._elsewhere[root] = (now, rounds + 1)
        return mine

    def _watch(self) -> None:
        """The watchdog: wake held instances that have work due but that the runner does not know of.

        Every :data:`WATCHDOG_INTERVAL` seconds it looks at up to
        :data:`WATCHDOG_BATCH` held instances (in turn; each read brings this
        engine's copy up to date with one indexed query) and notifies the runner of any
        with a message in its inbox, a timer due, a cancel request or a first
        step to take, that is neither queued, worked on nor waiting for a
        retry. Whatever a lost wake-up or an unforeseen failure left behind
        is then processed within about one interval.
        """
        now = time.monotonic()
        if now - self._watched_at < WATCHDOG_INTERVAL:
            return
        self._watched_at = now
        engine, runner = self.engine, self.runner
        if not self._watch_queue:
            self._watch_queue = list(engine.parts.holdings.held())
        batch, self._watch_queue = self._watch_queue[:WATCHDOG_BATCH], self._watch_queue[WATCHDOG_BATCH:]
        woken = 0
        for instance_id in batch:
            if self._stopping.is_set():
                return
            if runner.working_on(instance_id) or not engine.parts.holdings.holds(instance_id):
                continue
            try:
                instance = engine.instance(instance_id)
            except EngineError:
                continue
            if engine.parts.commits.has_work(instance):
                runner.notify(instance_id)
                woken += 1
        if woken:
            log.warning(
                "worker %s: the watchdog woke %d held instance(s) with work due that nothing was doing",
                engine.engine_id,
                woken,
                extra=self._fields(),
            )

    def _take_unclaimed(self) -> None:
        """Place again the new roots left unowned past the grace period; after a second one, take them.

        A worker placed a root elsewhere when its own reading of the listing
        said so; workers that read it at other moments may disagree, and a
        member may have stopped. After one grace period the roots still
        unowned are placed again (every worker now sees the same owners);
        after another, whoever sees one first takes it.
        """
        if not self._elsewhere:
            return
        now = time.monotonic()
        grace = PLACEMENT_GRACE
        due = [(root, rounds) for root, (since, rounds) in self._elsewhere.items() if now - since >= grace]
        unowned: dict[int, list[UUID]] = {}
        for root, rounds in due:
            del self._elsewhere[root]
            try:
                record = self.engine.instance(root).record
            except EngineError:
                continue
            owner = record.owner
            if record.status.finished or owner == self.engine.engine_id or self.coordination.is_live(owner):
                continue
            unowned.setdefault(rounds, []).append(root)
        for rounds, roots in sorted(unowned.items()):
            for root in roots if rounds >= PLACEMENT_ROUNDS else self._mine(roots, rounds):
                if self._stopping.is_set():
                    return
                self._take_over(root)

    def _is_foreign_root(self, notification: Notification) -> bool:
        """A new root whose creator is another engine that is not live (it holds nothing)."""
        try:
            started = self.engine.parts.journal.mapper.to_domain_event(notification)
        except Exception as error:  # noqa: BLE001 - recovery parks what does not decode
            log.warning(
                "worker %s skipped a new instance whose creation does not decode: %s",
                self.engine.engine_id,
                error,
                extra=self._fields(_uuid(notification.originator_id)),
            )
            return False
        if not isinstance(started, Instance.Started) or started.parent is not None:
            return False
        owner = started.owner
        return owner != self.engine.engine_id and not self.coordination.is_live(owner)

    def _take_over(self, root: UUID) -> None:
        engine = self.engine
        try:
            taken = engine.take_over(
                root, reason=f"a new root, created by an engine that is not live; worker {engine.engine_id}"
            )
        except (EngineError, IntegrityError) as error:
            # Another worker took it first (TreeHeld, a conflict), or it finished meanwhile: all normal.
            log.debug(
                "worker %s did not take over root %s: %s",
                engine.engine_id,
                root,
                error,
                extra=self._fields(root),
            )
            return
        except Exception as error:  # noqa: BLE001 - the recovery manager sweeps it later
            log.warning(
                "worker %s could not take over root %s, left to the recovery manager: %s",
                engine.engine_id,
                root,
                error,
                extra=self._fields(root),
            )
            return
        log.info(
            "worker %s took over root %s (%d instance(s))",
            engine.engine_id,
            root,
            len(taken.claimed),
            extra=self._fields(root),
        )


def _uuid(value: object) -> UUID:
    return value if isinstance(value, UUID) else UUID(str(value))


def recovery_settings(settings: RecoverySettings, group: str) -> RecoverySettings:
    """``settings`` for a worker of ``group``: the group's own name and, unless set, its own leader lock.

    Settings left at the default group take the worker's; another group is a
    configuration error. Each group gets its own advisory lock id (derived
    from its name) unless one was chosen, so two groups on one database each
    elect their own leader.
    """
    default = RecoverySettings()
    if settings.group not in (group, default.group):
        raise ConfigurationError(
            f"the recovery settings name group {settings.group!r} but the worker serves group {group!r}; "
            "give both the same group"
        )
    lock_id = settings.lock_id
    if lock_id == DEFAULT_LOCK_ID and group != default.group:
        digest = hashlib.blake2b(group.encode(), digest_size=8).digest()
        lock_id = int.from_bytes(digest, "big") & (2**63 - 1)
    return attrs.evolve(settings, group=group, lock_id=lock_id)

"""The recovery manager: a background sweep that moves lost call trees to a live engine.

One manager runs per engine (a :class:`~incarnate.Worker` starts it). Every
``scan_interval`` it tries to lead its group (a PostgreSQL advisory lock,
``coordination.lead``; a SQLite or in-memory store always leads), and the
leader sweeps once:

1. catch the listing up, and read the engines' heartbeats once;
2. pick the candidates: in-flight ROOTS (a child is never recovered on its
   own: it moves with its root's tree) whose owner is neither live nor this
   engine, unchanged for at least ``ttl`` seconds — or at once when the
   owner retired (stopped gracefully); and orphans, in-flight
   children whose parent has vanished (no listing row, no stored event) for
   at least ``orphan_grace_period`` seconds;
3. lease a batch of them atomically (``coordination.claim``: a root another
   replica holds is skipped, an expired lease is taken over);
4. hand each leased root to a pool of ``worker_count`` threads that call the
   handler, each bounded by ``item_timeout``; mark each orphan ``orphan``.
   Without a handler of the caller's, the batch's roots are shared out
   among the threads and each share is taken over as
   :meth:`Engine.resume_all` takes trees over: read in two queries, claimed
   in one atomic save, then acquired one by one (a share of ``n`` roots is
   bounded by ``n x item_timeout``); each root still gets its own outcome;
5. release each lease with its outcome, and log
   ``claimed=N dispatched=M succeeded=K failed=F``.

Outcomes: the handler returned → ``succeeded``; a store failure or a
conflict (:class:`~incarnate.errors.StorageError`, ``eventsourcing``'s
``IntegrityError``, ``TreeHeld``, ``Fenced``) → ``transient``, retried at a
later scan; a parked tree or a checkpoint that does not rebuild →
``failed`` (an operator decides); anything else → ``error`` with its
message. A handler still running
after ``item_timeout`` is abandoned: it counts as failed and its lease is
left to expire, and this manager does not try that root again while the
abandoned call still runs.

:meth:`RecoveryManager.stop` is graceful mid-sweep: nothing more is
dispatched, the calls in progress are waited for (each at most until its
``item_timeout``), and the leases not dispatched are left to expire, so a
later sweep — here or on another replica — picks them up again.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING
from uuid import UUID

import attrs
from eventsourcing.persistence import IntegrityError, PersistenceError

from incarnate._ownership import TakeOver, orphan, take_over_batch
from incarnate.errors import ConfigurationError, Fenced, StorageError, TreeHeld
from projections import CheckpointError, ListingRow, is_embedded

if TYPE_CHECKING:
    from incarnate._engine import Engine
    from incarnate.store import Heartbeat

log = logging.getLogger("incarnate.recovery.manager")

DEFAULT_LOCK_ID = 0x1CA7_4A7E_5EC0_7E11
"""The advisory lock id a group's leader holds (63 bits: a PostgreSQL ``bigint``)."""

Handler = Callable[[UUID], object]
"""Recovers one root; returns normally on success (a result with ``parked=True`` counts as failed)."""

SUCCEEDED = "succeeded"
TRANSIENT = "transient"
FAILED = "failed"
ORPHAN = "orphan"
ERROR = "error"

_TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (StorageError, IntegrityError, TreeHeld, Fenced)
"""A store failure or a conflict with another engine: the lease is released ``transient`` and retried."""


def _non_negative(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if value < 0:
        raise ConfigurationError(f"RecoverySettings.{attribute.name} must not be negative, got {value}")


def _positive(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if value <= 0:
        raise ConfigurationError(f"RecoverySettings.{attribute.name} must be positive, got {value}")


def _at_least_one(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ConfigurationError(f"RecoverySettings.{attribute.name} must be at least 1, got {value}")


@attrs.frozen
class RecoverySettings:
    """How the recovery manager of an engine sweeps (see docs/reference/configuration.md)."""

    enabled: bool = True
    """Whether the manager runs at all."""
    ttl: float = attrs.field(default=30.0, validator=_non_negative)
    """Seconds a root must have been unchanged before it is a candidate."""
    scan_interval: float = attrs.field(default=5.0, validator=_positive)
    """Seconds between two scans."""
    batch_size: int = attrs.field(default=100, validator=_at_least_one)
    """The most roots (and orphans) one scan leases."""
    worker_count: int = 4
    """Threads calling the handler at once; at least 1 when enabled."""
    lease_duration: float = attrs.field(default=30.0, validator=_positive)
    """Seconds a lease keeps other replicas off a root."""
    lock_id: int = DEFAULT_LOCK_ID
    """The advisory lock the group's leader holds (PostgreSQL); one per group."""
    group: str = "default"
    """The engine group: engines that may recover each other's call trees."""
    orphan_grace_period: float = attrs.field(default=1800.0, validator=_non_negative)
    """Seconds a child whose parent vanished is left before it is marked ``orphan``; 0 disables."""
    item_timeout: float = attrs.field(default=1.0, validator=_positive)
    """Seconds one handler call may run before it is abandoned (its lease then expires)."""

    def warnings(self) -> list[str]:
        """The unsafe combinations of these settings, each as a sentence naming the fix."""
        if not self.enabled:
            return []
        found: list[str] = []
        if self.lease_duration < self.scan_interval:
            found.append(
                f"lease_duration ({self.lease_duration:g} s) is shorter than scan_interval "
                f"({self.scan_interval:g} s): a lease may lapse before the next scan sees its outcome; "
                "make lease_duration at least scan_interval"
            )
        if self.worker_count >= 1:
            rounds = math.ceil(self.batch_size / self.worker_count)
            worst = rounds * self.item_timeout
            if self.lease_duration < worst:
                found.append(
                    f"lease_duration ({self.lease_duration:g} s) is shorter than a batch's worst case, "
                    f"ceil(batch_size / worker_count) x item_timeout = {rounds} x {self.item_timeout:g} s "
                    f"= {worst:g} s: the last roots of a batch may be leased again by another replica "
                    "while this one still recovers them; raise lease_duration or worker_count, or lower "
                    "batch_size or item_timeout"
                )
        return found


@attrs.frozen
class SweepReport:
    """What one scan did."""

    leader: bool
    """Whether this engine led its group (a non-leader does not sweep; every count is 0)."""
    candidates: int = 0
    """Roots and orphans eligible before leasing."""
    claimed: int = 0
    """Leased to this engine by this scan."""
    dispatched: int = 0
    """Handed to a worker (the rest were left to expire because the manager stopped)."""
    succeeded: int = 0
    failed: int = 0
    """Dispatched and not succeeded: transient, parked, checkpoint, handler errors and timeouts."""
    orphaned: int = 0
    """Children written ``orphan``."""
    transient: int = 0
    errors: int = 0
    timed_out: int = 0
    cancelled: bool = False
    """Whether :meth:`RecoveryManager.stop` interrupted the fan-out."""

    @property
    def summary(self) -> str:
        """The one-line summary the sweep logs."""
        return (
            f"claimed={self.claimed} dispatched={self.dispatched} succeeded={self.succeeded} "
            f"failed={self.failed} orphaned={self.orphaned}"
        )


@attrs.frozen
class _Outcome:
    outcome: str
    message: str = ""


@attrs.frozen
class _Item:
    """What one call of the fan-out recovers: a share of the batch's roots, or one orphan."""

    roots: tuple[UUID, ...]
    orphan: bool = False


SHARE_LIMIT = 100
"""The most roots one call takes over together (one claim save), whatever the batch size."""

REASON = "recovery manager"
"""The reason every take-over by the recovery manager names."""


@attrs.define
class _Tally:
    dispatched: int = 0
    succeeded: int = 0
    failed: int = 0
    orphaned: int = 0
    transient: int = 0
    errors: int = 0
    timed_out: int = 0


class RecoveryManager:
    """Sweeps the call trees of dead engines over to this one, as the leader of its group.

    Thread-safe: :meth:`sweep` runs one scan at a time; :meth:`start` runs
    scans on a background thread until :meth:`stop`.
    """

    def __init__(
        self,
        engine: Engine,
        settings: RecoverySettings | None = None,
        handler: Handler | None = None,
    ) -> None:
        self.engine = engine
        self.settings = settings if settings is not None else RecoverySettings()
        if self.settings.enabled and self.settings.worker_count < 1:
            raise ConfigurationError(
                f"RecoverySettings.worker_count must be at least 1 while the recovery manager of "
                f"engine {engine.engine_id} is enabled, got {self.settings.worker_count}; "
                "raise it, or pass enabled=False"
            )
        self.handler: Handler = handler if handler is not None else self._take_over
        self._shared = handler is None
        """Whether a batch's roots are taken over in shares (the default handler), not one by one."""
        self._backlog: list[tuple[UUID, str]] = []
        """The roots (and owners) the last scan found and did not lease, in listing order (see
        :meth:`_candidates`)."""
        self._backlog_at = 0.0
        self._owners: dict[UUID, str] = {}
        """The owner of each root the last read of the listing found lost."""
        self._orphans_at: float | None = None
        """When (monotonic) the last scan looked for orphans (see :meth:`_orphan_scan_due`)."""
        self._sweep_lock = threading.Lock()
        self._stopping = threading.Event()
        self._burst: int | None = None
        """Sweeps still allowed back to back while a backlog drains (None: no backlog yet)."""
        self._thread: threading.Thread | None = None
        self._leading: bool | None = None
        self._running_lock = threading.Lock()
        self._running: set[UUID] = set()
        self._abandoned: set[UUID] = set()

    # ---------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Warn about unsafe settings, then scan every ``scan_interval`` on a background thread."""
        if not self.settings.enabled:
            log.debug("recovery manager of engine %s is disabled", self.engine.engine_id)
            return
        if self._thread is not None and self._thread.is_alive():
            return
        for warning in self.settings.warnings():
            log.warning("recovery manager of engine %s: %s", self.engine.engine_id, warning)
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._loop, name=f"incarnate-recovery-{self.engine.engine_id}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float | None = None) -> bool:
        """Stop scanning, gracefully mid-sweep; True when the background thread ended in time.

        Nothing more is dispatched; calls in progress are waited for (each at
        most until its ``item_timeout``); leases not dispatched are left to
        expire. ``timeout`` defaults to ``item_timeout`` plus 10 seconds.
        """
        self._stopping.set()
        bound = self.settings.item_timeout + 10.0 if timeout is None else timeout
        deadline = time.monotonic() + bound
        thread = self._thread
        if thread is not None:
            thread.join(bound)
            self._thread = None
        # A sweep called directly (not from the background thread) is waited for too.
        ended = self._sweep_lock.acquire(timeout=max(0.0, deadline - time.monotonic()))
        if ended:
            try:
                self._resign()
            finally:
                self._sweep_lock.release()
        else:
            log.warning(
                "recovery manager of engine %s did not stop within %g s; its sweep ends on its own "
                "once the calls in progress reach item_timeout",
                self.engine.engine_id,
                bound,
            )
        return ended

    def __enter__(self) -> RecoveryManager:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def leading(self) -> bool:
        """Whether this engine led its group at its last scan (False before its first and after a stop)."""
        return self._leading is True

    @property
    def running(self) -> frozenset[UUID]:
        """Roots whose handler call is still running (abandoned ones included)."""
        with self._running_lock:
            return frozenset(self._running)

    def _loop(self) -> None:
        while not self._stopping.is_set():
            report: SweepReport | None = None
            try:
                report = self.sweep()
            except Exception:
                log.warning(
                    "recovery sweep of engine %s failed; retrying in %g s",
                    self.engine.engine_id,
                    self.settings.scan_interval,
                    exc_info=True,
                )
            if report is not None and self._more_at_once(report):
                continue  # a full batch that all went well: the backlog goes on, without waiting
            self._burst = None
            self._stopping.wait(self.settings.scan_interval)

    def _more_at_once(self, report: SweepReport) -> bool:
        """Whether to sweep again at once: a full batch was leased and every root of it succeeded.

        A backlog is then recovered as fast as the workers go, not at one
        batch per scan interval. The sweeps in a row are bounded by the
        backlog the first of them saw (its candidates over the batch size),
        and any failure (a transient one included) waits for the interval,
        so nothing is retried in a tight loop.
        """
        full = (
            report.claimed >= self.settings.batch_size
            and report.dispatched == report.claimed
            and report.succeeded == report.claimed
        )
        if not full:
            return False
        if self._burst is None:
            self._burst = -(-report.candidates // self.settings.batch_size) - 1
        if self._burst <= 0:
            return False
        self._burst -= 1
        return True

    def _resign(self) -> None:
        if self._leading:
            try:
                self.engine.parts.coordination.resign(self.settings.lock_id, self.engine.engine_id)
            except Exception:  # a closed store has released the lock already
                log.debug("resigning leadership of engine %s failed", self.engine.engine_id, exc_info=True)
            self._set_leading(False)

    # -------------------------------------------------------------- sweep

    def sweep(self) -> SweepReport:
        """One scan: lead, pick candidates, lease a batch, recover it; returns what it did.

        After :meth:`stop` it does nothing (``cancelled``) until :meth:`start`.
        """
        with self._sweep_lock:
            if self._stopping.is_set():
                return SweepReport(leader=bool(self._leading), cancelled=True)
            coordination = self.engine.parts.coordination
            engine_id = self.engine.engine_id
            leading = coordination.lead(self.settings.lock_id, engine_id)
            self._set_leading(leading)
            if not leading:
                self._backlog = []
                return SweepReport(leader=False)
            roots, orphans = self._candidates()
            candidates = [*roots, *orphans]
            if not candidates or self._stopping.is_set():
                return SweepReport(leader=True, candidates=len(candidates), cancelled=self._stopping.is_set())
            claimed, examined = self._lease(candidates)
            # The roots this scan did not reach are the next scan's candidates while they are fresh: a
            # backlog drains without reading every in-flight listing row again for each batch.
            orphan_ids = set(orphans)
            owners = self._owners
            self._backlog = [(root, owners[root]) for root in candidates[examined:] if root in owners]
            self._backlog_at = time.monotonic()
            tally = _Tally()
            cancelled = self._fan_out(self._items(claimed, orphan_ids), tally)
            report = SweepReport(
                leader=True,
                candidates=len(candidates),
                claimed=len(claimed),
                dispatched=tally.dispatched,
                succeeded=tally.succeeded,
                failed=tally.failed,
                orphaned=tally.orphaned,
                transient=tally.transient,
                errors=tally.errors,
                timed_out=tally.timed_out,
                cancelled=cancelled,
            )
            self._log_report(report)
            return report

    def _set_leading(self, leading: bool) -> None:
        if leading == self._leading:
            return
        if leading:
            log.info(
                "engine %s now leads recovery of group %r (lock %d)",
                self.engine.engine_id,
                self.settings.group,
                self.settings.lock_id,
            )
        elif self._leading is not None:
            log.info(
                "engine %s no longer leads recovery of group %r", self.engine.engine_id, self.settings.group
            )
        self._leading = leading

    def _log_report(self, report: SweepReport) -> None:
        if report.cancelled:
            log.debug(
                "recovery fan-out of engine %s cancelled by stop(): %d leases left to expire",
                self.engine.engine_id,
                report.claimed - report.dispatched,
            )
        level = logging.WARNING if report.dispatched < report.claimed else logging.INFO
        log.log(level, "recovery sweep of engine %s: %s", self.engine.engine_id, report.summary)

    # --------------------------------------------------------- candidates

    def _lease(self, candidates: list[UUID]) -> tuple[list[UUID], int]:
        """Lease up to ``batch_size`` of ``candidates`` in order: the roots leased, and how many were seen.

        The candidates are offered a slice of twice the batch size at a
        time (a lease another replica holds is skipped), so a long backlog
        costs each scan what its batch costs, not what the backlog does.
        """
        coordination = self.engine.parts.coordination
        limit = self.settings.batch_size
        won: list[UUID] = []
        examined = 0
        while len(won) < limit and examined < len(candidates):
            offered = candidates[examined : examined + 2 * limit]
            got = coordination.claim(
                offered, self.engine.engine_id, self.settings.lease_duration, limit - len(won)
            )
            won.extend(got)
            if len(won) >= limit and got:
                examined += offered.index(got[-1]) + 1
            else:
                examined += len(offered)
        return won, examined

    def _candidates(self) -> tuple[list[UUID], list[UUID]]:
        """Roots of dead owners past ``ttl``, and orphans past the grace period, in listing order.

        While the previous scan's leftover roots are younger than
        ``scan_interval`` they are the candidates (a backlog draining batch
        after batch); the listing is read again once they are used up or
        stale; a leftover whose owner has come back to life since is
        dropped (the heartbeats are read at every scan). One that has
        finished or moved meanwhile costs nothing wrong: the take-over
        reads the tree and claims only what is still lost.
        """
        coordination = self.engine.parts.coordination
        if self._backlog and time.monotonic() - self._backlog_at < self.settings.scan_interval:
            running = self.running
            now = coordination.now()
            beats = coordination.heartbeats()
            left = [
                root
                for root, owner in self._backlog
                if root not in running and self._claimable(owner, beats, now)
            ]
            if left:
                return left, []
        self._backlog = []
        listing = self.engine.listing
        listing.catch_up()
        roots = listing.rows(in_flight=True, roots=True)
        now = coordination.now()
        beats = coordination.heartbeats()
        running = self.running
        lost = [
            row
            for row in roots
            if row.id not in running
            and self._claimable(row.owner, beats, now)
            and (now - row.changed_at >= self.settings.ttl or _retired(beats.get(row.owner)))
        ]
        self._owners = {row.id: row.owner for row in lost}
        orphans: list[UUID] = []
        if self._orphan_scan_due():
            orphans = self._orphans(listing.rows(in_flight=True), now, running)
        return [row.id for row in lost], orphans

    def _orphan_scan_due(self) -> bool:
        """Whether this scan looks for orphans: at most every tenth of ``orphan_grace_period``.

        Finding them reads every in-flight row, children included (a
        fan-out's children outnumber the roots); a scan for lost roots reads
        the in-flight roots only.
        """
        grace = self.settings.orphan_grace_period
        if grace <= 0:
            return False
        now = time.monotonic()
        if self._orphans_at is not None and now - self._orphans_at < max(
            self.settings.scan_interval, grace / 10
        ):
            return False
        self._orphans_at = now
        return True

    def _claimable(self, owner: str, beats: dict[str, Heartbeat], now: float) -> bool:
        """Whether a tree owned by ``owner`` is this group's to recover: the owner is not live, nor us."""
        if owner == self.engine.engine_id:
            return False
        beat = beats.get(owner)
        if beat is None:
            return True  # retired, or never beat (a plain engine or a command-line client)
        return beat.expires_at <= now and beat.group == self.settings.group

    def _orphans(self, rows: Iterable[ListingRow], now: float, running: frozenset[UUID]) -> list[UUID]:
        grace = self.settings.orphan_grace_period
        if grace <= 0:
            return []
        listed = {row.id for row in rows}
        vanished: dict[UUID, bool] = {}
        found: list[UUID] = []
        for row in rows:
            parent = row.parent
            if parent is None or parent in listed or row.id in running or now - row.changed_at < grace:
                continue
            if is_embedded(row):
                continue  # an embedded task lives in its parent's events: never an orphan of its own
            if parent not in vanished:
                vanished[parent] = self._vanished(parent)
            if vanished[parent]:
                found.append(row.id)
        return found

    def _vanished(self, instance_id: UUID) -> bool:
        """Whether an instance has neither a listing row nor a stored event."""
        if self.engine.listing.get(instance_id) is not None:
            return False
        try:
            return not self.engine.parts.journal.recorder.select_events(instance_id, limit=1)
        except PersistenceError as error:
            raise StorageError(
                f"could not read the events of {instance_id} in {self.engine.storage.describe()}: {error}"
            ) from error

    # ----------------------------------------------------------- fan-out

    def _items(self, claimed: list[UUID], orphans: set[UUID]) -> list[_Item]:
        """The calls that recover a leased batch: one per orphan, and one per root or share of roots.

        With the default handler the roots are shared out evenly among the
        ``worker_count`` threads (at most :data:`SHARE_LIMIT` roots a share),
        each share taken over with one claim save; a handler of the
        caller's is called once per root.
        """
        roots = [root for root in claimed if root not in orphans]
        items = [_Item((root,), orphan=True) for root in claimed if root in orphans]
        size = 1
        if self._shared and roots:
            size = min(SHARE_LIMIT, max(1, math.ceil(len(roots) / self.settings.worker_count)))
        items[:0] = [_Item(tuple(roots[begin : begin + size])) for begin in range(0, len(roots), size)]
        return items

    def _fan_out(self, items: list[_Item], tally: _Tally) -> bool:
        """Recover the leased items with at most ``worker_count`` at once; True when stop() cut it short.

        Each call runs on its own daemon thread, so an abandoned (hung) call
        never holds up the next ones nor the interpreter's exit. A call on
        ``n`` roots may run ``n x item_timeout`` seconds.
        """
        pending = collections.deque(items)
        running: dict[concurrent.futures.Future[dict[UUID, _Outcome]], tuple[_Item, float]] = {}
        timeout = self.settings.item_timeout
        while pending or running:
            while pending and len(running) < self.settings.worker_count and not self._stopping.is_set():
                item = pending.popleft()
                running[self._dispatch(item)] = (item, time.monotonic() + timeout * len(item.roots))
                tally.dispatched += len(item.roots)
            if not running:
                break
            nearest = min(deadline for _, deadline in running.values())
            done, _ = concurrent.futures.wait(
                running,
                timeout=max(0.0, nearest - time.monotonic()),
                return_when=concurrent.futures.FIRST_COMPLETED,
            )
            for future in done:
                running.pop(future)
                self._settle(future.result(), tally)
            now = time.monotonic()
            for future, (item, deadline) in list(running.items()):
                if deadline <= now and not future.done():
                    del running[future]
                    with self._running_lock:
                        self._abandoned.update(root for root in item.roots if root in self._running)
                    tally.failed += len(item.roots)
                    tally.timed_out += len(item.roots)
                    log.warning(
                        "recovery of %s by engine %s still runs after %s: abandoned; "
                        "its lease is left to expire and it is not retried while the call runs",
                        item.roots[0]
                        if len(item.roots) == 1
                        else f"{len(item.roots)} roots ({item.roots[0]}, …)",
                        self.engine.engine_id,
                        f"item_timeout ({timeout:g} s)"
                        if len(item.roots) == 1
                        else f"{len(item.roots)} x item_timeout ({timeout * len(item.roots):g} s)",
                    )
        return bool(pending)

    def _dispatch(self, item: _Item) -> concurrent.futures.Future[dict[UUID, _Outcome]]:
        future: concurrent.futures.Future[dict[UUID, _Outcome]] = concurrent.futures.Future()
        with self._running_lock:
            self._running.update(item.roots)

        def run() -> None:
            try:
                if item.orphan:
                    [child] = item.roots
                    future.set_result({child: self._orphan(child)})
                else:
                    future.set_result(self._recover_share(item.roots))
            finally:
                with self._running_lock:
                    self._running.difference_update(item.roots)
                    late = [root for root in item.roots if root in self._abandoned]
                    self._abandoned.difference_update(item.roots)
                for root in late:
                    log.info("the abandoned recovery of %s has ended; a later scan may retry it", root)

        future.set_running_or_notify_cancel()
        name = f"incarnate-recovery-{item.roots[0]}" + (
            f"+{len(item.roots) - 1}" if len(item.roots) > 1 else ""
        )
        threading.Thread(target=run, name=name, daemon=True).start()
        return future

    def _recover_share(self, roots: tuple[UUID, ...]) -> dict[UUID, _Outcome]:
        """Recover a share of roots: together in one claim save when there are several, else by the handler.

        Each root gets the outcome the handler would have given it alone: a
        tree taken over succeeded (failed when parked), a tree held by a
        live engine is transient. A root the joint take-over skipped (not a
        root, unknown) is handed to the handler, which says why; when the
        joint take-over fails as a whole, every root is, one by one.
        """
        if len(roots) == 1:
            return {roots[0]: self._recover(roots[0])}
        try:
            taken, held = take_over_batch(self.engine.parts, roots, reason=REASON)
        except Exception:  # each root then meets the error alone, and is classified by it
            log.info(
                "taking %d roots over together failed; each is taken over on its own",
                len(roots),
                exc_info=True,
            )
            return {root: self._recover(root) for root in roots}
        outcomes: dict[UUID, _Outcome] = {}
        for tree in taken:
            outcomes[tree.root] = self._judged(tree.root, tree)
        for error in held:
            log.info("recovery of %s is transient, retried at a later scan: %s", error.root, error)
            outcomes[error.root] = _Outcome(TRANSIENT, _describe(error))
        for root in roots:
            if root not in outcomes:
                outcomes[root] = self._recover(root)
        return outcomes

    def _recover(self, root: UUID) -> _Outcome:
        """Call the handler on one root and classify how it ended."""
        try:
            result = self.handler(root)
        except _TRANSIENT_ERRORS as error:
            log.info("recovery of %s is transient, retried at a later scan: %s", root, error)
            return _Outcome(TRANSIENT, _describe(error))
        except CheckpointError as error:
            log.warning("recovery of %s failed for good: %s", root, error)
            return _Outcome(FAILED, _describe(error))
        except Exception as error:
            log.warning("recovery of %s raised", root, exc_info=True)
            return _Outcome(ERROR, _describe(error))
        return self._judged(root, result)

    @staticmethod
    def _judged(root: UUID, result: object) -> _Outcome:
        """The outcome of a call that returned ``result``: failed for a parked tree, else succeeded."""
        if getattr(result, "parked", False) is True:
            log.warning("call tree %s is parked: an operator resolves, migrates or terminates it", root)
            return _Outcome(FAILED, f"call tree {root} is parked; see `incarnate parked`")
        return _Outcome(SUCCEEDED)

    def _orphan(self, child: UUID) -> _Outcome:
        """Write an orphan child ``orphan`` (its parent vanished past the grace period)."""
        reason = (
            f"its parent vanished (no record, no stored event) for more than "
            f"{self.settings.orphan_grace_period:g} s; marked by the recovery manager of engine "
            f"{self.engine.engine_id}"
        )
        try:
            marked = orphan(self.engine.parts, child, reason)
        except _TRANSIENT_ERRORS as error:
            return _Outcome(TRANSIENT, _describe(error))
        except Exception as error:
            log.warning("marking %s orphan raised", child, exc_info=True)
            return _Outcome(ERROR, _describe(error))
        if marked:
            log.warning("instance %s is now orphan: %s", child, reason)
            return _Outcome(ORPHAN, reason)
        return _Outcome(SUCCEEDED, "already finished")

    def _settle(self, outcomes: dict[UUID, _Outcome], tally: _Tally) -> None:
        """Count the ended calls of one item and release their leases, those with one outcome together."""
        alike: dict[_Outcome, list[UUID]] = {}
        for root, outcome in outcomes.items():
            alike.setdefault(outcome, []).append(root)
            if outcome.outcome == SUCCEEDED:
                tally.succeeded += 1
            elif outcome.outcome == ORPHAN:
                tally.orphaned += 1
            else:
                tally.failed += 1
                if outcome.outcome == TRANSIENT:
                    tally.transient += 1
                elif outcome.outcome == ERROR:
                    tally.errors += 1
        coordination = self.engine.parts.coordination
        engine_id = self.engine.engine_id
        # One statement for a share's leases where the store can (an adapter of an older port may not).
        release_many = getattr(coordination, "release_many", None)
        for outcome, roots in alike.items():
            try:
                if release_many is not None and len(roots) > 1:
                    release_many(roots, engine_id, outcome=outcome.outcome, message=outcome.message)
                else:
                    for root in roots:
                        coordination.release(
                            root, engine_id, outcome=outcome.outcome, message=outcome.message
                        )
            except Exception:  # the leases then expire on their own
                log.warning(
                    "could not release the recovery lease on %s (outcome %s); it expires on its own",
                    roots[0] if len(roots) == 1 else f"{len(roots)} roots ({roots[0]}, …)",
                    outcome.outcome,
                    exc_info=True,
                )

    def _take_over(self, root: UUID) -> TakeOver:
        return self.engine.take_over(root, reason=REASON)


def _retired(beat: Heartbeat | None) -> bool:
    """Whether the owner stopped gracefully: its trees move at once, without waiting for the ttl."""
    return beat is not None and beat.retired


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"

"""The commit path: a unit of work → fenced → group-committed → enacted.

:class:`CommitPath` is the one way an instance is written. A unit of work
(``incarnate._work``) collects what one macrostep, a message, a cancel or a
claim changes; :meth:`CommitPath.commit` checks that this engine holds the
ownership incarnation of every instance it writes as owner (fencing),
saves everything in one transaction (with other threads' units, see
``incarnate._commits``), and only then :meth:`CommitPath.enact` hands the
follow-ups and deadlines to the runner. :meth:`CommitPath.work` is one
instance's next unit of work: decide, commit, enact.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol
from uuid import UUID

from eventsourcing.persistence import IntegrityError, PersistenceError

from aggregates import Instance, InstanceKind, InstanceStatus, Ref
from incarnate import _logs, _tracing
from incarnate._clock import Clock
from incarnate._commits import GroupCommit
from incarnate._copies import Catalog, Copies, keeps_snapshot
from incarnate._holdings import Holdings
from incarnate._http import HttpConfig, Post, deliver_http, post
from incarnate._journal import Journal
from incarnate._process import Decision, decide
from incarnate._reads import Reads, is_embedded_copy
from incarnate._runners import TaskDeferred, notify_due_task, on_step_lane
from incarnate._tasks import TaskFunction, run_embedded_task, run_task
from incarnate._work import UnitOfWork
from incarnate.errors import EngineError, Fenced, PayloadTooLarge, StorageError
from statechart import Chart, JsonValue
from statechart.codec import SnapshotDelta
from statechart.event import error_invoke_event
from statechart.snapshot import Snapshot

log = logging.getLogger("incarnate.engine")

MAX_CONFLICT_RETRIES = 20


class Notify(Protocol):
    """What the commit path tells the runner after a commit: which instances have work, and when."""

    def notify(self, instance_id: UUID) -> None:
        """``instance_id`` may have work now."""
        ...

    def notify_at(self, deadline: float, instance_id: UUID) -> None:
        """``instance_id`` will have work at ``deadline`` (the engine's clock)."""
        ...


Hook = Callable[[str, UnitOfWork], None]
"""Called at the commit points ``before-commit`` and ``after-commit`` (crash injection in tests)."""


class CommitPath:
    """Units of work of one engine: decided, fenced, saved together, then enacted.

    It is also the :class:`~incarnate._work.Workshop` deciding reads from
    (the engine's id and clock, the registered charts, the codec and this
    engine's copies) and the :class:`~incarnate._tasks.TaskHost` a task's
    run commits its outcome through.
    """

    def __init__(
        self,
        *,
        engine_id: str,
        clock: Clock,
        catalog: Catalog,
        journal: Journal,
        copies: Copies,
        reads: Reads,
        holdings: Holdings,
        runner: Notify,
        commit_batch: int,
        commit_wait: float,
        http: HttpConfig | None = None,
        embed_tasks: bool = True,
    ) -> None:
        self.engine_id = engine_id
        self.embed_tasks = embed_tasks
        """Whether a task child born here is embedded in its parent (see ``Engine(embed_tasks=...)``)."""
        self.embedded: dict[UUID, Ref] = {}
        """The embedded tasks whose bodies are due here, by id: each one's Ref (its parent, slot, generation).

        An entry is added when the birth (or recovery) hands the task to the
        runner and removed when its run ends (its outcome committed, or the
        task found settled or fenced), so it holds only tasks in flight."""
        self.http = http or HttpConfig()
        """The Basic HTTP event I/O processor's settings (its ingress base URL, retries)."""
        self.http_post: Post = post
        """How an outbox entry is posted (the standard library; a test may put a fake in its place)."""
        self.clock = clock
        self.catalog = catalog
        self.journal = journal
        self.copies = copies
        self.reads = reads
        self.holdings = holdings
        self.runner = runner
        # Units of work of concurrent threads share transactions (see incarnate._commits).
        self.group_commit = GroupCommit(journal.write, max_batch=commit_batch, max_wait=commit_wait)
        self.hooks: list[Hook] = []
        self.task_loop: asyncio.AbstractEventLoop | None = None
        """The event loop async tasks run on (see ``Engine.run_tasks_on``); None: ``asyncio.run`` per task."""

    # ----------------------------------------------------------- the Workshop

    @property
    def charts(self) -> Mapping[str, Chart[Any]]:
        return self.catalog.charts

    def http_location(self, instance_id: UUID) -> str | None:
        return self.http.location(instance_id)

    def encode(self, chart: Chart[Any], snapshot: Snapshot[Any]) -> dict[str, Any]:
        return self.copies.encode(chart, snapshot)

    def encode_delta(
        self, chart: Chart[Any], before: Snapshot[Any] | None, after: Snapshot[Any]
    ) -> SnapshotDelta:
        return self.copies.encode_delta(chart, before, after)

    def decode(self, chart: Chart[Any], instance: Instance) -> Snapshot[Any]:
        return self.copies.decode(chart, instance)

    def load(self, aggregate_id: UUID, *, fresh: bool = True) -> Instance:
        loaded: Instance = self.reads.load(aggregate_id, fresh=fresh)
        return loaded

    @property
    def tasks(self) -> Mapping[str, TaskFunction]:
        return self.catalog.tasks

    def instance(self, instance_id: UUID, *, fresh: bool = True) -> Instance:
        return self.reads.instance(instance_id, fresh=fresh)

    def check_holds(self, instance: Instance) -> None:
        """Raise :class:`~incarnate.errors.Fenced` unless this engine holds the instance's incarnation."""
        record = instance.record
        held = self.holdings.incarnation(instance.id)
        if record.owner != self.engine_id or record.incarnation != held:
            raise Fenced(instance.id, self.engine_id, held, record.owner, record.incarnation)

    # ----------------------------------------------------------- saving

    def save_instances(self, *instances: Instance) -> None:
        """Save the instances' pending events in one atomic save (``IntegrityError`` on a conflict).

        The facts saved are logged once stored (see ``incarnate._logs``).
        """
        for instance in instances:
            if is_embedded_copy(instance):
                ref = instance.record.parent
                raise EngineError(
                    f"instance {instance.id} is a task child embedded in its parent "
                    f"{ref.parent if ref is not None else '?'}: it has no stream of its own to write; "
                    "cancel it with cancel(), or write to its parent"
                )
        written = [(i, tuple(i.pending_events)) for i in instances] if _logs.wanted() else None
        try:
            self.group_commit.save(instances)
        except IntegrityError:
            self.copies.stale(instance.id for instance in instances)
            raise
        except PersistenceError as error:
            raise StorageError(f"the store refused a commit: {error}") from error
        self.copies.saw(instances)
        self.copies.ended([instance for instance in instances if instance.record.status.finished])
        if written:
            _logs.committed(self.engine_id, written)

    def commit(self, uow: UnitOfWork) -> None:
        """Save a unit of work in one atomic save, fenced: :class:`Fenced` if it writes an instance not held.

        Its new instances are held by this engine at incarnation 1.
        """
        pending = uow.pending()
        if not pending:
            _tracing.committed()
            return
        unchanged = {
            instance.id: instance.version - len(instance.pending_events)
            for instance in pending
            if keeps_snapshot(instance.pending_events)
        }
        try:
            for instance_id in uow.fenced:
                loaded = uow.loaded.get(instance_id)
                if loaded is not None:
                    self.check_holds(loaded)
            self._hook("before-commit", uow)
            self.save_instances(*pending)
        except IntegrityError:
            _tracing.conflicted()
            raise
        except BaseException as error:
            _tracing.abandoned(error)
            raise
        _tracing.committed()  # the step's span ends with its commit
        finished = [instance.id for instance in pending if instance.record.status.finished]
        for instance in pending:
            if not instance.record.status.finished:
                self.copies.remember(instance, uow.decoded.get(instance.id), unchanged.get(instance.id))
        holdings = self.holdings
        holdings.created(
            (instance_id, created.record.incarnation) for instance_id, created in uow.created.items()
        )
        if finished:  # it runs nowhere again: nothing of it stays, so memory stays flat
            for instance_id in finished:
                holdings.finish(instance_id)
            self.journal.forget(finished)
            self.copies.drop(finished)
        self._hook("after-commit", uow)

    def _hook(self, point: str, uow: UnitOfWork) -> None:
        for hook in self.hooks:
            hook(point, uow)

    def enact(self, uow: UnitOfWork) -> None:
        """Hand a committed unit of work's follow-ups and deadlines to the runner.

        A task child born in this unit of work goes straight to a runner's
        task lane when it has one (``notify_task``): its body runs there,
        and a step lane would only hand it over.
        """
        runner = self.runner
        for deadline, instance_id in uow.deadlines:
            runner.notify_at(deadline, instance_id)
        for ref in uow.embedded:
            self.run_embedded(ref)
        created = uow.created
        for instance_id in uow.followups:
            born = created.get(instance_id)
            if born is not None and born.record.kind is InstanceKind.TASK:
                notify_due_task(runner, instance_id)
            else:
                runner.notify(instance_id)

    def run_embedded(self, ref: Ref) -> None:
        """Hand the body of the embedded task child of ``ref`` to the runner (its task lane, if any)."""
        task_id = ref.child_id
        self.embedded[task_id] = ref
        notify_due_task(self.runner, task_id)

    def has_work(self, instance: Instance) -> bool:
        """Whether an instance has something to do right now (after a commit)."""
        record = instance.record
        if record.outbox and record.status is not InstanceStatus.PARKED:
            return True  # Basic HTTP sends to post, even after the macrostep that finished it
        if record.status.finished or record.status is InstanceStatus.PARKED:
            return False
        if record.inbox or record.cancel is not None or record.status is InstanceStatus.BORN:
            return True
        snapshot = self.copies.decoded_at(instance)
        if snapshot is None:
            return False
        now = self.clock.now()
        return any(timer.deadline <= now for timer in snapshot.timers)

    # ----------------------------------------------------------- a message's macrostep in its commit

    def inline(self, instance_id: UUID | None, wanted: bool = True) -> AbstractContextManager[bool]:
        """Whether the calling thread may step ``instance_id`` now, held for the block.

        The runner decides (its ``inline``): a threaded runner while it runs
        and no worker is on the instance, the deterministic runner inside
        ``run_until_idle``; a runner without ``inline`` never. ``send`` and a
        task's outcome use it to commit the macrostep their message causes
        with the message.
        """
        acquired = instance_id is not None and self.holdings.is_acquired(instance_id)
        inline = getattr(self.runner, "inline", None) if wanted and acquired else None
        if inline is None:
            return contextlib.nullcontext(False)
        held: AbstractContextManager[bool] = inline(instance_id)
        return held

    def step_along(self, uow: UnitOfWork, instance_id: UUID | None, *, careful: bool) -> Instance | None:
        """Add the next macrostep of an instance ``uow`` wrote to if this engine runs it; that instance.

        An event accepted for an instance this engine holds and has
        acquired (a message sent to it, a task's outcome for its parent) is
        then consumed in the same commit as its acceptance, instead of in a
        second one after the runner picks the instance up. Nothing is added
        (None) for an instance not in ``uow``, not held and acquired here,
        fenced, parked or in a parked tree, finished, or a task; the runner
        then steps it as before.
        """
        if instance_id is None or not self.holdings.runnable(instance_id):
            return None
        instance = uow.loaded.get(instance_id)
        if instance is None:
            return None
        record = instance.record
        if (
            record.kind is not InstanceKind.CHART
            or record.status.finished
            or record.status is InstanceStatus.PARKED
            or record.owner != self.engine_id
            or not self.holdings.holds_at(instance_id, record.incarnation)
        ):
            return None
        if record.root != instance_id:
            root = uow.load(record.root)
            if root is not None and root.record.status is InstanceStatus.PARKED:
                return None
        uow.fence(instance)
        if decide(self, uow, instance, careful=careful) is None:
            return None
        return instance

    def commit_along(
        self, uow: UnitOfWork, instance_id: UUID | None, *, along: bool, careful: bool
    ) -> Literal["committed", "conflict", "alone"]:
        """Commit and enact ``uow``, with the next macrostep of ``instance_id`` when this thread may take it.

        ``uow`` wrote to ``instance_id``'s inbox (a message sent, a task's
        outcome for its parent). When ``along`` and the runner lets this
        thread work on that instance now (:meth:`inline`), its macrostep
        joins the commit (:meth:`step_along`), and the runner hears of the
        instance afterwards only if more work is due. Returns
        ``"committed"``; ``"conflict"`` after a version conflict (decide
        again from fresh copies); ``"alone"`` when the macrostep could not be
        added or was refused (an oversized event): decide again without it,
        and the runner's processing meets the problem and reports it.
        """
        with self.inline(instance_id, along) as inline:
            stepped = None
            if inline:
                try:
                    stepped = self.step_along(uow, instance_id, careful=careful)
                except Exception:  # the runner's processing meets it again and reports it
                    log.debug("%s is stepped by the runner", instance_id, exc_info=True)
                    return "alone"
            try:
                self.commit(uow)
            except IntegrityError:
                return "conflict"
            except PayloadTooLarge:
                if stepped is None:
                    raise
                return "alone"
            if stepped is not None:
                if self.has_work(stepped):
                    uow.follow(stepped.id)
                else:
                    uow.unfollow(stepped.id)
            self.enact(uow)
        return "committed"

    # ----------------------------------------------------------- one instance's next unit of work

    def work(self, instance_id: UUID) -> Decision | None:
        """Decide, commit and enact the next unit of work of an instance held and acquired here.

        None when it is idle, finished or in a parked tree. A task's body
        runs here (or is deferred to a task thread); a unit that would store
        an oversized event fails its instance instead.
        """
        if instance_id in self.embedded:
            if on_step_lane():
                raise TaskDeferred(instance_id)  # the body runs on a task thread, never here
            return run_embedded_task(self, instance_id)
        try:
            return self._work(instance_id)
        except PayloadTooLarge as error:
            return self._fail_oversized(instance_id, error)

    def _work(self, instance_id: UUID) -> Decision | None:
        careful = False
        fresh = False
        for _ in range(MAX_CONFLICT_RETRIES):
            uow = UnitOfWork(self, fresh=fresh)
            instance = uow.load(instance_id)
            if instance is None:
                return None
            if instance.record.outbox and instance.record.status is not InstanceStatus.PARKED:
                # The committed Basic HTTP sends go out before the next macrostep (SCXML C.2).
                if on_step_lane():
                    raise TaskDeferred(instance_id)  # posts wait on the network: a task thread's work
                return deliver_http(self, instance_id)
            if instance.record.status.finished:
                return None
            uow.fence(instance)  # an owner write: Fenced when another engine claimed it since
            root_id = instance.record.root
            if root_id != instance_id:
                root = uow.load(root_id)
                if root is not None and root.record.status is InstanceStatus.PARKED:
                    return None
            record = instance.record
            if (
                record.kind is InstanceKind.TASK
                and record.status is InstanceStatus.BORN
                and record.cancel is None
            ):
                if on_step_lane():
                    raise TaskDeferred(instance_id)  # the body runs on a task thread, never here
                return run_task(self, instance_id)
            decision = decide(self, uow, instance, careful=careful)
            if decision is None:
                if not fresh:
                    fresh = True  # idle on this engine's copy: confirm with the store
                    continue
                return None
            try:
                self.commit(uow)
            except IntegrityError:
                careful = fresh = True
                continue
            if self.has_work(instance):
                uow.follow(instance_id)
            self.enact(uow)
            return decision
        raise StorageError(f"could not commit work for {instance_id}: too many concurrent writers")

    def _fail_oversized(self, instance_id: UUID, error: PayloadTooLarge) -> Decision | None:
        """A unit of work that would store an oversized event fails its instance instead.

        Nothing of that unit of work was written; the instance fails with an
        incident naming the size and the limit, and its parent is told, as for
        a macrostep that cannot be computed.
        """
        log.warning("%s", error)
        for _ in range(MAX_CONFLICT_RETRIES):
            uow = UnitOfWork(self)
            instance = uow.load(instance_id)
            if instance is None or instance.record.status.finished:
                return None
            uow.fence(instance)
            detail: dict[str, JsonValue] = {"error": type(error).__name__, "message": str(error)}
            instance.record_incident("payload-too-large", str(error), park=False)
            instance.fail(detail)
            uow.tell_parent(instance, self.clock.now(), error_invoke_event, detail)
            try:
                self.commit(uow)
            except IntegrityError:
                continue
            self.enact(uow)
            return Decision("failed", str(error))
        raise StorageError(f"could not record the failure of {instance_id}: too many concurrent writers")

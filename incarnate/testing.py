"""A test kit for users of incarnate: in-memory engines, restarts, crash injection, commit points.

``memory_engine`` builds an engine over a named in-memory store with a
virtual clock and the deterministic runner; ``restart`` closes an engine
and builds a fresh one over the same store, as a new process would;
``crash_at`` makes the next commit crash at a chosen point.
``commit_points`` runs a scenario once per commit it makes, crashing there,
and checks that recovery kept every committed fact and finished the same
way; ``event_sequences`` is a Hypothesis strategy for a chart's events.
``StoreContract`` is the store port's contract suite, which a store adapter
of your own runs by subclassing it (it needs pytest).

Installed as a pytest plugin (the ``incarnate`` entry point), it gives the
fixtures ``incarnate_clock`` and ``incarnate_engine``.
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast
from uuid import UUID

import attrs
from eventsourcing.persistence import StoredEvent

from aggregates import InstanceRecord
from incarnate._clock import Clock, VirtualClock
from incarnate._crash import CrashInsideCommit, SimulatedCrash
from incarnate._engine import Engine, Runner
from incarnate._http import HttpConfig
from incarnate._runners import DeterministicRunner, ThreadedRunner
from incarnate._storage import Storage
from incarnate._tasks import TaskFunction
from incarnate._work import UnitOfWork
from incarnate.errors import ConfigurationError, RecoveryCheckFailed
from projections import Checkpoint
from statechart import Chart, Event, JsonValue
from statechart.errors import IncarnateError

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = [
    "CommitPoint",
    "CrashPoint",
    "EngineFactory",
    "RecoveryCheckFailed",
    "Scenario",
    "SimulatedCrash",
    "StoreContract",
    "advance",
    "check_recovery",
    "commit_points",
    "crash_at",
    "event_names",
    "event_sequences",
    "memory_engine",
    "outcomes",
    "restart",
    "stored_events",
]


class EngineFactory(Protocol):
    """What the ``incarnate_engine`` fixture gives: ``build(charts, tasks) -> Engine``."""

    def __call__(
        self, charts: Iterable[Chart[Any]] = (), tasks: Mapping[str, TaskFunction] | None = None
    ) -> Engine:
        """An in-memory engine on the test's virtual clock, closed after the test."""
        ...


class CrashPoint(enum.Enum):
    """Where, around a commit, a crash is injected."""

    BEFORE_COMMIT = "before-commit"
    """The macrostep is decided; nothing is written."""
    DURING_COMMIT = "during-commit"
    """The events are written inside the transaction, which never commits (SQL stores)."""
    AFTER_COMMIT = "after-commit"
    """Everything is committed; nothing is enacted yet."""


def memory_engine(
    charts: Iterable[Chart[Any]] = (),
    tasks: Mapping[str, TaskFunction] | None = None,
    *,
    name: str | None = None,
    clock: Clock | None = None,
    http: HttpConfig | None = None,
    embed_tasks: bool = True,
) -> Engine:
    """An engine over a named in-memory store, with a virtual clock and the deterministic runner.

    ``http`` configures the Basic HTTP event I/O processor (its ingress base URL, retries);
    ``embed_tasks`` embeds task children in their parents (see ``Engine``).
    """
    return Engine(
        charts,
        tasks,
        storage=Storage.popo(name or f"memory-{uuid.uuid4().hex}"),
        clock=clock or VirtualClock(0.0),
        runner=DeterministicRunner(),
        http=http,
        embed_tasks=embed_tasks,
    )


def restart(engine: Engine, *, clock: Clock | None = None) -> Engine:
    """Close ``engine`` and build a fresh one over the same store, charts and tasks.

    The new engine knows nothing but what is stored, like a new process; it
    hands every unfinished instance to its runner (a threaded runner is
    already working: it starts when the engine is built).
    """
    charts = list(engine.charts.values())
    tasks = dict(engine.parts.catalog.tasks)
    storage = engine.storage
    old = engine.runner
    runner: Runner = ThreadedRunner(old.workers) if isinstance(old, ThreadedRunner) else DeterministicRunner()
    engine.close()
    http = engine.parts.commits.http
    fresh = Engine(
        charts,
        tasks,
        storage=storage,
        clock=clock or engine.clock,
        runner=runner,
        http=http,
        embed_tasks=engine.parts.commits.embed_tasks,
    )
    fresh.resume_all()
    return fresh


@contextlib.contextmanager
def crash_at(engine: Engine, point: CrashPoint, *, nth: int = 1) -> Iterator[list[UnitOfWork]]:
    """Crash the ``nth`` commit from now at ``point``; yields the crashed units of work."""
    crashed: list[UnitOfWork] = []
    seen = [0]

    def due() -> bool:
        seen[0] += 1
        return seen[0] == nth

    if point is CrashPoint.DURING_COMMIT:
        with _crash_inside_transaction(engine, due):
            yield crashed
        return

    def hook(where: str, uow: UnitOfWork) -> None:
        if where == point.value and due():
            crashed.append(uow)
            raise SimulatedCrash(f"simulated crash at {where}")

    engine.parts.commits.hooks.append(hook)
    try:
        yield crashed
    finally:
        engine.parts.commits.hooks.remove(hook)


@contextlib.contextmanager
def _crash_inside_transaction(engine: Engine, due: Callable[[], bool]) -> Iterator[None]:
    """Crash inside the transaction that inserts the *last* event of the chosen commit.

    The commit's last pending event is noted when the commit starts; the
    insert that writes it is written in the store's transaction and never
    committed (see :class:`~incarnate._crash.CrashInsideCommit`). If the
    engine wrote a commit in several transactions, the earlier ones would
    stay committed — which is exactly what tests using this crash point detect.
    """
    if not engine.storage.transactional:
        raise ValueError(
            f"{engine.storage.describe()} has no transaction to crash inside; "
            "use BEFORE_COMMIT or AFTER_COMMIT"
        )
    target: list[tuple[str, int]] = []

    def note(where: str, uow: UnitOfWork) -> None:
        if where == "before-commit" and due():
            last = [(i.id, e.originator_version) for i in uow.pending() for e in i.pending_events][-1]
            target.append((last[0].hex, last[1]))

    def chosen(stored: Sequence[StoredEvent]) -> bool:
        written = {(_hex(s.originator_id), s.originator_version) for s in stored}
        if target and target[0] in written:
            target.clear()
            return True
        return False

    hooks = engine.parts.commits.hooks
    hooks.append(note)
    try:
        with CrashInsideCommit(engine.parts.journal.recorder, chosen).installed():
            yield
    finally:
        hooks.remove(note)


def _hex(originator_id: object) -> str:
    return originator_id.hex if isinstance(originator_id, uuid.UUID) else str(originator_id).replace("-", "")


def advance(engine: Engine, seconds: float) -> float:
    """Move the virtual clock of ``engine`` forward by ``seconds``; returns the new time.

    Raises :class:`~incarnate.errors.ConfigurationError` when the engine
    reads a real clock (build it with :func:`memory_engine`, or pass
    ``clock=VirtualClock(...)``).
    """
    clock = engine.clock
    if not isinstance(clock, VirtualClock):
        raise ConfigurationError(
            f"engine {engine.engine_id} reads {type(clock).__name__}, which cannot be moved; "
            "build it with a VirtualClock (memory_engine and the incarnate_engine fixture do)"
        )
    return clock.advance(seconds)


# ------------------------------------------------------------------ commit points

Scenario = Callable[[Engine], object]
"""A user's scenario: starts instances, sends events, moves the clock and runs ``engine``."""

PUBLISHED_BY_RECOVERY = ("Started", "Stepped", "Birth", "ChildRetry", "ChildResume")
"""Events recovery must never write: a new instance, a statechart step, a birth, a retry."""


class CommitPoint:
    """One run of a scenario with a crash injected at one commit; use it as a context manager.

    ``with point as engine:`` runs the scenario on a fresh store, crashes it
    at commit :attr:`number` (of :attr:`total`) at :attr:`where`, restarts,
    checks the recovery invariants, finishes the scenario and compares its
    final outcomes with the uncrashed run; the block gets the recovered
    engine to check more, and it is closed (its store dropped) on the way out.
    A broken invariant raises :class:`RecoveryCheckFailed` naming the point.
    """

    def __init__(self, plan: _Plan, number: int, where: CrashPoint) -> None:
        self.number = number
        self.total = plan.commits
        self.where = where
        self._plan = plan
        self._engine: Engine | None = None
        self._storage: Storage | None = None

    def __repr__(self) -> str:
        return f"<CommitPoint {self}>"

    def __str__(self) -> str:
        return f"commit {self.number} of {self.total}, crash {self.where.value}"

    def __enter__(self) -> Engine:
        self._storage = self._plan.storage()
        try:
            self._engine = _CrashedRun(self, self._plan, self._storage).run()
        except BaseException:
            self._storage.forget()
            self._storage = None
            raise
        return self._engine

    def __exit__(self, *exc_info: object) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()
        if self._storage is not None:
            self._storage.forget()
            self._storage = None

    def check(self) -> None:
        """Run this point's crash, recovery and checks (``with point: pass``)."""
        with self:
            pass


class _Plan:
    """What the uncrashed (dry) run of a scenario gave: its commit count and final outcomes."""

    def __init__(
        self,
        scenario: Scenario,
        charts: Sequence[Chart[Any]],
        tasks: Mapping[str, TaskFunction],
        storage: Callable[[], Storage],
        now: float,
        embed_tasks: bool = True,
    ) -> None:
        self.scenario = scenario
        self.charts = charts
        self.tasks = tasks
        self.storage = storage
        self.now = now
        self.embed_tasks = embed_tasks
        self.commits = 0
        self.outcomes: dict[_Label, _Outcome] = {}
        self.transactional = False

    def dry_run(self) -> None:
        storage = self.storage()
        try:
            with self.engine(storage) as engine:
                self.transactional = storage.transactional

                def count(where: str, uow: UnitOfWork) -> None:
                    if where == "before-commit":
                        self.commits += 1

                engine.parts.commits.hooks.append(count)
                self.scenario(engine)
                engine.parts.commits.hooks.remove(count)
                engine.run_until_idle()
                self.outcomes = outcomes(engine)
        finally:
            storage.forget()

    def engine(self, storage: Storage) -> Engine:
        return Engine(
            self.charts,
            self.tasks,
            storage=storage,
            clock=VirtualClock(self.now),
            runner=DeterministicRunner(),
            embed_tasks=self.embed_tasks,
        )


class _CrashedRun:
    """One scenario run that crashes at a point, restarts under the scenario's feet and carries on."""

    def __init__(self, point: CommitPoint, plan: _Plan, storage: Storage) -> None:
        self.point = point
        self.plan = plan
        self.engine = plan.engine(storage)
        self.crashed = False
        self.last: UnitOfWork | None = None

    def fail(self, problem: str) -> RecoveryCheckFailed:
        return RecoveryCheckFailed(self.point, problem)

    def run(self) -> Engine:
        def note(where: str, uow: UnitOfWork) -> None:
            if where == "before-commit":
                self.last = uow

        self.engine.parts.commits.hooks.append(note)
        try:
            with crash_at(self.engine, self.point.where, nth=self.point.number):
                self.plan.scenario(cast(Engine, _Driven(self)))
            if not self.crashed:
                raise self.fail(
                    f"the scenario finished without reaching this commit (the uncrashed run made "
                    f"{self.plan.commits}); a scenario must do the same each time: use the engine's "
                    "virtual clock (advance) and no randomness"
                )
            self.engine.run_until_idle()
            self.compare_outcomes()
        except BaseException:
            self.engine.close()
            raise
        return self.engine

    def recover(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Restart after the crash, check the invariants, then finish the call the crash interrupted."""
        self.crashed = True
        crashed = self.engine
        committed = self.committed(crashed)
        events = stored_events(crashed)
        self.engine = restart(crashed)
        after = stored_events(self.engine)
        self.check_nothing_lost(events, after)
        self.check_nothing_published(after[len(events) :] if after[: len(events)] == events else after)
        self.check_identity(committed)
        if method == "start":
            return self.finish_start(args, kwargs)
        if method == "send":
            landed = self.landed_send()
            if landed is not None:
                return landed
        return getattr(self.engine, method)(*args, **kwargs)

    def landed_send(self) -> int | None:
        """The inbox number of the message a crashed ``send`` committed; None when it did not land.

        A send is accepted (and, on an engine running the instance, stepped)
        in one commit, so after a crash it has either landed whole — the call
        returns its number, as it would have — or not at all, and is sent again.
        """
        sent = self.last.sent if self.last else None
        if sent is None:
            return None
        instance_id, seq = sent
        try:
            stored = self.engine.instance(instance_id)
        except IncarnateError:
            return None
        return seq if stored.record.message_seq >= seq else None

    def finish_start(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A crashed ``start`` returns its root when committed, and is retried (same id) when not."""
        roots = [i for i in (self.last.created.values() if self.last else ()) if i.record.parent is None]
        if not roots:
            return self.engine.start(*args, **kwargs)
        root_id = roots[0].id
        if root_id in set(self.engine.parts.journal.instance_ids()):
            return self.engine.handle(root_id)
        return self.engine.start(*args, **{**kwargs, "id": root_id})

    def committed(self, engine: Engine) -> dict[UUID, tuple[InstanceRecord, Checkpoint]]:
        """Every stored instance as the store holds it now, and its ResumePlan checkpoint."""
        out: dict[UUID, tuple[InstanceRecord, Checkpoint]] = {}
        for instance_id in engine.parts.journal.instance_ids():
            instance, _, _ = engine.parts.reads.read(instance_id)
            try:
                checkpoint = engine.plan(instance_id)
            except IncarnateError as error:
                raise self.fail(
                    f"the committed events of {instance_id} make no checkpoint: {error}"
                ) from error
            out[instance_id] = (instance.record, checkpoint)
        return out

    def check_nothing_lost(self, before: list[_Stored], after: list[_Stored]) -> None:
        kept = set(after)
        lost = [s for s in before if s not in kept]
        if lost:
            raise self.fail(
                f"{len(lost)} committed events are gone after the restart, first {lost[0][2]} "
                f"version {lost[0][1]} of {lost[0][0]}"
            )

    def check_nothing_published(self, written: list[_Stored]) -> None:
        published = [s for s in written if s[2] in PUBLISHED_BY_RECOVERY]
        if published:
            what = ", ".join(f"{topic} of {originator}" for originator, _, topic, _ in published)
            raise self.fail(
                f"recovery itself wrote {what}; recovery may only claim and re-arm "
                "(re-attach, never re-birth)"
            )

    def check_identity(self, committed: dict[UUID, tuple[InstanceRecord, Checkpoint]]) -> None:
        """The recovered instances are exactly the committed ones: ids, Refs, attempts, snapshots."""
        engine = self.engine
        ids = list(engine.parts.journal.instance_ids())
        if set(ids) != set(committed):
            extra = sorted(str(i) for i in set(ids) - set(committed))
            missing = sorted(str(i) for i in set(committed) - set(ids))
            raise self.fail(f"recovery changed the set of instances: new {extra}, missing {missing}")
        for instance_id, (record, checkpoint) in committed.items():
            live = engine.instance(instance_id)
            if _unowned(live.record) != _unowned(record):
                raise self.fail(
                    f"instance {instance_id} ({record.name}) differs from its committed record after "
                    f"recovery: {_difference(record, live.record)}"
                )
            replay = engine.plan(instance_id)
            if _unversioned(replay) != _unversioned(checkpoint):
                raise self.fail(
                    f"the ResumePlan of {instance_id} ({record.name}) after recovery differs from the "
                    f"committed one: {checkpoint} became {replay}"
                )
            chart = engine.charts.get(record.name)
            if chart is not None and Checkpoint.of(live, chart) != replay:
                raise self.fail(
                    f"the recovered engine's copy of {instance_id} ({record.name}) differs from the "
                    "replay of its events"
                )

    def compare_outcomes(self) -> None:
        got = outcomes(self.engine)
        if got == self.plan.outcomes:
            return
        lines = []
        for label in sorted(set(got) | set(self.plan.outcomes), key=repr):
            want, have = self.plan.outcomes.get(label), got.get(label)
            if want != have:
                lines.append(f"{_describe(label)}: uncrashed {want}, recovered {have}")
        raise self.fail(
            "after recovery the scenario finished differently from the uncrashed run: " + "; ".join(lines)
        )


class _Driven:
    """The engine a scenario holds: calls go to the engine of the moment, which a crash replaces.

    A call the crash interrupts is finished on the recovered engine, as a
    client would retry it: ``run_until_idle`` runs again, a ``start`` that
    committed returns its id, anything else is called again.
    """

    def __init__(self, run: _CrashedRun) -> None:
        self._run = run

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._run.engine, name)
        if not inspect.ismethod(value):
            return value
        run = self._run

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return getattr(run.engine, name)(*args, **kwargs)
            except SimulatedCrash:
                if run.crashed:
                    raise
                return run.recover(name, args, kwargs)

        return call


def commit_points(
    scenario: Scenario,
    charts: Iterable[Chart[Any]],
    tasks: Mapping[str, TaskFunction] | None = None,
    *,
    storage: Callable[[], Storage] | None = None,
    points: Iterable[CrashPoint] = tuple(CrashPoint),
    now: float = 0.0,
    embed_tasks: bool = True,
) -> Iterator[CommitPoint]:
    """One :class:`CommitPoint` per commit the scenario makes and per crash point.

    The scenario runs once uncrashed first, counting its commits (the
    engine's ``before-commit`` hook) and recording its final outcomes; then
    each point runs it on a fresh store with a crash there. ``storage`` makes
    a fresh, empty store per run (default: a named in-memory store);
    ``DURING_COMMIT`` needs a store whose commit is a transaction
    (:attr:`~incarnate.Storage.transactional`) and is left out on the others
    (in memory). ``embed_tasks`` runs it on engines that embed task
    children in their parents (see ``Engine``).
    A scenario with N commits yields N x len(points) points; one with no
    commit raises :class:`~incarnate.errors.ConfigurationError`.
    """
    plan = _Plan(scenario, list(charts), dict(tasks or {}), storage or _memory_storage, now, embed_tasks)
    plan.dry_run()
    if plan.commits == 0:
        raise ConfigurationError(
            f"the scenario {getattr(scenario, '__name__', scenario)!r} made no commit, so there is no "
            "point to crash at; it should start an instance (engine.start) and run the engine"
        )
    wanted = [p for p in points if p is not CrashPoint.DURING_COMMIT or plan.transactional]
    for number in range(1, plan.commits + 1):
        for where in wanted:
            yield CommitPoint(plan, number, where)


def check_recovery(
    scenario: Scenario,
    charts: Iterable[Chart[Any]],
    tasks: Mapping[str, TaskFunction] | None = None,
    *,
    storage: Callable[[], Storage] | None = None,
    points: Iterable[CrashPoint] = tuple(CrashPoint),
    now: float = 0.0,
    embed_tasks: bool = True,
) -> int:
    """Check every commit point of a scenario (see :func:`commit_points`); returns how many ran."""
    checked = 0
    for point in commit_points(
        scenario, charts, tasks, storage=storage, points=points, now=now, embed_tasks=embed_tasks
    ):
        point.check()
        checked += 1
    return checked


# ------------------------------------------------------------------ outcomes

_Label = tuple[int, tuple[tuple[str, str, int], ...]]
_Outcome = tuple[str, str, JsonValue, int]
_Stored = tuple[str, int, str, bytes]


def outcomes(engine: Engine) -> dict[_Label, _Outcome]:
    """Every instance's (chart, status, output, attempt), keyed by its place in its call tree.

    The key is the root's rank among roots in creation order and the path of
    (site, member key, generation) from the root, so that two runs with
    different random root ids compare.
    """
    records = {i.id: i.record for i in engine.instances()}
    roots = [instance_id for instance_id, record in records.items() if record.parent is None]
    rank = {root: number for number, root in enumerate(roots)}
    out: dict[_Label, _Outcome] = {}
    for record in records.values():
        path: list[tuple[str, str, int]] = []
        current = record
        while current.parent is not None and current.parent.parent in records:
            ref = current.parent
            path.append((ref.site, ref.key, ref.generation))
            current = records[ref.parent]
        attempt = record.birth.attempt if record.birth is not None else 1
        label = (rank.get(record.root, -1), tuple(reversed(path)))
        out[label] = (record.name, record.status.value, record.output, attempt)
    return out


def stored_events(engine: Engine) -> list[_Stored]:
    """Every stored instance event as (originator, version, event class, stored state), in log order."""
    out: list[_Stored] = []
    start = 1
    while True:
        notifications = engine.parts.journal.recorder.select_notifications(start=start, limit=1000)
        if not notifications:
            return out
        for n in notifications:
            if ":Instance." in n.topic:
                name = n.topic.rsplit(".", 1)[-1].partition("@")[0]  # the class, without its format
                out.append((_hex(n.originator_id), n.originator_version, name, n.state))
        start = notifications[-1].id + 1


def _describe(label: _Label) -> str:
    rank, path = label
    where = "".join(f"/{site}[{key}]#{generation}" for site, key, generation in path)
    return f"root {rank + 1}{where}"


def _unowned(record: InstanceRecord) -> InstanceRecord:
    return attrs.evolve(record, owner="", incarnation=0)


def _unversioned(checkpoint: Checkpoint) -> Checkpoint:
    return attrs.evolve(checkpoint, version=0)


def _difference(before: InstanceRecord, after: InstanceRecord) -> str:
    changed = [
        f"{field.name} {getattr(before, field.name)!r} became {getattr(after, field.name)!r}"
        for field in attrs.fields(InstanceRecord)
        if field.name not in ("owner", "incarnation")
        and getattr(before, field.name) != getattr(after, field.name)
    ]
    return "; ".join(changed)


def _memory_storage() -> Storage:
    return Storage.popo(f"commit-points-{uuid.uuid4().hex}")


# ------------------------------------------------------------------ Hypothesis

RESERVED_EVENT_PREFIXES = ("done.", "error.", "retry.invoke.", "after.")
"""Events a chart's transitions may name that only the engine raises (outcomes, completions, timers)."""


def event_names(chart: Chart[Any]) -> tuple[str, ...]:
    """The event names a test can send to an instance of ``chart``, sorted.

    Taken from the transitions' descriptors: a wildcard (``*``) names no
    event, a prefix descriptor (``order.*``, stored as ``order``) gives its
    prefix, and names only the engine raises (``done.*``, ``error.*``,
    ``retry.invoke.*``, timers) are left out.
    """
    names = {
        descriptor
        for transition in chart.shape.transitions
        if transition.delay is None
        for descriptor in transition.events
        if descriptor != "*" and not descriptor.startswith(RESERVED_EVENT_PREFIXES)
    }
    return tuple(sorted(names))


def event_sequences(
    chart: Chart[Any],
    *,
    min_size: int = 0,
    max_size: int = 10,
    data: Mapping[str, SearchStrategy[JsonValue]] | None = None,
    names: Iterable[str] | None = None,
) -> SearchStrategy[list[Event]]:
    """A Hypothesis strategy for lists of events a chart's transitions name (see :func:`event_names`).

    ``data`` gives a strategy for the data of an event by name (default:
    ``None``); ``names`` restricts (or extends) the names drawn from.
    Hypothesis is imported here, so that it stays optional for users.
    """
    try:
        from hypothesis import strategies as st
    except ImportError as error:
        raise ConfigurationError(
            "event_sequences needs Hypothesis; install it with pip install 'incarnate[test]' "
            "or pip install hypothesis"
        ) from error
    chosen = tuple(names) if names is not None else event_names(chart)
    if not chosen:
        raise ConfigurationError(
            f"chart {chart.name!r} names no event a test can send (only wildcards, completions or "
            "timers); pass names=[...] to event_sequences"
        )
    unknown = sorted(set(data or {}) - set(chosen))
    if unknown:
        raise ConfigurationError(
            f"event_sequences(data=...) names {unknown}, which chart {chart.name!r} does not send to; "
            f"its events are {list(chosen)}"
        )
    by_name = dict(data or {})
    events = st.one_of(*(st.builds(Event, st.just(name), by_name.get(name, st.none())) for name in chosen))
    return st.lists(events, min_size=min_size, max_size=max_size)


# ------------------------------------------------------------------ pytest plugin
# Registered as the ``incarnate`` pytest11 entry point: installing incarnate gives every
# project these fixtures. Names are prefixed so they never clash with a project's own.

try:
    import pytest
except ImportError:  # pytest is not installed: the functions above still work
    pass
else:
    # The contract's checks are plain asserts: rewritten by pytest when it loads this plugin first.
    pytest.register_assert_rewrite("incarnate._contract")
    from incarnate._contract import StoreContract

    @pytest.fixture
    def incarnate_clock() -> VirtualClock:
        """A virtual clock at time 0.0; it moves only when told to (``advance``)."""
        return VirtualClock(0.0)

    @pytest.fixture
    def incarnate_engine(incarnate_clock: VirtualClock) -> Iterator[EngineFactory]:
        """In-memory engines on ``incarnate_clock`` with the deterministic runner, closed after the test."""
        built: list[Engine] = []

        def build(
            charts: Iterable[Chart[Any]] = (), tasks: Mapping[str, TaskFunction] | None = None
        ) -> Engine:
            engine = memory_engine(charts, tasks, clock=incarnate_clock)
            built.append(engine)
            return engine

        yield build
        for engine in built:
            engine.close()
            engine.storage.forget()

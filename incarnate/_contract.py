"""The store port's contract, as pytest tests any store adapter runs by supplying one fixture.

Subclass :class:`StoreContract` in a test module (its name must start with
``Test``) and give it a ``storage`` fixture that yields a fresh, empty
store of your kind and removes it afterwards; every test below then runs
against your adapter::

    class TestMyStore(StoreContract):
        notifies = True  # wait() wakes when another opening inserts

        @pytest.fixture
        def storage(self, tmp_path):
            yield MyStorage(str(tmp_path / "events"))

The tests cover what the engine relies on: the configuration (its
description, URL and secrets), the recorder (exact reads, all-or-nothing
inserts, a crash inside a commit), ``select_many``, the listing's tables
and the coordination (heartbeats, leases, leadership, wake-ups).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import ClassVar
from uuid import UUID

import attrs
import pytest
from eventsourcing.persistence import ApplicationRecorder, InfrastructureFactory, IntegrityError, StoredEvent
from eventsourcing.utils import Environment

from incarnate._crash import CrashInsideCommit, SimulatedCrash
from incarnate._storage import Storage
from incarnate.errors import ConfigurationError
from incarnate.store import Coordination, ListingTables, Store
from projections import ListingRow
from statechart import JsonValue

APPLICATION_NAME = "incarnate"
"""The engine's application name: the library names the events table (and its channel) after it."""
LOCK_ID = 0x1C4A_7E00_0000_0042


def listing_row(
    row_id: UUID | None = None,
    *,
    parent: UUID | None = None,
    status: str = "born",
    version: int = 1,
    changed_at: float = 1_800_000_000.25,
) -> ListingRow:
    """A listing row with plausible defaults."""
    row_id = row_id or uuid.uuid4()
    return ListingRow(
        id=row_id,
        root=parent or row_id,
        parent=parent,
        kind="chart",
        name="order",
        status=status,
        owner="host:1:abc",
        version=version,
        has_snapshot=False,
        changed_at=changed_at,
    )


class StoreContract:
    """The tests every store adapter passes; subclass it and give the ``storage`` fixture.

    Two class attributes say what the store promises beyond the minimum:
    :attr:`leads_alone` and :attr:`notifies`.
    """

    leads_alone: ClassVar[bool] = False
    """Whether one coordination leading a lock id keeps every other from leading it (PostgreSQL's
    advisory locks); False: every engine leads (a store on one host)."""
    notifies: ClassVar[bool] = False
    """Whether ``wait()`` wakes when another opening of the store inserts events (PostgreSQL's
    LISTEN/NOTIFY, a named in-memory store); False: the caller polls."""

    # ------------------------------------------------------------ fixtures

    @pytest.fixture
    def storage(self) -> Iterator[Storage]:
        """A fresh, empty store of the kind under test, removed afterwards: each subclass gives its own."""
        pytest.fail(f"{type(self).__name__} must define the storage fixture: a fresh, empty store")
        yield  # pragma: no cover

    @pytest.fixture
    def store(self, storage: Storage) -> Store:
        """The adapter of the test's store."""
        return storage.open()

    @pytest.fixture
    def open_tables(self, store: Store) -> Iterator[Callable[[], ListingTables]]:
        """Open listing tables over the test's store; all are closed at the end."""
        opened: list[ListingTables] = []

        def build() -> ListingTables:
            opened.append(store.listing_tables())
            return opened[-1]

        yield build
        for tables in opened:
            tables.close()

    @pytest.fixture
    def open_coordination(self, store: Store) -> Iterator[Callable[[], Coordination]]:
        """Open coordinations over the test's store (as separate engines would); all are closed at the end."""
        opened: list[Coordination] = []

        def build() -> Coordination:
            opened.append(store.coordination())
            return opened[-1]

        yield build
        for coordination in opened:
            coordination.close()

    @pytest.fixture
    def open_recorder(self, storage: Storage) -> Iterator[Callable[[], ApplicationRecorder]]:
        """Open the engine's application recorder over a new opening of the store, as an engine does."""
        factories: list[InfrastructureFactory] = []

        def build() -> ApplicationRecorder:
            factory = InfrastructureFactory.construct(Environment(APPLICATION_NAME, storage.env()))
            factories.append(factory)
            return storage.open().recorder(factory.application_recorder)

        yield build
        for factory in factories:
            factory.close()

    @pytest.fixture
    def recorder(self, open_recorder: Callable[[], ApplicationRecorder]) -> ApplicationRecorder:
        """The engine's application recorder over the test's store."""
        return open_recorder()

    # ------------------------------------------------------------ configuration

    def test_the_adapter_describes_its_storage(self, storage: Storage, store: Store) -> None:
        """The adapter's description is its storage's: one line, the same for logs and messages."""
        assert store.describe() == storage.describe()
        assert "\n" not in storage.describe()

    def test_a_url_reads_back_as_the_same_store(self, storage: Storage, store: Store) -> None:
        """url() reads back through Storage.from_url as the same kind and URL; else the store has no URL."""
        try:
            url = storage.url()
        except ConfigurationError as error:
            assert "has no URL" in str(error)
            with pytest.raises(ConfigurationError, match="has no URL"):
                store.url()
            return
        again = Storage.from_url(url)
        assert (type(again), again.url(), again.describe()) == (type(storage), url, storage.describe())
        assert store.url() == url

    def test_secrets_never_show(self, storage: Storage) -> None:
        """No secret of the storage is in its description, its URL or its repr."""
        shown = [storage.describe(), repr(storage)]
        try:
            shown.append(storage.url())
        except ConfigurationError as error:
            shown.append(str(error))
        for secret in storage.secrets():
            assert secret
            assert not any(secret in text for text in shown)

    def test_the_environment_selects_a_persistence_module(self, storage: Storage) -> None:
        """env() names the library's persistence module, and its own settings override the given ones."""
        env = storage.env({})
        assert env["PERSISTENCE_MODULE"]
        assert (
            storage.env({"PERSISTENCE_MODULE": "elsewhere"})["PERSISTENCE_MODULE"]
            == env["PERSISTENCE_MODULE"]
        )

    # ------------------------------------------------------------ the recorder

    def test_inserted_events_read_back_exactly(self, recorder: ApplicationRecorder) -> None:
        """Ids, versions, topics (non-ASCII too) and states (any bytes) read back as inserted, each way."""
        originator, other = uuid.uuid4(), uuid.uuid4()
        states = [b"", b"\x00\xff\x00", "é€😀".encode(), bytes(range(256)) * 300]
        events = [StoredEvent(originator, n + 1, f"topic:é{n}", state) for n, state in enumerate(states)]
        recorder.insert_events(events)
        recorder.insert_events([StoredEvent(other, 1, "other", b"x")])
        read = recorder.select_events(originator)
        assert [(e.originator_version, e.topic, bytes(e.state)) for e in read] == [
            (e.originator_version, e.topic, e.state) for e in events
        ]
        assert {UUID(str(e.originator_id)) for e in read} == {originator}

        def versions(**bounds: object) -> list[int]:
            return [e.originator_version for e in recorder.select_events(originator, **bounds)]  # type: ignore[arg-type]

        assert versions(gt=2) == [3, 4]
        assert versions(lte=2) == [1, 2]
        assert versions(gt=1, lte=3) == [2, 3]
        assert versions(desc=True) == [4, 3, 2, 1]
        assert versions(desc=True, limit=1) == [4]
        assert versions(gt=1, lte=4, desc=True, limit=2) == [4, 3]
        assert versions(gt=4, limit=1) == []
        assert recorder.select_events(uuid.uuid4()) == []
        assert [UUID(str(n.originator_id)) for n in recorder.select_notifications(start=1, limit=10)] == [
            *[originator] * 4,
            other,
        ]

    def test_an_insert_is_all_or_nothing(self, recorder: ApplicationRecorder) -> None:
        """A batch with an event the store has (or one twice) raises IntegrityError and stores nothing."""
        taken, fresh = uuid.uuid4(), uuid.uuid4()
        recorder.insert_events([StoredEvent(taken, 1, "t", b"first")])
        with pytest.raises(IntegrityError):
            recorder.insert_events([StoredEvent(fresh, 1, "t", b"a"), StoredEvent(taken, 1, "t", b"b")])
        twice = StoredEvent(fresh, 1, "t", b"a")
        with pytest.raises(IntegrityError):
            recorder.insert_events([twice, twice])
        assert recorder.select_events(fresh) == []
        recorder.insert_events([StoredEvent(fresh, 1, "t", b"a")])
        assert [bytes(n.state) for n in recorder.select_notifications(start=1, limit=10)] == [b"first", b"a"]

    def test_a_crash_inside_a_commit_stores_nothing(
        self, storage: Storage, recorder: ApplicationRecorder
    ) -> None:
        """The test kit's crash inside a commit raises SimulatedCrash; the store keeps none of the batch."""
        if not storage.transactional:
            pytest.skip(f"{storage.describe()}: a commit is no transaction to crash inside")
        first, second = uuid.uuid4(), uuid.uuid4()
        batch = [StoredEvent(first, 1, "t", b"a"), StoredEvent(second, 1, "t", b"b")]
        with CrashInsideCommit(recorder, lambda events: True).installed(), pytest.raises(SimulatedCrash):
            recorder.insert_events(batch)
        assert (recorder.select_events(first), recorder.select_events(second)) == ([], [])
        recorder.insert_events(batch)  # unwrapped again: the same events commit
        assert [UUID(str(n.originator_id)) for n in recorder.select_notifications(start=1, limit=10)] == [
            first,
            second,
        ]

    def test_select_many_gives_what_reading_each_gives(
        self, store: Store, recorder: ApplicationRecorder
    ) -> None:
        """Every event of each originator in version order; none for an unknown id; ``latest`` the newest."""
        originators = [uuid.uuid4() for _ in range(3)]
        for count, originator in enumerate(originators, start=1):
            recorder.insert_events(
                [StoredEvent(originator, v, f"t{v}", bytes([v])) for v in range(1, count + 1)]
            )
        found = store.select_many(recorder, [*originators, uuid.uuid4()])
        if found is None:
            return  # the store reads originators one at a time
        assert set(found) == set(originators)
        for originator in originators:
            each = recorder.select_events(originator)
            assert [(e.originator_version, e.topic, bytes(e.state)) for e in found[originator]] == [
                (e.originator_version, e.topic, bytes(e.state)) for e in each
            ]
            assert all(e.originator_id == originator for e in found[originator])
        newest = store.select_many(recorder, originators, latest=True)
        assert newest is not None
        assert {o: [e.originator_version for e in events] for o, events in newest.items()} == {
            o: [count] for count, o in enumerate(originators, start=1)
        }

    def test_select_many_reads_more_originators_than_one_statement_names(
        self, store: Store, recorder: ApplicationRecorder
    ) -> None:
        """1,200 originators are read whole, however the store splits them into statements."""
        originators = [uuid.uuid4() for _ in range(1_200)]
        recorder.insert_events([StoredEvent(o, 1, "t", b"x") for o in originators])
        found = store.select_many(recorder, originators)
        if found is None:
            return
        assert set(found) == set(originators)
        assert {len(events) for events in found.values()} == {1}

    # ------------------------------------------------------------ the listing's tables

    def test_position_moves_only_from_the_expected_value(
        self, open_tables: Callable[[], ListingTables]
    ) -> None:
        """A write with a stale expected position writes nothing and returns False (a compare-and-swap)."""
        tables = open_tables()
        first = listing_row()
        assert tables.position() == 0
        assert tables.write([(1, first)], expected=0, position=3) is True
        assert tables.write([(4, listing_row())], expected=0, position=7) is False
        assert tables.position() == 3
        assert [r.id for r in tables.select(in_flight=False, roots=False)] == [first.id]

    def test_upsert_keeps_the_first_sequence_and_overwrites_every_field(
        self, open_tables: Callable[[], ListingTables]
    ) -> None:
        """Rewriting a row replaces its fields, changed_at included, but keeps its place in the order."""
        tables = open_tables()
        a, b = listing_row(), listing_row()
        assert tables.write([(1, a), (2, b)], expected=0, position=2)
        newer = attrs.evolve(
            a, status="running", version=2, has_snapshot=True, owner="other", changed_at=1_800_000_009.5
        )
        assert tables.write([(9, newer)], expected=2, position=3)
        assert tables.select(in_flight=False, roots=False) == [newer, b]
        assert tables.load({a.id, b.id, uuid.uuid4()}) == {a.id: newer, b.id: b}

    def test_select_filters_in_flight_and_roots(self, open_tables: Callable[[], ListingTables]) -> None:
        """In-flight drops finished rows (orphans too), roots drops children, and both combine."""
        tables = open_tables()
        root = listing_row()
        child = listing_row(parent=root.id, status="running")
        done = listing_row(status="done")
        orphan = listing_row(parent=root.id, status="orphan")
        parked = listing_row(status="parked")
        written = [(1, root), (2, child), (3, done), (4, orphan), (5, parked)]
        assert tables.write(written, expected=0, position=5)

        def ids(*, in_flight: bool, roots: bool) -> list[UUID]:
            return [r.id for r in tables.select(in_flight=in_flight, roots=roots)]

        assert ids(in_flight=False, roots=False) == [root.id, child.id, done.id, orphan.id, parked.id]
        assert ids(in_flight=True, roots=False) == [root.id, child.id, parked.id]
        assert ids(in_flight=False, roots=True) == [root.id, done.id, parked.id]
        assert ids(in_flight=True, roots=True) == [root.id, parked.id]

    def test_reset_forgets_rows_and_position(self, open_tables: Callable[[], ListingTables]) -> None:
        """After a reset the tables are empty at position 0 and take writes from 0 again."""
        tables = open_tables()
        assert tables.write([(1, listing_row())], expected=0, position=4)
        tables.reset()
        assert (tables.position(), tables.select(in_flight=False, roots=False)) == (0, [])
        assert tables.write([(1, listing_row())], expected=0, position=1)

    def test_two_openings_share_one_listing(self, open_tables: Callable[[], ListingTables]) -> None:
        """Tables opened twice over one store see each other's writes and compete on the position."""
        first, second = open_tables(), open_tables()
        written = listing_row()
        assert first.write([(1, written)], expected=0, position=1)
        assert second.position() == 1
        assert second.load({written.id}) == {written.id: written}
        assert second.write([(2, listing_row())], expected=0, position=2) is False

    def test_an_empty_load_and_unknown_ids_find_nothing(
        self, open_tables: Callable[[], ListingTables]
    ) -> None:
        """Loading no ids, or ids never written, returns an empty mapping."""
        tables = open_tables()
        assert tables.load(set()) == {}
        assert tables.load({uuid.uuid4()}) == {}

    def test_many_rows_load_whole(self, open_tables: Callable[[], ListingTables]) -> None:
        """Loading 1,200 rows at once finds each, however the store splits them into statements."""
        tables = open_tables()
        rows = [listing_row() for _ in range(1_200)]
        assert tables.write(list(enumerate(rows, start=1)), expected=0, position=1)
        assert tables.load({r.id for r in rows}) == {r.id: r for r in rows}

    def test_load_tasks_finds_the_in_flight_embedded_rows_of_the_given_parents(
        self, open_tables: Callable[[], ListingTables]
    ) -> None:
        """Embedded task rows (version 0) still in flight, by parent: no other row, and not a finished one."""
        tables = open_tables()
        first, second, third = listing_row(), listing_row(), listing_row()
        born = listing_row(parent=first.id, version=0)
        running = listing_row(parent=first.id, version=0, status="running")
        finished = listing_row(parent=first.id, version=0, status="done")
        streamed = listing_row(parent=first.id)  # a child with a stream of its own
        other = listing_row(parent=second.id, version=0)
        rows = [first, second, third, born, running, finished, streamed, other]
        assert tables.write(list(enumerate(rows, start=1)), expected=0, position=1)
        assert tables.load_tasks({first.id}) == {born.id: born, running.id: running}
        assert tables.load_tasks({first.id, second.id, third.id}) == {
            born.id: born,
            running.id: running,
            other.id: other,
        }
        assert tables.load_tasks(set()) == {} and tables.load_tasks({third.id}) == {}
        ended = attrs.evolve(running, status="cancelled")
        assert tables.write([(9, ended)], expected=1, position=2)
        assert tables.load_tasks({first.id}) == {born.id: born}

    @pytest.mark.parametrize("changed_at", [0.0, 1_800_000_000.123456])
    def test_changed_at_round_trips(
        self, open_tables: Callable[[], ListingTables], changed_at: float
    ) -> None:
        """A row's change time reads back exactly as written."""
        tables = open_tables()
        written = listing_row(changed_at=changed_at)
        assert tables.write([(1, written)], expected=0, position=1)
        assert tables.load({written.id})[written.id].changed_at == changed_at

    # ------------------------------------------------------------ the coordination

    def test_now_is_the_store_clock_in_epoch_seconds(
        self, open_coordination: Callable[[], Coordination]
    ) -> None:
        """The store's clock reads seconds since the epoch, close to this host's clock here."""
        assert abs(open_coordination().now() - time.time()) < 5.0

    def test_a_heartbeat_is_live_until_it_expires(
        self, open_coordination: Callable[[], Coordination]
    ) -> None:
        """An engine is live while its heartbeat has not expired, and another coordination agrees."""
        coordination, other = open_coordination(), open_coordination()
        beat = coordination.beat("engine-a", "default", 0.4)
        assert beat.expires_at - beat.beat_at == pytest.approx(0.4, abs=1e-6)
        assert (coordination.is_live("engine-a"), other.is_live("engine-a")) == (True, True)
        assert other.is_live("engine-never") is False
        time.sleep(0.6)
        assert (coordination.is_live("engine-a"), other.is_live("engine-a")) == (False, False)
        assert "engine-a" in other.heartbeats()  # a lapsed heartbeat is still listed

    def test_a_beat_renews_and_a_retire_ends_at_once(
        self, open_coordination: Callable[[], Coordination]
    ) -> None:
        """Beating again extends the lease (and may move the group); retiring ends liveness at once."""
        coordination = open_coordination()
        first = coordination.beat("engine-a", "default", 30.0)
        second = coordination.beat("engine-a", "batch", 60.0)
        assert second.expires_at > first.expires_at
        assert coordination.heartbeats() == {"engine-a": second}
        assert not second.retired
        coordination.retire("engine-a")
        coordination.retire("engine-a")  # retiring twice is harmless
        assert not coordination.is_live("engine-a")
        retired = coordination.heartbeats()["engine-a"]
        assert retired.retired and retired.group == "batch" and retired.expires_at < second.expires_at
        coordination.retire("engine-b")  # an engine that never beat gets no row
        assert set(coordination.heartbeats()) == {"engine-a"}

    def test_heartbeats_filter_by_group(self, open_coordination: Callable[[], Coordination]) -> None:
        """heartbeats(group) lists only that group's engines; without a group, every engine."""
        coordination = open_coordination()
        coordination.beat("a", "default", 30.0)
        coordination.beat("b", "batch", 30.0)
        assert set(coordination.heartbeats("batch")) == {"b"}
        assert set(coordination.heartbeats()) == {"a", "b"}

    def test_a_beat_carries_the_engine_load(self, open_coordination: Callable[[], Coordination]) -> None:
        """A beat's load reads back exactly in another opening, by group; a beat without one: unknown."""
        coordination, other = open_coordination(), open_coordination()
        load: dict[str, JsonValue] = {
            "running": 2,
            "lag": 0.25,
            "leading": True,
            "host": "hôte-1",
            "pid": None,
            "threads": [4, 4],
            "nested": {"a": "b"},
        }
        coordination.beat("engine-a", "default", 30.0, load)
        coordination.beat("engine-b", "batch", 30.0, {"running": 1})
        coordination.beat("engine-c", "batch", 30.0)
        assert other.loads() == {"engine-a": load, "engine-b": {"running": 1}}
        assert other.loads("batch") == {"engine-b": {"running": 1}}
        assert other.loads("nobody") == {}
        coordination.retire("engine-a")
        assert other.loads()["engine-a"] == load  # a graceful stop keeps the last report
        coordination.beat("engine-b", "batch", 30.0)  # beating without a load: unknown again
        assert set(other.loads()) == {"engine-a"}
        with pytest.raises(ValueError, match="engine-d"):
            coordination.beat("engine-d", "default", 30.0, {"when": object()})  # type: ignore[dict-item]
        assert "engine-d" not in other.heartbeats()

    def test_leaders_are_the_engines_holding_a_leader_lock(
        self, open_coordination: Callable[[], Coordination]
    ) -> None:
        """Where a lock is held, leaders() names each engine with the locks it holds now; else it is None."""
        first, second = open_coordination(), open_coordination()
        # Names and locks of this test's own: other stores may share the server (and its locks).
        a, b = f"engine-{uuid.uuid4().hex[:12]}", f"engine-{uuid.uuid4().hex[:12]}"
        lock = uuid.uuid4().int & (2**62 - 1)
        first.beat(a, "default", 30.0)
        second.beat(b, "default", 30.0)
        assert first.lead(lock, a) is True
        if not self.leads_alone:
            assert (first.leaders(), second.leaders()) == (None, None)
            return
        assert second.lead(lock, b) is False
        assert second.lead(lock + 1, b) is True
        assert second.leaders() == {a: frozenset({lock}), b: frozenset({lock + 1})}
        first.resign(lock, a)
        assert first.leaders() == {b: frozenset({lock + 1})}
        second.close()
        assert first.leaders() == {}

    def test_claim_skips_held_leases_and_keeps_the_order_and_limit(
        self, open_coordination: Callable[[], Coordination]
    ) -> None:
        """A claim takes free roots in the order given up to its limit, and skips roots leased to anyone."""
        first, second = open_coordination(), open_coordination()
        roots = [uuid.uuid4() for _ in range(6)]
        assert first.claim(roots[:3], "manager-a", 30.0, 10) == roots[:3]
        assert second.claim(roots, "manager-b", 30.0, 2) == roots[3:5]
        assert first.claim(roots, "manager-a", 30.0, 10) == [roots[5]]  # its own held leases are skipped too
        assert first.claim(roots, "manager-a", 30.0, 10) == []
        holders = {lease.root: lease.holder for lease in second.leases()}
        assert holders == {
            root: "manager-a" if i in (0, 1, 2, 5) else "manager-b" for i, root in enumerate(roots)
        }

    def test_expired_and_released_leases_are_taken_over(
        self, open_coordination: Callable[[], Coordination]
    ) -> None:
        """A lease past its expiry, or released, goes to the next claimer, counting one more attempt."""
        first, second = open_coordination(), open_coordination()
        expiring, released = uuid.uuid4(), uuid.uuid4()
        assert first.claim([expiring], "manager-a", 0.2, 10) == [expiring]
        assert first.claim([released], "manager-a", 30.0, 10) == [released]
        assert first.release(released, "manager-a", outcome="transient", message="conflict") is True
        assert {lease.root: lease.outcome for lease in second.leases()}[released] == "transient"
        time.sleep(0.4)
        assert second.claim([expiring, released], "manager-b", 30.0, 10) == [expiring, released]
        leases = {lease.root: lease for lease in first.leases()}
        assert {
            (lease.holder, lease.attempts, lease.outcome, lease.message) for lease in leases.values()
        } == {("manager-b", 2, "", "")}

    def test_release_by_another_holder_changes_nothing(
        self, open_coordination: Callable[[], Coordination]
    ) -> None:
        """Releasing a lease one does not hold (or no longer holds) returns False and leaves it held."""
        coordination = open_coordination()
        root = uuid.uuid4()
        assert coordination.release(root, "manager-a", outcome="succeeded") is False  # never leased
        coordination.claim([root], "manager-a", 30.0, 1)
        assert coordination.release(root, "manager-b", outcome="succeeded") is False
        assert coordination.release(root, "manager-a", outcome="failed", message="parked") is True
        assert coordination.release(root, "manager-a", outcome="succeeded") is False  # already released
        (lease,) = coordination.leases()
        assert (lease.holder, lease.outcome, lease.message) == ("manager-a", "failed", "parked")

    def test_release_many_ends_the_holders_leases_together(
        self, open_coordination: Callable[[], Coordination]
    ) -> None:
        """``release_many`` releases the leases the holder still holds, with one outcome; a count of them."""
        coordination = open_coordination()
        mine, released, theirs, never = (uuid.uuid4() for _ in range(4))
        assert coordination.claim([mine, released], "manager-a", 30.0, 10) == [mine, released]
        assert coordination.claim([theirs], "manager-b", 30.0, 10) == [theirs]
        assert coordination.release(released, "manager-a", outcome="failed", message="parked") is True
        assert coordination.release_many([], "manager-a", outcome="succeeded") == 0
        count = coordination.release_many(
            [mine, released, theirs, never], "manager-a", outcome="transient", message="conflict"
        )
        assert count == 1
        leases = {lease.root: (lease.holder, lease.outcome, lease.message) for lease in coordination.leases()}
        assert leases == {
            mine: ("manager-a", "transient", "conflict"),
            released: ("manager-a", "failed", "parked"),
            theirs: ("manager-b", "", ""),
        }
        with pytest.raises(ValueError, match="succeeded, transient, failed, orphan, error"):
            coordination.release_many([theirs], "manager-b", outcome="")

    def test_release_refuses_an_unknown_outcome(self, open_coordination: Callable[[], Coordination]) -> None:
        """An outcome outside succeeded/transient/failed/orphan/error is a ValueError naming them."""
        coordination = open_coordination()
        root = uuid.uuid4()
        coordination.claim([root], "manager-a", 30.0, 1)
        with pytest.raises(ValueError, match="succeeded, transient, failed, orphan, error"):
            coordination.release(root, "manager-a", outcome="")

    def test_concurrent_claims_never_lease_one_root_twice(
        self, open_coordination: Callable[[], Coordination]
    ) -> None:
        """Two threads claiming the same roots at once, each with its own coordination, never both win one."""
        roots = [uuid.uuid4() for _ in range(40)]
        coordinations = [open_coordination(), open_coordination()]
        won: dict[str, list[UUID]] = {"a": [], "b": []}
        errors: list[BaseException] = []
        start = threading.Barrier(2, timeout=10)

        def claim(name: str, coordination: Coordination) -> None:
            try:
                start.wait()
                for offset in range(0, len(roots), 4):
                    won[name].extend(coordination.claim(roots[offset:] + roots[:offset], name, 30.0, 3))
            except Exception as error:  # noqa: BLE001 -- reported below, not lost in the thread
                errors.append(error)

        threads = [
            threading.Thread(target=claim, args=(name, c)) for name, c in zip(won, coordinations, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert errors == []
        assert not any(thread.is_alive() for thread in threads)
        assert set(won["a"]).isdisjoint(won["b"])
        assert len(won["a"]) + len(won["b"]) == len(set(won["a"]) | set(won["b"]))
        assert len(won["a"]) + len(won["b"]) == len(roots)  # 2 x 10 claims of 3 cover all 40 roots
        holders = {lease.root: lease.holder for lease in coordinations[0].leases()}
        assert holders == {**dict.fromkeys(won["a"], "a"), **dict.fromkeys(won["b"], "b")}

    def test_leadership(self, open_coordination: Callable[[], Coordination]) -> None:
        """One leader per lock id until it resigns or closes where the store says so; else everyone leads."""
        first, second = open_coordination(), open_coordination()
        assert first.lead(LOCK_ID, "engine-a") is True
        assert first.lead(LOCK_ID, "engine-a") is True  # staying leader
        if not self.leads_alone:
            assert second.lead(LOCK_ID, "engine-b") is True
            return
        assert second.lead(LOCK_ID, "engine-b") is False
        assert second.lead(LOCK_ID + 1, "engine-b") is True  # another lock id is independent
        first.resign(LOCK_ID, "engine-a")
        assert second.lead(LOCK_ID, "engine-b") is True
        assert first.lead(LOCK_ID, "engine-a") is False
        second.close()
        assert first.lead(LOCK_ID, "engine-a") is True

    def test_wait_times_out_without_new_events(self, open_coordination: Callable[[], Coordination]) -> None:
        """With nothing committed, wait() returns False once its timeout has passed."""
        coordination = open_coordination()
        coordination.wait(0.0)  # starts listening where the store notifies
        started = time.monotonic()
        assert coordination.wait(0.3) is False
        assert 0.25 <= time.monotonic() - started < 3.0

    def test_wait_wakes_when_another_opening_inserts(
        self,
        open_coordination: Callable[[], Coordination],
        open_recorder: Callable[[], ApplicationRecorder],
    ) -> None:
        """Where the store notifies, an insert through another opening of it wakes wait() within a second."""
        if not self.notifies:
            pytest.skip("this store does not notify: its callers poll")
        coordination = open_coordination()
        other = open_recorder()
        while coordination.wait(0.05):  # listening from here on; earlier inserts drained
            pass
        inserting = threading.Timer(
            0.2, lambda: other.insert_events([StoredEvent(uuid.uuid4(), 1, "t", b"")])
        )
        started = time.monotonic()
        inserting.start()
        try:
            assert coordination.wait(5.0) is True
            assert time.monotonic() - started < 1.2
        finally:
            inserting.join(timeout=10)

    def test_many_openers_may_create_the_tables_at_once(self, store: Store) -> None:
        """Opening the coordination and listing tables from four threads at once over a new store succeeds."""
        errors: list[Exception] = []
        opened: list[Coordination | ListingTables] = []
        start = threading.Barrier(4, timeout=10)

        def open_both() -> None:
            try:
                start.wait()
                opened.append(store.coordination())
                opened.append(store.listing_tables())
            except Exception as error:  # noqa: BLE001 -- reported below, not lost in the thread
                errors.append(error)

        threads = [threading.Thread(target=open_both) for _ in range(4)]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=30)
            assert errors == []
            assert len(opened) == 8
        finally:
            for item in opened:
                item.close()

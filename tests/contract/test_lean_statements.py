"""The recorder's insert and select sent through libpq, against the real server.

Both originator id types the library offers (``uuid`` and ``text``), every
form of ``select_events``, binary states, errors raised as the library's
classes, and a connection that lost its prepared statements.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from eventsourcing.persistence import IntegrityError, ProgrammingError, StoredEvent
from eventsourcing.postgres import PostgresDatastore

from incarnate.store import _lean as lean
from incarnate.store._postgres import NonPipelinedRecorder
from tests.stores import PG_DBNAME, PG_HOST, PG_PORT, require_postgres


@pytest.fixture(params=["uuid", "text"])
def recorder(request: pytest.FixtureRequest) -> Iterator[NonPipelinedRecorder]:
    user = require_postgres()
    table = f"contract_lean_{request.param}_events"
    datastore = PostgresDatastore(
        PG_DBNAME, PG_HOST, str(PG_PORT), user, "", pool_size=1, originator_id_type=request.param
    )
    made = NonPipelinedRecorder(datastore, events_table_name=table)
    try:
        made.create_table()
        yield made
    finally:
        with datastore.get_connection() as connection:
            connection.execute(f"DROP TABLE IF EXISTS {table}")
            connection.execute(f"DROP FUNCTION IF EXISTS {made.insert_function_name}")
        datastore.close()


def test_inserted_events_read_back_exactly_in_every_select_form(recorder: NonPipelinedRecorder) -> None:
    """Ids, versions, topics (non-ASCII too) and states (any bytes) come back as they went in."""
    originator, other = uuid.uuid4(), uuid.uuid4()
    states = [b"", b"\x00\xff\x00", "é€😀".encode(), bytes(range(256)) * 300]
    events = [StoredEvent(originator, n + 1, f"topic:é{n}", state) for n, state in enumerate(states)]
    assert recorder.insert_events(events) == [1, 2, 3, 4]
    assert recorder.insert_events([StoredEvent(other, 1, "other", b"x")]) == [5]

    read = recorder.select_events(originator)
    assert [(e.originator_version, e.topic, e.state) for e in read] == [
        (e.originator_version, e.topic, e.state) for e in events
    ]
    expected_id = originator if recorder.datastore.originator_id_type == "uuid" else str(originator)
    assert {e.originator_id for e in read} == {expected_id}

    def versions(**bounds: object) -> list[int]:
        return [e.originator_version for e in recorder.select_events(originator, **bounds)]

    assert versions(gt=2) == [3, 4]
    assert versions(lte=2) == [1, 2]
    assert versions(gt=1, lte=3) == [2, 3]
    assert versions(desc=True) == [4, 3, 2, 1]
    assert versions(desc=True, limit=1) == [4]
    assert versions(gt=1, lte=4, desc=True, limit=2) == [4, 3]
    assert versions(gt=4, limit=1) == []
    assert recorder.select_events(uuid.uuid4()) == []
    assert recorder.select_events(str(originator), gt=3) == recorder.select_events(originator, gt=3)


def test_a_conflict_is_the_librarys_integrity_error_and_stores_nothing(
    recorder: NonPipelinedRecorder,
) -> None:
    taken, fresh = uuid.uuid4(), uuid.uuid4()
    recorder.insert_events([StoredEvent(taken, 1, "t", b"first")])
    with pytest.raises(IntegrityError, match="duplicate key"):
        recorder.insert_events([StoredEvent(fresh, 1, "t", b"a"), StoredEvent(taken, 1, "t", b"b")])
    assert recorder.select_events(fresh) == []
    (later,) = recorder.insert_events([StoredEvent(fresh, 1, "t", b"a")]) or [0]
    assert later > 1  # a refused insert's ids are not reused: no reader can have passed over them
    assert [n.state for n in recorder.select_notifications(start=1, limit=10)] == [b"first", b"a"]


def test_a_connection_that_lost_its_prepared_statements_prepares_them_again(
    recorder: NonPipelinedRecorder,
) -> None:
    """``DISCARD ALL`` (a pooler's reset, say) drops them; the next call prepares and succeeds."""
    originator = uuid.uuid4()
    recorder.insert_events([StoredEvent(originator, 1, "t", b"one")])
    assert len(recorder.select_events(originator)) == 1
    with recorder.datastore.get_connection() as connection:  # the pool's only connection
        connection.execute("DISCARD ALL")
    recorder.insert_events([StoredEvent(originator, 2, "t", b"two")])
    assert [e.state for e in recorder.select_events(originator)] == [b"one", b"two"]


def test_a_terminated_backend_is_an_operational_error_the_recorder_retries(
    recorder: NonPipelinedRecorder,
) -> None:
    """A lost connection reads as the library's ``OperationalError``: retried on a fresh connection."""
    originator = uuid.uuid4()
    recorder.insert_events([StoredEvent(originator, 1, "t", b"one")])
    with recorder.datastore.get_connection() as connection:
        pid = connection.info.backend_pid
    user = require_postgres()
    with psycopg.connect(host=PG_HOST, port=PG_PORT, dbname=PG_DBNAME, user=user, autocommit=True) as killer:
        killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
    # The first attempt meets the dead connection, the pool drops it, the retry reads.
    assert [e.state for e in recorder.select_events(originator)] == [b"one"]
    recorder.insert_events([StoredEvent(originator, 2, "t", b"two")])
    assert [e.state for e in recorder.select_events(originator)] == [b"one", b"two"]


def test_a_statement_the_server_refuses_raises_the_librarys_error_class() -> None:
    """An error other than a lost statement is raised at once, as the library maps psycopg's."""
    user = require_postgres()
    datastore = PostgresDatastore(PG_DBNAME, PG_HOST, str(PG_PORT), user, "", pool_size=1)
    statement = lean.Statement("contract_lean_broken", b"SELECT * FROM contract_lean_no_such_table", [])
    try:
        with (
            pytest.raises(ProgrammingError, match="contract_lean_no_such_table"),
            datastore.get_connection() as connection,
        ):
            statement.run(connection, [])
        with datastore.get_connection() as connection:  # still usable
            assert connection.execute("SELECT 1").fetchone() == {"?column?": 1}
    finally:
        datastore.close()


def test_binary_arrays_follow_postgresqls_wire_format() -> None:
    """Header (dimensions, null flag, element type, length, lower bound), then length-prefixed items."""
    assert lean.array(lean.INT8_OID, []) == bytes.fromhex("000000000000000000000014")
    assert lean.array(lean.BYTEA_OID, [b"ab", b""]) == bytes.fromhex(
        "000000010000000000000011000000020000000100000002616200000000"
    )
    assert lean.int8(-2) == bytes.fromhex("fffffffffffffffe")
    some = uuid.uuid4()
    assert lean.identifier(some, lean.UUID_OID) == some.bytes
    assert lean.identifier(str(some), lean.UUID_OID) == some.bytes
    assert lean.identifier(some, lean.TEXT_OID) == str(some).encode()
    assert lean.numbered(b"SELECT f(%b::uuid[], %b) WHERE x > %b") == b"SELECT f($1::uuid[], $2) WHERE x > $3"


def test_two_statements_of_one_name_on_one_connection_each_run_their_own_text() -> None:
    """A name prepared with another text (another statement, or outside this module) is replaced."""
    user = require_postgres()
    datastore = PostgresDatastore(PG_DBNAME, PG_HOST, str(PG_PORT), user, "", pool_size=1)
    one = lean.Statement("contract_lean_shared", b"SELECT 1::int8", [])
    two = lean.Statement("contract_lean_shared", b"SELECT 2::int8", [])
    try:
        with datastore.get_connection() as connection:
            assert lean.int8_column(one.run(connection, [])) == [1]
            assert lean.int8_column(two.run(connection, [])) == [2]
            assert lean.int8_column(one.run(connection, [])) == [1]
            connection.execute("DEALLOCATE ALL")  # the module still records one's text there
            assert lean.int8_column(two.run(connection, [])) == [2]  # replacing: nothing to drop, prepared
            connection.execute("DEALLOCATE ALL")
            fresh = lean.Statement("contract_lean_fresh", b"SELECT 4::int8", [])
            connection.execute("PREPARE contract_lean_fresh AS SELECT 5::int8")
            assert lean.int8_column(fresh.run(connection, [])) == [4]  # duplicate on prepare: replaced
    finally:
        datastore.close()


def test_an_interrupted_statement_is_cancelled_on_the_server() -> None:
    """Waiting is psycopg's own: a signal's exception ends the wait at once and the query is cancelled."""
    import signal
    import time

    user = require_postgres()
    datastore = PostgresDatastore(PG_DBNAME, PG_HOST, str(PG_PORT), user, "", pool_size=1)
    sleeper = lean.Statement("contract_lean_sleep", b"SELECT pg_sleep(20)", [])

    def interrupt(signum: int, frame: object) -> None:
        raise SystemExit("interrupted")

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with datastore.get_connection() as connection:
            started = time.monotonic()
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            with pytest.raises(SystemExit, match="interrupted"):
                sleeper.run(connection, [])
            assert time.monotonic() - started < 5
            assert connection.execute("SELECT 1 AS one").fetchone() == {"one": 1}  # cancelled, not stuck
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        datastore.close()

"""The library's own application-recorder contract, run against the PostgreSQL recorder the engine uses.

``eventsourcing``'s test cases import ``pycryptodome`` and ``msgspec``; the
module is skipped when they are not installed (they are no dependency of ours).
"""

from __future__ import annotations

import pytest

pytest.importorskip("Crypto", reason="eventsourcing's recorder test cases need pycryptodome")
pytest.importorskip("msgspec", reason="eventsourcing's recorder test cases need msgspec")

from eventsourcing.postgres import PostgresDatastore
from eventsourcing.tests.persistence import ApplicationRecorderTestCase

from incarnate.store._postgres import NonPipelinedRecorder
from tests.stores import PG_DBNAME, PG_HOST, PG_PORT, require_postgres


class TestNonPipelinedRecorder(ApplicationRecorderTestCase[NonPipelinedRecorder]):
    """The library's recorder contract holds for the recorder that inserts without pipeline mode."""

    def setUp(self) -> None:
        user = require_postgres()
        self.datastore = PostgresDatastore(PG_DBNAME, PG_HOST, str(PG_PORT), user, "")
        self.recorder = NonPipelinedRecorder(self.datastore, events_table_name="contract_events")
        self.recorder.create_table()

    def tearDown(self) -> None:
        with self.datastore.get_connection() as connection:
            connection.execute("DROP TABLE IF EXISTS contract_events")
            connection.execute(f"DROP FUNCTION IF EXISTS {self.recorder.insert_function_name}")
        self.datastore.close()

    def create_recorder(self) -> NonPipelinedRecorder:
        return self.recorder


def test_a_commit_waits_for_the_one_before_it_so_readers_never_see_a_hole() -> None:
    """The schema's insert function holds the events table's lock to the commit.

    A transaction that has inserted (notification id 1) and not committed
    makes the next insert wait; without the lock the next one would commit
    id 2 first, and a reader tailing the log would pass over id 1 for good.
    """
    import threading
    import uuid

    from eventsourcing.persistence import StoredEvent

    user = require_postgres()
    datastore = PostgresDatastore(PG_DBNAME, PG_HOST, str(PG_PORT), user, "", pool_size=4)
    recorder = NonPipelinedRecorder(datastore, events_table_name="contract_function_events")
    try:
        recorder.create_table()
        first, second = (StoredEvent(uuid.uuid4(), 1, "topic", b"state") for _ in range(2))
        later: list[object] = []
        with datastore.get_connection() as held, held.transaction(), held.cursor() as curs:
            recorder._insert_stored_events(curs, [first])
            assert recorder._fetch_ids_after_insert_events(curs, [first]) == [1]
            writer = threading.Thread(target=lambda: later.append(recorder.insert_events([second])))
            writer.start()
            writer.join(0.5)
            assert writer.is_alive()  # waiting for the lock, not committed ahead of id 1
            assert recorder.select_notifications(start=1, limit=10) == []
        writer.join(30.0)
        assert later == [[2]]
        assert [n.id for n in recorder.select_notifications(start=1, limit=10)] == [1, 2]
    finally:
        with datastore.get_connection() as connection:
            connection.execute("DROP TABLE IF EXISTS contract_function_events")
            connection.execute(f"DROP FUNCTION IF EXISTS {recorder.insert_function_name}")
        datastore.close()


@pytest.mark.parametrize("one_statement", [True, False], ids=["one statement", "begin-commit"])
def test_an_insert_is_all_or_nothing_and_leaves_its_connection_usable(one_statement: bool) -> None:
    """One autocommitted statement is a transaction too: a conflicting event stores none of the batch.

    The same holds between ``BEGIN`` and ``COMMIT`` (the form the test kit's
    crash inside a commit uses), and the pool's connections stay usable
    after the refused insert, so the next insert and read succeed.
    """
    import uuid

    from eventsourcing.persistence import IntegrityError, StoredEvent

    user = require_postgres()
    datastore = PostgresDatastore(PG_DBNAME, PG_HOST, str(PG_PORT), user, "", pool_size=1)
    recorder = NonPipelinedRecorder(datastore, events_table_name="contract_atomic_events")
    recorder.one_statement = one_statement
    try:
        recorder.create_table()
        taken, fresh = uuid.uuid4(), uuid.uuid4()
        assert recorder.insert_events([StoredEvent(taken, 1, "topic", b"first")]) == [1]
        batch = [StoredEvent(fresh, 1, "topic", b"\x00\xffbinary"), StoredEvent(taken, 1, "topic", b"again")]
        with pytest.raises(IntegrityError):
            recorder.insert_events(batch)
        assert recorder.select_events(fresh) == []
        assert [e.state for e in recorder.select_events(taken)] == [b"first"]
        assert recorder.insert_events(batch[:1]) is not None
        (stored,) = recorder.select_events(fresh)
        assert (stored.originator_id, stored.originator_version) == (fresh, 1)
        assert stored.state == b"\x00\xffbinary"
        assert [n.originator_id for n in recorder.select_notifications(start=1, limit=10)] == [taken, fresh]
    finally:
        with datastore.get_connection() as connection:
            connection.execute("DROP TABLE IF EXISTS contract_atomic_events")
            connection.execute(f"DROP FUNCTION IF EXISTS {recorder.insert_function_name}")
        datastore.close()

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
        self.datastore.close()

    def create_recorder(self) -> NonPipelinedRecorder:
        return self.recorder

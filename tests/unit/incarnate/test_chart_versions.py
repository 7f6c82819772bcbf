"""Each registered chart's shape is stored once; a starting engine learns that without decoding it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from aggregates import ChartVersion
from incarnate import Engine, Storage
from tests.scenarios import charts

TASKS = {"charge": lambda call: "ok"}


def version_rows(path: str, chart_name: str, fingerprint: str) -> list[tuple[int, bytes]]:
    """The stored events of the chart version's aggregate: (version, state)."""
    version_id = ChartVersion.id_for(chart_name, fingerprint)
    with sqlite3.connect(path) as connection:
        return connection.execute(
            "SELECT originator_version, state FROM stored_events WHERE originator_id = ?",
            (version_id.hex,),
        ).fetchall()


def test_engines_starting_over_one_store_record_each_chart_version_once(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    for _ in range(3):
        Engine(charts.ALL, storage=Storage.sqlite(path)).close()
    with Engine(charts.ALL, storage=Storage.sqlite(path)) as engine:
        for chart in charts.ALL:
            assert [version for version, _ in version_rows(path, chart.name, chart.fingerprint)] == [1]
            assert engine.parts.journal.chart_shape(chart.name, chart.fingerprint) == chart.shape


def test_an_engine_starts_over_a_stored_chart_version_that_does_not_decode(tmp_path: Path) -> None:
    """The check reads the version's first event without decoding it: a damaged shape stops no start."""
    path = str(tmp_path / "store.db")
    Engine(charts.ALL, storage=Storage.sqlite(path)).close()
    chart = charts.KID
    version_id = ChartVersion.id_for(chart.name, chart.fingerprint)
    with sqlite3.connect(path) as connection:
        connection.execute(
            "UPDATE stored_events SET state = ? WHERE originator_id = ?", (b"{not json", version_id.hex)
        )
    with Engine(charts.ALL, TASKS, storage=Storage.sqlite(path)) as engine:
        handle = engine.start(charts.KID, input={"name": "x"})
        engine.run_until_idle()
        engine.send(handle.id, "finish")
        engine.run_until_idle()
        assert handle.result(timeout=5) == "done:x"
    assert version_rows(path, chart.name, chart.fingerprint) == [(1, b"{not json")]  # left as it was

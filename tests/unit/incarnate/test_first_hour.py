"""What a new user meets first: `incarnate start`, clients without task code, events that did nothing,
and bad input that must be one clear line, never a traceback or a bug report."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from uuid import UUID

import pytest

from aggregates import InstanceStatus
from incarnate import ConfigurationError, Engine, EngineError, InstanceExists, Storage, ThreadedRunner
from incarnate._inspect import check_event
from incarnate.cli import main
from statechart import Chart, final, invoke, state, transition
from statechart.errors import ChartInvalid
from tests.scenarios import charts

CHARTS = "tests.scenarios.charts:ALL"


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A SQLite store holding nothing yet (an engine created its tables)."""
    path = str(tmp_path / "store.db")
    Engine(charts.ALL, {"charge": lambda call: "ok"}, storage=Storage.sqlite(path)).close()
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``incarnate ARGV``, in-process: the exit status, standard output and standard error."""
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# ------------------------------------------------------------ incarnate start


def test_start_prints_the_new_id_and_a_worker_can_run_it(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`incarnate start` commits a root and prints its id alone, ready for `$(...)`."""
    status, out, err = run(capsys, "start", "gate", "--charts", CHARTS, "--db", db)
    assert status == 0, err
    ident = UUID(out.strip())
    with Engine(charts.ALL, {"charge": lambda call: "ok"}, storage=Storage.sqlite(db)) as engine:
        engine.resume_all()
        engine.send(ident, "answer", "yes")
        engine.run_until_idle()
        assert engine.instance(ident).record.output == "yes"


def test_start_with_a_key_starts_once(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A repeated `start --key` prints the same id, starts nothing, and `--json` says so."""
    status, out, _ = run(
        capsys, "start", "gate", "--key", "order-7", "--json", "--charts", CHARTS, "--db", db
    )
    assert status == 0
    first = json.loads(out)
    assert first["started"] is True and first["status"] == "running" and first["key"] == "order-7"
    status, out, err = run(capsys, "start", "gate", "--key", "order-7", "--charts", CHARTS, "--db", db)
    assert status == 0 and out.strip() == first["id"]
    assert "not started again" in err
    with Engine(charts.ALL, storage=Storage.sqlite(db)) as engine:
        engine.listing.catch_up()
        assert [row.id for row in engine.listing.rows()] == [UUID(first["id"])]


def test_start_refuses_an_id_already_taken(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`start --id` of a stored instance is one line and exit 2; the stored instance is untouched."""
    _, out, _ = run(capsys, "start", "gate", "--charts", CHARTS, "--db", db)
    ident = out.strip()
    status, out, err = run(capsys, "start", "gate", "--id", ident, "--charts", CHARTS, "--db", db)
    assert status == 2 and out == ""
    assert "already holds an instance with that id" in err and "Traceback" not in err


def test_start_names_a_chart_the_charts_lack(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown chart name lists the charts there are."""
    status, _, err = run(capsys, "start", "gaet", "--charts", CHARTS, "--db", db)
    assert status == 2
    assert "'gaet' is not among the charts" in err and "gate" in err


def test_engine_start_with_a_key_is_idempotent_and_checks_the_input(tmp_path: Path) -> None:
    """The same key and input return the first instance; the same key with other input raises."""
    with Engine(charts.ALL, storage=Storage.sqlite(str(tmp_path / "s.db"))) as engine:
        first = engine.start("parent", {"members": ["a"]}, key="k")
        again = engine.start("parent", {"members": ["a"]}, key="k")
        assert again.id == first.id == Engine.id_for_key("parent", "k")
        with pytest.raises(InstanceExists, match="another chart or input"):
            engine.start("parent", {"members": ["b"]}, key="k")
        with pytest.raises(InstanceExists):
            engine.start("gate", id=first.id)


# ------------------------------------------------------------ clients need no task code


def test_a_client_engine_needs_no_task_functions(tmp_path: Path) -> None:
    """An engine that only starts and sends registers charts that invoke tasks without their functions."""
    storage = Storage.sqlite(str(tmp_path / "s.db"))
    with Engine(charts.ALL, storage=storage) as client:
        charging = client.start("charging")
        assert client.instance(charging).record.status is InstanceStatus.RUNNING
        with pytest.raises(ChartInvalid) as raised:
            client.run_until_idle()  # running work needs them
        assert "task 'charge' is not registered" in str(raised.value.exceptions[0])
    with Engine(charts.ALL, {"charge": lambda call: "paid"}, storage=storage) as worker:
        worker.resume_all()
        worker.run_until_idle()
        assert worker.instance(charging).record.status is InstanceStatus.DONE


def test_an_engine_that_runs_work_needs_every_task() -> None:
    """A threaded runner works at once, so an engine built with one still refuses a missing task."""
    with pytest.raises(ChartInvalid):
        Engine(charts.ALL, storage=Storage.popo(), runner=ThreadedRunner(workers=1))


# ------------------------------------------------------------ events that did nothing


def test_an_ignored_event_is_on_the_outcome_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The receipt's outcome says the event was ignored, and a WARNING names it and the states."""
    with Engine([charts.GATE], storage=Storage.sqlite(str(tmp_path / "s.db"))) as engine:
        gate = engine.start("gate")
        receipt = engine.send_receipt(gate, "aprove")
        with caplog.at_level(logging.WARNING, logger="incarnate.engine.ignored"):
            engine.run_until_idle()
        outcome = receipt.wait(timeout=5)
        assert outcome.processed and outcome.ignored
        [record] = [r for r in caplog.records if r.name == "incarnate.engine.ignored"]
        assert "'aprove'" in record.getMessage() and "awaiting_answer" in record.getMessage()
        taken = engine.send_receipt(gate, "answer", "yes")
        engine.run_until_idle()
        assert not taken.wait(timeout=5).ignored


def test_send_refuses_an_event_no_transition_takes(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`incarnate send ID aprove` sends nothing and exits 3; `--allow-ignored` sends it with a warning."""
    _, out, _ = run(capsys, "start", "gate", "--charts", CHARTS, "--db", db)
    ident = out.strip()
    status, out, err = run(capsys, "send", ident, "aprove", "--db", db)
    assert status == 3 and out == ""
    assert "would ignore 'aprove'" in err and "the events it may be sent now: answer" in err
    with Engine(charts.ALL, storage=Storage.sqlite(db)) as engine:
        assert engine.instance(UUID(ident)).record.inbox == ()
    status, out, _ = run(capsys, "send", ident, "aprove", "--allow-ignored", "--db", db)
    assert status == 0 and "warning" in out and "accepted 'aprove'" in out
    status, _, _ = run(capsys, "send", ident, "answer", "--data", '"yes"', "--db", db)
    assert status == 0


def test_an_autoforwarding_site_leaves_the_event_unjudged(tmp_path: Path) -> None:
    """Where a site forwards every event to its children, a name no transition matches is not refused."""
    kid = Chart("kid", state("idle", on=[transition("poke", "poked")]), final("poked"))
    parent = Chart("forwarding", state("running", invoke=[invoke("kid", chart="kid", autoforward=True)]))
    with Engine([parent, kid], storage=Storage.sqlite(str(tmp_path / "s.db"))) as engine:
        started = engine.start("forwarding")
        engine.run_until_idle()
        assert check_event(engine, engine.instance(started), "poke").taken is None


# ------------------------------------------------------------ bad input: one line, exit 2


def test_a_lone_surrogate_is_refused_clearly(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A lone surrogate in `--data` (an escape, or bytes not UTF-8) is exit 2, and the API says why."""
    _, out, _ = run(capsys, "start", "gate", "--charts", CHARTS, "--db", db)
    ident = out.strip()
    for data in ('"\\ud800"', '"\udced"'):
        status, _, err = run(capsys, "send", ident, "answer", "--data", data, "--db", db)
        assert status == 2, err
        assert "lone surrogate" in err
    with Engine(charts.ALL, storage=Storage.sqlite(db)) as engine:
        with pytest.raises(EngineError, match="lone surrogate"):
            engine.send(UUID(ident), "answer", {"note": "\ud800"})
        with pytest.raises(EngineError, match="lone surrogate"):
            engine.send(UUID(ident), "answer\udcff")
        assert engine.instance(UUID(ident)).record.inbox == ()


def test_an_unclosed_ipv6_url_is_a_configuration_error(capsys: pytest.CaptureFixture[str]) -> None:
    """`--db postgresql://u@[::1/db` names the URL form instead of reporting a bug."""
    with pytest.raises(ConfigurationError, match="IPv6 host in brackets"):
        Storage.from_url("postgresql://u@[::1/db")
    status, _, err = run(capsys, "list", "--db", "postgresql://u:secret@[::1/db")
    assert status == 2 and "malformed" in err and "secret" not in err


def test_a_charts_module_that_raises_on_import(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `--charts` module that raises is one line naming the error and where, exit 2."""
    (tmp_path / "broken_charts.py").write_text("CHARTS = []\nraise RuntimeError('no config file')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    status, _, err = run(capsys, "list", "--charts", "broken_charts:CHARTS", "--db", db)
    assert status == 2
    assert "RuntimeError: no config file" in err and "broken_charts.py:2" in err
    assert "this is a bug" not in err

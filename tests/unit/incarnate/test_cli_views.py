"""The operator's views on the command line: list filters, ``show``, ``--json`` of every reading
command, plain piped output, ``check`` and ``migrate --chart``, and the generated reference."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import attrs
import pytest

from aggregates import InstanceStatus
from incarnate import Engine, PostgresStorage, Storage, TaskCall
from incarnate.cli import main, reference
from statechart import Chart, JsonValue
from tests import stores
from tests.scenarios import charts
from tests.unit.incarnate import v2_charts

ROOT = Path(__file__).resolve().parents[3]
CHARTS = "tests.scenarios.charts:ALL"
V2 = "tests.unit.incarnate.test_cli_views:V2_ALL"
TASKS = "tests.unit.incarnate.sample_charts:TASKS"
V2_ALL: list[Chart[Any]] = [v2_charts.PARENT, *(chart for chart in charts.ALL if chart.name != "parent")]
"""Every scenario chart, with version 2 of ``parent``."""
ROW_KEYS = ["id", "root", "parent", "kind", "name", "status", "owner", "version", "changed_at"]
ROW_KEYS.append("changed_at_epoch")


def declined(call: TaskCall) -> JsonValue:
    """Fail every charge, as a card that is declined."""
    raise RuntimeError(f"card declined on attempt {call.attempt}")


@attrs.frozen
class Store:
    """A SQLite store: a ``parent`` with a running ``kid``, a ``charging`` whose first charge failed."""

    path: Path
    parent: UUID
    kid: UUID
    charging: UUID
    failed: UUID

    @property
    def db(self) -> str:
        """The path as ``--db`` takes it."""
        return str(self.path)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """Build the store with an engine whose charge task always fails, then close the engine."""
    path = tmp_path / "store.db"
    engine = Engine(charts.ALL, {"charge": declined}, storage=Storage.sqlite(str(path)))
    try:
        parent = engine.start("parent", {"members": ["a"]})
        engine.run_until_idle()
        kid = engine.children(parent)[0].id
        charging = engine.start("charging")
        engine.run_until_idle()
        [failed] = [
            i.id
            for i in engine.instances()
            if i.record.parent and i.record.parent.parent == charging and i.record.status.value == "failed"
        ]
    finally:
        engine.close()
    return Store(path, parent, kid, charging, failed)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``incarnate`` in-process; return the exit status, standard output and standard error."""
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    """Run a reading command with ``--json``; its one JSON document (it must exit 0)."""
    status, out, err = run(capsys, *argv, "--json")
    assert (status, err) == (0, ""), err
    return json.loads(out)


def park(store: Store) -> None:
    """Park the parent's tree: a fresh engine with version 2 of ``parent`` acquires it."""
    engine = Engine(V2_ALL, {"charge": declined}, storage=Storage.sqlite(store.db))
    try:
        engine.resume_all()
    finally:
        engine.close()


# --------------------------------------------------------------------- list


def test_list_json_is_one_document_with_the_documented_keys(
    capsys: pytest.CaptureFixture[str], store: Store
) -> None:
    """``list --json`` prints the page (total, offset, limit, left_off, rows): string ids, ISO times."""
    page = run_json(capsys, "list", "--db", store.db)
    assert list(page) == ["total", "offset", "limit", "left_off", "rows"]
    assert (page["total"], page["limit"], page["left_off"]) == (len(page["rows"]), 50, 0)
    assert {row["id"] for row in page["rows"]} == {str(store.parent), str(store.kid), str(store.charging)}
    for row in page["rows"]:
        assert list(row) == [*ROW_KEYS, "started_at", "started_at_epoch", "configuration"]
        assert isinstance(row["id"], str) and isinstance(row["changed_at_epoch"], float)
        assert row["changed_at"].endswith("+00:00") and "." in row["changed_at"]
        assert row["started_at"].endswith("+00:00") and row["started_at_epoch"] <= row["changed_at_epoch"] + 1
    by_id = {row["id"]: row for row in page["rows"]}
    assert by_id[str(store.kid)]["configuration"] != []


def test_list_filters_by_status_and_chart(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``--status`` (repeatable) and ``--chart`` keep the matching rows, finished ones included."""
    failed = run_json(capsys, "list", "--status", "failed", "--db", store.db)
    assert [row["id"] for row in failed["rows"]] == [str(store.failed)]
    both = run_json(capsys, "list", "--status", "failed", "--status", "running", "--db", store.db)
    assert {row["status"] for row in both["rows"]} == {"failed", "running"}
    kids = run_json(capsys, "list", "--chart", "kid", "--db", store.db)
    assert [row["id"] for row in kids["rows"]] == [str(store.kid)]
    status, out, _ = run(capsys, "list", "--chart", "kid", "--db", store.db)
    assert status == 0 and out.splitlines()[1].split()[0] == str(store.kid)
    status, _, err = run(capsys, "list", "--status", "sleeping", "--db", store.db)
    assert status == 2 and "'sleeping' is not one of" in err


def test_list_limit_says_how_many_were_left_off(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``--limit N`` prints the N most recently changed rows and notes the rest on standard error."""
    everything = run_json(capsys, "list", "--all", "--limit", "0", "--db", store.db)
    assert everything["limit"] is None and everything["left_off"] == 0
    status, out, err = run(capsys, "list", "--all", "--limit", "2", "--db", store.db)
    assert status == 0
    ids = [line.split()[0] for line in out.splitlines()[1:]]
    assert ids == [row["id"] for row in everything["rows"][:2]]
    left = everything["total"] - 2
    assert err == (
        f"2 of {everything['total']} shown (--limit 2); {left} more left off: pass --limit 0 for all, "
        "or narrow with --status, --chart or --since\n"
    )
    status, _, err = run(capsys, "list", "--limit", "-1", "--db", store.db)
    assert status == 2 and "--limit must be 0 (no limit) or more, got -1" in err


def test_list_since_keeps_the_rows_changed_since(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``--since`` takes a duration back from now or an ISO time, compared with the row's change time."""
    recent = run_json(capsys, "list", "--since", "1d", "--db", store.db)
    assert recent["total"] == 3
    assert run_json(capsys, "list", "--since", "2999-01-01T00:00:00Z", "--db", store.db)["total"] == 0
    assert run_json(capsys, "list", "--since", "2000-01-01", "--db", store.db)["total"] == 3
    status, out, _ = run(capsys, "list", "--since", "2999-01-01T00:00:00Z", "--db", store.db)
    assert (status, out) == (0, f"no instances match in SQLite file {store.db}\n")
    status, _, err = run(capsys, "list", "--since", "yesterday", "--db", store.db)
    assert status == 2 and "--since 'yesterday' is neither a duration nor a time" in err


# --------------------------------------------------------------------- show


def test_show_prints_the_context_and_the_slot(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``show`` prints an instance's status, owner, context and, for a child, its slot and attempt."""
    status, out, err = run(capsys, "show", str(store.parent), "--db", store.db)
    assert (status, err) == (0, "")
    fields = dict(line.split(":", 1) for line in out.splitlines()[1:] if not line.startswith(" "))
    assert out.splitlines()[0] == f"chart 'parent' {store.parent}"
    assert fields["status"].strip() == "running"
    assert fields["configuration"].strip() == "gathering"
    assert '"members": ["a"]' in fields["context"]
    assert fields["root"].strip() == "itself"
    _, out, _ = run(capsys, "show", str(store.kid)[:8], "--db", store.db)
    assert "slot:          team[a]#1, attempt 1" in out.splitlines()


def test_show_makes_a_failed_tasks_error_visible(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """A failed task's error is printed by ``show``, in its JSON, and after the call tree of ``tree``."""
    status, out, _ = run(capsys, "show", str(store.failed), "--db", store.db)
    assert status == 0
    [error] = [line for line in out.splitlines() if line.startswith("error:")]
    assert "card declined on attempt 1" in error
    detail = run_json(capsys, "show", str(store.failed), "--db", store.db)
    assert detail["status"] == "failed" and "card declined on attempt 1" in json.dumps(detail["error"])
    facts = (detail["kind"], detail["name"], detail["site"], detail["attempt"])
    assert facts == ("task", "charge", "charge", 1)
    _, out, _ = run(capsys, "tree", str(store.charging), "--db", store.db)
    assert out.splitlines()[-1] == (
        f"error of task 'charge' charge#1 id {str(store.failed)[:8]}: "
        '{"error": "RuntimeError", "message": "card declined on attempt 1"}'
    )


def test_show_json_has_the_documented_keys(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``show --json`` prints the instance detail with the keys the reference lists."""
    detail = run_json(capsys, "show", str(store.kid), "--db", store.db)
    assert list(detail) == [
        "id", "root", "parent", "kind", "name", "status", "owner", "incarnation", "version", "steps",
        "site", "key", "generation", "attempt", "input", "context", "configuration", "output", "error",
        "incidents", "timers", "cancel_reason", "pending_messages", "children", "changed_at",
        "changed_at_epoch",
    ]  # fmt: skip
    assert (detail["id"], detail["parent"], detail["site"], detail["key"]) == (
        str(store.kid),
        str(store.parent),
        "team",
        "a",
    )
    assert detail["configuration"] == ["working"] and detail["error"] is None


# ------------------------------------------------------ the other views' JSON


def test_tree_timeline_and_plan_json(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``tree``, ``timeline`` and ``plan`` with ``--json`` print their documented documents."""
    node = run_json(capsys, "tree", str(store.parent), "--db", store.db, "--charts", CHARTS)
    assert (node["id"], node["status"]) == (str(store.parent), "running")
    assert node["configuration"] == ["gathering"]
    [child] = node["children"]
    assert (child["id"], child["site"], child["key"], child["generation"]) == (str(store.kid), "team", "a", 1)
    assert (node["depth"], child["depth"], child["recursion"]) == (0, 1, 0)  # depth is the place in the tree
    events = run_json(capsys, "timeline", str(store.parent), "--tree", "--db", store.db)
    assert (events["id"], events["tree"]) == (str(store.parent), True)
    assert {i["label"] for i in events["instances"]} == {"parent", "team[a]#1"}
    assert [e["version"] for e in events["events"] if e["instance"] == str(store.parent)] == [1, 2, 3]
    assert list(events["events"][0]) == [
        "at",
        "at_epoch",
        "offset",
        "instance",
        "label",
        "version",
        "event",
        "summary",
    ]
    plan = run_json(capsys, "plan", str(store.parent), "--db", store.db, "--charts", CHARTS)
    assert (plan["status"], plan["version"], plan["configuration"]) == ("running", 3, ["gathering"])
    [activation] = plan["activations"]
    assert (activation["child_id"], activation["attempt"], activation["journal"]) == (str(store.kid), 1, [])


def test_parked_json_and_its_batch_hint(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``parked`` lists roots with their incidents; its hint names the batch commands, not one per id."""
    assert run_json(capsys, "parked", "--db", store.db) == {"roots": []}
    park(store)
    document = run_json(capsys, "parked", "--db", store.db)
    [held] = document["roots"]
    assert (held["root"], held["name"]) == (str(store.parent), "parent")
    assert held["incidents"][0]["kind"] == "revalidation" and held["incidents"][0]["parked"] is True
    _, out, _ = run(capsys, "parked", "--db", store.db)
    assert "1 parked root(s) of chart(s) 'parent'." in out
    assert "incarnate migrate --chart NAME --map OLD=NEW --dry-run" in out and "incarnate check" in out


def test_recover_json_and_its_parked_exit_status(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``recover --json`` prints its summary; parked roots left make it exit 4, not 0."""
    limits = ["--timeout", "10", "--wait", "0", "--json"]
    status, out, _ = run(capsys, "recover", "--db", store.db, "--charts", V2, "--tasks", TASKS, *limits)
    summary = json.loads(out)
    assert status == summary["exit_status"] == 4
    assert summary["parked"] == 1
    assert list(summary) == [
        "store", "elapsed", "ending", "acquired", "processed", "in_flight", "parked", "left_alone", "timers",
        "errors", "exit_status",
    ]  # fmt: skip
    assert list(summary["timers"]) == ["pending", "next_due", "next_due_epoch"]


# ------------------------------------------------------------ plain output


def test_piped_output_is_plain_text(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """Off a terminal no command prints an ANSI escape code, and long table cells are never cut."""
    for argv in (
        ["list", "--all"],
        ["show", str(store.failed)],
        ["tree", str(store.parent), "--charts", CHARTS],
        ["timeline", str(store.parent), "--tree"],
        ["parked"],
    ):
        status, out, err = run(capsys, *argv, "--db", store.db)
        assert status == 0, err
        assert "\x1b" not in out + err, argv
        assert "…" not in out, argv
    _, out, _ = run(capsys, "list", "--all", "--db", store.db)
    assert all(str(store.parent) in out for _ in range(1))
    assert max(len(line) for line in out.splitlines()) > 100, "a wide table is not wrapped to 80 columns"


@pytest.mark.slow
def test_piped_output_is_plain_even_when_colour_is_forced(store: Store) -> None:
    """A process whose output is a pipe prints no ANSI codes, even with FORCE_COLOR and a colour TERM."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FORCE_COLOR": "1", "TERM": "xterm-256color"}
    for argv in (["list", "--all"], ["tree", store.db and str(store.parent)]):
        done = subprocess.run(
            [sys.executable, "-m", "incarnate", *argv, "--db", store.db],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "\x1b" not in done.stdout and str(store.parent)[:8] in done.stdout


def test_a_terminal_gets_a_rich_table(
    capsys: pytest.CaptureFixture[str], store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal ``list`` draws its table with rich: the same cells, in bold headers."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert main(["list", "--db", store.db]) == 0
    shown = terminal.getvalue()
    assert "\x1b[1m" in shown, "the header is bold"
    assert str(store.parent) in shown and str(store.kid) in shown


# ---------------------------------------------------------- check, migrate


def test_check_gives_each_live_instance_a_verdict(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``check`` exits 1 while an instance needs a mapping, and 0 once the ``--map`` makes it migrate."""
    status, out, _ = run(capsys, "check", V2, "--chart", "parent", "--db", store.db)
    assert status == 1
    header, row, *rest = out.splitlines()
    assert header.split() == ["ID", "ROOT", "CHART", "STATUS", "VERDICT", "WHY"]
    assert row.split()[:5] == [str(store.parent), str(store.parent)[:8], "parent", "running", "needs-mapping"]
    assert rest[0].startswith("1 live instance(s): 1 needs-mapping")
    mapped = ["--map", "gathering=collecting"]
    document = run_json(capsys, "check", V2, "--chart", "parent", *mapped, "--db", store.db)
    assert list(document) == ["verdicts", "summary", "ok"] and document["ok"] is True
    [verdict] = document["verdicts"]
    assert (verdict["instance_id"], verdict["verdict"]) == (str(store.parent), "migrates")
    assert document["summary"]["migrates"] == 1
    status, _, err = run(capsys, "check", V2, "--chart", "nosuch", "--db", store.db)
    assert status == 2 and "--chart 'nosuch' is not among the charts" in err


def test_migrate_a_chart_dry_run_then_for_real(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``migrate --chart --dry-run`` writes nothing; without it the instances are migrated and reported."""
    park(store)
    argv = ["migrate", "--chart", "parent", "--map", "gathering=collecting", "--charts", V2, "--db", store.db]
    status, out, _ = run(capsys, *argv, "--dry-run")
    assert status == 0
    assert "migrates" in out and out.splitlines()[-1].startswith("dry run: nothing was written")
    engine = Engine(V2_ALL, {"charge": declined}, storage=Storage.sqlite(store.db))
    try:
        assert engine.instance(store.parent).record.status is InstanceStatus.PARKED
    finally:
        engine.close()
    status, out, err = run(capsys, *argv)
    assert status == 0, out + err
    assert "1 migrated, 1 parked root(s) resolved, 0 skipped" in out
    engine = Engine(V2_ALL, {"charge": declined}, storage=Storage.sqlite(store.db))
    try:
        assert engine.instance(store.parent).record.status is InstanceStatus.RUNNING
        assert engine.snapshot(store.parent).configuration == ("collecting",)
    finally:
        engine.close()


def test_migrate_a_chart_as_json(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``migrate --chart --json`` prints the verdicts with ``--dry-run``, else the batch's report."""
    park(store)
    argv = ["migrate", "--chart", "parent", "--map", "gathering=collecting", "--charts", V2, "--db", store.db]
    looked = run_json(capsys, *argv, "--dry-run")
    assert list(looked) == ["verdicts", "summary", "ok"] and looked["ok"] is True
    status, out, err = run(capsys, *argv, "--json")
    assert (status, err) == (0, "migrated 1 of 1\n"), "the progress goes to standard error, plain when piped"
    report = json.loads(out)
    assert list(report) == ["batch", "verdicts", "migrated", "resolved", "skipped", "summary"]
    assert report["migrated"] == [str(store.parent)] and report["resolved"] == [str(store.parent)]
    assert report["batch"].startswith("migration-") and report["skipped"] == []
    status, _, err = run(capsys, "migrate", str(store.parent), "--map", "a=b", "--json", "--charts", V2)
    assert status == 2 and "--json applies to a whole chart's migration" in err


@pytest.mark.parametrize(
    "argv",
    [["--map", "a=b"], ["ID", "--chart", "parent", "--map", "a=b"]],
)
def test_migrate_takes_exactly_one_of_an_id_or_a_chart(
    capsys: pytest.CaptureFixture[str], store: Store, argv: list[str]
) -> None:
    """``migrate`` with neither an ID nor ``--chart``, or with both, exits 2 saying which to give."""
    argv = [str(store.parent) if arg == "ID" else arg for arg in argv]
    status, out, err = run(capsys, "migrate", *argv, "--charts", V2, "--db", store.db)
    assert (status, out) == (2, "")
    assert "give exactly one of ID (one parked instance) or --chart NAME" in err


# ----------------------------------------------------------------- stores


@pytest.fixture
def postgres() -> Iterator[PostgresStorage]:
    """An empty PostgreSQL schema (skips when no server answers, unless INCARNATE_REQUIRE_POSTGRES)."""
    with stores.storage_for("postgres", Path()) as storage:
        assert isinstance(storage, PostgresStorage)
        yield storage


def test_db_takes_a_postgresql_url_and_never_prints_its_password(
    capsys: pytest.CaptureFixture[str], postgres: PostgresStorage
) -> None:
    """``--db postgresql://USER:PASSWORD@HOST:PORT/DB?schema=S`` opens that store; the password is hidden."""
    engine = Engine(charts.ALL, {"charge": declined}, storage=postgres)
    try:
        gate = engine.start("gate")
        engine.run_until_idle()
    finally:
        engine.close()
    url = (
        f"postgresql://{postgres.user}:s3cret-pw@{postgres.host}:{postgres.port}/"
        f"{postgres.dbname}?schema={postgres.schema}"
    )
    page = run_json(capsys, "list", "--db", url)
    assert [row["id"] for row in page["rows"]] == [str(gate)]
    status, out, err = run(capsys, "show", "ffff", "--db", url)
    assert status == 2 and "PostgreSQL" in err
    assert "s3cret-pw" not in out + err


# --------------------------------------------------------------- reference


def test_the_generated_cli_reference_is_up_to_date() -> None:
    """docs/reference/cli.md holds the reference rendered from the commands, between its markers."""
    page = reference.PAGE.read_text(encoding="utf-8")
    assert reference.updated(page, reference.render()) == page, (
        "docs/reference/cli.md is stale: run `python -m incarnate.cli.reference` to regenerate it"
    )
    assert "### `incarnate list`" in page and "`--since` `WHEN`" in page

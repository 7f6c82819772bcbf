"""The operator commands of ``incarnate``: list, tree, timeline, plan, send, cancel, parked, migrate,
resolve, terminate and recover, over a SQLite file an engine wrote."""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

import attrs
import pytest

from aggregates import InstanceStatus, Settlement
from incarnate import Engine, Storage
from incarnate.cli import main
from incarnate.cli._output import StatusLine
from statechart import Chart, Registry
from tests.scenarios import charts
from tests.unit.incarnate import v2_charts

CHARTS = "tests.scenarios.charts:ALL"
V2 = "tests.unit.incarnate.v2_charts:ALL"
TASKS = "tests.unit.incarnate.sample_charts:TASKS"
GATE_A = UUID("abcd0000-0000-4000-8000-000000000001")
GATE_B = UUID("abcd1111-0000-4000-8000-000000000002")

ALL: list[Chart[object]] = list(charts.ALL)
REGISTRY = Registry(ALL)
"""A Registry, for ``--charts``."""
NOT_CHARTS = [charts.KID, "parent"]
"""A list with something that is not a Chart in it."""
NO_CHARTS: list[Chart[object]] = []
"""An empty list of charts."""


def registry() -> Registry:
    """Return the registry: a zero-argument function is accepted in place of the charts."""
    return REGISTRY


@attrs.frozen
class Store:
    """A SQLite store holding a ``parent`` with one running ``kid``, and a finished ``charging``."""

    path: Path
    parent: UUID
    kid: UUID
    charging: UUID
    charge: UUID

    @property
    def db(self) -> str:
        """The path as ``--db`` takes it."""
        return str(self.path)

    def engine(self, charts_: Sequence[Chart[Any]] = tuple(charts.ALL)) -> Engine:
        """An engine over the store (the caller closes it)."""
        return Engine(charts_, {"charge": lambda call: "ok"}, storage=Storage.sqlite(self.db))


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """Build the store with an engine, then close the engine."""
    path = tmp_path / "store.db"
    engine = Engine(charts.ALL, {"charge": lambda call: "ok"}, storage=Storage.sqlite(str(path)))
    try:
        parent = engine.start("parent", {"members": ["a"]})
        engine.run_until_idle()
        kid = engine.children(parent)[0].id
        charging = engine.start("charging")
        engine.run_until_idle()
        [charge] = [
            i.id for i in engine.instances() if i.record.parent and i.record.parent.parent == charging
        ]
    finally:
        engine.close()
    return Store(path, parent, kid, charging, charge)


def parked(store: Store) -> None:
    """Park the parent's tree: a fresh engine with version 2 of ``parent`` acquires it."""
    engine = store.engine(v2_charts.ALL)
    try:
        engine.resume_all()
    finally:
        engine.close()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``incarnate`` in-process; return the exit status, standard output and standard error."""
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def status_of(store: Store, instance_id: UUID) -> InstanceStatus:
    """The stored status of an instance, read by a fresh engine."""
    engine = store.engine()
    try:
        return engine.instance(instance_id).record.status
    finally:
        engine.close()


# ---------------------------------------------------------------- the store


def test_a_missing_store_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A ``--db`` that names no file exits 2 and creates nothing."""
    missing = tmp_path / "missing.db"
    status, out, err = run(capsys, "list", "--db", str(missing))
    assert (status, out) == (2, "")
    assert f"incarnate list: error: no store at {str(missing)!r} (named by --db)" in err
    assert not missing.exists()


def test_a_file_that_is_not_a_store_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A ``--db`` file that is not a SQLite database exits 2 naming the store."""
    garbage = tmp_path / "garbage.db"
    garbage.write_text("not a database")
    status, _, err = run(capsys, "list", "--db", str(garbage))
    assert status == 2
    assert "cannot open SQLite file" in err


def test_the_store_defaults_to_the_environment(
    capsys: pytest.CaptureFixture[str], store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``--db`` the store is the one the environment names (here SQLITE_DBNAME)."""
    monkeypatch.delenv("PERSISTENCE_MODULE", raising=False)
    monkeypatch.setenv("SQLITE_DBNAME", store.db)
    status, out, _ = run(capsys, "list")
    assert status == 0
    assert str(store.parent) in out


def test_without_db_or_environment_the_store_is_incarnate_db(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nothing set the store is ./incarnate.db, and its absence is reported."""
    monkeypatch.delenv("PERSISTENCE_MODULE", raising=False)
    monkeypatch.delenv("SQLITE_DBNAME", raising=False)
    monkeypatch.chdir(tmp_path)
    status, _, err = run(capsys, "parked")
    assert status == 2
    assert "no store at 'incarnate.db' (named by the environment" in err


# --------------------------------------------------------------------- list


def newest_first(store: Store, *, in_flight: bool = True, roots: bool = False) -> list[str]:
    """The ids of the store's listing, the most recently changed first (the order ``list`` prints)."""
    engine = store.engine()
    try:
        engine.listing.catch_up()
        rows = engine.listing.rows(in_flight=in_flight, roots=roots)
    finally:
        engine.close()
    return [str(row.id) for row in sorted(rows, key=lambda row: -row.changed_at)]


def test_list_shows_the_instances_in_flight(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``list`` prints a table of the unfinished instances with their root, parent, kind, name and status."""
    status, out, err = run(capsys, "list", "--db", store.db)
    assert (status, err) == (0, "")
    header, *rows = out.splitlines()
    assert header.split() == ["ID", "ROOT", "PARENT", "KIND", "NAME", "STATUS", "OWNER", "CHANGED"]
    assert sorted(row.split()[:6] for row in rows) == sorted(
        [
            [str(store.parent), str(store.parent)[:8], "-", "chart", "parent", "running"],
            [str(store.kid), str(store.parent)[:8], str(store.parent)[:8], "chart", "kid", "running"],
        ]
    )
    assert [row.split()[0] for row in rows] == newest_first(store)
    changed = [row.split()[7] for row in rows]
    assert changed == sorted(changed, reverse=True)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", when) for when in changed)


def test_list_all_and_roots(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``--all`` adds finished instances; ``--roots`` keeps roots only."""
    _, out, _ = run(capsys, "list", "--db", store.db, "--all")
    assert [line.split()[0] for line in out.splitlines()[1:]] == newest_first(store, in_flight=False)
    assert sorted(line.split()[0] for line in out.splitlines()[1:]) == sorted(
        str(i) for i in (store.parent, store.kid, store.charging, store.charge)
    )
    assert "done" in out
    _, out, _ = run(capsys, "list", "--db", store.db, "--all", "--roots")
    assert [line.split()[0] for line in out.splitlines()[1:]] == newest_first(
        store, in_flight=False, roots=True
    )
    assert sorted(line.split()[0] for line in out.splitlines()[1:]) == sorted(
        [str(store.parent), str(store.charging)]
    )


def test_list_says_when_nothing_is_in_flight(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """An empty selection prints a sentence, not an empty table."""
    engine = store.engine()
    engine.terminate(store.parent, "done with it")
    engine.close()
    status, out, _ = run(capsys, "list", "--db", store.db)
    assert status == 0
    assert out.startswith("no instances in flight in SQLite file ")


# --------------------------------------------------------------------- tree


def test_tree_shows_children_and_configuration(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``tree`` shows each child's site, key, generation and attempt, and with charts each configuration."""
    status, out, _ = run(capsys, "tree", str(store.parent), "--db", store.db)
    assert status == 0
    assert out.splitlines() == [
        f"chart 'parent' root {str(store.parent)[:8]}: running",
        f"  chart 'kid' team[a] gen 1 attempt 1 id {str(store.kid)[:8]}: running",
    ]
    _, out, _ = run(capsys, "tree", str(store.parent), "--db", store.db, "--charts", CHARTS)
    assert "running in gathering" in out and "running in working" in out


def test_tree_includes_finished_children(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """A child whose output was consumed (no longer retained) is still shown, with its status."""
    status, out, _ = run(capsys, "tree", str(store.charging), "--db", store.db, "--charts", CHARTS)
    assert status == 0
    assert out.splitlines() == [
        f"chart 'charging' root {str(store.charging)[:8]}: done in paid",
        f"  task 'charge' charge gen 1 attempt 1 id {str(store.charge)[:8]}: done",
    ]


def test_an_id_may_be_a_unique_prefix(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """A unique prefix of at least 4 hex digits names an instance; an ambiguous one is refused."""
    engine = store.engine()
    engine.start("gate", id=GATE_A)
    engine.start("gate", id=GATE_B)
    engine.close()
    status, out, _ = run(capsys, "tree", "abcd1", "--db", store.db)
    assert status == 0
    assert out.startswith("chart 'gate' root abcd1111")
    status, _, err = run(capsys, "tree", "abcd", "--db", store.db)
    assert status == 2
    assert f"'abcd' is the start of 2 instance ids ({GATE_A}, {GATE_B}); give more digits" in err
    status, _, err = run(capsys, "tree", "fff0", "--db", store.db)
    assert status == 2
    assert "no instance id starts with 'fff0'" in err


@pytest.mark.parametrize("command", ["tree", "timeline", "send", "cancel", "terminate"])
@pytest.mark.parametrize("bad", ["not-an-id", "abc", "12345678-zzzz"])
def test_a_bad_id_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], store: Store, command: str, bad: str
) -> None:
    """Something that is neither a UUID nor a hex prefix exits 2 saying what an id looks like."""
    extra = ["approve"] if command == "send" else []
    status, out, err = run(capsys, command, bad, *extra, "--db", store.db)
    assert (status, out) == (2, "")
    assert f"{bad!r} is not an instance id; give its UUID" in err


@pytest.mark.parametrize("command", ["tree", "timeline", "plan", "send", "cancel", "resolve", "terminate"])
def test_an_unknown_instance_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], store: Store, command: str
) -> None:
    """A well-formed id that names no instance exits 2 naming it."""
    unknown = "00000000-0000-4000-8000-000000000000"
    extra = {"send": ["approve"], "plan": ["--charts", CHARTS], "resolve": ["--charts", CHARTS]}
    status, out, err = run(capsys, command, unknown, *extra.get(command, []), "--db", store.db)
    assert (status, out) == (2, "")
    assert f"no instance {unknown} in this store" in err


# ----------------------------------------------------------------- timeline


def test_timeline_of_one_instance(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``timeline`` prints the instance's events in order, one per line."""
    status, out, _ = run(capsys, "timeline", str(store.parent), "--db", store.db)
    assert status == 0
    header, *lines = out.splitlines()
    assert header.startswith(f"timeline of {store.parent}: 3 events, from ")
    assert [line.split(None, 3)[2:] for line in lines] == [
        ["v1", "started chart 'parent'"],
        ["v2", "initial macrostep -> gathering"],
        ["v3", "Birth team[a] gen 1 attempt 1"],
    ]


def test_timeline_of_a_call_tree(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``--tree`` interleaves every instance of the call tree by time, each named by its slot."""
    status, out, _ = run(capsys, "timeline", str(store.parent), "--tree", "--db", store.db)
    assert status == 0
    header, *lines = out.splitlines()
    assert header.startswith(f"timeline of the call tree of {store.parent} (2 instances): 5 events")
    who = [line.split()[1] for line in lines]
    assert who.count("parent") == 3 and who.count("team[a]#1") == 2
    seconds = [float(line.split()[0].removesuffix("s")) for line in lines]
    assert seconds == sorted(seconds)
    assert "started chart 'kid' as team[a] gen 1" in out


# --------------------------------------------------------------------- plan


def test_plan_shows_the_checkpoint_and_its_activations(
    capsys: pytest.CaptureFixture[str], store: Store
) -> None:
    """``plan`` prints status, version, configuration and every activation's incarnation facts."""
    status, out, err = run(capsys, "plan", str(store.parent), "--db", store.db, "--charts", CHARTS)
    assert (status, err) == (0, "")
    assert out.splitlines() == [
        f"ResumePlan of {store.parent} (chart 'parent')",
        "status:        running",
        "version:       3",
        "configuration: gathering",
        "timers:        none",
        "activations:   1",
        "  team[a]",
        "    generation:    1",
        f"    Ref:           {store.parent}/team[a]#1",
        f"    child:         chart 'kid' {store.kid}",
        "    state:         running",
        "    attempt:       1",
        "    armed step:    0",
        "    provenance:    birth",
        "    retry journal: none",
    ]


def test_plan_needs_charts(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """Without ``--charts`` plan exits 2 saying it needs them to decode the snapshot."""
    status, out, err = run(capsys, "plan", str(store.parent), "--db", store.db)
    assert (status, out) == (2, "")
    assert "--charts is required to decode the checkpoint's snapshot" in err


def test_plan_needs_the_instance_chart(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """Charts that do not include the instance's exit 2 naming the chart that is missing."""
    status, _, err = run(
        capsys,
        "plan",
        str(store.parent),
        "--db",
        store.db,
        "--charts",
        "tests.unit.incarnate.sample_charts:ORDER",
    )
    assert status == 2
    assert "chart 'parent' of" in err and "is not among the charts of" in err


def test_plan_of_a_corrupted_store_fails(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """A stream whose activations no longer cover the live slots exits 1 with the checkpoint error."""
    engine = store.engine()
    corrupted = engine.instance(store.parent)
    corrupted.record_settled(corrupted.record.activations[0].ref, Settlement.DONE)  # no such outcome happened
    engine.parts.commits.save_instances(corrupted)
    engine.close()
    status, out, err = run(capsys, "plan", str(store.parent), "--db", store.db, "--charts", CHARTS)
    assert (status, out) == (1, "")
    assert err.startswith(f"incarnate plan: error: the ResumePlan of {store.parent} does not validate: ")
    assert "slot team[a]: omitted activation" in err


# --------------------------------------------------------------------- send


def test_send_accepts_an_event_durably(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``send`` appends the event with its data to the instance's inbox and prints its sequence number."""
    status, out, err = run(
        capsys, "send", str(store.kid), "finish", "--data", '{"by": "ops"}', "--db", store.db
    )
    assert (status, err) == (0, "")
    assert out == f"accepted 'finish' for {store.kid} as inbox message 1\n"
    engine = store.engine()
    [message] = engine.instance(store.kid).record.inbox
    engine.close()
    assert (message.seq, message.event.name, message.event.data) == (1, "finish", {"by": "ops"})


def test_send_with_a_key_is_accepted_once(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """A repeated send with the same key is acknowledged but not accepted again."""
    run(capsys, "send", str(store.kid), "finish", "--key", "k1", "--db", store.db)
    status, out, _ = run(capsys, "send", str(store.kid), "finish", "--key", "k1", "--db", store.db)
    assert status == 0
    assert out == f"'finish' with key 'k1' was accepted for {store.kid} before; not accepted again\n"


def test_send_refuses_bad_data_and_finished_instances(
    capsys: pytest.CaptureFixture[str], store: Store
) -> None:
    """Data that is not JSON, or a finished instance, exits 2 with a clear message."""
    status, _, err = run(capsys, "send", str(store.kid), "finish", "--data", "{oops", "--db", store.db)
    assert status == 2
    assert "--data '{oops' is not JSON" in err
    status, _, err = run(capsys, "send", str(store.charging), "pay", "--db", store.db)
    assert status == 2
    assert f"instance {store.charging} is done and accepts no further events" in err


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("NaN", "--data 'NaN' is not accepted: NaN is not a JSON value (JSON has no NaN or Infinity)"),
        ("Infinity", "Infinity is not a JSON value"),
        ("-Infinity", "-Infinity is not a JSON value"),
        ('{"x": [NaN]}', "NaN is not a JSON value"),
        ("1e400", "the number 1e400 is out of range of a 64-bit float; send a smaller number, or a string"),
        ("1" * 5000, "an integer of 5000 digits, and integers may have at most 4300; send a longer number"),
        ("-" + "9" * 4301, "an integer of 4301 digits"),
        ("[" * 5000 + "]" * 5000, "nests lists and objects 5000 levels deep, and at most 100 are accepted"),
        ('{"a":' * 5000 + "1" + "}" * 5000, "nests lists and objects 5000 levels deep"),
        ("[" * 101 + "]" * 101, "nests lists and objects 101 levels deep, and at most 100"),
        ("{oops", "--data '{oops' is not JSON (Expecting property name"),
    ],
)
def test_send_refuses_data_that_is_not_json_data(
    capsys: pytest.CaptureFixture[str], store: Store, data: str, expected: str
) -> None:
    """Data outside JSON (NaN, infinities, huge integers, deep nesting) exits 2 with one line naming it."""
    status, out, err = run(capsys, "send", str(store.kid), "finish", f"--data={data}", "--db", store.db)
    assert (status, out) == (2, "")
    [line] = err.splitlines()
    assert line.startswith("incarnate send: error: --data ")
    assert expected in line
    assert len(line) < 400, "the message shows a long value shortened"
    engine = store.engine()
    try:
        assert engine.instance(store.kid).record.inbox == ()
    finally:
        engine.close()


def test_send_accepts_the_documented_limits(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """Lists nested 100 deep and a 4300-digit integer are accepted; brackets in strings do not nest."""
    deep = "[" * 100 + "]" * 100
    status, _, err = run(capsys, "send", str(store.kid), "finish", "--data", deep, "--db", store.db)
    assert (status, err) == (0, "")
    big = "7" * 4300
    status, _, err = run(capsys, "send", str(store.kid), "finish", "--data", big, "--db", store.db)
    assert (status, err) == (0, "")
    brackets = json.dumps({"text": "[" * 500 + '\\"{'})
    status, _, err = run(capsys, "send", str(store.kid), "finish", "--data", brackets, "--db", store.db)
    assert (status, err) == (0, "")
    engine = store.engine()
    try:
        inbox = engine.instance(store.kid).record.inbox
    finally:
        engine.close()
    assert [m.event.data for m in inbox][1:] == [int(big), json.loads(brackets)]


# ------------------------------------------------------------------- cancel


def test_cancel_requests_a_stop(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``cancel`` records the request with its reason; asking again changes nothing."""
    status, out, _ = run(capsys, "cancel", str(store.parent), "--reason", "not needed", "--db", store.db)
    assert status == 0
    assert out.startswith(f"cancel of {store.parent} requested ('not needed')")
    engine = store.engine()
    request = engine.instance(store.parent).record.cancel
    engine.close()
    assert request is not None and request.reason == "not needed"
    status, out, _ = run(capsys, "cancel", str(store.parent), "--db", store.db)
    assert status == 0
    assert out == f"a cancel of {store.parent} was requested already ('not needed'); nothing more to do\n"


def test_cancel_refuses_a_finished_instance(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """Cancelling an instance that has finished exits 2."""
    status, _, err = run(capsys, "cancel", str(store.charging), "--db", store.db)
    assert status == 2
    assert f"{store.charging} is done; there is nothing to cancel" in err


# ------------------------------------------------------------------- parked


def test_parked_lists_roots_with_their_incidents(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``parked`` says when nothing is parked, and lists each parked root's incidents."""
    status, out, _ = run(capsys, "parked", "--db", store.db)
    assert (status, out.startswith("no parked roots in SQLite file")) == (0, True)
    parked(store)
    status, out, _ = run(capsys, "parked", "--db", store.db)
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == f"{store.parent}  chart 'parent'  1 incident(s)"
    # version 5: the recovering engine's Claimed (version 4) comes before the incident
    assert lines[1].startswith("  revalidation (version 5, parked): chart 'parent' changed incompatibly")
    assert "state 'gathering' was removed" in lines[1]


# ------------------------------------------------------------------ migrate


@pytest.mark.parametrize(
    ("maps", "expected"),
    [
        (["gathering"], "--map 'gathering' is not OLD=NEW"),
        (["=collecting"], "--map '=collecting' is not OLD=NEW"),
        (["gathering="], "--map 'gathering=' is not OLD=NEW"),
        (["a=b=c"], "--map 'a=b=c' is not OLD=NEW"),
        (["a=b", "a=c"], "--map 'a' is mapped twice ('b' and 'c'); map each state once"),
    ],
)
def test_migrate_rejects_a_bad_map(
    capsys: pytest.CaptureFixture[str], store: Store, maps: list[str], expected: str
) -> None:
    """A ``--map`` that is not OLD=NEW, or maps a state twice, exits 2 before the store is touched."""
    argv = [arg for pair in maps for arg in ("--map", pair)]
    status, out, err = run(capsys, "migrate", str(store.parent), *argv, "--db", store.db, "--charts", V2)
    assert (status, out) == (2, "")
    assert expected in err


def test_migrate_needs_charts_and_a_parked_tree(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """Without ``--charts``, or on a tree that is not parked, migrate exits 2."""
    status, _, err = run(
        capsys, "migrate", str(store.parent), "--map", "gathering=collecting", "--db", store.db
    )
    assert status == 2
    assert "--charts is required to map the stored states onto the new charts" in err
    status, _, err = run(
        capsys,
        "migrate",
        str(store.parent),
        "--map",
        "gathering=collecting",
        "--db",
        store.db,
        "--charts",
        V2,
    )
    assert status == 2
    assert f"the call tree of {store.parent} is not parked (its root {store.parent} is running)" in err


def test_a_rejected_migration_writes_nothing(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """A mapping that leaves the snapshot unfit exits 1 listing the problems; the instance is unchanged."""
    parked(store)
    engine = store.engine(v2_charts.ALL)
    version = engine.instance(store.parent).version
    engine.close()
    status, out, err = run(
        capsys, "migrate", str(store.parent), "--map", "nowhere=reviewing", "--db", store.db, "--charts", V2
    )
    assert (status, out) == (1, "")
    assert err.splitlines() == [
        f"incarnate migrate: error: the migration of {store.parent} was rejected; nothing was written:",
        "  - states ['gathering'] no longer exist and the mapping does not name them",
        "Map every removed state to a state of the new chart, or terminate the call tree.",
    ]
    engine = store.engine(v2_charts.ALL)
    assert engine.instance(store.parent).version == version
    engine.close()


def test_migrate_maps_the_states_and_unparks(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """A good mapping rewrites the snapshot and the root runs again in the mapped state."""
    parked(store)
    status, out, err = run(
        capsys,
        "migrate",
        str(store.parent),
        "--map",
        "gathering=collecting",
        "--db",
        store.db,
        "--charts",
        V2,
    )
    assert (status, err) == (0, "")
    assert out.splitlines()[0] == f"migrated {store.parent} (gathering -> collecting)"
    assert out.splitlines()[1].startswith(f"root {store.parent} is running in collecting")
    engine = store.engine(v2_charts.ALL)
    assert engine.instance(store.parent).record.status is InstanceStatus.RUNNING
    assert engine.snapshot(store.parent).configuration == ("collecting",)
    engine.close()


# ---------------------------------------------------------- resolve, terminate


def test_resolve_unparks_once_the_tree_validates(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """Resolve exits 1 while the tree does not decode, and unparks it under charts it fits."""
    parked(store)
    status, out, err = run(capsys, "resolve", str(store.parent), "--db", store.db, "--charts", V2)
    assert (status, out) == (1, "")
    assert f"{store.parent} stays parked: its call tree still does not validate" in err
    status, out, err = run(capsys, "resolve", str(store.parent), "--db", store.db, "--charts", CHARTS)
    assert (status, err) == (0, "")
    assert out.splitlines()[0] == f"resolved {store.parent} ('resolved by an operator')"
    assert status_of(store, store.parent) is InstanceStatus.RUNNING


def test_resolve_refuses_children_and_running_roots(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """Resolve applies to a parked root: a child or a running root exits 2."""
    status, _, err = run(capsys, "resolve", str(store.kid), "--db", store.db, "--charts", CHARTS)
    assert status == 2
    assert f"{store.kid} is a child (team[a] of {store.parent}); resolve applies to a whole call tree" in err
    status, _, err = run(capsys, "resolve", str(store.parent), "--db", store.db, "--charts", CHARTS)
    assert status == 2
    assert f"{store.parent} is running, not parked; there is nothing to resolve" in err


def test_terminate_ends_the_call_tree(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``terminate`` cancels a parked root and its children without running them."""
    parked(store)
    status, out, _ = run(capsys, "terminate", str(store.parent), "--reason", "retired", "--db", store.db)
    assert status == 0
    assert out == f"terminated the call tree of {store.parent}: 2 instance(s) cancelled ('retired')\n"
    assert status_of(store, store.parent) is InstanceStatus.CANCELLED
    assert status_of(store, store.kid) is InstanceStatus.CANCELLED


def test_terminate_refuses_children_and_finished_roots(
    capsys: pytest.CaptureFixture[str], store: Store
) -> None:
    """Terminate applies to an unfinished root: a child or a finished root exits 2."""
    status, _, err = run(capsys, "terminate", str(store.kid), "--db", store.db)
    assert status == 2
    assert f"give its root {store.parent}" in err
    status, _, err = run(capsys, "terminate", str(store.charging), "--db", store.db)
    assert status == 2
    assert f"{store.charging} is done; there is nothing to terminate" in err


# ------------------------------------------------------------------ recover


def test_recover_runs_accepted_work_until_idle(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``recover`` acquires the trees, processes what was accepted, reports progress and a summary."""
    run(capsys, "send", str(store.kid), "finish", "--db", store.db)
    status, out, err = run(
        capsys, "recover", "--db", store.db, "--charts", CHARTS, "--tasks", TASKS, "--workers", "2"
    )
    assert status == 0
    assert err.splitlines()[0] == f"acquiring the unfinished call trees of SQLite file {store.db}"
    assert err.splitlines()[-1].startswith("acquired 2  processed ")
    lines = out.splitlines()
    assert lines[0].startswith(f"recovered SQLite file {store.db} in ") and lines[0].endswith(": idle")
    assert lines[1] == "acquired:   2 instance(s)"
    assert lines[3] == "in flight:  1 instance(s), waiting for events, timers or children"
    assert lines[4] == "parked:     0 root(s)"
    engine = store.engine()
    assert engine.snapshot(store.parent).configuration == ("reviewing",)
    assert engine.instance(store.kid).record.status is InstanceStatus.DONE
    engine.close()


def test_recover_reports_parked_roots(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """A tree that no longer decodes is parked by recovery: the summary says so and the status is 4."""
    status, out, _ = run(capsys, "recover", "--db", store.db, "--charts", V2, "--timeout", "10")
    assert status == 4
    assert "parked:     1 root(s) (see `incarnate parked`)" in out
    assert out.splitlines()[-1].startswith("parked roots remain (exit status 4): see `incarnate parked`")
    assert status_of(store, store.parent) is InstanceStatus.PARKED


def test_recover_stops_at_the_timeout(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """A timeout shorter than the work stops the run, says so, and still exits 0."""
    run(capsys, "send", str(store.kid), "finish", "--db", store.db)
    status, out, _ = run(
        capsys, "recover", "--db", store.db, "--charts", CHARTS, "--tasks", TASKS, "--timeout", "0.000001"
    )
    assert status == 0
    assert "stopped by the 1e-06s timeout with work left; run it again" in out.splitlines()[0]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], "--charts is required to run the recovered instances"),
        (["--charts", CHARTS], "pass --tasks MODULE:ATTR with a function for every task they invoke"),
        (["--charts", CHARTS, "--tasks", TASKS, "--workers", "0"], "--workers must be at least 1, got 0"),
        (["--charts", CHARTS, "--tasks", TASKS, "--timeout", "0"], "--timeout must be a positive number"),
    ],
)
def test_recover_refuses_a_bad_setup(
    capsys: pytest.CaptureFixture[str], store: Store, argv: list[str], expected: str
) -> None:
    """Recovery without charts, without the tasks they invoke, or with bad limits exits 2 and runs nothing."""
    status, out, err = run(capsys, "recover", "--db", store.db, *argv)
    assert (status, out) == (2, "")
    assert expected in err
    assert status_of(store, store.kid) is InstanceStatus.RUNNING


def test_progress_is_a_live_display_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the progress is a rich live display, redrawn in place, its last state left shown."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    progress = StatusLine("starting")
    progress.show("acquired 10  processed 0", key=1)
    progress.show("done", key=2, final=True)
    shown = terminal.getvalue()
    assert "\x1b[" in shown, "a terminal gets cursor control to redraw the line"
    assert shown.split("\r\x1b[2K")[-1].startswith("done"), "the last drawing of the line shows the end"


def test_progress_prints_plain_lines_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off a terminal each change is a line of its own, and repeats are not printed."""
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    progress = StatusLine("starting", interval=0.0)
    progress.show("one", key=1)
    progress.show("one again", key=1)
    progress.show("two", key=2)
    progress.show("end", key=2, final=True)
    assert stream.getvalue() == "one\ntwo\nend\n"


# ----------------------------------------------------------- charts and tasks


@pytest.mark.parametrize(
    ("charts_path", "instance", "expected"),
    [
        ("tests.scenarios.charts:ALL", "parent", "running in gathering"),
        ("tests.scenarios.charts:KID", "kid", "running in working"),
        ("tests.unit.incarnate.test_cli_ops:REGISTRY", "parent", "running in gathering"),
        ("tests.unit.incarnate.test_cli_ops:registry", "parent", "running in gathering"),
    ],
)
def test_charts_may_be_a_list_a_chart_a_registry_or_a_maker(
    capsys: pytest.CaptureFixture[str], store: Store, charts_path: str, instance: str, expected: str
) -> None:
    """``--charts`` takes a list of Charts, one Chart, a Registry, or a function returning one of those."""
    instance_id = getattr(store, instance)
    status, out, err = run(capsys, "tree", str(instance_id), "--db", store.db, "--charts", charts_path)
    assert (status, err) == (0, "")
    assert expected in out


@pytest.mark.parametrize(
    ("option", "path", "expected"),
    [
        (
            "--charts",
            "tests.unit.incarnate.test_cli_ops:NOT_CHARTS",
            "lists things that are not Charts: item 1",
        ),
        ("--charts", "tests.unit.incarnate.test_cli_ops:NO_CHARTS", "lists no charts"),
        (
            "--charts",
            "tests.unit.incarnate.sample_charts:NOT_A_CHART",
            "not a list of Charts, a Registry or a Chart",
        ),
        ("--charts", "tests.scenarios.charts", "write CHARTS as 'package.module:attribute'"),
        ("--charts", "tests.scenarios.charts:PARENT", "the charts of 'tests.scenarios.charts:PARENT' cannot"),
        ("--tasks", "tests.unit.incarnate.sample_charts:NOT_TASKS", "'charge' maps to a str"),
        ("--tasks", "tests.unit.incarnate.sample_charts:ORDER", "not a dict of task functions"),
        (
            "--tasks",
            "tests.unit.incarnate.sample_charts:MISSING",
            "has no attribute 'MISSING'; task tables it defines: TASKS\n",
        ),
    ],
)
def test_bad_charts_or_tasks_are_usage_errors(
    capsys: pytest.CaptureFixture[str], store: Store, option: str, path: str, expected: str
) -> None:
    """``--charts`` or ``--tasks`` that do not name what they should exit 2 saying what is wrong."""
    status, out, err = run(capsys, "list", "--db", store.db, option, path)
    assert (status, out) == (2, "")
    assert expected in err


def test_tasks_may_be_a_function_returning_the_table(
    capsys: pytest.CaptureFixture[str], store: Store
) -> None:
    """``--tasks`` takes a function that returns the table, and recovery runs with it."""
    status, _, _ = run(
        capsys,
        "recover",
        "--db",
        store.db,
        "--charts",
        CHARTS,
        "--tasks",
        "tests.unit.incarnate.sample_charts:tasks",
    )
    assert status == 0


def test_help_lists_the_operator_commands(capsys: pytest.CaptureFixture[str]) -> None:
    """``incarnate --help`` names every operator command."""
    status, out, _ = run(capsys, "--help")
    assert status == 0
    for name in (
        "list",
        "tree",
        "timeline",
        "plan",
        "send",
        "cancel",
        "parked",
        "migrate",
        "resolve",
        "terminate",
        "recover",
    ):
        assert name in out


# ----------------------------------------------------------- errors as JSON


def json_error(err: str) -> dict[str, Any]:
    """The error document a ``--json`` command printed on standard error (and nothing else there)."""
    document = json.loads(err)
    assert list(document) == ["error"] and list(document["error"]) == ["code", "message", "exit_status"]
    error: dict[str, Any] = document["error"]
    return error


def test_an_unknown_instance_is_a_json_error_with_its_code(
    capsys: pytest.CaptureFixture[str], store: Store
) -> None:
    """``show ID --json`` of an id that names no instance prints the error as JSON: ``unknown-instance``."""
    unknown = "00000000-0000-4000-8000-000000000000"
    status, out, err = run(capsys, "show", unknown, "--json", "--db", store.db)
    assert (status, out) == (2, "")
    error = json_error(err)
    assert (error["code"], error["exit_status"]) == ("unknown-instance", 2)
    assert error["message"].startswith(f"no instance {unknown} in this store")


@pytest.mark.parametrize("data", ["NaN", "{oops", "[" * 101 + "]" * 101])
def test_data_that_is_not_json_is_a_json_error_with_its_code(
    capsys: pytest.CaptureFixture[str], store: Store, data: str
) -> None:
    """``start --data`` that is not JSON data, with ``--json``, is the error ``invalid-json``."""
    status, out, err = run(
        capsys, "start", "parent", "--data", data, "--json", "--charts", CHARTS, "--db", store.db
    )
    assert (status, out) == (2, "")
    error = json_error(err)
    assert (error["code"], error["exit_status"]) == ("invalid-json", 2)
    assert error["message"].startswith("--data ")


def test_a_bad_store_url_is_a_json_configuration_error(capsys: pytest.CaptureFixture[str]) -> None:
    """A ``--db`` the storage configuration refuses is ``configuration-error``, the engine's own code."""
    status, out, err = run(capsys, "list", "--json", "--db", "ftp://example.com/store")
    assert (status, out) == (2, "")
    error = json_error(err)
    assert error["code"] == "configuration-error"
    assert "store URL scheme 'ftp' is not supported" in error["message"]


@pytest.mark.parametrize(
    ("argv", "code", "exit_status"),
    [
        (["list", "--json", "--no-such-option"], "usage-error", 2),  # click's, not ours
        (["tree", "not-an-id", "--json"], "command-error", 2),  # the command's own refusal
        (["plan", "00000000-0000-4000-8000-000000000000", "--json"], "command-error", 2),  # no --charts
    ],
)
def test_json_errors_of_the_command_line_itself(
    capsys: pytest.CaptureFixture[str], store: Store, argv: list[str], code: str, exit_status: int
) -> None:
    """A bad command line, and a refusal the command makes itself, have codes of their own."""
    status, out, err = run(capsys, *argv, "--db", store.db)
    assert (status, out) == (exit_status, "")
    error = json_error(err)
    assert (error["code"], error["exit_status"]) == (code, exit_status)


def test_a_failed_operation_keeps_its_status_and_the_cause_s_code(
    capsys: pytest.CaptureFixture[str], store: Store
) -> None:
    """A ResumePlan that does not validate exits 1 as a failed operation; its code is the checkpoint's."""
    engine = store.engine()
    corrupted = engine.instance(store.parent)
    corrupted.record_settled(corrupted.record.activations[0].ref, Settlement.DONE)  # no such outcome happened
    engine.parts.commits.save_instances(corrupted)
    engine.close()
    status, out, err = run(capsys, "plan", str(store.parent), "--json", "--db", store.db, "--charts", CHARTS)
    assert (status, out) == (1, "")
    error = json_error(err)
    assert (error["code"], error["exit_status"]) == ("checkpoint-omitted-activation", 1)
    assert "slot team[a]: omitted activation" in error["message"]


def test_without_json_an_error_stays_one_line(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """Only ``--json`` turns the error into a document; otherwise it is the one prefixed line."""
    unknown = "00000000-0000-4000-8000-000000000000"
    status, _, err = run(capsys, "show", unknown, "--db", store.db)
    assert status == 2
    assert err.startswith(f"incarnate show: error: no instance {unknown}") and err.count("\n") == 1

"""What-if replay: recorded inputs re-run through a new chart, each instance classified, nothing written;
and ``incarnate list --state``, which finds the instances a replay names by their current state."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

import attrs
import pytest

from incarnate import Engine, Storage
from incarnate._whatif import WhatIf, replay_all
from incarnate.cli import main
from projections import Replayed, recorded_run, replay
from statechart import Chart
from tests.unit.incarnate import whatif_charts as charts

MODULE = "tests.unit.incarnate.whatif_charts"


@attrs.frozen
class Store:
    """A SQLite store with a submitted ticket (in ``review``) and a fresh one (in ``open``)."""

    path: Path
    submitted: UUID
    fresh: UUID

    def engine(self, charts_: Sequence[Chart[Any]]) -> Engine:
        """An engine over the store with ``charts_`` (the caller closes it)."""
        return Engine(charts_, storage=Storage.sqlite(str(self.path)))


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """Run version 1 of the ticket: one submitted, one not."""
    path = tmp_path / "store.db"
    engine = Engine([charts.V1], storage=Storage.sqlite(str(path)))
    try:
        submitted = engine.start("ticket")
        fresh = engine.start("ticket")
        engine.run_until_idle()
        engine.send(submitted, "submit")
        engine.run_until_idle()
    finally:
        engine.close()
    return Store(path, submitted, fresh)


def replayed(store: Store, charts_: Sequence[Chart[Any]]) -> dict[UUID, WhatIf]:
    """Each live instance's what-if result under ``charts_``."""
    engine = store.engine(charts_)
    try:
        return {r.instance_id: r for r in replay_all(engine.parts)}
    finally:
        engine.close()


def stored_events(store: Store) -> int:
    """How many events the store holds."""
    engine = store.engine([charts.V1])
    try:
        return sum(len(engine.events_of(i.id)) for i in engine.instances())
    finally:
        engine.close()


def test_a_compatible_chart_replays_the_same(store: Store) -> None:
    """Every recorded input leads where it led: both instances are *same*."""
    results = replayed(store, charts.ALL_SAME)
    assert {r.replay.outcome for r in results.values()} == {Replayed.SAME}
    assert results[store.submitted].replay.replayed == ("review",)


def test_a_changed_target_diverges_at_the_event_that_took_it(store: Store) -> None:
    """The submitted ticket diverges at its submit, with both configurations; the fresh one does not."""
    engine = store.engine([charts.V1])
    try:
        submit = next(e for e in engine.events_of(store.submitted) if getattr(e, "trigger", None) is not None)
    finally:
        engine.close()
    results = replayed(store, charts.ALL_DIVERGES)
    verdict = results[store.submitted].replay
    assert verdict.outcome is Replayed.DIVERGES
    assert verdict.at == submit.originator_version
    assert (verdict.recorded, verdict.replayed) == (("review",), ("waiting",))
    assert results[store.fresh].replay.outcome is Replayed.SAME


def test_a_state_left_without_transitions_strands(store: Store) -> None:
    """A ticket in a ``review`` with no transition and no timer left waits forever: *strands*."""
    results = replayed(store, charts.ALL_STRANDS)
    verdict = results[store.submitted].replay
    assert verdict.outcome is Replayed.STRANDS
    assert "review" in verdict.reason
    assert results[store.fresh].replay.outcome is Replayed.SAME


def test_a_chart_that_raises_parks(store: Store) -> None:
    """A context that does not build from the recorded input makes the replay raise: *parks*, naming why."""
    results = replayed(store, charts.ALL_PARKS)
    verdict = results[store.submitted].replay
    assert verdict.outcome is Replayed.PARKS
    assert "queue" in verdict.reason


def test_a_chart_not_among_the_new_ones_parks(store: Store) -> None:
    """An instance whose chart the new charts lack parks, and the reason names the chart."""
    from tests.unit.incarnate import v2_charts

    results = replayed(store, v2_charts.ALL)
    assert {r.replay.outcome for r in results.values()} == {Replayed.PARKS}
    assert "'ticket'" in results[store.submitted].replay.reason


def test_replay_writes_nothing(store: Store) -> None:
    """Replaying under each variant leaves the store's events as they were."""
    before = stored_events(store)
    for variant in (charts.ALL_SAME, charts.ALL_DIVERGES, charts.ALL_STRANDS, charts.ALL_PARKS):
        replayed(store, variant)
    assert stored_events(store) == before


def test_a_timer_the_new_chart_lacks_diverges(store: Store) -> None:
    """A recorded timer firing the new chart never armed diverges at that firing."""
    engine = store.engine([charts.V1])
    try:
        events = engine.events_of(store.submitted)
    finally:
        engine.close()
    run = recorded_run(events)
    first = run.inputs[0]
    timer = attrs.evolve(first, version=99, timer="after.review.0", now=first.now + 4000)
    verdict = replay(charts.DIVERGES, attrs.evolve(run, inputs=(first, timer)))
    assert verdict.outcome is Replayed.DIVERGES
    assert verdict.at == 99


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``incarnate`` in-process; the exit status, standard output and standard error."""
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_check_replay_prints_each_class_beside_the_verdict(
    capsys: pytest.CaptureFixture[str], store: Store
) -> None:
    """``check --replay`` prints the verdict and the replay per instance; a divergence exits 1."""
    status, out, _ = run_cli(capsys, "check", f"{MODULE}:ALL_DIVERGES", "--replay", "--db", str(store.path))
    assert status == 1
    line = next(row for row in out.splitlines() if row.startswith(str(store.submitted)))
    assert "resumes" in line and "diverges" in line and "review -> waiting" in line
    assert "1 same, 1 diverges; nothing was written" in out


def test_check_replay_json(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``check --replay --json`` gives each instance's replay and verdict, and the counts."""
    status, out, _ = run_cli(
        capsys, "check", f"{MODULE}:ALL_STRANDS", "--replay", "--json", "--db", str(store.path)
    )
    document = json.loads(out)
    assert status == 1 and document["ok"] is False
    assert document["replay"] == {"same": 1, "diverges": 0, "strands": 1, "parks": 0}
    by_id = {i["instance_id"]: i for i in document["instances"]}
    assert by_id[str(store.submitted)]["replay"] == "strands"
    assert by_id[str(store.submitted)]["verdict"] == "resumes"


def test_check_replay_of_the_same_charts_is_fine(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """Replaying under the charts the instances run exits 0."""
    status, out, _ = run_cli(capsys, "check", f"{MODULE}:ALL_V1", "--replay", "--db", str(store.path))
    assert status == 0
    assert "2 same" in out


def test_check_replay_of_an_unknown_chart_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], store: Store
) -> None:
    """``--chart`` naming no new chart is refused, naming the charts there are."""
    status, _, err = run_cli(
        capsys, "check", f"{MODULE}:ALL_V1", "--replay", "--chart", "nope", "--db", str(store.path)
    )
    assert status == 2
    assert "'nope'" in err and "ticket" in err


# --------------------------------------------------- list --state


def test_list_state_keeps_the_instances_in_that_state(
    capsys: pytest.CaptureFixture[str], store: Store
) -> None:
    """Only the submitted ticket is in ``review``; only the fresh one in ``open``."""
    db = str(store.path)
    status, out, _ = run_cli(capsys, "list", "--chart", "ticket", "--state", "review", "--db", db)
    assert status == 0
    assert str(store.submitted) in out and str(store.fresh) not in out
    status, out, _ = run_cli(capsys, "list", "--chart", "ticket", "--state", "open", "--db", db)
    assert str(store.fresh) in out and str(store.submitted) not in out


def test_list_state_needs_a_chart(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """``--state`` alone is refused, saying to add ``--chart``."""
    status, _, err = run_cli(capsys, "list", "--state", "review", "--db", str(store.path))
    assert status == 2 and "--chart" in err


def test_list_state_names_the_states_of_a_known_chart(
    capsys: pytest.CaptureFixture[str], store: Store
) -> None:
    """A state the registered chart lacks is refused, listing its states."""
    status, _, err = run_cli(
        capsys,
        "list",
        "--chart",
        "ticket",
        "--state",
        "nowhere",
        "--charts",
        f"{MODULE}:ALL_V1",
        "--db",
        str(store.path),
    )
    assert status == 2 and "'nowhere'" in err and "review" in err


def test_list_state_matches_nothing(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    """A state no instance is in lists nothing, and says so."""
    status, out, _ = run_cli(
        capsys, "list", "--chart", "ticket", "--state", "closed", "--db", str(store.path)
    )
    assert status == 0 and "no instances match" in out

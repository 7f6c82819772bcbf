"""Validated migration of every live instance: verdicts first, then atomic, recorded batches."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from aggregates import Instance, InstanceStatus
from incarnate import Engine, Storage
from incarnate._migration import Verdict, apply, check
from incarnate.errors import EngineError
from statechart import Chart
from tests.scenarios import charts
from tests.unit.incarnate import v2_charts

V1: list[Chart[Any]] = list(charts.ALL)
V2: list[Chart[Any]] = list(v2_charts.ALL)


def _engine(path: Path, charts_: Sequence[Chart[Any]]) -> Engine:
    return Engine(charts_, {"charge": lambda call: "ok"}, storage=Storage.sqlite(str(path)))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[Path, list[UUID]]]:
    """A SQLite store with five ``parent`` roots in ``gathering``, each with one running ``kid``."""
    path = tmp_path / "store.db"
    engine = _engine(path, V1)
    try:
        parents: list[UUID] = [engine.start("parent", {"members": [f"m{n}"]}) for n in range(5)]
        engine.run_until_idle()
    finally:
        engine.close()
    yield path, parents


def _events(path: Path, charts_: Sequence[Chart[Any]]) -> dict[UUID, list[str]]:
    engine = _engine(path, charts_)
    try:
        return {i.id: [type(e).__name__ for e in engine.events_of(i.id)] for i in engine.instances()}
    finally:
        engine.close()


def test_unchanged_charts_resume(store: tuple[Path, list[UUID]]) -> None:
    """Under the charts they were started with, every live instance (roots and children) resumes."""
    path, parents = store
    engine = _engine(path, V1)
    try:
        verdicts = check(engine.parts)
    finally:
        engine.close()
    assert len(verdicts) == 10
    assert {v.verdict for v in verdicts} == {Verdict.RESUMES}
    assert {v.instance_id for v in verdicts if v.name == "parent"} == set(parents)


def test_a_removed_state_needs_a_mapping_and_the_mapping_makes_it_migrate(
    store: tuple[Path, list[UUID]],
) -> None:
    """Version 2 renamed ``gathering``: parents need a mapping naming it; with it they migrate."""
    path, parents = store
    engine = _engine(path, V2)
    try:
        bare = {v.instance_id: v for v in check(engine.parts)}
        mapped = {v.instance_id: v for v in check(engine.parts, mapping={"gathering": "collecting"})}
    finally:
        engine.close()
    for parent in parents:
        assert bare[parent].verdict is Verdict.NEEDS_MAPPING
        assert bare[parent].missing == ("gathering",)
        assert "--map OLD=NEW" in bare[parent].reasons[0]
        assert mapped[parent].verdict is Verdict.MIGRATES
        assert "gathering -> collecting" in mapped[parent].reasons[0]
    kids = [v for v in bare.values() if v.name == "kid"]
    assert kids and all(v.verdict is Verdict.RESUMES for v in kids)


def test_the_verdict_is_what_an_engine_does(store: tuple[Path, list[UUID]]) -> None:
    """An instance judged needs-mapping is parked by a version-2 engine's recovery; a resuming one is not."""
    path, parents = store
    engine = _engine(path, V2)
    try:
        verdicts = {v.instance_id: v.verdict for v in check(engine.parts)}
        engine.resume_all()
        statuses = {p: engine.instance(p).record.status for p in parents}
    finally:
        engine.close()
    assert all(verdicts[p] is Verdict.NEEDS_MAPPING for p in parents)
    assert set(statuses.values()) == {InstanceStatus.PARKED}


def test_a_chart_missing_from_the_new_charts_parks(store: tuple[Path, list[UUID]]) -> None:
    """An instance whose chart the new charts lack would park, and the reason names the chart."""
    path, parents = store
    engine = _engine(path, [charts.KID])
    try:
        verdicts = {v.instance_id: v for v in check(engine.parts, chart="parent")}
    finally:
        engine.close()
    assert set(verdicts) == set(parents)
    assert all(v.verdict is Verdict.PARKS for v in verdicts.values())
    assert "chart 'parent' is not among the new charts" in verdicts[parents[0]].reasons[0]


def test_a_mapping_onto_an_unknown_state_is_refused(store: tuple[Path, list[UUID]]) -> None:
    """A mapping whose target the new chart lacks is refused before any verdict, naming the states."""
    path, _ = store
    engine = _engine(path, V2)
    try:
        with pytest.raises(EngineError, match="does not have: nowhere"):
            check(engine.parts, chart="parent", mapping={"gathering": "nowhere"})
    finally:
        engine.close()


def test_a_dry_run_writes_nothing(store: tuple[Path, list[UUID]]) -> None:
    """Checking, with and without a mapping, leaves every stored event as it was."""
    path, _ = store
    before = _events(path, V2)
    engine = _engine(path, V2)
    try:
        check(engine.parts)
        check(engine.parts, chart="parent", mapping={"gathering": "collecting"})
    finally:
        engine.close()
    assert _events(path, V2) == before


def test_apply_records_each_decision_and_the_instances_then_resume(store: tuple[Path, list[UUID]]) -> None:
    """Apply writes one ``Migrated`` per instance with the batch and reason; then every instance resumes."""
    path, parents = store
    engine = _engine(path, V2)
    progress: list[tuple[int, int]] = []
    try:
        report = apply(
            engine.parts,
            chart="parent",
            mapping={"gathering": "collecting"},
            batch_size=2,
            reason="release 2",
            progress=lambda done, total: progress.append((done, total)),
        )
        after = check(engine.parts)
    finally:
        engine.close()
    assert set(report.migrated) == set(parents)
    assert progress == [(2, 5), (4, 5), (5, 5)]
    assert {v.verdict for v in after} == {Verdict.RESUMES}
    events = _events(path, V2)
    assert [events[p].count("Migrated") for p in parents] == [1] * 5
    engine = _engine(path, V2)
    try:
        stored = [e for e in engine.events_of(parents[0]) if type(e).__name__ == "Migrated"]
        engine.resume_all()
        statuses = {p: engine.instance(p).record.status for p in parents}
        configuration = engine.snapshot(parents[0]).configuration
    finally:
        engine.close()
    assert stored[0].batch == report.batch and stored[0].reason == "release 2"
    assert stored[0].mapping == (("gathering", "collecting"),)
    assert set(statuses.values()) == {InstanceStatus.RUNNING}
    assert "collecting" in configuration


def test_apply_resolves_a_parked_tree_once_it_fits(store: tuple[Path, list[UUID]]) -> None:
    """Roots parked by a version-2 engine are migrated and resolved by one apply."""
    path, parents = store
    engine = _engine(path, V2)
    try:
        engine.resume_all()  # parks every parent: gathering is gone
        assert {engine.instance(p).record.status for p in parents} == {InstanceStatus.PARKED}
        report = apply(engine.parts, chart="parent", mapping={"gathering": "collecting"})
        statuses = {p: engine.instance(p).record.status for p in parents}
    finally:
        engine.close()
    assert set(report.resolved) == set(parents)
    assert set(statuses.values()) == {InstanceStatus.RUNNING}


class Crash(BaseException):
    """A process death injected at a commit point (not an Exception: nothing may absorb it)."""


def test_a_crash_mid_batch_leaves_each_instance_migrated_and_recorded_or_untouched(
    store: tuple[Path, list[UUID]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed at its second batch's commit, apply leaves batch one written, the rest untouched."""
    path, parents = store
    engine = _engine(path, V2)
    saves = 0
    real_save = engine.parts.commits.save_instances

    def save_then_crash(*instances: Instance) -> None:
        nonlocal saves
        saves += 1
        if saves == 2:
            raise Crash
        real_save(*instances)

    monkeypatch.setattr(engine.parts.commits, "save_instances", save_then_crash)
    with pytest.raises(Crash):
        apply(engine.parts, chart="parent", mapping={"gathering": "collecting"}, batch_size=2)
    engine.close()
    events = _events(path, V2)
    counts = [events[p].count("Migrated") for p in parents]
    assert sorted(counts) == [0, 0, 0, 1, 1]
    engine = _engine(path, V2)
    try:
        mapping = {"gathering": "collecting"}
        verdicts = {v.instance_id: v.verdict for v in check(engine.parts, chart="parent", mapping=mapping)}
        assert sorted(v.value for v in verdicts.values()) == ["migrates"] * 3 + ["resumes"] * 2
        report = apply(engine.parts, chart="parent", mapping={"gathering": "collecting"}, batch_size=2)
    finally:
        engine.close()
    assert len(report.migrated) == 3
    events = _events(path, V2)
    assert [events[p].count("Migrated") for p in parents] == [1] * 5


def test_a_live_owner_holds_its_instances(store: tuple[Path, list[UUID]]) -> None:
    """An instance whose owner has a live heartbeat is held: apply leaves it alone."""
    path, parents = store
    engine = _engine(path, V2)
    try:
        owner = engine.instance(parents[0]).record.owner
        engine.parts.coordination.beat(owner, "default", 60.0)
        verdicts = {v.instance_id: v for v in check(engine.parts, mapping={"gathering": "collecting"})}
        report = apply(engine.parts, chart="parent", mapping={"gathering": "collecting"})
    finally:
        engine.close()
    assert all(verdicts[p].verdict is Verdict.HELD for p in parents)
    assert repr(owner) in verdicts[parents[0]].reasons[0]
    assert report.migrated == ()


def test_the_tree_of_an_instance_awaiting_migration_names_its_stored_states(
    store: tuple[Path, list[UUID]],
) -> None:
    """Under charts it no longer fits, an instance's call tree still renders, naming its stored states."""
    from incarnate._inspect import call_tree_of

    path, parents = store
    engine = _engine(path, V2)
    try:
        tree = call_tree_of(engine, parents[0])
    finally:
        engine.close()
    assert tree.configuration == ("stored states gathering do not fit chart 'parent'",)
    assert [node.name for node in tree.walk()] == ["parent", "kid"]

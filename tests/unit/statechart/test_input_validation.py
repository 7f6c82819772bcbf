"""Strict input validation: nothing is converted, unknown keys are named, a str is never a collection."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

from incarnate import Engine, EngineError, Storage, VirtualClock
from statechart import Chart, JsonValue, Registry, final, invoke, start, state, transition
from statechart.codec import SnapshotCodec, context_from_input
from statechart.effects import ActionFailed, BirthChild
from statechart.errors import CodecError
from tests.unit.statechart.support import of_type


@attrs.frozen
class Review:
    """A context with one field of each kind the converter must keep apart."""

    doc: str = ""
    pages: int = 0
    score: float = 0.0
    urgent: bool = False
    reviewers: tuple[str, ...] = ()


@attrs.frozen
class Tagged:
    """A context with set-like fields."""

    tags: frozenset[str] = frozenset()
    seen: set[str] = attrs.Factory(set)


REVIEW = Chart("review", state("open", on=[transition("close", "closed")]), final("closed"), context=Review)
TAGGED = Chart("tagged", state("open"), context=Tagged)


@pytest.mark.parametrize(
    ("given", "field", "expected"),
    [
        ({"doc": 3}, "input.doc", "expected a str, got int 3"),
        ({"pages": "5"}, "input.pages", "expected an int, got str '5'"),
        ({"pages": True}, "input.pages", "expected an int, got bool True"),
        ({"pages": 2.5}, "input.pages", "expected an int, got float 2.5"),
        ({"urgent": 1}, "input.urgent", "expected a bool (true or false), got int 1"),
        ({"score": "1.5"}, "input.score", "expected a float (or an int), got str '1.5'"),
        ({"score": False}, "input.score", "expected a float (or an int), got bool False"),
        ({"reviewers": "alice"}, "input.reviewers", "expected a list (for a tuple field), got str 'alice'"),
        ({"reviewers": {"alice": 1}}, "input.reviewers", "expected a list (for a tuple field), got dict"),
        ({"reviewers": ["alice", 7]}, "input.reviewers[1]", "expected a str, got int 7"),
        ({"doc": "x", "reviewer": "alice"}, "input", "extra fields 'reviewer'"),
    ],
)
def test_input_is_never_coerced(given: dict[str, Any], field: str, expected: str) -> None:
    """A value of another type than declared raises CodecError naming the chart, field, type and value."""
    with pytest.raises(CodecError) as caught:
        context_from_input(REVIEW, given)
    message = str(caught.value)
    assert caught.value.chart == "review"
    assert f"{field}: {expected}" in message
    assert "fix:" in message


def test_a_str_is_not_a_set() -> None:
    """A str given for a frozenset or set field raises CodecError instead of a set of its characters."""
    with pytest.raises(
        CodecError, match=r"input\.tags: expected a list \(for a frozenset field\), got str 'ab'"
    ):
        context_from_input(TAGGED, {"tags": "ab"})
    with pytest.raises(CodecError, match=r"input\.seen: expected a list \(for a set field\), got bytes"):
        context_from_input(TAGGED, {"seen": b"ab"})  # type: ignore[dict-item]
    assert context_from_input(TAGGED, {"tags": ["a", "b"]}).tags == frozenset({"a", "b"})


def test_exact_values_and_the_int_to_float_widening_are_accepted() -> None:
    """Values of the declared types pass unchanged; an int is accepted where a float is declared."""
    context = context_from_input(
        REVIEW,
        {"doc": "d", "pages": 3, "score": 2, "urgent": True, "reviewers": ["a", "b"]},
    )
    assert context == Review("d", 3, 2.0, True, ("a", "b"))
    assert isinstance(context.score, float)


def test_stored_snapshots_still_round_trip() -> None:
    """A snapshot written by this version decodes back to an equal one under the strict converter."""
    codec = SnapshotCodec(REVIEW)
    context = Review("d", 3, 2.5, True, ("a", "b"))
    snapshot, _ = start(REVIEW, context)
    assert codec.decode(codec.encode(snapshot)) == snapshot


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    """An engine over a real SQLite file."""
    built = Engine([REVIEW], storage=Storage.sqlite(str(tmp_path / "inputs.db")), clock=VirtualClock(1.0))
    yield built
    built.close()


def test_start_refuses_a_bad_input_before_storing_anything(engine: Engine) -> None:
    """Engine.start raises CodecError for an input that does not fit, and stores no instance."""
    for bad in ({"doc": 3}, {"pages": "5"}, {"reviewers": "alice"}, {"unknown": 1}, {"doc": ("a",)}):
        with pytest.raises(CodecError, match="chart 'review'"):
            engine.start("review", bad)  # type: ignore[arg-type]
    assert list(engine.parts.journal.instance_ids()) == []
    good = engine.start("review", {"doc": "d", "reviewers": ["alice"]})
    assert list(engine.parts.journal.instance_ids()) == [good]


def test_send_refuses_bad_event_data_before_storing_it(engine: Engine) -> None:
    """Engine.send refuses a non-str name and non-JSON data with EngineError; the inbox stays empty."""
    instance_id = engine.start("review")
    with pytest.raises(EngineError, match="plain JSON"):
        engine.send(instance_id, "close", ("a", "b"))  # type: ignore[arg-type]
    with pytest.raises(EngineError, match="non-empty str name"):
        engine.send(instance_id, 3)  # type: ignore[arg-type]
    assert engine.instance(instance_id).record.message_seq == 0


# ------------------------------------------------------------ child inputs


@attrs.frozen
class Kid:
    """A child's context."""

    name: str = ""


@attrs.frozen
class Team:
    """A parent's context: who to fan out to."""

    names: tuple[str, ...] = ()
    lead: JsonValue = ""


KID = Chart("kid", state("working"), context=Kid)


def test_a_bad_child_input_is_an_execution_error_in_the_parent_step() -> None:
    """An input mapping that does not fit the child's context raises error.execution and births nothing."""
    parent = Chart(
        "lead_parent",
        state("working", invoke=[invoke("lead", chart="kid", input=lambda team: {"name": team.lead})]),
        context=Team,
    )
    registry = Registry([parent, KID])  # the registry links the parent's site to the child chart
    registry.validate()
    snapshot, effects = start(parent, Team(lead=7))
    (failure,) = of_type(effects, ActionFailed)
    assert failure.action == "input of site lead"
    assert "input.name: expected a str, got int 7" in failure.message
    assert of_type(effects, BirthChild) == []
    assert snapshot.children[0].status.value == "failed"
    _, effects = start(parent, Team(lead="ann"))
    assert [b.input for b in of_type(effects, BirthChild)] == [{"name": "ann"}]


def test_a_bad_member_input_is_an_execution_error_naming_the_member() -> None:
    """A map member whose input does not fit the child's context fails the births, naming the member."""

    def members(team: Team) -> Mapping[str, JsonValue]:
        return {name: {"name": name, "age": 3} for name in team.names}

    parent = Chart(
        "family", state("working", invoke=[invoke("each", chart="kid", map=members)]), context=Team
    )
    registry = Registry([parent, KID])
    registry.validate()
    _, effects = start(parent, Team(names=("ann", "bob")))
    (failure,) = of_type(effects, ActionFailed)
    assert failure.action == "input of member 'ann' of site each"
    assert "extra fields 'age'" in failure.message
    assert of_type(effects, BirthChild) == []


def test_a_map_returning_a_str_is_not_a_fan_out_over_its_characters() -> None:
    """A ``map`` that returns a str raises error.execution naming the site; no member per character."""

    def one_name(team: Team) -> Mapping[str, JsonValue]:
        return "alice"  # type: ignore[return-value]

    parent = Chart("chars", state("working", invoke=[invoke("each", task="t", map=one_name)]), context=Team)
    _, effects = start(parent, Team())
    (failure,) = of_type(effects, ActionFailed)
    assert failure.action == "map of site each"
    assert "not a collection of member keys" in failure.message
    assert of_type(effects, BirthChild) == []


def test_a_str_for_a_list_of_members_starts_no_family(tmp_path: Path) -> None:
    """A root input giving one str where the member list is declared is refused; no family of characters."""
    parent = Chart(
        "team",
        state(
            "working", invoke=[invoke("each", chart="kid", map=lambda t: {n: {"name": n} for n in t.names})]
        ),
        context=Team,
    )
    engine = Engine([parent, KID], storage=Storage.sqlite(str(tmp_path / "team.db")), clock=VirtualClock(1.0))
    try:
        with pytest.raises(CodecError, match=r"input\.names: expected a list"):
            engine.start("team", {"names": "alice"})
        assert list(engine.parts.journal.instance_ids()) == []
    finally:
        engine.close()

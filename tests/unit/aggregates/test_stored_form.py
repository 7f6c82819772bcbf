"""The mapper's stored form: the converter's JSON of each event, without the stored event's own columns.

The mapper encodes with a converter of its own (no ``originator_id`` and
``originator_version`` to drop afterwards, encoded snapshots passed through)
and writes JSON with msgspec, read back and checked, falling back to the
standard library's strict encoder (:func:`aggregates.stored_json`). These
tests hold its bytes to the reference form — the event converter's
unstructured event, minus those two keys, as compact JSON — for every event
an order with children, timers, a retried task, a cancellation and an
incident stores, and check each stored event decodes back to an equal
event; and they hold ``stored_json`` to the standard library's reading of
any JSON data, NaN and infinities refused as before.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import tracemalloc
import types
import typing
from datetime import datetime
from typing import Any
from uuid import UUID

import attrs
import cattrs
import pytest
from cattrs.errors import ClassValidationError
from eventsourcing.persistence import MapperDeserialisationError, StoredEvent
from eventsourcing.utils import get_topic
from hypothesis import given
from hypothesis import strategies as st

from aggregates import (
    CattrsMapper,
    ChartVersion,
    Instance,
    InstanceSnapshot,
    read_stored_json,
    resolve_stored_topic,
    stored_json,
)
from aggregates._codec import _WALKED, CONVERTER, DECODER, decode_event, encode_event, typed_json
from incarnate import testing
from incarnate._demo import CHARTS, ORDER, TASKS
from statechart._codec import _PARTS, is_json_type
from statechart.snapshot import ChildSlot, Snapshot


def reference_state(event: Any) -> bytes:
    """The stored form by definition: the converter's data without the two columns, compact JSON."""
    data = encode_event(event)
    del data["originator_id"]
    del data["originator_version"]
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


@pytest.fixture(scope="module")
def stored() -> list[StoredEvent]:
    """Every event of a few orders driven through their lives (memory store, virtual clock)."""
    engine = testing.memory_engine(CHARTS, TASKS)
    with engine:
        shipped = engine.start(ORDER, {"items": ["book", "lamp"]}).id
        cancelled = engine.start(ORDER, {"items": ["chair"]}).id
        engine.run_until_idle()
        for _ in range(6):
            testing.advance(engine, 1.5)
            engine.run_until_idle()
        engine.cancel(cancelled, "the customer changed their mind")
        engine.send(shipped, "approve", {"by": "ops", "note": "ünïcødé ✓", "ratio": 0.1, "n": 10**20})
        engine.run_until_idle()
        assert engine.result(shipped) is not None
        notifications = engine.parts.journal.recorder.select_notifications(start=1, limit=10_000)
    return [
        StoredEvent(n.originator_id, n.originator_version, n.topic, n.state)
        for n in notifications
        if n.topic.startswith(get_topic(Instance))
    ]


def test_the_orders_store_every_kind_of_instance_event_the_test_means_to_cover(
    stored: list[StoredEvent],
) -> None:
    kinds = {s.topic.rpartition(".")[2] for s in stored}
    assert {"Started", "Stepped@2", "Birth@2", "ChildRetry", "Accepted", "Completed"} <= kinds
    assert {"CancelRequested", "Cancelled"} <= kinds
    # Format 2: a macrostep's settlements and a message accepted by the macrostep itself ride on it.
    steps = [read_stored_json(s.state) for s in stored if s.topic.endswith("Stepped@2")]
    assert any(step["settled"] for step in steps)
    assert any(step["received"] is not None for step in steps)


def test_each_stored_event_is_the_reference_form_and_decodes_to_an_equal_event(
    stored: list[StoredEvent],
) -> None:
    mapper = CattrsMapper(transcoder=None)  # type: ignore[arg-type]  # the cattrs mapper uses no transcoder
    for record in stored:
        event = mapper.to_domain_event(record)
        again = mapper.to_stored_event(event)
        assert again.state == reference_state(event), record.topic
        assert again.state == record.state
        assert (again.originator_id, again.originator_version, again.topic) == (
            record.originator_id,
            record.originator_version,
            record.topic,
        )
        assert isinstance(again.originator_id, UUID)
        assert mapper.to_domain_event(again) == event


def test_the_lighter_decoder_reads_every_stored_event_as_the_detailed_converter_does(
    stored: list[StoredEvent],
) -> None:
    for record in stored:
        cls, _ = resolve_stored_topic(record.topic)
        data = {**read_stored_json(record.state), "originator_id": record.originator_id}
        data["originator_version"] = record.originator_version
        assert DECODER.structure(dict(data), cls) == CONVERTER.structure(dict(data), cls), record.topic


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (lambda data: data.pop("effects"), "event.effects"),
        (lambda data: data.update(now="soon"), "event.now"),
        (lambda data: data.update(trigger={"name": 7, "data": None}), "event.trigger.name"),
        (lambda data: data.update(surplus=1), "surplus"),
    ],
    ids=["missing", "wrong-scalar", "nested", "extra-key"],
)
def test_a_damaged_stored_event_is_refused_with_the_detailed_error_naming_the_field(
    stored: list[StoredEvent], damage: Any, named: str
) -> None:
    """The lighter decoder fails without naming the field; the detailed converter is asked again."""
    record = next(r for r in stored if r.topic.endswith("Stepped@2") and read_stored_json(r.state)["trigger"])
    data = {**read_stored_json(record.state), "originator_id": record.originator_id}
    data["originator_version"] = record.originator_version
    damage(data)
    with pytest.raises(Exception) as lighter:
        DECODER.structure(dict(data), Instance.Stepped)
    with pytest.raises(ClassValidationError) as raised:
        decode_event(dict(data), Instance.Stepped)
    assert named in "; ".join(cattrs.transform_error(raised.value, path="event"))
    assert not isinstance(lighter.value, ClassValidationError)
    damaged = StoredEvent(
        record.originator_id,
        record.originator_version,
        record.topic,
        stored_json({k: v for k, v in data.items() if k not in ("originator_id", "originator_version")}),
    )
    with pytest.raises(MapperDeserialisationError, match=named.replace(".", r"\.")):
        CattrsMapper(transcoder=None).to_domain_event(damaged)  # type: ignore[arg-type]


JSON_DATA = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(JSON_DATA)
def test_stored_json_is_json_any_reader_reads_back_as_the_same_data(data: Any) -> None:
    stored = stored_json(data)
    assert json.loads(stored) == data
    assert read_stored_json(stored) == data
    # compact text, the standard library's but for how some floats are written ("1e16", "0.00001")
    standard = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    if not has_float(data):
        assert stored == standard


def has_float(data: Any) -> bool:
    """Whether JSON data holds a float anywhere."""
    if isinstance(data, float):
        return True
    if isinstance(data, dict):
        return any(has_float(value) for value in data.values())
    if isinstance(data, list):
        return any(has_float(item) for item in data)
    return False


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_stored_json_refuses_nan_and_infinities_instead_of_writing_null(bad: float) -> None:
    for data in (bad, {"context": {"ratio": bad}}, [1, [2, {"x": bad}]]):
        with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
            stored_json(data)


def test_stored_json_writes_a_tuple_as_a_list() -> None:
    assert stored_json({"pair": ("a", 1)}) == b'{"pair":["a",1]}'


def test_a_state_that_is_not_utf8_json_is_a_value_error() -> None:
    for state in (b"{", b"NaN", b"\xff"):
        with pytest.raises(ValueError):
            read_stored_json(state)


# A large text is checked by walking its data instead of reading it back (no second copy).


def large(data: Any) -> dict[str, Any]:
    """``data`` in an envelope whose text is long enough to be checked by the walk."""
    return {"padding": "x" * _WALKED, "data": data}


@given(JSON_DATA)
def test_a_large_stored_json_is_json_any_reader_reads_back_as_the_same_data(data: Any) -> None:
    envelope = large(data)
    stored = stored_json(envelope)
    assert json.loads(stored) == envelope
    standard = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    if not has_float(data):
        assert stored == standard


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_large_stored_json_refuses_nan_and_infinities_at_any_depth(bad: float) -> None:
    for data in (bad, {"context": {"ratio": bad}}, [1, [2, {"x": bad}]], [[[[[[bad]]]]]]):
        with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
            stored_json(large(data))


def test_stored_json_writes_as_the_standard_library_does_tuples_and_keys_that_are_not_strings() -> None:
    for data in ({"pair": ("a", 1)}, {1: "one", 2.5: "half"}, {True: "yes", None: "none"}):
        for sized in (data, large(data)):
            expected = json.dumps(sized, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
            assert stored_json(sized) == expected.encode()


def test_stored_json_refuses_what_is_not_json_as_the_standard_library_does() -> None:
    for data in (UUID(int=1), {"ids": {1, 2}}, b"bytes"):
        for sized in (data, large(data)):
            with pytest.raises(TypeError, match="is not JSON serializable"):
                stored_json(sized)


def test_encoding_a_large_text_does_not_build_a_second_copy_of_its_data() -> None:
    """The peak while encoding is the text and little more, not a decoded copy of the data besides."""
    data = [{"site": "member", "key": f"k{n}", "output": {"n": n, "ok": True}} for n in range(5_000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        stored = stored_json(data)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert len(stored) > _WALKED
    decoded_copy = len(stored) * 3  # a decoded copy of these dicts takes several times their text
    assert peak < len(stored) + decoded_copy // 3, (peak, len(stored))


# The typed fast path: an Instance event is plain JSON by its converter's construction, but for
# the paths its class names (``untyped_paths``); only those are checked before its text is written.


def instance_event_classes() -> list[type[Any]]:
    """Every stored Instance event class."""
    return [
        value
        for value in vars(Instance).values()
        if isinstance(value, type)
        and dataclasses.is_dataclass(value)
        and value.__qualname__.startswith("Instance.")
        and value.__name__ not in ("Event", "Created", "Fact")  # bases, never stored themselves
    ]


SNAPSHOT_PARTS = {name: annotation for name, annotation in _PARTS if name != "context"}
ENCODED_BY_THE_SNAPSHOT_CODEC: dict[tuple[str, str], Any] = {
    # (class, field): what the field's ``dict[str, Any]`` holds, as the snapshot codec encodes it
    ("Stepped", "parts"): SNAPSHOT_PARTS,
    ("Stepped", "added"): ChildSlot,
    ("Stepped", "changed"): ChildSlot,
}
COLUMNS = {"originator_id", "originator_version"}  # stored as the stored event's own columns


def untyped_in(annotation: Any, where: str, seen: set[Any]) -> list[str]:
    """Where, inside ``annotation``, a converter could pass a value through unchecked."""
    if annotation in (str, int, bool, float, type(None), UUID, datetime) or is_json_type(annotation):
        return []
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        plain = all(type(member.value) in (str, int) for member in annotation)
        return [] if plain else [f"{where}: enum {annotation.__name__} has values that are not str or int"]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (tuple, list):
        return [p for arg in args if arg is not Ellipsis for p in untyped_in(arg, f"{where}[]", seen)]
    if origin is dict:
        if args[0] is not str:
            return [f"{where}: keys of {annotation}"]
        return untyped_in(args[1], f"{where}{{}}", seen)
    if origin in (typing.Union, types.UnionType):
        return [p for arg in args for p in untyped_in(arg, where, seen)]
    if isinstance(annotation, type) and (attrs.has(annotation) or dataclasses.is_dataclass(annotation)):
        if annotation in seen:
            return []
        seen.add(annotation)
        hints = typing.get_type_hints(annotation)
        names = (
            [f.name for f in attrs.fields(annotation) if f.init]  # the converter's fields
            if attrs.has(annotation)
            else [f.name for f in dataclasses.fields(annotation)]  # type: ignore[arg-type]
        )
        return [
            p
            for name in names
            if name not in COLUMNS
            for p in untyped_in(hints[name], f"{where}.{name}", seen)
        ]
    return [f"{where}: {annotation!r}"]


@pytest.mark.parametrize("cls", instance_event_classes(), ids=lambda cls: cls.__name__)
def test_every_instance_event_is_plain_json_by_construction_but_for_the_paths_it_declares(
    cls: type[Any],
) -> None:
    untyped = cls.untyped_paths
    assert untyped is not None
    declared = {path[0]: path[1:] for path in untyped}
    hints = typing.get_type_hints(cls)
    problems: list[str] = []
    for field in dataclasses.fields(cls):
        name = field.name
        if name in COLUMNS:
            continue
        encoded = ENCODED_BY_THE_SNAPSHOT_CODEC.get((cls.__name__, name))
        if name in declared and not declared[name]:
            continue  # checked whole when stored
        if isinstance(encoded, dict):  # snapshot parts: typed but for what the class declares
            left = {part for part in encoded if (part,) != declared.get(name)}
            problems += [p for part in left for p in untyped_in(encoded[part], f"{name}.{part}", set())]
            assert declared.get(name) == ("context",), f"{cls.__name__}.{name} must declare its context"
        elif encoded is not None:
            problems += untyped_in(encoded, name, set())
        else:
            problems += untyped_in(hints[name], name, set())
    assert not problems, f"{cls.__name__} declares {untyped} untyped, and also holds: {problems}"


def test_the_walk_finds_what_a_converter_would_pass_through() -> None:
    assert untyped_in(dict[str, Any], "parts", set()) == ["parts{}: typing.Any"]
    assert untyped_in(Snapshot, "snapshot", set()) == ["snapshot.context: +C"]
    assert untyped_in(Instance.Migrated, "migrated", set()) == ["migrated.snapshot{}: typing.Any"]
    assert not untyped_in(Instance.Birth, "birth", set())


def test_the_snapshot_parts_hold_no_author_typed_data_but_the_context() -> None:
    assert typing.get_type_hints(Snapshot)["context"] not in SNAPSHOT_PARTS.values()
    assert set(SNAPSHOT_PARTS) | {"context", "children"} == {f.name for f in attrs.fields(Snapshot) if f.init}


CONTEXTS = JSON_DATA | st.sampled_from(
    [math.nan, {"ratio": math.inf}, [1, (2, 3)], {"when": datetime(2026, 1, 1)}, {"ids": {1, 2}}, {1: "one"}]
)


@given(CONTEXTS)
def test_a_step_with_any_context_is_stored_as_the_whole_check_stores_it_or_refused_alike(
    context: Any,
) -> None:
    data = {"trigger": None, "now": 1.5, "parts": {"context": context, "steps": 2}, "snapshot": None}
    try:
        expected: bytes | type[BaseException] = stored_json(data)
    except (TypeError, ValueError) as error:
        expected = type(error)
    if isinstance(expected, bytes):
        assert typed_json(data, Instance.Stepped.untyped_paths) == expected
    else:
        with pytest.raises(expected):
            typed_json(data, Instance.Stepped.untyped_paths)


def test_snapshots_and_chart_versions_declare_nothing_so_they_are_checked_whole() -> None:
    assert getattr(InstanceSnapshot, "untyped_paths", None) is None
    assert getattr(ChartVersion.Registered, "untyped_paths", None) is None

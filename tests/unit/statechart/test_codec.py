"""The snapshot codec: exact JSON round trips, refusal of non-JSON data, contexts from input."""

from __future__ import annotations

import json
import math
from typing import cast

import attrs
import pytest

from statechart import (
    Chart,
    Event,
    JsonValue,
    RetryPolicy,
    final,
    history,
    invoke,
    parallel,
    send,
    start,
    state,
    step,
    transition,
)
from statechart.codec import CONVERTER, SnapshotCodec, check_json, context_from_input, make_converter
from statechart.errors import CodecError, IncarnateError, InvalidEvent
from statechart.event import EventKind, InvokeId, error_invoke_event
from statechart.snapshot import SlotStatus, Snapshot, Status


@attrs.frozen
class Address:
    """A nested attrs value inside the context."""

    city: str = ""
    lines: tuple[str, ...] = ()


@attrs.frozen
class Order:
    """A context with nested attrs values, a tuple, an optional and free JSON data."""

    id: str = ""
    address: Address = Address()
    previous: tuple[Address, ...] = ()
    quantity: int | None = None
    extra: JsonValue = None


def everything() -> Chart[Order]:
    """A chart whose snapshots carry history, timers, child slots and a nested context."""
    return Chart(
        "order",
        state(
            "shop",
            history("h", "browse", deep=True),
            state("browse", on=[transition("pick", "basket")]),
            state("basket"),
            on=[transition("pay", "paying")],
        ),
        parallel(
            "paying",
            state(
                "charge",
                invoke=[invoke("payment", task="charge", input={"amount": 3}, retry=RetryPolicy(3, 10))],
            ),
            state(
                "remind",
                entry=[send("nudge", {"n": [1, 2]}, delay=60, id="nudge")],
                on=[transition("nudge", "h"), transition("done", "complete")],
            ),
        ),
        final("complete", done_data={"ok": True}),
        context=Order,
    )


def initial_context() -> Order:
    return Order("o-2")


def busy_snapshot() -> Snapshot[Order]:
    chart = everything()
    context = Order("o-1", Address("Paris", ("1 rue",)), (Address("Lyon"),), 2, {"tags": ["a", None, 1.5]})
    snapshot, _ = start(chart, context, now=100.0, lineage=("tree",))
    snapshot, _ = step(chart, snapshot, Event("pick"))
    snapshot, _ = step(chart, snapshot, Event("pay"))
    snapshot, _ = step(
        chart, snapshot, error_invoke_event(InvokeId("payment", "", 1), {"why": "x"}), now=101.0
    )
    return snapshot


def test_busy_snapshot_round_trips_exactly() -> None:
    """A snapshot with history, timers, a retrying child and a nested context decodes to an equal value."""
    chart = everything()
    snapshot = busy_snapshot()
    assert snapshot.history and snapshot.timers and snapshot.children
    assert snapshot.children[0].status is SlotStatus.RETRYING
    codec = SnapshotCodec(chart)
    data = codec.encode(snapshot)
    assert codec.decode(data) == snapshot


def test_encoded_snapshot_survives_json_text() -> None:
    """The encoded form is plain JSON: dumping and loading it still decodes to an equal snapshot."""
    codec = SnapshotCodec(everything())
    snapshot = busy_snapshot()
    text = json.dumps(codec.encode(snapshot), allow_nan=False)
    assert codec.decode(json.loads(text)) == snapshot


def test_encoding_uses_lists_and_enum_values() -> None:
    """Tuples become lists and enums their values in the encoded form."""
    data = SnapshotCodec(everything()).encode(busy_snapshot())
    assert data["status"] == "running"
    assert data["configuration"] == ["paying", "charge", "remind"]
    assert data["context"]["address"] == {"city": "Paris", "lines": ["1 rue"]}
    assert data["history"] == [{"id": "h", "states": ["basket"]}]
    assert data["children"][0]["status"] == "retrying"
    assert data["lineage"] == ["tree"]


def test_finished_snapshot_round_trips_with_output() -> None:
    """A completed snapshot keeps its status and output through the codec."""
    chart = everything()
    snapshot, _ = start(chart, initial_context())
    snapshot, _ = step(chart, snapshot, Event("pay"))
    snapshot, _ = step(chart, snapshot, Event("done"))
    assert snapshot.status is Status.DONE
    codec = SnapshotCodec(chart)
    decoded = codec.decode(json.loads(json.dumps(codec.encode(snapshot))))
    assert decoded == snapshot
    assert decoded.output == {"ok": True}


def test_events_with_identities_round_trip() -> None:
    """Events in the queue and timers keep their kind, send id and invoke id."""
    chart = everything()
    snapshot, _ = start(chart, initial_context())
    queued = (
        Event("x", [1], EventKind.INTERNAL, send_id="s1"),
        Event("done.invoke.payment", {"k": "v"}, EventKind.PLATFORM, invoke_id=InvokeId("payment", "k", 7)),
    )
    snapshot = attrs.evolve(snapshot, internal_queue=queued)
    codec = SnapshotCodec(chart)
    assert codec.decode(codec.encode(snapshot)).internal_queue == queued


def test_tuple_in_json_data_is_refused_with_its_path() -> None:
    """A tuple inside free JSON data raises CodecError naming the chart and the path inside the value."""
    chart = everything()
    snapshot, _ = start(chart, Order(extra={"items": [1, (2, 3)]}))  # type: ignore[list-item]
    with pytest.raises(CodecError) as caught:
        SnapshotCodec(chart).encode(snapshot)
    message = str(caught.value)
    assert "chart 'order'" in message
    assert "$.items[1]" in message
    assert "tuple" in message and "use a list" in message
    assert isinstance(caught.value, IncarnateError)
    assert isinstance(caught.value, ValueError)


def test_set_and_non_string_key_are_refused() -> None:
    """Sets and mappings with non-string keys are not JSON data."""
    chart = everything()
    codec = SnapshotCodec(chart)
    snapshot, _ = start(chart, initial_context())
    with pytest.raises(CodecError, match=r"\$\.s: set"):
        codec.encode(attrs.evolve(snapshot, output={"s": {1}}))  # type: ignore[dict-item]
    with pytest.raises(CodecError, match="key 1 is not a string"):
        codec.encode(attrs.evolve(snapshot, output={1: "x"}))  # type: ignore[dict-item]


def test_encode_error_names_the_snapshot_field() -> None:
    """An encode error locates the bad value in the snapshot (``context.extra``), as decode errors do."""
    chart = everything()
    snapshot, _ = start(chart, Order(extra={"k": (1,)}))  # type: ignore[dict-item]
    with pytest.raises(CodecError) as caught:
        SnapshotCodec(chart).encode(snapshot)
    assert "context.extra" in str(caught.value)


def test_decode_refuses_extra_keys_and_wrong_types_with_paths() -> None:
    """Decoding names the path of a wrong-typed field and refuses unknown keys."""
    codec = SnapshotCodec(everything())
    data = codec.encode(busy_snapshot())
    wrong = json.loads(json.dumps(data))
    wrong["context"]["quantity"] = "two"
    with pytest.raises(CodecError) as caught:
        codec.decode(wrong)
    assert "snapshot.context.quantity" in str(caught.value)
    extra = json.loads(json.dumps(data))
    extra["surprise"] = 1
    with pytest.raises(CodecError, match="surprise"):
        codec.decode(extra)
    missing = json.loads(json.dumps(data))
    del missing["configuration"]
    with pytest.raises(CodecError, match="configuration"):
        codec.decode(missing)


def test_check_json_accepts_plain_data_and_names_bad_paths() -> None:
    """``check_json`` returns plain JSON unchanged and raises TypeError at the first bad path."""
    value: JsonValue = {"a": [1, 2.5, "x", None, True, {"b": []}]}
    assert check_json(value) is value
    with pytest.raises(TypeError, match=r"\$\.a\[2\]\.b: tuple"):
        check_json({"a": [1, 2, {"b": (1,)}]})
    with pytest.raises(TypeError, match="not representable"):
        check_json([math.nan])
    with pytest.raises(TypeError, match="not representable"):
        check_json(math.inf)
    with pytest.raises(TypeError, match="object"):
        check_json(object(), "data")


def test_converter_unstructures_tuples_as_lists() -> None:
    """The shared converter turns tuples into lists; a fresh one behaves the same."""
    for converter in (CONVERTER, make_converter()):
        assert converter.unstructure(Address("x", ("l1", "l2"))) == {"city": "x", "lines": ["l1", "l2"]}


# ------------------------------------------------------------ context from input


def test_context_from_no_input_uses_defaults() -> None:
    """With no input, the context class is built from its defaults."""
    assert context_from_input(everything(), None) == Order()


def test_context_from_mapping_is_structured() -> None:
    """A mapping input is structured into the context class, nested values included."""
    built = context_from_input(everything(), {"id": "o-9", "address": {"city": "Oslo", "lines": ["a"]}})
    assert built == Order("o-9", Address("Oslo", ("a",)))


def test_start_builds_the_context_from_input() -> None:
    """``start(input=...)`` builds the context when none is given."""
    snapshot, _ = start(everything(), input={"quantity": 4})
    assert snapshot.context == Order(quantity=4)


def test_bad_input_is_a_codec_error_with_its_path() -> None:
    """An input of the wrong shape raises CodecError naming the offending field."""
    with pytest.raises(CodecError) as caught:
        context_from_input(everything(), {"address": {"lines": 5}})
    assert caught.value.path == "input"
    assert "input.address.lines" in str(caught.value)
    with pytest.raises(CodecError, match="extra fields"):
        context_from_input(everything(), {"nope": 1})
    with pytest.raises(CodecError, match="context_from_input"):
        context_from_input(everything(), [1, 2])


def test_chart_context_from_input_takes_precedence() -> None:
    """A chart's own ``context_from_input`` builds the context from any JSON input."""

    def from_id(value: JsonValue) -> Order:
        return Order(id=str(value))

    chart = Chart("custom", state("a"), context=Order, context_from_input=from_id)
    assert context_from_input(chart, "o-5") == Order("o-5")
    snapshot, _ = start(chart, input=7)
    assert snapshot.context == Order("7")


def test_start_refuses_a_context_of_another_class() -> None:
    """``start`` with a context that is not the chart's class raises InvalidEvent."""
    with pytest.raises(InvalidEvent, match="expects a Order context"):
        start(everything(), cast(Order, Address()))

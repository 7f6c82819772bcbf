"""The strict converter's quick hooks (homogeneous tuples, optionals, plain enums) agree with
cattrs' own hooks: the same value for every valid input, the same error for every invalid one."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any
from unittest import mock

import attrs
import cattrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from statechart import _codec
from statechart.codec import make_converter


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.Enum):
    LOW = 1
    HIGH = 2


@attrs.frozen
class Point:
    x: int
    label: str


@attrs.frozen
class Node:
    """A type that holds itself: its hooks are looked up when first used."""

    name: str
    next: Node | None = None
    children: tuple[Node, ...] = ()


def _plain_collection(
    item: Any, converter: cattrs.Converter, base: Callable[[Any, Any], Any], expected: str
) -> Callable[[Any, Any], Any]:
    """What the strict converter did for every collection before the quick tuple hook."""

    def structure(value: Any, typ: Any) -> Any:
        if isinstance(value, _codec._NOT_COLLECTIONS):
            raise _codec._refuse(value, expected)
        return base(value, typ)

    return structure


def reference_outcome(value: Any, annotation: Any) -> tuple[str, Any]:
    """The outcome with cattrs' generic tuple, optional and enum hooks (the quick ones off)."""
    with mock.patch.object(_codec, "_homogeneous_tuple", _plain_collection):
        converter = make_converter()
        dispatch = converter._structure_func._function_dispatch
        dispatch._handler_pairs = [
            pair
            for pair in dispatch._handler_pairs
            if getattr(pair[1], "__module__", "") != _codec.__name__
            or pair[1].__name__ not in ("_structure_optional", "_structure_enum")
        ]
        converter._structure_func.clear_cache()
        return outcome(converter, value, annotation)


def outcome(converter: cattrs.Converter, value: Any, annotation: Any) -> tuple[str, Any]:
    try:
        return "value", converter.structure(value, annotation)
    except Exception as error:  # noqa: BLE001 - the error is what is compared
        if isinstance(error, cattrs.BaseValidationError):
            return "error", (type(error).__name__, cattrs.transform_error(error))
        return "error", (type(error).__name__, str(error))


ANNOTATIONS = (
    tuple[str, ...],
    tuple[int, ...],
    tuple[Point, ...],
    tuple[Colour, ...],
    tuple[Node, ...],
    Point | None,
    Colour | None,
    Level,
    Colour,
    Node,
)

values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["red", "green", "blue", "", "x"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.fixed_dictionaries({"x": inner, "label": inner})
        | st.fixed_dictionaries({"name": inner}, optional={"next": inner, "children": inner})
    ),
    max_leaves=12,
)


@pytest.mark.parametrize("annotation", ANNOTATIONS, ids=str)
@given(value=values)
def test_quick_hooks_agree_with_cattrs_own(annotation: Any, value: Any) -> None:
    assert outcome(make_converter(), value, annotation) == reference_outcome(value, annotation)


def test_a_tuple_item_that_fails_is_named_by_its_index() -> None:
    with pytest.raises(cattrs.BaseValidationError) as raised:
        make_converter().structure([{"x": 1, "label": "a"}, {"x": "2", "label": "b"}], tuple[Point, ...])
    assert any("$[1].x" in line for line in cattrs.transform_error(raised.value))


def test_a_str_where_a_tuple_belongs_is_refused() -> None:
    with pytest.raises(Exception, match="expected a list"):
        make_converter().structure("abc", tuple[str, ...])


def test_a_recursive_type_structures() -> None:
    data = {"name": "a", "next": {"name": "b"}, "children": [{"name": "c", "children": [{"name": "d"}]}]}
    node = make_converter().structure(data, Node)
    assert node == Node("a", Node("b"), (Node("c", None, (Node("d"),)),))


points = st.fixed_dictionaries({"x": st.integers(), "label": st.text(max_size=3)})
VALID: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (tuple[str, ...], st.lists(st.text(max_size=3), max_size=8)),
    (tuple[int, ...], st.lists(st.integers(), max_size=8)),
    (tuple[Point, ...], st.lists(points, max_size=8)),
    (tuple[Colour, ...], st.lists(st.sampled_from(["red", "green"]), max_size=8)),
    (Point | None, st.none() | points),
    (Level, st.sampled_from([1, 2])),
]


@pytest.mark.parametrize(("annotation", "strategy"), VALID, ids=[str(a) for a, _ in VALID])
@given(data=st.data())
def test_valid_values_structure_alike(
    annotation: Any, strategy: st.SearchStrategy[Any], data: st.DataObject
) -> None:
    value = data.draw(strategy)
    fast = outcome(make_converter(), value, annotation)
    assert fast[0] == "value"
    assert fast == reference_outcome(value, annotation)

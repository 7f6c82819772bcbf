"""Effects in stored events: a tagged dict per effect, each class's functions generated at first use.

The event converters store an effect as its fields and ``"effect"`` (its
class's name) last, and read it back, exactly as cattrs'
``configure_tagged_union`` does; they only generate a member's functions
the first time it is met, instead of all of them when a converter is
made. These tests hold the three (the shared converter, the one the
mapper stores with, the one that reads stored events) to a reference
converter configured by cattrs' own strategy, for any effect of every
class.
"""

from __future__ import annotations

import enum
import types
import typing
from typing import Any, get_args, get_origin

import attrs
import cattrs
import pytest
from cattrs.strategies import configure_tagged_union
from hypothesis import given, settings
from hypothesis import strategies as st

from aggregates import CONVERTER
from aggregates._codec import DECODER, STORED_CONVERTER, make_event_converter
from statechart._codec import is_json_type
from statechart.effects import Effect, Stopped

JSON: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def strategy_for(annotation: Any) -> st.SearchStrategy[Any]:
    """Values of a field type of the effect classes: attrs classes, optionals, tuples, enums, JSON."""
    if is_json_type(annotation):
        return JSON
    origin = get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(strategy_for(arg) for arg in get_args(annotation)))
    if origin is tuple:
        args = get_args(annotation)
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(strategy_for(args[0]), max_size=3).map(tuple)
        return st.tuples(*(strategy_for(arg) for arg in args))
    if origin is dict:
        return st.dictionaries(st.text(max_size=6), strategy_for(get_args(annotation)[1]), max_size=3)
    if attrs.has(annotation):
        hints = typing.get_type_hints(annotation)
        return st.builds(
            annotation, **{field.name: strategy_for(hints[field.name]) for field in attrs.fields(annotation)}
        )
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return st.sampled_from(list(annotation))
    if annotation is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if annotation is type(None):
        return st.none()
    return st.from_type(annotation)


EFFECT: Any = Effect
"""The union, typed for the converters' ``structure`` (which types its second argument as a class)."""

EFFECTS = st.one_of(*(strategy_for(member) for member in get_args(Effect)))


def reference() -> Any:
    converter = make_event_converter()
    configure_tagged_union(Effect, converter, tag_name="effect")
    return converter


REFERENCE = reference()


@settings(max_examples=5)
@given(st.data())
def test_every_effect_class_has_values_here(data: st.DataObject) -> None:
    for member in get_args(Effect):
        assert data.draw(strategy_for(member)).__class__ is member


@settings(max_examples=300)
@given(EFFECTS)
def test_an_effect_is_stored_and_read_as_cattrs_tagged_union_stores_and_reads_it(effect: Any) -> None:
    expected = REFERENCE.unstructure(effect, Effect)
    assert list(expected)[-1] == "effect"
    for converter in (CONVERTER, STORED_CONVERTER):
        data = converter.unstructure(effect, Effect)
        assert data == expected
        assert list(data) == list(expected)  # the same keys in the same order: the same stored bytes
    for converter in (CONVERTER, DECODER):
        assert converter.structure(expected, EFFECT) == REFERENCE.structure(expected, EFFECT) == effect


def test_an_unknown_tag_or_class_is_refused_as_there() -> None:
    with pytest.raises(KeyError):
        CONVERTER.structure({"effect": "Vanished"}, EFFECT)
    with pytest.raises(KeyError):
        REFERENCE.structure({"effect": "Vanished"}, EFFECT)

    @attrs.frozen
    class Stranger:
        reason: str

    with pytest.raises(KeyError):
        CONVERTER.unstructure(Stranger("x"), Effect)


def test_a_converter_is_made_without_generating_any_effect_class_functions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[Any] = []
    for name in ("get_structure_hook", "get_unstructure_hook"):
        original = getattr(cattrs.Converter, name)

        def asking(self: Any, cls: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            asked.append(cls)
            return _original(self, cls, *args, **kwargs)

        monkeypatch.setattr(cattrs.Converter, name, asking)
    converter = make_event_converter()
    assert not set(asked) & set(get_args(Effect))
    assert converter.unstructure(Stopped("done"), Effect) == {"reason": "done", "effect": "Stopped"}
    assert Stopped in asked  # generated at its first use

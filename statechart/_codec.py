"""The cattrs codec: snapshots, events and effects to JSON-compatible data and back.

One converter serves the whole project; the packages above extend it with
their own hooks. Tuples become lists, enums their values, and JSON data is
checked on the way in and out so that a value that would not survive the
round trip (a tuple, a set, a non-string key, an arbitrary object) is
refused with the path where it was found.
"""

from __future__ import annotations

import math
import typing
from typing import Any, Generic, TypeVar, Union, get_args, get_origin

import attrs
import cattrs
from cattrs.errors import ClassValidationError

from statechart import errors
from statechart._chart import Chart
from statechart._event import JsonValue
from statechart._snapshot import Snapshot

C = TypeVar("C")


def check_json(value: object, path: str = "$") -> JsonValue:
    """Return ``value`` if it is plain JSON data, else raise ``TypeError`` naming the path."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise TypeError(f"{path}: {value!r} is not representable in JSON")
        return value
    if isinstance(value, list):
        for n, item in enumerate(value):
            check_json(item, f"{path}[{n}]")
        return value
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{path}: key {key!r} is not a string")
            check_json(item, f"{path}.{key}")
        return value
    hint = " (use a list)" if isinstance(value, tuple | set | frozenset) else ""
    raise TypeError(f"{path}: {type(value).__name__} {value!r} is not JSON data{hint}")


def _json_hook(value: object, _type: object) -> JsonValue:
    return check_json(value)


def _json_unstructure(value: object) -> JsonValue:
    return check_json(value)


_SCALARS = frozenset({type(None), bool, int, float, str})


def is_json_type(annotation: object) -> bool:
    """Whether ``annotation`` is :data:`JsonValue` (as resolved from any module)."""
    if get_origin(annotation) is not Union:
        return False
    args = get_args(annotation)
    return set(args) >= _SCALARS and len(args) == 7


def make_converter() -> cattrs.Converter:
    """A strict converter: no extra keys, tuples as lists, JSON data checked."""
    converter = cattrs.Converter(forbid_extra_keys=True, unstruct_collection_overrides={tuple: list})
    converter.register_structure_hook_func(is_json_type, _json_hook)
    converter.register_unstructure_hook_func(is_json_type, _json_unstructure)
    return converter


CONVERTER = make_converter()


class SnapshotCodec(Generic[C]):
    """Encode and decode the snapshots of one chart (its context class decides the shape)."""

    def __init__(self, chart: Chart[C], converter: cattrs.Converter | None = None) -> None:
        self.chart = chart
        self.converter = converter or CONVERTER
        self.type: Any = Snapshot[chart.context_type]  # type: ignore[name-defined]

    def encode(self, snapshot: Snapshot[C]) -> dict[str, Any]:
        """The snapshot as JSON-compatible data."""
        try:
            data: dict[str, Any] = self.converter.unstructure(snapshot, self.type)
        except (TypeError, ValueError) as error:
            self._locate(snapshot)
            raise errors.CodecError(self.chart.name, "snapshot", str(error)) from error
        return data

    def _locate(self, snapshot: Snapshot[C]) -> None:
        """Raise a CodecError naming the (nested) snapshot field that does not encode."""
        self._descend(snapshot, self.type, "snapshot")

    def _descend(self, value: object, annotation: Any, path: str) -> None:
        try:
            self.converter.unstructure(value, annotation)
        except (TypeError, ValueError) as error:
            cls = type(value)
            if attrs.has(cls):
                hints = typing.get_type_hints(cls)
                for field in attrs.fields(cls):
                    inner: Any = hints.get(field.name, Any)
                    if path == "snapshot" and field.name == "context":
                        inner = self.chart.context_type
                    self._descend(getattr(value, field.name), inner, f"{path}.{field.name}")
            raise errors.CodecError(self.chart.name, path, str(error)) from error

    def decode(self, data: dict[str, Any]) -> Snapshot[C]:
        """The snapshot back from :meth:`encode`'s data."""
        try:
            snapshot: Snapshot[C] = self.converter.structure(data, self.type)
        except ClassValidationError as error:
            detail = "; ".join(cattrs.transform_error(error, path="snapshot"))
            raise errors.CodecError(self.chart.name, "snapshot", detail) from error
        except (TypeError, ValueError, KeyError) as error:
            raise errors.CodecError(self.chart.name, "snapshot", str(error)) from error
        return snapshot


def context_from_input(chart: Chart[C], input: JsonValue) -> C:
    """Build a chart's initial context from a JSON input."""
    if chart.context_from_input is not None:
        return chart.context_from_input(input)
    if input is None:
        return chart.context_type()
    if not isinstance(input, dict):
        raise errors.CodecError(
            chart.name,
            "input",
            f"expected a mapping of {chart.context_type.__name__} fields, got {input!r}; "
            "pass a dict or give the chart context_from_input=",
        )
    try:
        context: C = CONVERTER.structure(input, chart.context_type)
    except ClassValidationError as error:
        detail = "; ".join(cattrs.transform_error(error, path="input"))
        raise errors.CodecError(chart.name, "input", detail) from error
    return context

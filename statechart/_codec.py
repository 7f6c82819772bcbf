"""The cattrs codec: snapshots, events and effects to JSON-compatible data and back.

One converter serves the whole project; the packages above extend it with
their own hooks. Tuples become lists, enums their values, and JSON data is
checked on the way in and out so that a value that would not survive the
round trip (a tuple, a set, a non-string key, an arbitrary object) is
refused with the path where it was found.

Structuring is strict, because the same converter turns a user's input into
a context: no value is converted between ``str``, ``int``, ``float`` and
``bool`` (``True`` is not an int here), the one widening being an ``int``
where a ``float`` is declared (JSON has one number type); a ``str``,
``bytes`` or mapping is never taken for a collection (a list, tuple, set or
frozenset field); and unknown keys are refused.
"""

from __future__ import annotations

import collections.abc
import contextvars
import enum
import json
import math
import operator
import types
import typing
from collections.abc import Callable
from typing import Any, Generic, TypeVar, Union, get_args, get_origin

import attrs
import cattrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError
from cattrs.gen import make_dict_unstructure_fn, override

from statechart import errors
from statechart._chart import Chart
from statechart._event import Event, JsonValue
from statechart._snapshot import ChildSlot, Snapshot, slot_changes
from statechart.errors import StrictTypeError

C = TypeVar("C")


def check_text(text: str, path: str) -> str:
    """Return ``text`` if it can be stored (encoded as UTF-8), else raise ``TypeError`` naming the path.

    Only a lone surrogate (``"\\ud800"``, as a JSON escape or a badly
    decoded file can produce) cannot: it is no Unicode character.
    """
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            code = ord(text[error.start])
            raise TypeError(
                f"{path}: the text holds a lone surrogate U+{code:04X} at index {error.start}, which is "
                "not a Unicode character and cannot be stored; send valid text (a surrogate pair "
                "written in JSON as two escapes, or the character itself)"
            ) from None
    return text


def check_json(value: object, path: str = "$") -> JsonValue:
    """Return ``value`` if it is plain JSON data, else raise ``TypeError`` naming the path."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, str):
        return check_text(value, path)
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
            check_text(key, f"{path} key {key!r}")
            check_json(item, f"{path}.{key}")
        return value
    hint = " (use a list)" if isinstance(value, tuple | set | frozenset) else ""
    raise TypeError(f"{path}: {type(value).__name__} {value!r} is not JSON data{hint}")


def plain_json(data: object) -> bool:
    """Whether ``data`` is only dicts with string keys, lists, strings, ints, bools, None and finite floats.

    Exact types only (a subclass, such as an enum, is not plain): for such
    data msgspec writes what the standard library writes. Iterative, so
    deep data cannot exhaust the stack.
    """
    pending: list[object] = [data]
    pop, extend = pending.pop, pending.extend
    while pending:
        item = pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is float:
            if not math.isfinite(item):  # type: ignore[arg-type]
                return False
        elif kind is dict:
            mapping: dict[object, object] = item  # type: ignore[assignment]
            for key in mapping:
                if type(key) is not str:
                    return False
            extend(mapping.values())
        elif kind is list:
            extend(item)  # type: ignore[arg-type]
        else:
            return False
    return True


def finite_float(value: float) -> float:
    """``value`` if it is a finite number, else ``ValueError``: JSON has no NaN or infinity.

    The converter's unstructure hook for ``float``: a non-finite float in a
    context, a timer or a stored field is refused where it is encoded,
    never written as ``null``.
    """
    if value - value != 0:  # NaN - NaN and inf - inf are NaN; x - x is 0 for every finite x
        raise ValueError(f"{value!r} is not representable in JSON (it has no NaN or infinity)")
    return value


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


def _describe(value: object) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _refuse(value: object, expected: str) -> StrictTypeError:
    return StrictTypeError(f"expected {expected}, got {_describe(value)}")


def _structure_str(value: object, typ: Any) -> Any:
    if not isinstance(value, str):
        raise _refuse(value, "a str")
    return value if typ is str else typ(value)  # a str subclass (a str enum) is built from it


def _structure_bool(value: object, _typ: Any) -> bool:
    if not isinstance(value, bool):
        raise _refuse(value, "a bool (true or false)")
    return value


def _structure_int(value: object, typ: Any) -> Any:
    if typ is int and type(value) is int:
        return value
    if typ is bool or (isinstance(typ, type) and issubclass(typ, bool)):
        return _structure_bool(value, typ)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _refuse(value, "an int")
    return value if typ is int else typ(value)  # an int subclass (an int enum) is built from it


def _structure_float(value: object, typ: Any) -> Any:
    # An int is the one widening accepted: JSON writes 2.0 as 2 in many encoders.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _refuse(value, "a float (or an int)")
    return float(value) if typ is float else typ(value)


_NOT_COLLECTIONS = (str, bytes, bytearray, collections.abc.Mapping)
_resolving: contextvars.ContextVar[frozenset[Any]] = contextvars.ContextVar("resolving", default=frozenset())
"""Collection types whose cattrs hook is being looked up to be wrapped (per thread, like every context)."""


def _collection_origin(annotation: Any) -> type | None:
    origin = get_origin(annotation) or annotation
    if not isinstance(origin, type) or issubclass(origin, _NOT_COLLECTIONS) or issubclass(origin, enum.Enum):
        return None
    if not issubclass(origin, collections.abc.Collection):
        return None
    return origin


def _is_collection(annotation: Any) -> bool:
    """A list, tuple, set or frozenset annotation (bare or parameterised), not being wrapped now."""
    if _collection_origin(annotation) is None:
        return False
    return annotation not in _resolving.get()


def _strict_collection(annotation: Any, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """cattrs' own hook for ``annotation``, refusing a str, bytes or mapping first."""
    token = _resolving.set(_resolving.get() | {annotation})
    try:
        base = converter.get_structure_hook(annotation, cache_result=False)
    finally:
        _resolving.reset(token)
    origin = _collection_origin(annotation)
    expected = f"a list (for a {origin.__name__ if origin else 'collection'} field)"

    args = get_args(annotation)
    if get_origin(annotation) is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _homogeneous_tuple(args[0], converter, base, expected)

    def structure(value: Any, typ: Any) -> Any:
        if isinstance(value, _NOT_COLLECTIONS):
            raise _refuse(value, expected)
        return base(value, typ)

    return structure


def _homogeneous_tuple(
    item: Any, converter: cattrs.Converter, base: Callable[[Any, Any], Any], expected: str
) -> Callable[[Any, Any], Any]:
    """``tuple[item, ...]`` from a list: each item through its hook in one pass; cattrs' own hook
    (``base``) only for anything else, or when an item fails, to say which one and why."""
    found: list[Callable[[Any, Any], Any]] = []

    def structure(value: Any, typ: Any) -> Any:
        if type(value) is list:
            if item is str:
                if all(type(one) is str for one in value):
                    return tuple(value)
            else:
                if not found:
                    found.append(converter.get_structure_hook(item))
                hook = found[0]
                try:
                    return tuple([hook(one, item) for one in value])
                except Exception:  # noqa: BLE001 - the base hook reports it, with the item's index
                    pass
        if isinstance(value, _NOT_COLLECTIONS):
            raise _refuse(value, expected)
        return base(value, typ)

    return structure


def _is_optional(annotation: object) -> bool:
    """``X | None`` (or ``Optional[X]``) of one type ``X``."""
    if get_origin(annotation) not in (Union, types.UnionType):
        return False
    args = get_args(annotation)
    return len(args) == 2 and type(None) in args


def _structure_optional(annotation: Any, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """None, or ``X``'s own hook (looked up at its first use, so a type may hold itself): cattrs'
    generic optional hook looks the inner hook up again for every value."""
    inner = next(arg for arg in get_args(annotation) if arg is not type(None))
    found: list[Callable[[Any, Any], Any]] = []

    def structure(value: Any, _typ: Any) -> Any:
        if value is None:
            return None
        if not found:
            found.append(converter.get_structure_hook(inner))
        return found[0](value, inner)

    return structure


def _structure_enum(cls: type[enum.Enum]) -> Callable[[Any, Any], Any]:
    """A plain enum's member from its stored value: a lookup, the enum's own call only for a miss."""
    members = cls._value2member_map_

    def structure(value: Any, _typ: Any) -> Any:
        try:
            return members[value]
        except (KeyError, TypeError):  # not a value (or unhashable): the enum finds it or says why
            return cls(value)

    return structure


def _is_plain_enum(cls: object) -> bool:
    """An enum whose members' values are stored as they are (not one that types its ``_value_``)."""
    return isinstance(cls, type) and issubclass(cls, enum.Enum) and "_value_" not in cls.__annotations__


def make_converter(*, detailed_validation: bool = True) -> cattrs.Converter:
    """A strict converter: no extra keys, no conversions between scalars, tuples as lists, JSON checked.

    ``detailed_validation=False`` makes cattrs generate its structuring
    functions without the bookkeeping that names every failing field:
    they are generated and run faster and build the same values, but a
    failure says less; a reader that wants both reads with such a
    converter and asks a detailed one again when it fails.
    """
    converter = cattrs.Converter(
        forbid_extra_keys=True,
        unstruct_collection_overrides={tuple: list},
        detailed_validation=detailed_validation,
    )
    converter.register_structure_hook(str, _structure_str)
    converter.register_structure_hook(int, _structure_int)
    converter.register_structure_hook(bool, _structure_bool)
    converter.register_structure_hook(float, _structure_float)
    converter.register_structure_hook_factory(_is_optional, _structure_optional)
    converter.register_structure_hook_factory(_is_collection, _strict_collection)
    converter.register_structure_hook_func(is_json_type, _json_hook)
    converter.register_unstructure_hook_func(is_json_type, _json_unstructure)
    converter.register_unstructure_hook(float, finite_float)
    # An enum is stored as its value, read straight from the member (no property, no Python frame).
    converter.register_unstructure_hook_factory(_is_plain_enum, lambda _cls: operator.attrgetter("_value_"))
    converter.register_structure_hook_factory(_is_plain_enum, _structure_enum)
    # Stored only when set (an autoforwarded copy, an event of a cancelled invocation, an event
    # that came over HTTP), so that every other event is stored exactly as before the fields existed.
    converter.register_unstructure_hook_factory(
        lambda cls: cls is Event,
        lambda cls: make_dict_unstructure_fn(
            cls,
            converter,
            invoke_name=override(omit_if_default=True),
            origin_type=override(omit_if_default=True),
            raw=override(omit_if_default=True),
        ),
    )
    return converter


def _format_problem(error: BaseException, annotation: Any) -> str:
    """One structuring problem, in words that name the expected type and the actual value."""
    if isinstance(error, StrictTypeError | TypeError) and str(error).startswith("expected "):
        return str(error)
    if isinstance(error, ForbiddenExtraKeysError):
        fields = ", ".join(repr(f) for f in sorted(error.extra_fields))
        return f"extra fields {fields}: the class declares no such field"
    if isinstance(error, KeyError):
        return "required field missing"
    return cattrs.v.format_exception(error, annotation)


def problems_of(error: ClassValidationError | IterableValidationError, path: str) -> list[str]:
    """Every problem of a cattrs validation error, each as ``<path>: <problem>``."""
    found = []
    for line in cattrs.transform_error(error, path=path, format_exception=_format_problem):
        problem, _, where = line.rpartition(" @ ")
        found.append(f"{where}: {problem}" if problem else line)
    return found


CONVERTER = make_converter()


@attrs.frozen
class SnapshotDelta:
    """What one macrostep changed in a snapshot, as stored data.

    ``parts`` holds the encoded top-level fields that changed (all of them,
    ``children`` apart, for a first macrostep); the child slots that were
    added, changed or removed are listed apart (see
    :class:`~statechart.snapshot.SlotChanges` for the order they apply in), each
    encoded slot naming its own ``site`` and ``key``.
    """

    parts: dict[str, Any]
    added: tuple[dict[str, Any], ...] = ()
    changed: tuple[dict[str, Any], ...] = ()
    removed: tuple[tuple[str, str], ...] = ()


def _parts() -> tuple[tuple[str, Any], ...]:
    """The snapshot's data fields other than ``children``, with their annotations."""
    hints = typing.get_type_hints(Snapshot)
    return tuple(
        (field.name, hints[field.name])
        for field in attrs.fields(Snapshot)
        if field.init and field.name != "children"
    )


_PARTS = _parts()


class SnapshotCodec(Generic[C]):
    """Encode and decode the snapshots of one chart (its context class decides the shape)."""

    def __init__(self, chart: Chart[C], converter: cattrs.Converter | None = None) -> None:
        self.chart = chart
        self.converter = converter or CONVERTER
        self.type: Any = Snapshot[chart.context_type]  # type: ignore[name-defined]
        self._slot_hook = self.converter.get_unstructure_hook(ChildSlot)
        self._part_hooks: tuple[tuple[str, Callable[[Any], Any]], ...] = tuple(
            (
                name,
                self.converter.get_unstructure_hook(chart.context_type if name == "context" else annotation),
            )
            for name, annotation in _PARTS
        )
        """Each part's unstructure hook, looked up once (a macrostep encodes several)."""

    def encode(self, snapshot: Snapshot[C]) -> dict[str, Any]:
        """The snapshot as JSON-compatible data."""
        try:
            data: dict[str, Any] = self.converter.unstructure(snapshot, self.type)
        except (TypeError, ValueError) as error:
            self._locate(snapshot)
            raise errors.CodecError(self.chart.name, "snapshot", str(error)) from error
        self._check_context(data.get("context"))
        return data

    def encode_delta(self, before: Snapshot[C] | None, after: Snapshot[C]) -> SnapshotDelta:
        """What changed from ``before`` (None: nothing yet) to ``after``, encoded.

        O(what changed) when ``after`` was computed from ``before`` by the
        interpreter; the parts are compared by identity first, then by value.
        """
        parts: dict[str, Any] = {}
        try:
            for name, hook in self._part_hooks:
                value = getattr(after, name)
                if before is not None:
                    old = getattr(before, name)
                    if value is old or value == old:
                        continue
                parts[name] = hook(value)
            changes = slot_changes(before, after)
            slot_hook = self._slot_hook
            added = tuple(slot_hook(slot) for slot in changes.added)
            changed = tuple(slot_hook(slot) for slot in changes.changed)
        except (TypeError, ValueError):
            self.encode(after)  # raises the CodecError that names the field
            raise
        if "context" in parts:
            self._check_context(parts["context"])
        return SnapshotDelta(parts, added, changed, changes.removed)

    def _check_context(self, data: object) -> None:
        """A :class:`CodecError` when the encoded context is not JSON data (a value passed through).

        A context field typed ``Any`` (or a custom hook) can hand over a value
        JSON has no form for, such as a ``datetime`` or a ``set``: refused
        here, naming the context, rather than when the step is stored. A
        tuple is written as a list, as the standard library writes it.
        """
        if plain_json(data):
            return
        try:
            json.dumps(data, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise errors.CodecError(self.chart.name, "snapshot.context", str(error)) from error

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
    except (ClassValidationError, IterableValidationError) as error:
        detail = "; ".join(problems_of(error, "input"))
        raise errors.CodecError(
            chart.name,
            "input",
            f"the input does not fit {chart.context_type.__name__}: {detail}; fix: pass "
            "exactly the declared fields with values of the declared types (nothing is converted: "
            "'3' is not an int, 1 is not a bool, a str is not a list), or give the chart "
            "context_from_input=",
        ) from error
    except (TypeError, ValueError) as error:
        raise errors.CodecError(
            chart.name, "input", f"the input does not fit {chart.context_type.__name__}: {error}"
        ) from error
    return context

"""One cattrs codec for every stored event, and the mapper that uses it.

The stock ``eventsourcing`` mapper serialises ``vars(event)`` with a JSON
transcoder, which turns tuples into lists and knows nothing of attrs values.
:class:`CattrsMapper` instead unstructures each event with the project's
converter (exact for tuples, enums, attrs classes and unions) and
structures it back into the event class named by the stored topic. No
pickle is involved anywhere.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any, get_args
from uuid import UUID

import cattrs
import msgspec
from cattrs.errors import ClassValidationError
from cattrs.fns import identity
from cattrs.gen import make_dict_unstructure_fn, override
from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import Mapper, MapperDeserialisationError, StoredEvent
from eventsourcing.utils import get_topic, resolve_topic

from aggregates._identity import BirthFacts
from aggregates._keyed import SlotData
from aggregates._records import Activation, Activations
from aggregates.errors import DecodeError
from statechart.codec import make_converter, plain_json
from statechart.effects import Effect

_UUIDS: dict[str, UUID] = {}
"""UUIDs read lately, by their text: a tree's ids recur in every event and row of it."""

_UUIDS_KEPT = 65_536
"""How many :data:`_UUIDS` holds before it starts again (a bound on memory, not a cache policy)."""


def uuid_of(text: str) -> UUID:
    """``UUID(text)``, remembered: the same text read again costs a dictionary lookup, not a parse.

    A recovery reads each id of a tree a dozen times or more (every event and
    listing row names its instance, its root and its parent); parsing one
    costs about as much as forty lookups. ``ValueError`` for text that is not a UUID.
    """
    found = _UUIDS.get(text)
    if found is None:
        found = UUID(text)
        if len(_UUIDS) >= _UUIDS_KEPT:
            _UUIDS.clear()
        _UUIDS[text] = found
    return found


def _structure_uuid(value: Any, _: object) -> UUID:
    """A UUID from its text; a UUID object (an event's id as the store read it) is taken as it is."""
    if type(value) is UUID:
        return value
    return uuid_of(value) if type(value) is str else UUID(value)


def _configure_effects(converter: cattrs.Converter) -> None:
    """Effects as tagged dicts: a member's fields and ``"effect"``, its class's name, last.

    What cattrs' ``configure_tagged_union(Effect, converter,
    tag_name="effect")`` stores and reads, without generating the
    structuring and unstructuring functions of every effect class when the
    converter is made (each converter made at import took about 17 ms):
    each member's are generated at its first use. An unknown tag, or a
    value of a class that is not a member, raises ``KeyError`` as there.
    """
    members: dict[str, type[Any]] = {member.__name__: member for member in get_args(Effect)}
    classes = frozenset(members.values())
    unstructures: dict[type[Any], Callable[[Any], dict[str, Any]]] = {}
    structures: dict[str, tuple[type[Any], Callable[[Any, Any], Any]]] = {}

    def unstructure_effect(value: Any) -> dict[str, Any]:
        cls = value.__class__
        hook = unstructures.get(cls)
        if hook is None:
            if cls not in classes:
                raise KeyError(cls)
            hook = unstructures[cls] = converter.get_unstructure_hook(cls)
        data = hook(value)
        data["effect"] = cls.__name__
        return data

    def structure_effect(value: Any, _: Any) -> Any:
        value = value.copy()
        tag = value.pop("effect")
        found = structures.get(tag)
        if found is None:
            cls = members[tag]
            found = structures[tag] = (cls, converter.get_structure_hook(cls))
        return found[1](value, found[0])

    converter.register_unstructure_hook(Effect, unstructure_effect)
    converter.register_structure_hook(Effect, structure_effect)


def make_event_converter(*, detailed_validation: bool = True) -> cattrs.Converter:
    """The statechart converter extended for stored events (UUIDs, datetimes, effects)."""
    converter = make_converter(detailed_validation=detailed_validation)
    converter.register_unstructure_hook(UUID, str)
    converter.register_structure_hook(UUID, _structure_uuid)
    converter.register_unstructure_hook(datetime, datetime.isoformat)
    converter.register_structure_hook(datetime, lambda value, _: datetime.fromisoformat(value))
    _configure_effects(converter)
    # A class's ``stored_if_set`` fields are stored only when set (a message's ``detached`` and
    # ``trace``, an embedded task's trace context on its activation and its birth).
    converter.register_unstructure_hook_factory(
        lambda cls: bool(getattr(cls, "stored_if_set", ())),
        lambda cls: make_dict_unstructure_fn(cls, converter, **_if_set(cls)),
    )
    # The record's keyed maps are stored as their values, in order (an InstanceSnapshot).
    converter.register_unstructure_hook(SlotData, lambda slots: list(slots.values()))
    converter.register_structure_hook(
        SlotData, lambda value, _: SlotData.of(converter.structure(value, list[dict[str, Any]]))
    )
    converter.register_unstructure_hook(
        Activations, lambda kept: [converter.unstructure(a, Activation) for a in kept.values()]
    )
    converter.register_structure_hook(
        Activations, lambda value, _: Activations.of(converter.structure(value, list[Activation]))
    )
    return converter


CONVERTER = make_event_converter()
DECODER = make_event_converter(detailed_validation=False)
""":data:`CONVERTER` without cattrs' detailed validation, for reading stored events.

It builds the same events; its structuring functions are generated in about
two thirds of the time (the first read of each event class in a process:
a restarted engine's first claims) and run faster. An event it fails to
read is read again by :data:`CONVERTER`, whose error names the failing
field (see :func:`decode_event`).
"""

_PLAIN = frozenset({str | None, int | None, dict[str, Any], dict[str, Any] | None})
"""Field types whose values the stored form keeps as they are: optional scalars and encoded snapshots.

(Floats are not among them: every float goes through the converter's
finite check, :func:`statechart.codec.finite_float`.)

An encoded snapshot (``JsonObject``) is JSON data built by the snapshot
codec, so copying it value by value, as a converter does for ``dict[str,
Any]``, would produce the same JSON.
"""


def _is_domain_event(cls: object) -> bool:
    return (
        isinstance(cls, type)
        and dataclasses.is_dataclass(cls)
        and "originator_version" in {f.name for f in dataclasses.fields(cls)}
    )


class _Last:
    """An unstructure hook that remembers the last object it encoded, and gives its data again.

    One commit stores some objects several times: a parent's id in every
    Ref of its children and a root's in every ``root`` (``UUID.__str__`` is
    Python code), a child's :class:`BirthFacts` in the parent's ``Birth``
    (or ``ChildResume``) and in the child's ``Started``. An identity test
    is cheaper than encoding again; the data is only read (the mapper
    writes it as text and drops it), so sharing it is safe.
    """

    __slots__ = ("last", "make")

    def __init__(self, make: Callable[[Any], Any]) -> None:
        self.make = make
        self.last: tuple[Any, Any] | None = None

    def __call__(self, value: Any) -> Any:
        last = self.last  # one read: another thread may replace it meanwhile
        if last is not None and last[0] is value:
            return last[1]
        data = self.make(value)
        self.last = (value, data)
        return data


_uuid_text = _Last(str)


def _optional_uuid(value: UUID | None) -> str | None:
    return None if value is None else _uuid_text(value)


def _if_set(cls: type) -> dict[str, Any]:
    """Overrides leaving out the fields an event class names in ``stored_if_set`` while at their default."""
    return {name: override(omit_if_default=True) for name in getattr(cls, "stored_if_set", ())}


def make_stored_converter() -> cattrs.Converter:
    """The event converter as the mapper stores events: the same JSON, produced with less work.

    An event's ``originator_id`` and ``originator_version`` are left out (they
    are the stored event's own columns), so are the fields an event class
    names in ``stored_if_set`` while they hold their default, and the fields
    in :data:`_PLAIN` are passed through instead of being copied.
    """
    converter = make_event_converter()
    converter.register_unstructure_hook_factory(
        _is_domain_event,
        lambda cls: make_dict_unstructure_fn(
            cls,
            converter,
            originator_id=override(omit=True),
            originator_version=override(omit=True),
            **_if_set(cls),
        ),
    )
    # cattrs' own identity: a tuple of such values is then unstructured by ``list`` alone.
    converter.register_unstructure_hook_func(_PLAIN.__contains__, identity)
    converter.register_unstructure_hook(UUID, _uuid_text)
    converter.register_unstructure_hook_func(lambda t: t == UUID | None, _optional_uuid)
    converter.register_unstructure_hook(
        BirthFacts, _Last(converter.gen_unstructure_attrs_fromdict(BirthFacts))
    )
    return converter


STORED_CONVERTER = make_stored_converter()

_FAST_ENCODE = msgspec.json.Encoder().encode
_FAST_DECODE = msgspec.json.Decoder().decode
_STRICT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


_WALKED = 16_384
"""Encoded size (bytes) from which :func:`stored_json` checks the data by walking it, not by reading it back.

Reading a large text back (an aggregate snapshot of a parent with
thousands of children) builds a second copy of the whole data, doubling
the peak memory of the encoding; the walk allocates nothing.
"""


def stored_json(data: object) -> bytes:
    """``data`` as a stored event's state: compact JSON in UTF-8, refusing NaN and infinities.

    msgspec's encoder writes it in an eighth of the standard library's time,
    but writes a NaN or an infinity as ``null``; its output is therefore
    checked: read back and compared with ``data`` (a few microseconds,
    C-level), or, for a text of :data:`_WALKED` bytes or more, by walking
    ``data`` for anything but plain JSON values (see :func:`plain_json`).
    Anything else — a non-finite float, a tuple, a key that is not a
    string, a value of another type — sends ``data`` through the standard
    library's strict encoder instead, which raises ``ValueError`` for a
    non-finite float. The two write the same text but for how some floats
    are spelled (``1e16`` and ``0.00001`` here, ``1e+16`` and ``1e-05``
    there), which every JSON reader reads as the same number.
    """
    try:
        encoded = _FAST_ENCODE(data)
    except (TypeError, ValueError, OverflowError):  # a key or value msgspec refuses: the stdlib decides
        return _STRICT.encode(data).encode()
    if len(encoded) < _WALKED:
        if _FAST_DECODE(encoded) == data:
            return encoded
    elif plain_json(data):
        return encoded
    return _STRICT.encode(data).encode()


def typed_json(data: dict[str, Any], untyped: tuple[tuple[str, ...], ...]) -> bytes:
    """The stored text of an event's ``data`` whose class vouches for its fields, checking only ``untyped``.

    An event class that declares ``untyped_paths`` (see
    :class:`CattrsMapper`) is made only of fields whose converter hooks
    produce plain JSON by construction (strings, integers, checked floats,
    enum values, checked JSON values, and containers of them), but for the
    paths it names: data a chart's author typed, such as a snapshot's
    ``context``, which may hold anything a converter passes through. Only
    those subtrees are checked (walked, see :func:`plain_json`); the text
    is then msgspec's. When one of them is not plain, or msgspec refuses the
    data, :func:`stored_json` decides, with its errors.
    """
    for path in untyped:
        value: Any = data
        for name in path:
            value = value.get(name) if type(value) is dict else None
        if value is not None and not plain_json(value):
            return stored_json(data)
    try:
        return _FAST_ENCODE(data)
    except (TypeError, ValueError, OverflowError):
        return stored_json(data)


def read_stored_json(state: bytes) -> Any:
    """A stored event's state back as JSON data (``ValueError`` when it is not UTF-8 JSON)."""
    return _FAST_DECODE(state)


def encode_event(event: object) -> dict[str, Any]:
    """An event object as JSON-compatible data."""
    data: dict[str, Any] = CONVERTER.unstructure(event, type(event))
    return data


def decode_event(data: dict[str, Any], cls: type[Any]) -> Any:
    """An event object of class ``cls`` from :func:`encode_event` data.

    Read by :data:`DECODER`; data it refuses is read again by
    :data:`CONVERTER`, which raises the detailed ``ClassValidationError``
    the stored event's decoding error is made from (or reads it, if only
    the lighter functions refused it: both build the same event).
    """
    structure = _DECODINGS.get(cls)
    if structure is None:
        structure = _DECODINGS[cls] = DECODER.get_structure_hook(cls)
    try:
        return structure(data, cls)
    except Exception:  # noqa: BLE001 - asked again for the error that names the field
        return CONVERTER.get_structure_hook(cls)(data, cls)


_DECODINGS: dict[type[Any], Callable[[Any, type[Any]], Any]] = {}
""":data:`DECODER`'s structure hook of each event class, looked up once."""


def class_version(cls: type[Any]) -> int:
    """The stored format of an event class (its ``class_version``; 1 when it has none)."""
    version: int = getattr(cls, "class_version", 1)
    return version


_STORED_TOPICS: dict[type[Any], str] = {}


def stored_topic(cls: type[Any]) -> str:
    """The topic an event of ``cls`` is stored under: its class's topic, then ``@N`` from format 2 on.

    A format in the topic means that a reader that does not know the
    format cannot resolve the topic and refuses the event (an engine parks
    the instance with an incident) instead of reading it as an older one.
    """
    topic = _STORED_TOPICS.get(cls)
    if topic is None:
        version = class_version(cls)
        topic = get_topic(cls) if version == 1 else f"{get_topic(cls)}@{version}"
        _STORED_TOPICS[cls] = topic
    return topic


def resolve_stored_topic(topic: str) -> tuple[type[Any], int]:
    """The event class a stored topic names, and the format it was stored in.

    Raises :class:`ValueError` for a format newer than the class's (a store
    written by a later version of the project), naming what to do.
    """
    base, _, suffix = topic.partition("@")
    cls: type[Any] = resolve_topic(base)
    stored = int(suffix) if suffix else 1
    known = class_version(cls)
    if stored > known:
        raise ValueError(
            f"stored format {stored} of {base.rpartition(':')[2]}, and this version of incarnate reads "
            f"formats up to {known}: the store was written by a later version; upgrade incarnate on every "
            "engine that opens this store"
        )
    return cls, stored


def upcast(cls: type[Any], stored: int, data: dict[str, Any]) -> None:
    """Bring an event's stored ``data`` from format ``stored`` to its class's, in place."""
    for version in range(stored, class_version(cls)):
        getattr(cls, f"upcast_v{version}_v{version + 1}")(data)


_ENCODINGS: dict[type[Any], tuple[Callable[[Any], Any], tuple[tuple[str, ...], ...] | None]] = {}
"""Per event class: its stored unstructure hook and its ``untyped_paths``, looked up once."""


class CattrsMapper(Mapper[UUID]):
    """Maps domain events to stored events through the cattrs codec (compression and
    encryption, when configured, apply as usual).

    An event class may declare ``untyped_paths``: a tuple of field paths
    (each a tuple of keys into its unstructured data) that hold
    author-typed data; everything else in it is plain JSON by the
    converter's construction, so only those paths are checked before the
    text is written (:func:`typed_json`). A class without the declaration
    is checked whole (:func:`stored_json`). The declarations are verified
    against the classes' field types by the test suite.
    """

    def to_stored_event(self, domain_event: DomainEventProtocol[UUID]) -> StoredEvent:
        cls = type(domain_event)
        encoding = _ENCODINGS.get(cls)
        if encoding is None:
            encoding = _ENCODINGS[cls] = (
                STORED_CONVERTER.get_unstructure_hook(cls),
                getattr(cls, "untyped_paths", None),
            )
        unstructure, untyped = encoding
        data = unstructure(domain_event)
        state = stored_json(data) if untyped is None else typed_json(data, untyped)
        del data  # a large snapshot's data is not kept through compression
        if self.compressor:
            state = self.compressor.compress(state)
        if self.cipher:
            state = self.cipher.encrypt(state)
        originator_id = domain_event.originator_id
        if not isinstance(originator_id, UUID):
            originator_id = UUID(str(originator_id))
        return StoredEvent(
            originator_id=originator_id,
            originator_version=domain_event.originator_version,
            topic=stored_topic(type(domain_event)),
            state=state,
        )

    def to_domain_event(self, stored_event: StoredEvent) -> DomainEventProtocol[UUID]:
        try:
            cls, stored = resolve_stored_topic(stored_event.topic)
            state = stored_event.state
            if self.cipher:
                state = self.cipher.decrypt(state)
            if self.compressor:
                state = self.compressor.decompress(state)
            data = read_stored_json(state)
            originator_id = stored_event.originator_id
            data["originator_id"] = originator_id if type(originator_id) is UUID else str(originator_id)
            data["originator_version"] = stored_event.originator_version
            if stored != 1 or class_version(cls) != 1:
                upcast(cls, stored, data)
            event: DomainEventProtocol[UUID] = decode_event(data, cls)
        except ClassValidationError as error:
            detail = "; ".join(cattrs.transform_error(error, path="event"))
            failure = _failure(stored_event, detail)
            raise MapperDeserialisationError(str(failure)) from _caused(failure, error)
        except Exception as error:  # noqa: BLE001 - re-raised, chained through the DecodeError
            failure = _failure(stored_event, f"{type(error).__name__}: {error}")
            raise MapperDeserialisationError(str(failure)) from _caused(failure, error)
        return event


# The library expects a MapperDeserialisationError; it is raised from the project's
# DecodeError, which keeps the structured facts for the engine to wrap at its edge.


def _failure(stored_event: StoredEvent, problem: str) -> DecodeError:
    return DecodeError(
        stored_event.topic, stored_event.originator_id, stored_event.originator_version, problem
    )


def _caused(failure: DecodeError, error: Exception) -> DecodeError:
    failure.__cause__ = error
    return failure

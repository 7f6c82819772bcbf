"""Child slots and activations by ``(site, key)``: immutable, ordered, and cheap to change.

An Instance's record is a frozen value evolved once per event; a parent
fanning out to thousands of children must not copy (or scan) every slot on
every event. :class:`Keyed` is a persistent map (a hash array mapped trie,
from ``immutables``) that also keeps insertion order, the order the
snapshot's ``children`` and the record's activations have always had: a
replaced value keeps its place, a new one goes last. Putting, replacing or
removing one value is O(log n) and shares everything else; the values in
order are sorted once per version, when asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, Generic, TypeVar

import immutables

V = TypeVar("V")
SlotKey = tuple[str, str]


def _seq(item: tuple[int, Any]) -> int:
    return item[0]


class Keyed(Generic[V]):
    """An immutable, insertion-ordered map of values by ``(site, key)``."""

    __slots__ = ("_items", "_next", "_ordered")

    kind: ClassVar[str] = "value"

    def __init__(
        self, items: immutables.Map[SlotKey, tuple[int, V]] | None = None, next_seq: int = 0
    ) -> None:
        self._items: immutables.Map[SlotKey, tuple[int, V]] = items if items is not None else immutables.Map()
        self._next = next_seq
        self._ordered: tuple[V, ...] | None = None

    @staticmethod
    def key_of(value: Any) -> SlotKey:
        """The ``(site, key)`` a value is kept under."""
        raise NotImplementedError

    @classmethod
    def of(cls, values: Iterable[V]) -> Any:
        """The map of ``values``, in their order (a later value of the same key replaces an earlier one)."""
        result = cls()
        with result._items.mutate() as items:
            seq = 0
            for value in values:
                key = cls.key_of(value)
                old = items.get(key)
                if old is None:
                    items[key] = (seq, value)
                    seq += 1
                else:
                    items[key] = (old[0], value)
            return cls(items.finish(), seq)

    def get(self, key: SlotKey) -> V | None:
        """The value of ``key``, if any."""
        item = self._items.get(key)
        return item[1] if item is not None else None

    def position(self, key: SlotKey) -> int:
        """Where ``key`` stands in the order (``KeyError`` when absent); only comparisons mean anything."""
        return self._items[key][0]

    def put(self, value: V) -> Any:
        """A map with ``value`` under its key: where the old one stood, or last."""
        key = self.key_of(value)
        old = self._items.get(key)
        if old is not None:
            return type(self)(self._items.set(key, (old[0], value)), self._next)
        return type(self)(self._items.set(key, (self._next, value)), self._next + 1)

    def remove(self, key: SlotKey) -> Any:
        """A map without ``key`` (``KeyError`` when it is absent)."""
        return type(self)(self._items.delete(key), self._next)

    def values(self) -> tuple[V, ...]:
        """The values in order (sorted once, then kept)."""
        ordered = self._ordered
        if ordered is None:
            ordered = tuple(value for _, value in sorted(self._items.values(), key=_seq))
            self._ordered = ordered
        return ordered

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[V]:
        return iter(self.values())

    def __bool__(self) -> bool:
        return bool(self._items)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Keyed)
        return len(self) == len(other) and self.values() == other.values()

    def __hash__(self) -> int:
        return hash(self.values())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self.values())!r})"


class SlotData(Keyed[dict[str, Any]]):
    """The encoded child slots of a snapshot, by ``(site, key)``."""

    __slots__ = ()

    @staticmethod
    def key_of(value: Any) -> SlotKey:
        return (value["site"], value["key"])

"""When the engine takes ``eventsourcing`` snapshots of its instances, and how they are stored.

A recovery read is the latest snapshot of an instance and the events after
it. Without snapshots a parent that fanned out to thousands of children is
replayed from its first event (four or so events per child). By default an
instance is snapshotted once it has at least :data:`DEFAULT_SNAPSHOT_EVENTS`
events since its last snapshot *and* at least as many as it keeps slots,
activations and inbox messages: a snapshot costs O(size) to write, so
spacing them by the size keeps their cost per event constant however large
the parent grows, and the tail a recovery read folds stays at most that
long. ``Engine(snapshot_interval=N)`` instead snapshots every N versions,
as ``eventsourcing`` does.

Snapshots are compressed with zlib (they are JSON, and repetitive); a
snapshot stored uncompressed, by an earlier version, still reads. A
snapshot over the payload limit is not written (a warning says so): it
would only have saved time.
"""

from __future__ import annotations

import zlib

from eventsourcing.persistence import Compressor

from aggregates import Instance

DEFAULT_SNAPSHOT_EVENTS = 1_000
"""Events an instance has at least between two snapshots, by default."""

_ZLIB_HEADER = b"x"
"""The first byte of zlib data at the default window size; JSON starts with ``{``."""


class TolerantZlib(Compressor):
    """zlib, reading uncompressed (JSON) data as it is."""

    def compress(self, data: bytes) -> bytes:
        """``data`` compressed."""
        return zlib.compress(data, 1)

    def decompress(self, data: bytes) -> bytes:
        """``data`` decompressed, or as it is when it was stored uncompressed."""
        if data[:1] == _ZLIB_HEADER:
            return zlib.decompress(data)
        return data


def size_of(instance: Instance) -> int:
    """What a snapshot of ``instance`` holds that grows: its slots, activations and inbox messages."""
    record = instance.record
    return len(record.slots) + len(record.retained) + len(record.inbox)


def snapshot_due(instance: Instance, last: int, minimum: int) -> bool:
    """Whether ``instance`` should be snapshotted now, its last snapshot being at version ``last``."""
    return instance.version - last >= max(minimum, size_of(instance))

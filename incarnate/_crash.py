"""Crash injection inside a commit: a recorder wrapper the test kit and the store contract share.

A crash between a commit's inserts and its ``COMMIT`` must leave nothing
of the commit stored. :class:`CrashInsideCommit` makes one by wrapping a
recorder's public ``insert_events`` — the one path every commit takes —
so it works on every store adapter without reaching into any recorder's
private methods.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from eventsourcing.persistence import ApplicationRecorder, IntegrityError, StoredEvent


class SimulatedCrash(BaseException):
    """Raised at an injected crash point.

    A ``BaseException``, like the interruption of a dying process, so that no
    ``except Exception`` on the way out can swallow it.
    """


class CrashInsideCommit:
    """A recorder wrapped so that each chosen insert is written in the store's transaction, never committed.

    The chosen batch is sent with one more row: a second copy of its last
    event, which the store refuses once the batch's rows are written in its
    transaction — by the uniqueness of (originator id, version) on which
    every recorder's optimistic concurrency rests. The store rolls the whole
    transaction back, as it does for a process that dies before its
    ``COMMIT``; then :class:`SimulatedCrash` is raised.
    """

    def __init__(
        self, recorder: ApplicationRecorder, chosen: Callable[[Sequence[StoredEvent]], bool]
    ) -> None:
        self.recorder = recorder
        self.chosen = chosen
        """Whether to crash the insert of these events."""
        self.insert = recorder.insert_events

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """The recorder's insert; a chosen one crashes inside its transaction."""
        if not stored_events or not self.chosen(stored_events):
            return self.insert(stored_events, **kwargs)
        try:
            self.insert([*stored_events, stored_events[-1]], **kwargs)
        except IntegrityError as refused:
            raise SimulatedCrash(
                "simulated crash inside the commit's transaction, after its inserts"
            ) from refused
        raise AssertionError(
            f"{type(self.recorder).__name__} stored a second copy of an event: a store must refuse an event "
            "whose originator and version it already holds (optimistic concurrency), or a crash inside "
            "its commit cannot be simulated"
        )

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """This wrapper in place of the recorder's ``insert_events`` for the block."""
        recorder: Any = self.recorder
        own = vars(recorder).get("insert_events")  # a store may have wrapped it already (memory)
        recorder.insert_events = self.insert_events
        try:
            yield
        finally:
            if own is None:
                del recorder.insert_events
            else:
                recorder.insert_events = own

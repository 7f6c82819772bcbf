"""Clocks: the engine reads time only through one of these."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """A source of the current time in seconds since the epoch."""

    def now(self) -> float:
        """The current time."""
        ...


class SystemClock:
    """Wall-clock time."""

    def now(self) -> float:
        """``time.time()``."""
        return time.time()


class VirtualClock:
    """A clock that only moves when told to (tests, simulations, the demo)."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        """The current virtual time."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` (never backwards); return the new time."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go back ({seconds} seconds)")
        with self._lock:
            self._now += seconds
            return self._now

    def set(self, when: float) -> None:
        """Jump to ``when`` (not earlier than now)."""
        with self._lock:
            if when < self._now:
                raise ValueError(f"a clock cannot go back from {self._now} to {when}")
            self._now = when

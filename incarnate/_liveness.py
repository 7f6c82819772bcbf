"""An engine's heartbeat: while it runs work, other engines see it live and leave its trees alone.

A :class:`Heartbeat` thread renews the engine's heartbeat row every third of
its lease (``coordination.beat``). An engine built with a runner that works
on its own (a :class:`~incarnate.ThreadedRunner`) starts one, so two such
engines over one store never take each other's live call trees; a
:class:`~incarnate.Worker` sets the group and the lease. Stopping it
retires the heartbeat (``coordination.retire``): what the engine owned is
claimable at once, and the recovery manager takes it without waiting for
its ``ttl``.

A beat may carry the engine's report of its work (:meth:`Heartbeat.reporting`;
a worker reports its load, see ``incarnate._fleet``), which the console and
``incarnate workers`` read from the store. A report that fails is logged and
the beat goes without it: reporting never costs the engine its liveness.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable

from incarnate.errors import ConfigurationError
from incarnate.store import Coordination, Load

log = logging.getLogger("incarnate.liveness")

DEFAULT_LEASE = 30.0
"""Seconds one heartbeat keeps an engine live, unless a worker says otherwise."""


class Heartbeat:
    """Beats for one engine on a daemon thread until stopped; a lost beat is retried at the next."""

    def __init__(
        self,
        coordination: Callable[[], Coordination],
        engine_id: str,
        *,
        group: str = "default",
        lease: float = DEFAULT_LEASE,
    ) -> None:
        self._coordination = coordination
        self.engine_id = engine_id
        self.group = group
        self.lease = lease
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by stop() and configure(): the thread looks again at once
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._report: Callable[[], Load] | None = None

    def configure(self, *, group: str, lease: float) -> None:
        """Beat for ``group`` with ``lease`` from the next beat on."""
        if not lease > 0:
            raise ConfigurationError(f"a heartbeat's lease must be a positive number of seconds, got {lease}")
        with self._lock:
            self.group, self.lease = group, lease
        self._wake.set()  # the thread may be waiting out a longer lease's third

    def reporting(self, report: Callable[[], Load] | None) -> None:
        """Send ``report()`` with every beat from the next one on (None: send no report)."""
        with self._lock:
            self._report = report

    def beat(self) -> None:
        """Renew the heartbeat now, with the report when there is one (raises the store's error)."""
        with self._lock:
            group, lease, report = self.group, self.lease, self._report
        self._coordination().beat(self.engine_id, group, lease, self._load(report))

    def _load(self, report: Callable[[], Load] | None) -> Load | None:
        if report is None:
            return None
        try:
            load = report()
            json.dumps(dict(load), allow_nan=False)  # what the store would refuse, refused here
            return load
        except Exception as error:  # noqa: BLE001 - the beat goes without it: liveness comes first
            log.warning("engine %s could not report its load with its heartbeat: %s", self.engine_id, error)
            return None

    def start(self) -> None:
        """Beat once, then keep beating on a thread; a no-op while it beats."""
        with self._lock:
            if self._thread is not None:
                return
            self._stop.clear()
            self._wake.clear()
            self._thread = threading.Thread(target=self._run, name="incarnate-heartbeat", daemon=True)
        try:
            self.beat()
        except Exception as error:  # noqa: BLE001 - the thread beats again; the engine still works
            log.warning("engine %s could not beat its heartbeat: %s", self.engine_id, error)
        self._thread.start()

    @property
    def running(self) -> bool:
        """Whether the thread beats."""
        return self._thread is not None

    def _run(self) -> None:
        while True:
            self._wake.wait(self.lease / 3)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.beat()
            except Exception as error:  # noqa: BLE001 - a lost beat is retried; the thread never dies
                log.warning("engine %s could not renew its heartbeat: %s", self.engine_id, error)

    def stop(self, *, retire: bool, timeout: float = 10.0) -> None:
        """Stop beating; with ``retire``, end the engine's liveness at once (its trees are claimable).

        An engine that never beat has nothing to retire.
        """
        with self._lock:
            thread, self._thread = self._thread, None
        self._stop.set()
        self._wake.set()
        if thread is not None:
            thread.join(timeout)
        if retire and thread is not None:
            try:
                self._coordination().retire(self.engine_id)
            except Exception as error:  # noqa: BLE001 - its lease then runs out instead
                log.warning(
                    "engine %s could not retire its heartbeat (%s); what it owned is claimable once its "
                    "lease of %gs runs out",
                    self.engine_id,
                    error,
                    self.lease,
                )

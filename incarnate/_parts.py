"""The parts an :class:`~incarnate.Engine` is composed of, as one object recovery and tools are given.

Each part owns its state and is the only one to change it:

- :class:`~incarnate._copies.Catalog`: the registered charts, codecs and task functions;
- :class:`~incarnate._journal.Journal`: the store (the engine's private ``eventsourcing`` Application);
- :class:`~incarnate._copies.Copies`: this engine's committed copies and decoded snapshots;
- :class:`~incarnate._reads.Reads`: private copies of stored instances and their ResumePlans;
- :class:`~incarnate._holdings.Holdings`: what this engine holds, has acquired, was fenced from;
- :class:`~incarnate._committing.CommitPath`: unit of work → fence → group commit → enact;
- :class:`~incarnate._liveness.Heartbeat`, the coordination facts and the listing of the store.

The engine's facade (``incarnate._engine``), recovery and ownership
(``incarnate._recovery``, ``incarnate._ownership``, ``incarnate._migration``),
the worker and the command line reach the parts through this object; the
parts never reach back up to it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from incarnate._clock import Clock
from incarnate._committing import CommitPath, Notify
from incarnate._copies import Catalog, Copies
from incarnate._holdings import Holdings
from incarnate._journal import Journal
from incarnate._listing import Listing
from incarnate._liveness import Heartbeat
from incarnate._reads import Reads
from incarnate._storage import Storage
from incarnate.store import Coordination

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from statechart import Chart


class Parts:
    """One engine's parts (see the module), and the store's coordination and listing, opened on first use."""

    def __init__(
        self,
        *,
        engine_id: str,
        clock: Clock,
        storage: Storage,
        catalog: Catalog,
        journal: Journal,
        copies: Copies,
        reads: Reads,
        holdings: Holdings,
        commits: CommitPath,
    ) -> None:
        self.engine_id = engine_id
        self.clock = clock
        self.storage = storage
        self.catalog = catalog
        self.journal = journal
        self.copies = copies
        self.reads = reads
        self.holdings = holdings
        self.commits = commits
        self._lock = threading.Lock()
        self._listing: Listing | None = None
        self.heartbeat = Heartbeat(lambda: journal.coordination, engine_id)
        """This engine's heartbeat: it beats while a runner that works on its own runs (see _liveness)."""

    @property
    def runner(self) -> Notify:
        """The runner the commit path hands follow-ups and deadlines to."""
        return self.commits.runner

    @property
    def charts(self) -> Mapping[str, Chart[Any]]:
        """The registered charts by name."""
        return self.catalog.charts

    @property
    def coordination(self) -> Coordination:
        """The facts this engine shares with the fleet through the store (opened on first use)."""
        return self.journal.coordination

    @property
    def listing(self) -> Listing:
        """The recovery listing of in-flight instances (opened on first use)."""
        with self._lock:
            if self._listing is None:
                self._listing = Listing(self.journal)
            return self._listing

    def close(self) -> None:
        """Close the listing, then the journal (the coordination, the store's recorders)."""
        with self._lock:
            listing, self._listing = self._listing, None
        if listing is not None:
            listing.close()
        self.journal.close()

"""The store port: what the engine needs from where it keeps its events, and one adapter per store.

The store kind (in memory, a SQLite file, PostgreSQL, or one of your own)
is one subclass of :class:`incarnate.Storage`, registered once by
:func:`incarnate.register_storage`; its ``open()`` returns the
:class:`~incarnate.store._port.Store` everything else talks to. Each
adapter passes the contract suite :class:`incarnate.testing.StoreContract`.
"""

from incarnate.errors import UnreadableRow
from incarnate.store._memory import forget_memory_store
from incarnate.store._port import Change, Coordination, Heartbeat, Lease, ListingTables, Load, Store

__all__ = [
    "forget_memory_store",
    "Change",
    "Coordination",
    "Heartbeat",
    "Lease",
    "ListingTables",
    "Load",
    "Store",
    "UnreadableRow",
]

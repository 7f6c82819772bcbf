"""What the SQL adapters share: the listing's and the coordination's table layout, and reading rows back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from incarnate.errors import UnreadableRow
from projections import ListingRow

POSTGRES_FACTORY = "incarnate.store._postgres:Factory"
"""The ``PERSISTENCE_MODULE`` topic of the PostgreSQL factory (importable without ``psycopg``)."""
ROWS_TABLE = "incarnate_listing"
TRACKING_TABLE = "incarnate_listing_tracking"
TRACKING_NAME = "listing"
"""The listing's key in the tracking table."""
HEARTBEATS_TABLE = "incarnate_heartbeats"
LEASES_TABLE = "incarnate_leases"

IN_FLIGHT_SQL = "status IN ('born', 'running', 'parked')"
"""Written identically in the partial index and the queries, so both stores use the index."""
COLUMNS = (
    "id",
    "seq",
    "root",
    "parent",
    "kind",
    "name",
    "status",
    "owner",
    "version",
    "has_snapshot",
    "changed_at",
)
READ_COLUMNS = ", ".join(c for c in COLUMNS if c != "seq")
UPSERT_SET = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS if c not in ("id", "seq"))
"""The columns an upsert of an existing row overwrites (its id and insertion sequence stay)."""
LEASE_COLUMNS = "root, holder, expires_at, attempts, outcome, message"
HEARTBEAT_COLUMNS = 'engine_id, "group", beat_at, expires_at'


def read_row(read: Callable[[Sequence[Any]], ListingRow], values: Sequence[Any]) -> ListingRow:
    """A stored row as a ListingRow; :class:`UnreadableRow` when it does not read back."""
    try:
        return read(values)
    except (ValueError, TypeError, AttributeError) as error:
        raise UnreadableRow(values[0] if values else "?", error) from error


def read_position(value: object) -> int:
    """A stored tracking position; :class:`UnreadableRow` when it is not a whole number."""
    try:
        return int(str(value))
    except (ValueError, TypeError) as error:
        raise UnreadableRow("position", error) from error


def sql_filter(*, in_flight: bool, roots: bool) -> str:
    """The WHERE clause of a listing selection."""
    conditions = [IN_FLIGHT_SQL] if in_flight else []
    if roots:
        conditions.append("parent IS NULL")
    return f" WHERE {' AND '.join(conditions)}" if conditions else ""


RELEASED = ("succeeded", "transient", "failed", "orphan", "error")
"""The outcomes a lease may be released with."""


def check_outcome(outcome: str) -> None:
    """Refuse an outcome that is not one of :data:`RELEASED` (an empty one would mean "still held")."""
    if outcome not in RELEASED:
        raise ValueError(f"lease outcome {outcome!r} is not one of {', '.join(RELEASED)}")

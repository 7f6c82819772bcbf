"""Where a new call tree goes: the live worker of the group with the fewest trees in flight.

Every worker follows the same notification log and reads the same listing,
so each computes the same placement for a batch of new roots, in log
order: a root goes to the member holding the fewest in-flight roots (counted
from the listing, plus the roots placed before it in the batch), ties broken
by a hash of the root and the member's id (rendezvous hashing, so the
choice does not depend on who computes it). A worker takes the roots placed
on it at once and leaves the others to their member; one still unowned
after a grace period is taken by whoever sees it first (its member may have
stopped, or read the log late), so placement only ever delays a root a
little, never strands it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING
from uuid import UUID

if TYPE_CHECKING:
    from incarnate.store import Heartbeat
    from projections import ListingRow


def members(beats: Mapping[str, Heartbeat], group: str, now: float, me: str) -> list[str]:
    """The engines of ``group`` whose heartbeat is live now, and ``me``, sorted."""
    live = {engine for engine, beat in beats.items() if beat.group == group and beat.expires_at > now}
    live.add(me)
    return sorted(live)


def load(rows: Iterable[ListingRow], among: Sequence[str]) -> Counter[str]:
    """How many in-flight roots each of ``among`` owns, from listing rows."""
    wanted = set(among)
    return Counter(row.owner for row in rows if row.parent is None and row.owner in wanted)


def _rank(root: UUID, member: str) -> int:
    digest = hashlib.blake2b(root.bytes + member.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def place(roots: Sequence[UUID], among: Sequence[str], counts: Mapping[str, int]) -> dict[UUID, str]:
    """Each root's member: the one with the fewest trees so far (the batch's earlier roots count)."""
    if not among:
        raise ValueError("placing roots needs at least one member")
    held = {member: counts.get(member, 0) for member in among}
    placed: dict[UUID, str] = {}
    for root in roots:
        chosen = min(among, key=lambda member: (held[member], _rank(root, member)))
        held[chosen] += 1
        placed[root] = chosen
    return placed

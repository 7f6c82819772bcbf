"""How the console slows down a client that keeps sending wrong tokens.

A client (an IP address; an IPv6 client by its /64 network, which one
machine usually holds whole) may send :data:`FREE_FAILURES` wrong tokens in
a row without waiting. Then it must wait :data:`FIRST_WAIT` before it tries
again, and each further wrong token doubles the wait (1 s, 2 s, 4 s … at
most :data:`LONGEST_WAIT`). While it waits every request it sends is
answered 429 with ``Retry-After``, its token unchecked: checking it would
tell a guesser when it guessed right. A right token after
the wait lets it in and clears its count, and so does
:data:`FORGET_AFTER` seconds without a wrong one. At most :data:`CLIENTS_KEPT`
clients are remembered; the one whose last wrong token is oldest goes first.
"""

from __future__ import annotations

import ipaddress
import time
from collections import OrderedDict
from collections.abc import Callable

import attrs

FREE_FAILURES = 5
"""Wrong tokens a client may send in a row before it must wait."""

FIRST_WAIT = 1.0
"""Seconds a client waits after its first wrong token past :data:`FREE_FAILURES`; each next one doubles it."""

LONGEST_WAIT = 300.0
"""The longest a client is shut out after one wrong token."""

FORGET_AFTER = 900.0
"""Seconds without a wrong token after which a client's count starts again."""

CLIENTS_KEPT = 4096
"""How many clients are remembered at most."""


@attrs.frozen
class _Record:
    failures: int
    last: float
    until: float


def client_key(address: str | None) -> str:
    """The key a client is counted under: its IP address, an IPv6 one's /64 network; other text as is."""
    if not address:
        return ""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class Throttle:
    """The wrong-token counts of recent clients and how long each must wait (see the module)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        free: int = FREE_FAILURES,
        first_wait: float = FIRST_WAIT,
        longest_wait: float = LONGEST_WAIT,
        forget_after: float = FORGET_AFTER,
        kept: int = CLIENTS_KEPT,
    ) -> None:
        self.clock = clock
        self.free = free
        self.first_wait = first_wait
        self.longest_wait = longest_wait
        self.forget_after = forget_after
        self.kept = kept
        self._records: OrderedDict[str, _Record] = OrderedDict()

    def __len__(self) -> int:
        return len(self._records)

    def wait(self, client: str) -> float:
        """Seconds ``client`` must still wait before its token is checked again (0 when it need not)."""
        record = self._records.get(client)
        return 0.0 if record is None else max(0.0, record.until - self.clock())

    def failed(self, client: str) -> None:
        """Count a wrong token from ``client``: past the free ones it must wait, longer each time."""
        now = self.clock()
        record = self._records.pop(client, None)
        failures = 1 if record is None or now - record.last > self.forget_after else record.failures + 1
        extra = failures - self.free
        delay = 0.0 if extra < 0 else min(self.longest_wait, self.first_wait * 2.0 ** min(extra, 32))
        self._records[client] = _Record(failures, now, now + delay)
        while len(self._records) > self.kept:
            self._records.popitem(last=False)

    def succeeded(self, client: str) -> None:
        """Forget ``client``'s wrong tokens: it sent the right one."""
        self._records.pop(client, None)

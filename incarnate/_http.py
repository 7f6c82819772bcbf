"""The Basic HTTP event I/O processor, outbound (SCXML Appendix C.2.1): durable, at-least-once posts.

A macrostep that runs a ``<send type="…#BasicHTTPEventProcessor">`` returns
a :class:`~statechart.effects.SendHttp` effect; its ``Stepped`` event puts
the send in the instance's outbox (see ``aggregates.Outbound``), so the
request is in the store before anything is sent. The runner then posts the
oldest outbox entry (:func:`deliver_http`), outside any commit, and commits
``HttpSendSettled`` when it is answered. A crash between the commit and the
answer posts the same request again, with the same ``Idempotency-Key``
(``<instance id>/<step>.<n>``): delivery is at least once, and a receiver
deduplicates by that key. Connection errors and 5xx answers are retried
with a doubling backoff a bounded number of times; a send that still fails
(or gets a 4xx) is given up and the chart hears ``error.communication``.

The request is ``POST`` with ``application/x-www-form-urlencoded`` content:
the event name as ``_scxmleventname``, then the namelist and params as
fields (a string as it is, any other JSON value as JSON text; a list as the
field repeated). A send with content posts the content, percent-encoded, as
the whole body. ``SCXML-Origin`` carries the sender's own location, where a
reply can be posted.
"""

from __future__ import annotations

import http.client
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Literal, Protocol
from urllib.parse import quote, urlencode
from uuid import UUID

import attrs

from aggregates import Instance, Outbound
from incarnate._process import Decision
from incarnate._work import UnitOfWork, Workshop
from incarnate.errors import ConfigurationError
from statechart import Event, JsonValue
from statechart.effects import SendHttp
from statechart.event import EventKind

log = logging.getLogger("incarnate.http")

ORIGIN_HEADER = "SCXML-Origin"
"""The header that carries the sender's own Basic HTTP location (``_event.origin`` at the receiver)."""

IDEMPOTENCY_HEADER = "Idempotency-Key"
"""The header that names one recorded send; the same on every retry and redelivery of it."""

FORM = "application/x-www-form-urlencoded"


@attrs.frozen
class HttpConfig:
    """How an engine speaks the Basic HTTP event I/O processor.

    ``base_url`` is where this deployment's HTTP ingress is reached from
    the senders (``http://127.0.0.1:8765``, or the public URL of a proxy in
    front of it); an instance's location is ``{base_url}/instances/{id}/events``.
    Without it, instances have no ``basichttp`` location (they can still
    post to other URLs). A post is tried ``attempts`` times, waiting
    ``backoff`` seconds after the first failure and twice as long after
    each next one; each try waits at most ``timeout`` seconds for an answer.
    """

    base_url: str | None = None
    attempts: int = 4
    backoff: float = 0.5
    timeout: float = 10.0

    def __attrs_post_init__(self) -> None:
        if self.base_url is not None and not self.base_url.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"the HTTP ingress base URL must start with http:// or https://, got {self.base_url!r}"
            )
        if self.attempts < 1:
            raise ConfigurationError(f"HTTP attempts must be at least 1, got {self.attempts}")
        if self.backoff < 0 or self.timeout <= 0:
            raise ConfigurationError(
                f"HTTP backoff must be >= 0 and timeout > 0 seconds, got {self.backoff} and {self.timeout}"
            )

    def location(self, instance_id: UUID) -> str | None:
        """The Basic HTTP location of an instance (``_ioprocessors['basichttp']['location']``)."""
        if self.base_url is None:
            return None
        return f"{self.base_url.rstrip('/')}/instances/{instance_id}/events"


def _field(value: JsonValue) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def encode(send: SendHttp) -> bytes:
    """The body of a send's request (C.2.1): form fields, or the content percent-encoded."""
    data = send.data
    if send.event is None and data is not None and not isinstance(data, dict):
        return quote(_field(data), safe="").encode("ascii")
    pairs: list[tuple[str, str]] = []
    if send.event is not None:
        pairs.append(("_scxmleventname", send.event))
    if isinstance(data, dict):
        for name, value in data.items():
            values = value if isinstance(value, list) else [value]
            pairs.extend((name, _field(item)) for item in values)
    elif data is not None:  # content beside an event name: the content as one field
        pairs.append(("_scxmlcontent", _field(data)))
    return urlencode(pairs).encode("ascii")


def headers(send: SendHttp, key: str) -> dict[str, str]:
    """The request's headers: the form content type, the idempotency key and the sender's location."""
    found = {"Content-Type": FORM, IDEMPOTENCY_HEADER: key}
    if send.origin is not None:
        found[ORIGIN_HEADER] = send.origin
    return found


@attrs.frozen
class Answer:
    """How one post ended: the status of an answer, or the error that kept it from one."""

    status: int | None
    error: str | None = None

    @property
    def retryable(self) -> bool:
        """A connection error or a 5xx answer may go better on another try; a 4xx will not."""
        return self.status is None or self.status >= 500


Post = Callable[[str, bytes, dict[str, str], float], Answer]
"""Posts ``body`` with ``headers`` to a URL, waiting at most ``timeout`` seconds: the transport."""


def post(url: str, body: bytes, header_map: dict[str, str], timeout: float) -> Answer:
    """POST with the standard library; any answer is an :class:`Answer`, never an exception."""
    request = urllib.request.Request(url, data=body, headers=header_map, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return Answer(response.status)
    except urllib.error.HTTPError as error:
        return Answer(error.code, f"{url} answered {error.code} {error.reason}")
    except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
        reason = getattr(error, "reason", error)
        return Answer(None, f"could not post to {url}: {reason}")


class HttpHost(Workshop, Protocol):
    """What posting an outbox entry and committing its outcome use of the commit path."""

    @property
    def http(self) -> HttpConfig:
        """The engine's Basic HTTP settings."""
        ...

    @property
    def http_post(self) -> Post:
        """The transport (:func:`post`; tests may put another in its place)."""
        ...

    def instance(self, instance_id: UUID, *, fresh: bool = True) -> Instance:
        """A private copy of a stored instance."""
        ...

    def check_holds(self, instance: Instance) -> None:
        """Raise unless this engine owns the instance now."""
        ...

    def commit_along(
        self, uow: UnitOfWork, instance_id: UUID | None, *, along: bool, careful: bool
    ) -> Literal["committed", "conflict", "alone"]:
        """Commit and enact ``uow``, with the next macrostep of ``instance_id`` when it may be taken."""
        ...


def idempotency_key(instance_id: UUID, entry: Outbound) -> str:
    """``<instance id>/<step>.<n>``: names one recorded send, the same on every redelivery."""
    return f"{instance_id}/{entry.key}"


def send_with_retries(config: HttpConfig, transport: Post, entry: Outbound, key: str) -> Answer:
    """Post ``entry`` until it is answered below 500, or ``config.attempts`` tries have failed."""
    body = encode(entry.send)
    header_map = headers(entry.send, key)
    answer = Answer(None, "not tried")
    for attempt in range(config.attempts):
        if attempt:
            time.sleep(config.backoff * 2 ** (attempt - 1))
        answer = transport(entry.send.target, body, header_map, config.timeout)
        if not answer.retryable:
            return answer
        log.info("post %s (%s) failed on try %d: %s", key, entry.send.target, attempt + 1, answer.error)
    return answer


def communication_error(entry: Outbound, reason: str) -> Event:
    """The ``error.communication`` a given-up send raises in its chart (SCXML 6.2, C.2)."""
    send = entry.send
    return Event(
        "error.communication",
        {"target": send.target, "event": send.event, "reason": reason},
        EventKind.PLATFORM,
        send.send_id,
    )


MAX_SETTLE_RETRIES = 20


def deliver_http(host: HttpHost, instance_id: UUID) -> Decision | None:
    """Post the oldest outbox entry of an instance, then commit how it ended.

    The post happens outside any commit. Delivered (2xx/3xx): the entry
    leaves the outbox. Given up: it leaves the outbox and, while the
    instance runs, ``error.communication`` is accepted for it in the same
    commit. If this engine lost the instance meanwhile, nothing is
    committed: the new owner posts the entry again (same key).
    """
    instance = host.instance(instance_id, fresh=False)
    if not instance.record.outbox:
        instance = host.instance(instance_id)
    if not instance.record.outbox:
        return None
    host.check_holds(instance)
    entry = instance.record.outbox[0]
    key = idempotency_key(instance_id, entry)
    answer = send_with_retries(host.http, host.http_post, entry, key)
    failed = answer.status is None or answer.status >= 400
    fresh = False
    for _ in range(MAX_SETTLE_RETRIES):
        uow = UnitOfWork(host, fresh=fresh)
        current = uow.load(instance_id)
        if current is None or not any(e.key == entry.key for e in current.record.outbox):
            return None  # settled by another run of this entry
        uow.fence(current)
        current.settle_http_send(entry.key, status=answer.status, error=answer.error if failed else None)
        if failed and not current.record.status.finished:
            reason = answer.error or f"answered {answer.status}"
            current.accept(communication_error(entry, reason), source=None, sent_at=host.clock.now())
        uow.follow(instance_id)  # more sends, or the error's macrostep
        outcome = host.commit_along(uow, instance_id, along=not fresh, careful=fresh)
        if outcome == "committed":
            if failed:
                log.warning("gave up the post %s to %s: %s", key, entry.send.target, answer.error)
            return Decision("http-failed" if failed else "http-sent", key)
        fresh = True
    return None

"""The Basic HTTP event I/O processor, inbound (SCXML Appendix C.2.2): ``POST …/instances/{id}/events``.

:func:`receive` turns one HTTP request into an event and accepts it durably
for the instance (``Engine.send``: in the store before the answer). It
knows nothing of a web framework: :class:`IngressServer` serves it alone,
with the standard library's threading HTTP server (one route, no
dependency beyond the engine's own); ``incarnate ingress`` runs it over a
store. (The console does not serve it: its rules are a browser's, forms
with a CSRF token from a page it served; a machine's POST carries none.)

What a request may carry:

- a form body (``application/x-www-form-urlencoded``, the default): the
  field ``_scxmleventname`` names the event; every other field becomes
  ``_event.data[name]`` (a repeated field: the list of its values). A value
  that is JSON text is that JSON value (``2`` is the number 2), any other
  text is a string. A body with no ``=`` is a bare value (a sender's
  ``<content>``): it is the data, decoded the same way;
- a JSON body (``application/json``): ``{"name": …, "data": …}``;
- the name as the last path segment (``…/events/{name}``), which wins.

Without a name the event is ``HTTP.POST`` (C.2.2). The event's
``origintype`` is the Basic HTTP processor's URI, its ``origin`` the
``SCXML-Origin`` header when given, and its ``raw`` the request as it
arrived: request line, content type, origin and body (never the
``Authorization`` header). An ``Idempotency-Key`` header makes a repeated
request a no-op (the engine's send key). Answers: 202 with the message's
sequence number (``{"accepted": true, "sequence": n}``; a repeat:
``"sequence": null, "duplicate": true``), 400 for a bad body or name, 404
for an unknown instance, 409 for a finished one, 413 for a body over
:data:`MAX_BODY_BYTES`.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, unquote_plus, urlsplit
from uuid import UUID

import attrs

from incarnate._hosts import HostRule
from incarnate._http import IDEMPOTENCY_HEADER, ORIGIN_HEADER
from incarnate.errors import EngineError, InstanceTerminated, StorageError, UnknownInstance
from statechart import Event, JsonValue
from statechart.event import EventKind
from statechart.model import BASIC_HTTP_PROCESSOR

log = logging.getLogger("incarnate.ingress")

MAX_BODY_BYTES = 1_048_576
"""The largest request body the ingress reads (1 MiB); a larger one is answered 413."""

DEFAULT_NAME = "HTTP.POST"
"""The name of an event whose request names none (SCXML C.2.2: the HTTP method)."""


@attrs.frozen
class Reply:
    """An answer: its status and its JSON body."""

    status: int
    body: dict[str, JsonValue]

    def encoded(self) -> bytes:
        return json.dumps(self.body, ensure_ascii=False).encode("utf-8")


def _value(text: str) -> JsonValue:
    """A field's value: the JSON value its text spells, else the text itself."""
    try:
        value: JsonValue = json.loads(text)
    except ValueError:
        return text
    return value


def _bad(message: str) -> Reply:
    return Reply(400, {"error": "bad-request", "message": message})


def parse(content_type: str, body: bytes, name: str | None) -> tuple[str, JsonValue] | Reply:
    """The event name and data a request carries, or the 400 that says what is wrong with it."""
    kind = content_type.split(";", 1)[0].strip().lower() or "application/x-www-form-urlencoded"
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return _bad("the request body is not UTF-8 text")
    data: JsonValue = None
    if kind == "application/json":
        try:
            message = json.loads(text) if text.strip() else {}
        except ValueError as error:
            return _bad(f"the JSON body does not parse: {error}")
        if not isinstance(message, dict) or set(message) - {"name", "data"}:
            return _bad('a JSON body is an object {"name": "...", "data": ...} with no other keys')
        given = message.get("name")
        if given is not None and not isinstance(given, str):
            return _bad(f"the JSON body's name must be a string, got {given!r}")
        return (name or given or DEFAULT_NAME), message.get("data")
    if kind != "application/x-www-form-urlencoded":
        return _bad(
            f"unsupported content type {kind!r}: post application/x-www-form-urlencoded fields "
            '(_scxmleventname names the event) or application/json {"name": ..., "data": ...}'
        )
    if text and "=" not in text:
        return (name or DEFAULT_NAME), _value(unquote_plus(text))  # a bare value: a sender's content
    fields: dict[str, list[JsonValue]] = {}
    given = None
    try:
        pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text))
    except ValueError as error:
        return _bad(f"the form body does not parse: {error}")
    for field, value in pairs:
        if field == "_scxmleventname":
            given = value
        elif field == "_scxmlcontent":
            data = _value(value)
        else:
            fields.setdefault(field, []).append(_value(value))
    if fields:
        data = {field: values[0] if len(values) == 1 else list(values) for field, values in fields.items()}
    return (name or given or DEFAULT_NAME), data


def raw_request(path: str, content_type: str, origin: str | None, body: bytes) -> str:
    """``_event.raw``: the request as it arrived, credentials left out."""
    lines = [f"POST {path} HTTP/1.1"]
    if content_type:
        lines.append(f"Content-Type: {content_type}")
    if origin:
        lines.append(f"{ORIGIN_HEADER}: {origin}")
    return "\r\n".join(lines) + "\r\n\r\n" + body.decode("utf-8", "replace")


def receive(
    send: Callable[..., int | None],
    instance: str,
    *,
    path: str,
    content_type: str,
    body: bytes,
    name: str | None = None,
    origin: str | None = None,
    key: str | None = None,
) -> Reply:
    """Accept the event one request carries for ``instance`` with ``send`` (``Engine.send``)."""
    try:
        instance_id = UUID(instance)
    except ValueError:
        return Reply(404, {"error": "unknown-instance", "message": f"{instance!r} is not an instance id"})
    parsed = parse(content_type, body, name)
    if isinstance(parsed, Reply):
        return parsed
    event_name, data = parsed
    event = Event(
        event_name,
        data,
        EventKind.EXTERNAL,
        origin=origin or None,
        origin_type=BASIC_HTTP_PROCESSOR,
        raw=raw_request(path, content_type, origin, body),
    )
    try:
        sequence = send(instance_id, event, key=key or None)
    except UnknownInstance:
        return Reply(404, {"error": "unknown-instance", "message": f"no instance {instance_id}"})
    except InstanceTerminated as error:
        return Reply(409, {"error": "instance-terminated", "message": str(error)})
    except StorageError:
        raise
    except EngineError as error:
        return _bad(str(error))
    if sequence is None:
        return Reply(202, {"accepted": True, "sequence": None, "duplicate": True})
    return Reply(202, {"accepted": True, "sequence": sequence})


def split_path(path: str) -> tuple[str, str | None] | None:
    """``(instance, name)`` of ``/instances/{id}/events[/{name}]`` (after any prefix), else None."""
    parts = [unquote(part) for part in urlsplit(path).path.split("/") if part]
    for index in range(len(parts) - 2):
        if parts[index] == "instances" and parts[index + 2] == "events":
            rest = parts[index + 3 :]
            if len(rest) > 1:
                return None
            return parts[index + 1], rest[0] if rest else None
    return None


def _token_refusal(authorization: str | None, token: str) -> Reply | None:
    given = (authorization or "").removeprefix("Bearer ").strip()
    if given and hmac.compare_digest(given.encode(), token.encode()):
        return None
    return Reply(
        401,
        {"error": "token-required", "message": "send the ingress token as 'Authorization: Bearer TOKEN'"},
    )


class IngressServer:
    """The inbound Basic HTTP processor alone: a threading HTTP server for one engine.

    Bound to 127.0.0.1 by default (``port=0``: any free port; see
    :attr:`url`). With ``token`` every request must carry
    ``Authorization: Bearer TOKEN`` (401 otherwise); without one, only
    requests whose ``Host`` is a loopback name, an IP address or the bound
    name are answered (the console's rule against DNS rebinding).
    """

    def __init__(
        self,
        send: Callable[..., int | None],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        allowed_hosts: tuple[str, ...] = (),
    ) -> None:
        self.send = send
        self.token = token
        self.rule = HostRule(host, allowed_hosts)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                reply = server.answer(self)
                body = reply.encoded()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("%s " + format, self.address_string(), *args)

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL the server answers at (``http://HOST:PORT``): the engine's ingress base URL."""
        host, port = self.httpd.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{name}]" if ":" in name else name
        return f"http://{shown}:{port}"

    def answer(self, request: BaseHTTPRequestHandler) -> Reply:
        """The reply to one request (the handler writes it)."""
        headers = request.headers
        if self.token is not None:
            refused = _token_refusal(headers.get("Authorization"), self.token)
            if refused is not None:
                return refused
        else:
            refusal = self.rule.refusal(headers.get("Host"))
            if refusal is not None:
                return Reply(refusal[0], {"error": "forbidden", "message": refusal[1]})
        target = split_path(request.path)
        if target is None:
            return Reply(
                404, {"error": "not-found", "message": "post to /instances/{id}/events or .../events/{name}"}
            )
        length = int(headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            return Reply(413, {"error": "too-large", "message": f"the body is over {MAX_BODY_BYTES} bytes"})
        body = request.rfile.read(length) if length > 0 else b""
        try:
            return receive(
                self.send,
                target[0],
                path=request.path,
                content_type=headers.get("Content-Type", ""),
                body=body,
                name=target[1],
                origin=headers.get(ORIGIN_HEADER),
                key=headers.get(IDEMPOTENCY_HEADER),
            )
        except Exception as error:  # noqa: BLE001 - the sender retries a 5xx later
            log.warning("could not accept a request for %s: %s", target[0], error)
            return Reply(503, {"error": "unavailable", "message": f"could not accept the event: {error}"})

    def start(self) -> IngressServer:
        """Serve on a daemon thread; returns the server."""
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, name="incarnate-ingress", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve on this thread until :meth:`stop` (from another thread) or an interrupt."""
        self.httpd.serve_forever()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> IngressServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

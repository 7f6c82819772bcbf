"""What keeps the console safe to open: the binding rule, the token, CSRF and the response headers.

- :func:`binding_problem` refuses a console on a host other than the
  loopback unless it asks for a token or is read-only; :func:`token_problem`
  refuses a token shorter than :data:`MIN_TOKEN_LENGTH`.
- :class:`Guard`, an ASGI middleware, checks on every request the ``Host``
  of a console without a token (:class:`~incarnate._hosts.HostRule`:
  DNS rebinding) or the token of one with it (``?token=`` once sets an
  HttpOnly SameSite=Strict cookie; or ``Authorization: Bearer``), shutting
  out for a while a client that keeps sending wrong ones
  (:class:`~incarnate.console._throttle.Throttle`). It refuses every POST in
  read-only mode and every POST whose Origin (or Referer) is not this
  console, and sets the security headers, with a fresh nonce per response
  for the one inline script the pages carry.
- :class:`Secrets` holds the per-process secret that CSRF form tokens and
  migration dry-run proofs are derived from; :meth:`Secrets.check_form`
  checks a form's token in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import secrets
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from incarnate._hosts import HostRule, is_loopback
from incarnate.console._throttle import Throttle, client_key

TOKEN_VARIABLE = "INCARNATE_CONSOLE_TOKEN"
"""The environment variable ``incarnate console`` reads a token from when ``--token`` is not given."""

MIN_TOKEN_LENGTH = 16
"""The fewest characters a console token may have."""

MAKE_TOKEN = """python3 -c 'import secrets; print(secrets.token_urlsafe(24))'"""
"""A command that prints a good token (32 characters, 192 random bits)."""

TOKEN_COOKIE = "incarnate_console_token"
CSRF_FIELD = "csrf_token"
"""The name of the hidden field every console form carries."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


REFUSAL_CODES = {
    400: "bad-request",
    401: "token-required",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    421: "host-refused",
    429: "too-many-attempts",
}
"""The code of a refusal that names none, by its HTTP status (``docs/reference/errors.md`` lists them)."""


class Refused(Exception):
    """A request the console will not serve: the status, the message, the code and any headers to answer with.

    Private to the console: it never leaves it, but becomes the answer (see
    :func:`error_answer`). ``code`` is the stable code the answer carries:
    the engine error's a refusal stands for (``unknown-instance``), else
    the one :data:`REFUSAL_CODES` gives its status.
    """

    def __init__(
        self, status: int, message: str, headers: Mapping[str, str] | None = None, *, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})
        self.code = code or REFUSAL_CODES.get(status, "refused")


def wants_json_answer(scope: Scope) -> bool:
    """Whether an error answer should be JSON: the request asked for ``format=json``, or accepts only JSON."""
    query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
    accept = _headers(scope).get("accept", "").split(";", maxsplit=1)[0].strip().lower()
    return ("format", "json") in query or accept == "application/json"


def error_answer(status: int, code: str, message: str, *, as_json: bool) -> tuple[bytes, str]:
    """The body and content type of an error answer: the message and the code, as text or JSON.

    JSON: ``{"error": {"code", "message", "status"}}``; text: the message,
    then a line ``code: CODE``.
    """
    if as_json:
        document = {"error": {"code": code, "message": message, "status": status}}
        return json.dumps(document, ensure_ascii=False).encode(), "application/json"
    return f"{message}\n\ncode: {code}\n".encode(), "text/plain; charset=utf-8"


def token_problem(token: str | None, *, what: str = "console", variable: str = TOKEN_VARIABLE) -> str | None:
    """Why ``token`` may not guard a server (too short to resist guessing); None when it may.

    ``what`` names the server (the console, the ingress), ``variable`` the
    environment variable its command reads the token from.
    """
    if token is None or len(token) >= MIN_TOKEN_LENGTH:
        return None
    return (
        f"the {what} token is {len(token)} characters long; it must have at least {MIN_TOKEN_LENGTH} "
        f"(--token or ${variable}). Make one with: {MAKE_TOKEN}"
    )


def binding_problem(host: str, *, token: str | None, read_only: bool) -> str | None:
    """Why a console may not listen on ``host`` as configured; None when it may."""
    if is_loopback(host) or token or read_only:
        return None
    return (
        f"refusing to serve the console on {host!r}: anyone who reaches that address could change "
        "instances. Pass --token TOKEN (or set INCARNATE_CONSOLE_TOKEN) so that every request must "
        "carry it, or --read-only to offer no actions; or bind --host 127.0.0.1"
    )


class Secrets:
    """The per-process secret and what is derived from it."""

    def __init__(self, token: str | None = None) -> None:
        self.token = token or None
        self._key = secrets.token_bytes(32)

    def _mac(self, *parts: str) -> str:
        message = "\x00".join(parts).encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def csrf_token(self) -> str:
        """The token every form of this process carries (checked by :meth:`check_form`)."""
        return self._mac("csrf")

    def check_form(self, value: object) -> None:
        """Raise :class:`Refused` (403) unless ``value`` is this process's CSRF token."""
        if not isinstance(value, str) or not hmac.compare_digest(value, self.csrf_token()):
            raise Refused(
                403,
                "refused: the form's CSRF token is missing or wrong (the console was restarted, or the "
                "form did not come from this console); reload the page and submit it again",
            )

    def proof(self, *parts: str) -> str:
        """A value only this process can make for ``parts`` (a dry run that was shown)."""
        return self._mac("proof", *parts)

    def check_proof(self, value: object, *parts: str) -> bool:
        """Whether ``value`` is :meth:`proof` of ``parts``."""
        return isinstance(value, str) and hmac.compare_digest(value, self.proof(*parts))

    def token_matches(self, value: str | None) -> bool:
        """Whether ``value`` is the console's token (constant time)."""
        if self.token is None or value is None:
            return False
        return hmac.compare_digest(value.encode(), self.token.encode())


def _headers(scope: Scope) -> dict[str, str]:
    return {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}


def security_headers(nonce: str) -> list[tuple[bytes, bytes]]:
    """The headers on every response: the CSP (inline script only by ``nonce``) and its companions."""
    policy = (
        "default-src 'none'; "
        f"script-src 'nonce-{nonce}'; "
        "style-src 'self'; "
        "img-src 'self' data:; "
        "connect-src 'self'; "
        "form-action 'self'; "
        "frame-ancestors 'none'; "
        "base-uri 'none'"
    )
    return [
        (b"content-security-policy", policy.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", b"DENY"),
        (b"referrer-policy", b"same-origin"),
        (b"cache-control", b"no-store"),
    ]


class Guard:
    """ASGI middleware: the Host or token, read-only and same-origin rules, and the security headers."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        secrets: Secrets,
        read_only: bool,
        hosts: HostRule | None = None,
        throttle: Throttle | None = None,
    ) -> None:
        self.app = app
        self.secrets = secrets
        self.read_only = read_only
        self.hosts = HostRule() if hosts is None else hosts
        self.throttle = Throttle() if throttle is None else throttle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        nonce = secrets.token_urlsafe(16)
        scope.setdefault("state", {})["nonce"] = nonce
        extra = security_headers(nonce)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        try:
            redirect = self._admit(scope)
            if scope["method"] not in ("GET", "HEAD"):
                self._check_post(scope)
        except Refused as refused:
            await _refuse(send_with_headers, refused, as_json=wants_json_answer(scope))
            return
        if redirect is not None:
            await _redirect_with_cookie(send_with_headers, redirect, self.secrets.token or "", scope)
            return
        await self.app(scope, receive, send_with_headers)

    def _admit(self, scope: Scope) -> str | None:
        """Check the Host (no token) or the token; a URL to redirect to when ``?token=`` set the cookie."""
        if self.secrets.token is None:
            # Without a token the Host is all that tells the console's own pages from a page
            # whose name was re-pointed at this machine (DNS rebinding).
            refusal = self.hosts.refusal(_headers(scope).get("host"))
            if refusal is not None:
                raise Refused(*refusal)
            return None
        client = client_key((scope.get("client") or ("", 0))[0])
        wait = self.throttle.wait(client)
        if wait > 0:
            seconds = math.ceil(wait)
            raise Refused(
                429,
                f"refused: too many wrong tokens from {client or 'this client'}; try again in {seconds} "
                "second(s) with the right token (each further wrong one doubles the wait)",
                {"retry-after": str(seconds)},
            )
        try:
            redirect = self._authenticate(scope)
        except Refused as refused:
            if refused.status == 403:  # a token was given, and it was wrong
                self.throttle.failed(client)
            raise
        self.throttle.succeeded(client)
        return redirect

    def _authenticate(self, scope: Scope) -> str | None:
        """Raise :class:`Refused` without the token; a URL to redirect to when ``?token=`` set it."""
        if self.secrets.token is None:
            return None
        headers = _headers(scope)
        authorization = headers.get("authorization", "")
        if authorization.lower().startswith("bearer ") and self.secrets.token_matches(authorization[7:]):
            return None
        cookie = SimpleCookie()
        cookie.load(headers.get("cookie", ""))
        if TOKEN_COOKIE in cookie and self.secrets.token_matches(cookie[TOKEN_COOKIE].value):
            return None
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = [value for key, value in query if key == "token"]
        if given and scope["method"] in ("GET", "HEAD") and self.secrets.token_matches(given[-1]):
            # Take the token out of the address: it would stay in the history and in logs.
            rest = urlencode([(key, value) for key, value in query if key != "token"])
            path = str(scope.get("root_path", "")) + str(scope["path"])
            return path + (f"?{rest}" if rest else "")
        status = 403 if given or authorization or TOKEN_COOKIE in cookie else 401
        raise Refused(
            status,
            "this console needs its token: open it once as /?token=TOKEN (a cookie then keeps it), or send "
            "the header 'Authorization: Bearer TOKEN'",
        )

    def _check_post(self, scope: Scope) -> None:
        if self.read_only:
            raise Refused(
                403, "refused: this console is read-only (started with --read-only); it changes nothing"
            )
        headers = _headers(scope)
        host = headers.get("host", "")
        origin = headers.get("origin") or headers.get("referer")
        if not origin:
            raise Refused(
                403,
                "refused: the request names no Origin or Referer, so it cannot be shown to come from this "
                "console; submit the console's own form from a browser",
            )
        if origin == "null" or urlsplit(origin).netloc.lower() != host.lower():
            raise Refused(
                403,
                f"refused: the request comes from {origin!r}, not from this console ({host!r}); "
                "cross-site requests are not accepted",
            )


async def _refuse(send: Send, refused: Refused, *, as_json: bool) -> None:
    status = refused.status
    body, content_type = error_answer(status, refused.code, refused.message, as_json=as_json)
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    headers += [(key.encode("latin-1"), value.encode("latin-1")) for key, value in refused.headers.items()]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="incarnate console"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _redirect_with_cookie(send: Send, location: str, token: str, scope: Scope) -> None:
    cookie = SimpleCookie()
    cookie[TOKEN_COOKIE] = token
    morsel = cookie[TOKEN_COOKIE]
    morsel["httponly"] = True
    morsel["samesite"] = "Strict"
    morsel["path"] = "/"
    if scope.get("scheme") == "https":
        morsel["secure"] = True
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", location.encode("latin-1")),
                (b"set-cookie", morsel.OutputString().encode("latin-1")),
                (b"content-length", b"0"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})

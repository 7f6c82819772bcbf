"""Which ``Host`` a server without a token answers to (the console, the HTTP ingress): against DNS rebinding.

A web page the operator visits can point its own name at 127.0.0.1 (or at
the console's address on the operator's network) after the page loads; the
browser then lets that page read the console and submit its forms, since
they now share the page's origin. Every such request names the page's host
in its ``Host`` header, so a console without a token answers only to:

- the loopback names ``localhost``, 127.0.0.0/8 and ``[::1]``;
- any IP address (a page's name can be re-pointed; an address it cannot
  own, so a page served from an address is the console itself);
- the name the console was bound to (``--host NAME``);
- every name passed with ``--allow-host NAME`` (``allowed_hosts`` of
  :func:`~incarnate.console.create_app`): the console's own name, behind a
  reverse proxy say. ``NAME:PORT`` allows that port only, ``NAME`` any port.

Each with or without a port. A console with a token answers to any Host: a
re-pointed page carries neither the token nor its cookie, which the browser
keeps for the console's own name (see :class:`~incarnate.console._security.Guard`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from incarnate.errors import ConfigurationError

WILDCARDS = frozenset({"", "0.0.0.0", "::"})
"""Bind addresses that listen on every interface of the machine."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def split_host(value: str) -> tuple[str, int | None] | None:
    """The name (lower case, IPv6 without brackets) and port of a ``Host`` value; None when malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        name, rest = (value[1:end], value[end + 1 :]) if end > 0 else ("", "")
        if not _is_address(name) or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:] if rest else None
    else:
        name, colon, port_text_or_empty = value.partition(":")
        port_text = port_text_or_empty if colon else None
    name = name.rstrip(".")
    if not name or any(c in name for c in "/@?#\\ "):
        return None
    if port_text is None:
        return name, None
    if not (port_text.isascii() and port_text.isdigit()) or int(port_text) > 65535:
        return None
    return name, int(port_text)


def allowed_host(entry: str) -> tuple[str, int | None]:
    """An ``--allow-host`` entry as a name and an optional port; :class:`ConfigurationError` if not one."""
    parsed = split_host(entry)
    if parsed is None:
        raise ConfigurationError(
            f"--allow-host takes a host name, with or without :PORT, as the browser's address shows it "
            f"(console.example.com or console.example.com:8443), got {entry!r}"
        )
    return parsed


class HostRule:
    """The ``Host`` values a console without a token answers to (see the module's documentation)."""

    def __init__(self, bound: str = "127.0.0.1", allowed: Iterable[str] = ()) -> None:
        name = bound.strip().strip("[]").lower().rstrip(".")
        self.bound = None if name in WILDCARDS else name
        self.allowed = frozenset(allowed_host(entry) for entry in allowed)

    def allows(self, name: str, port: int | None) -> bool:
        """Whether a request naming host ``name`` (and ``port``) is answered."""
        if is_loopback(name) or _is_address(name) or name == self.bound:
            return True
        return (name, None) in self.allowed or (name, port) in self.allowed

    def refusal(self, header: str | None) -> tuple[int, str] | None:
        """The status and message refusing a request whose ``Host`` header is ``header``; None to answer."""
        parsed = None if header is None else split_host(header)
        if parsed is None:
            return 400, (
                f"refused: the request's Host header ({header!r}) is missing or not a host name with an "
                "optional :PORT; send the name the console is opened by"
            )
        name, port = parsed
        if self.allows(name, port):
            return None
        return 421, (
            f"refused: this console does not answer to the Host {header!r}: a web page could have "
            "pointed that name at this machine to read the console. Open the console as localhost or "
            f"by its IP address; if {name!r} is the console's own name (behind a reverse proxy, say), "
            f"start it with --allow-host {name} (allowed_hosts=[{name!r}] for create_app) or with "
            "a token (--token)"
        )

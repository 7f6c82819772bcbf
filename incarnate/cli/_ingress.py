"""``incarnate ingress``: accept events over HTTP for the instances of a store (SCXML's Basic HTTP processor).

It serves :class:`~incarnate.IngressServer` over one engine that runs
nothing (an :class:`~incarnate._runners.Idle` runner, as the console's):
each request is accepted durably (``Engine.send``, in the store before the
answer) and a worker runs the instance. It binds 127.0.0.1 by default and
refuses any other address without a token (``--token`` or
``INCARNATE_INGRESS_TOKEN``, 16 characters or more), which every request
must then carry as ``Authorization: Bearer TOKEN``. It binds its port before
it says it serves, so a port in use is one error line (exit status 2).
"""

from __future__ import annotations

import errno
import signal
import threading
from types import FrameType

import click

from incarnate._hosts import allowed_host, is_loopback
from incarnate._ingress import IngressServer
from incarnate._runners import Idle
from incarnate.cli._common import redact
from incarnate.cli._store import DB_HELP, StoreOptions, listen_options, opened
from incarnate.console._security import token_problem
from incarnate.errors import CommandError, ConfigurationError

TOKEN_VARIABLE = "INCARNATE_INGRESS_TOKEN"
"""The environment variable ``incarnate ingress`` reads its token from when ``--token`` is not given."""


def _problem(host: str, token: str | None) -> str | None:
    problem = token_problem(token, what="ingress", variable=TOKEN_VARIABLE)
    if problem is not None:
        return problem
    if token is None and not is_loopback(host):
        return (
            f"refusing to accept events on {host!r} without a token: anyone who reaches that address "
            f"could send events to any instance. Pass --token TOKEN (or set {TOKEN_VARIABLE}), or bind "
            "--host 127.0.0.1 (behind a reverse proxy)"
        )
    return None


@click.command(
    "ingress",
    short_help="Accept events over HTTP (POST /instances/ID/events).",
)
@click.option("--db", metavar="PATH_OR_URL", help=DB_HELP)
@listen_options(port=8081, guard="--token", names="the ingress's name behind a reverse proxy")
@click.option(
    "--token",
    envvar=TOKEN_VARIABLE,
    metavar="TOKEN",
    help=f"require 'Authorization: Bearer TOKEN' (16 characters or more) on every request "
    f"(default: ${TOKEN_VARIABLE})",
)
@click.option(
    "--charts",
    metavar="MODULE:ATTR",
    help="import path of the charts the instances were started with (optional)",
)
def ingress(
    db: str | None,
    host: str,
    port: int,
    token: str | None,
    allow_hosts: tuple[str, ...],
    charts: str | None,
) -> int:
    """Accept events over HTTP for the store's instances until SIGTERM or SIGINT.

    POST /instances/ID/events with a form (the field _scxmleventname names
    the event, the others are its data) or a JSON body {"name", "data"}, or
    POST /instances/ID/events/NAME. Answers 202 with the accepted message's
    sequence number; 400, 404 or 409 with a JSON error saying why. Start the
    workers with the same base URL (HttpConfig) so that each instance's
    _ioprocessors['basichttp']['location'] points here.
    """
    problem = _problem(host, token)
    if problem is not None:
        raise CommandError(problem)
    try:
        for entry in allow_hosts:
            allowed_host(entry)
    except ConfigurationError as err:
        raise CommandError(str(err)) from err
    with opened(StoreOptions(db, charts), runner=Idle()) as engine:
        try:
            server = IngressServer(engine.send, host=host, port=port, token=token, allowed_hosts=allow_hosts)
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise CommandError(
                    f"cannot accept events on {host}:{port}: the port is in use; choose another with "
                    "--port PORT, or stop what holds it"
                ) from err
            raise CommandError(
                f"cannot accept events on {host}:{port}: {err.strerror or err}; check --host (an address "
                "of this machine) and --port"
            ) from err
        guard = "token required" if token else "no token"
        click.echo(
            f"incarnate ingress on {server.url}/instances/ID/events over "
            f"{redact(engine.storage.describe())} ({guard})",
            err=True,
        )
        stopping = threading.Event()

        def stop(number: int, frame: FrameType | None) -> None:
            stopping.set()

        previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        server.start()
        try:
            stopping.wait()
        finally:
            server.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    click.echo("incarnate ingress stopped", err=True)
    return 0

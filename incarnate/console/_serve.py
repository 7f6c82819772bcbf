"""``incarnate console``: serve the operator's web console over a store with uvicorn.

The console binds 127.0.0.1 by default. It refuses any other host unless
every request must carry a token (``--token``, or ``INCARNATE_CONSOLE_TOKEN``,
of at least 16 characters) or it is read-only (``--read-only``), and says so
naming both fixes. Without a token it answers only to the ``Host`` names
:class:`~incarnate._hosts.HostRule` accepts, and those given with
``--allow-host``. It binds its port before it says it serves, so a port
in use is one error line (exit status 2), not a server that fails to start.
"""

from __future__ import annotations

import errno
import socket

import click

from incarnate._hosts import allowed_host
from incarnate.cli._common import redact
from incarnate.cli._store import DB_HELP, StoreOptions, listen_options, opened
from incarnate.console._security import TOKEN_VARIABLE, binding_problem, token_problem
from incarnate.errors import CommandError, CommandFailed, ConfigurationError


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host`` and ``port`` for the server; :class:`CommandError` when it cannot be."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as err:
        raise CommandError(
            f"cannot serve the console on {host!r}: it is not an address or a name of this machine "
            f"({err.strerror}); pass --host 127.0.0.1, or an address of this machine"
        ) from err
    sock = socket.socket(family, kind, proto)
    try:
        # As uvicorn does: a port whose last connections are closing may be reused; one in use may not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise CommandError(
                f"cannot serve the console on {_address(host, port)}: port {port} is in use (another "
                "console or server holds it); choose another with --port PORT, or stop what holds it"
            ) from err
        raise CommandError(
            f"cannot serve the console on {_address(host, port)}: {err.strerror or err}; check --host "
            "(an address of this machine) and --port (1024 or more unless run as root)"
        ) from err
    return sock


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@click.command(
    "console",
    help="Serve the operator's web console: instances, call trees, timelines, diagrams and actions.",
)
@click.option("--db", metavar="PATH_OR_URL", help=DB_HELP)
@listen_options(port=8080, guard="--token or --read-only", names="the console's name behind a reverse proxy")
@click.option(
    "--token",
    envvar=TOKEN_VARIABLE,
    metavar="TOKEN",
    help=f"require this token (16 characters or more) on every request (default: ${TOKEN_VARIABLE}); "
    "open /?token=TOKEN once",
)
@click.option("--read-only", is_flag=True, help="offer no actions; refuse every POST")
@click.option(
    "--charts",
    metavar="MODULE:ATTR",
    help="import path of the charts the instances were started with (optional: without them the "
    "console draws the shapes the store recorded and shows no decoded ResumePlan)",
)
def command(
    db: str | None,
    host: str,
    port: int,
    token: str | None,
    read_only: bool,
    allow_hosts: tuple[str, ...],
    charts: str | None,
) -> None:
    """Serve the console until interrupted."""
    problem = token_problem(token) or binding_problem(host, token=token, read_only=read_only)
    if problem is not None:
        raise CommandError(problem)
    try:
        for entry in allow_hosts:
            allowed_host(entry)
    except ConfigurationError as err:
        raise CommandError(str(err)) from err
    try:
        import uvicorn

        from incarnate._runners import Idle
        from incarnate.console._app import create_app
    except ImportError as err:
        raise CommandError(
            f"the console needs its web libraries ({err.name or err} is not installed); install them "
            "with pip install 'incarnate[console]'"
        ) from err

    # Open the store once first, as every command does: a missing file, an unreachable server
    # or charts that do not load are reported now, in one line, not by the server's startup.
    with opened(StoreOptions(db, charts), runner=Idle()) as engine:
        storage, loaded = engine.storage, list(engine.charts.values())
    app = create_app(
        storage, charts=loaded, read_only=read_only, token=token, host=host, allowed_hosts=allow_hosts
    )
    sock = listen(host, port)
    with sock:
        mode = "read-only" if read_only else "actions enabled"
        guard = "token required" if token else "no token"
        where = _address(host, sock.getsockname()[1])  # the port the system chose for --port 0
        click.echo(
            f"incarnate console on http://{where}/ over {redact(storage.describe())} ({mode}, {guard})",
            err=True,
        )
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", server_header=False))
        server.run(sockets=[sock])
    if not server.started:
        raise CommandFailed("the console's server did not start; its log above says why")

"""What the benchmarks share: the PostgreSQL test server, the environment line, rounds and tables."""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import os
import platform
import statistics
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from statechart import Event

if TYPE_CHECKING:
    import psycopg

    from incarnate import Storage

T = TypeVar("T")

POSTGRES_HOST = "127.0.0.1"
POSTGRES_PORT = 5432
POSTGRES_DBNAME = "test"
POSTGRES_USERS = ("postgres", "root")
"""Tried in this order; the server is expected to trust local connections."""

STORES = ("sqlite", "postgres")
"""The stores a durable bench can run on, in the order they are measured."""

POSTGRES_HINT = "install the postgres extra: pip install -e '.[postgres]'"

TEMPORARY_PREFIX = "incarnate-bench-"
"""Prefix of the temporary directory that holds the SQLite files."""


# ---------------------------------------------------------------- counter


@attrs.frozen
class Tally:
    """The context of the benches' counter charts: a count and a short string."""

    count: int = 0
    note: str = "tick"


def count(tally: Tally, event: Event) -> Tally:
    """One more tick."""
    return attrs.evolve(tally, count=tally.count + 1)


# ------------------------------------------------------------ PostgreSQL


def postgres_available() -> bool:
    """Whether the PostgreSQL driver is installed."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return False
    return True


def missing_driver(stores: Sequence[str]) -> bool:
    """Whether ``stores`` need PostgreSQL and its driver is missing; if so, say how to install it."""
    if "postgres" in stores and not postgres_available():
        print(f"missing: psycopg; {POSTGRES_HINT} (or run with --store sqlite)", file=sys.stderr)
        return True
    return False


class Postgres:
    """An open connection to the test database, and the schemas created through it."""

    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self.connection = connection
        self.user: str = connection.info.user
        self.schemas: list[str] = []
        """Created so far, dropped when the connection closes."""

    def describe(self) -> str:
        """The server's version and address, as ``PostgreSQL 16.4, user@host:port/database``."""
        server = self.connection.info.server_version
        return (
            f"PostgreSQL {server // 10000}.{server % 10000}, {self.user}@{POSTGRES_HOST}:"
            f"{POSTGRES_PORT}/{POSTGRES_DBNAME}"
        )

    def create_schema(self, schema: str) -> None:
        """Create ``schema``, dropped with the connection."""
        from psycopg import sql

        self.connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        self.schemas.append(schema)

    def fresh(self, schema: str) -> Storage:
        """Create ``schema`` (dropped with the connection) and return the storage that uses it."""
        from incarnate import Storage

        self.create_schema(schema)
        return Storage.postgres(
            POSTGRES_DBNAME, host=POSTGRES_HOST, port=POSTGRES_PORT, user=self.user, schema=schema
        )

    def drop_tables(self, schema: str, tables: Iterable[str]) -> None:
        """Drop each of ``tables`` from ``schema`` where it exists."""
        from psycopg import sql

        for table in tables:
            name = sql.Identifier(schema, table)
            self.connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(name))


def connect_postgres() -> psycopg.Connection[Any] | None:
    """A connection to the test database as the first user it accepts; None, said why, when unreachable."""
    import psycopg

    problems = []
    for user in POSTGRES_USERS:
        try:
            return psycopg.connect(
                host=POSTGRES_HOST,
                port=POSTGRES_PORT,
                dbname=POSTGRES_DBNAME,
                user=user,
                connect_timeout=3,
                autocommit=True,
            )
        except psycopg.OperationalError as error:
            problems.append(f"{user}: {str(error).strip().splitlines()[0]}")
    print(
        f"note: PostgreSQL at {POSTGRES_HOST}:{POSTGRES_PORT}/{POSTGRES_DBNAME} is unreachable "
        f"({'; '.join(problems)}); its rows are skipped\n"
    )
    return None


@contextlib.contextmanager
def open_postgres() -> Iterator[Postgres | None]:
    """The test database, every schema created in it dropped afterwards; None when unreachable."""
    from psycopg import sql

    connection = connect_postgres()
    if connection is None:
        yield None
        return
    postgres = Postgres(connection)
    with connection:
        try:
            yield postgres
        finally:
            for schema in postgres.schemas:
                connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


# ------------------------------------------------------------ run set-up


def add_timing(parser: argparse.ArgumentParser, *, rounds: int, seconds: float, per: str) -> None:
    """The options ``--rounds`` and ``--seconds`` (the time each ``per`` runs in a round), with defaults."""
    parser.add_argument("--rounds", type=int, default=rounds, help=f"interleaved rounds (default {rounds})")
    parser.add_argument(
        "--seconds", type=float, default=seconds, help=f"seconds per {per} per round (default {seconds:g})"
    )


def add_choice(parser: argparse.ArgumentParser, name: str, choices: Iterable[str]) -> None:
    """The option ``--name``: one of ``choices``, or ``all`` (the default); see :func:`selected`."""
    parser.add_argument(
        f"--{name}", choices=[*choices, "all"], default="all", help=f"which {name} (default all)"
    )


def selected(choice: str, choices: Iterable[str]) -> list[str]:
    """Every one of ``choices`` when ``choice`` is ``all``, else ``choice`` alone."""
    return list(choices) if choice == "all" else [choice]


def version(distribution: str) -> str:
    """The installed version of a distribution, or ``?``."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def print_environment(distributions: Iterable[str]) -> None:
    """The Python version and machine, then the version of each distribution."""
    print(
        f"Python {platform.python_version()} on {platform.machine()}; "
        + ", ".join(f"{distribution} {version(distribution)}" for distribution in distributions)
    )


def rotated(items: Sequence[T], turn: int) -> list[T]:
    """``items`` started ``turn`` places further along, so that no item always comes first."""
    shift = turn % len(items)
    return [*items[shift:], *items[:shift]]


# ---------------------------------------------------------------- tables


def spread(values: Sequence[float]) -> float:
    """``(max - min) / median``: how far apart the rounds are, relative to their median."""
    return (max(values) - min(values)) / statistics.median(values)


@attrs.frozen
class Comparison:
    """One series of per-round rates against another, as the ratio tables show it."""

    measured: float
    """Median over median."""
    rounds: str
    """The range of the per-round ratios, as ``0.91-1.12x``."""
    wanted: str
    """The target, as ``>= 3x``, or ``-`` without one."""
    verdict: str
    """``met``, ``not met``, or ``-`` without a target."""


def compare(top: Sequence[float], bottom: Sequence[float], target: float | None) -> Comparison:
    """The median of ``top`` over the median of ``bottom``, per round too, against ``target``.

    The two series of a ratio run back to back in each round, so the range
    of the per-round ratios shows how much of the difference noise could explain.
    """
    measured = statistics.median(top) / statistics.median(bottom)
    per_round = [a / b for a, b in zip(top, bottom, strict=True)]
    rounds = f"{min(per_round):.2f}-{max(per_round):.2f}x"
    if target is None:
        return Comparison(measured, rounds, "-", "-")
    verdict = "met" if measured >= target else "not met"
    return Comparison(measured, rounds, f">= {target:g}x", verdict)


def print_table(
    header: str,
    results: Mapping[str, T],
    rows: Callable[[T], Iterable[str]],
    *,
    key: str = "store",
    width: int = 9,
) -> None:
    """A table whose first column, ``width`` characters wide and titled ``key``, names a key of ``results``.

    ``header`` titles the other columns; ``rows`` turns the result of one key
    into its rows, each printed after the key.
    """
    print(f"{key:<{width}} {header}")
    for name, result in results.items():
        for row in rows(result):
            print(f"{name:<{width}} {row}")


def print_tables(
    results: Mapping[str, T],
    tables: Sequence[tuple[str, Callable[[T], Iterable[str]]]],
    *,
    key: str = "store",
    width: int = 9,
) -> None:
    """Each of ``tables``, a header and its rows (see :func:`print_table`), a blank line between two."""
    for n, (header, rows) in enumerate(tables):
        if n:
            print()
        print_table(header, results, rows, key=key, width=width)


def server_cpu(name: str = "postgres") -> dict[int, int] | None:
    """CPU used so far (user and system, in clock ticks) by each of this host's processes called ``name``.

    Read from Linux's ``/proc``; None where it cannot tell (another OS, or
    no such process visible: a remote server, another user's processes
    hidden). See :func:`cpu_seconds_between`.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    used: dict[int, int] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue  # gone since listed, or not ours to read
        command, _, rest = text.rpartition(")")
        if command.partition("(")[2] != name:
            continue
        fields = rest.split()
        used[int(entry.name)] = int(fields[11]) + int(fields[12])  # utime and stime, after the state
    return used or None


def process_cpu(pid: int) -> float | None:
    """The CPU seconds (user and system, every thread) process ``pid`` has used so far; None if unknown.

    Read from Linux's ``/proc``, in clock ticks (10 ms on most systems).
    """
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None  # another OS, or the process is gone
    fields = text.rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds_between(before: dict[int, int] | None, after: dict[int, int] | None) -> float | None:
    """The CPU seconds :func:`server_cpu` readings show spent between them.

    A process present at both readings counts its growth, one started
    since counts all it used; one that ended between them is not seen (a
    server's sessions outlive a measurement, so it is little).
    """
    if before is None or after is None:
        return None
    ticks = sum(used - before.get(pid, 0) for pid, used in after.items() if used >= before.get(pid, 0))
    return ticks / os.sysconf("SC_CLK_TCK")


CPU_LATENCY_FILE = "/dev/cpu_dma_latency"
"""Linux's PM QoS request for the CPUs' wake-up latency (root only)."""


@contextlib.contextmanager
def cpu_latency_zero(wanted: bool) -> Iterator[str | None]:
    """While open, ask Linux to keep every CPU awake (no idle state with a wake-up latency); yields why not.

    Writing 0 to ``/dev/cpu_dma_latency`` and keeping it open makes idle
    CPUs poll instead of halting, so a thread that slept a few hundred
    microseconds on a socket resumes on a warm CPU; the request ends when
    the file is closed. Yields None when the request holds (or was not
    ``wanted``), else the reason it could not be made.
    """
    if not wanted:
        yield None
        return
    try:
        descriptor = os.open(CPU_LATENCY_FILE, os.O_WRONLY)
    except OSError as error:
        yield f"cannot open {CPU_LATENCY_FILE} ({error.strerror}; it needs root on Linux)"
        return
    try:
        os.write(descriptor, (0).to_bytes(4, sys.byteorder, signed=True))
        yield None
    finally:
        os.close(descriptor)

"""``incarnate workers``: every engine of a store, its heartbeat, leadership, trees and load.

It reads the store through the fleet's read model (:mod:`incarnate._fleet`)
and prints a table or, with ``--json``, that model's JSON document, whose
keys ``docs/reference/cli.md`` documents.
"""

from __future__ import annotations

import click

from incarnate import _fleet
from incarnate.cli._output import emit_json, note, out, table
from incarnate.cli._store import DB_HELP, StoreOptions, json_option, opened

HEADERS = ("ENGINE", "GROUP", "STATE", "LEADER", "LAST BEAT", "TREES", "RUNNING", "QUEUED", "LAG")


def ago(seconds: float | None) -> str:
    """An age as a table shows it: ``4.2s``, ``12m``, ``3h``, ``2d`` ago; ``-`` for none."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s ago"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    raise AssertionError("unreachable")  # pragma: no cover


def _leader(row: _fleet.EngineRow) -> str:
    return "?" if row.leader is None else "yes" if row.leader else "-"


def _cells(row: _fleet.EngineRow) -> tuple[str, ...]:
    """A row of the table: ``?`` where the engine reported no load, ``-`` where it never beat."""
    load = row.load
    if load is None:
        running = queued = lag = "-" if row.state == _fleet.ABSENT else "?"
    else:
        running, queued = str(load.running), str(load.queued)
        lag = f"{load.lag:.1f}s" + (f" ({load.behind} behind)" if load.behind else "")
    return (
        row.engine_id,
        row.group or "-",
        row.state,
        _leader(row),
        ago(row.heartbeat_age),
        str(row.trees),
        running,
        queued,
        lag,
    )


@click.command(short_help="List the store's engines: heartbeat, leader, trees owned and load.")
@click.option("--group", metavar="G", help="list the engines of this engine group only")
@click.option(
    "--all",
    "everyone",
    is_flag=True,
    help="list too the lapsed and retired engines that own nothing and last beat over an hour ago",
)
@json_option
@click.option("--db", metavar="PATH_OR_URL", help=DB_HELP)
def workers(group: str | None, everyone: bool, as_json: bool, db: str | None) -> int:
    """List every engine (worker) of the store, one row each.

    A row gives the engine's group; its state (live, lapsed, retired, or
    absent: it owns trees but never beat); how long ago it last beat, by
    the store's clock; whether it leads its group's recovery; the in-flight
    roots it owns; and the load it reported with its last beat: units of
    work running and queued, and its follower's lag behind the store's log.
    """
    with opened(StoreOptions(db)) as engine:
        read = _fleet.fleet(engine, group=group, everyone=everyone)
        where = engine.storage.describe()
    if as_json:
        emit_json(read.to_json())
        return 0
    if not read.rows:
        out(f"no engines{f' of group {group!r}' if group else ''} in {where}")
    else:
        table(HEADERS, [_cells(row) for row in read.rows])
    if read.left_off:
        note(
            f"{read.left_off} lapsed or retired engine(s) that own nothing and last beat over an hour ago "
            "left out: pass --all to list them"
        )
    return 0

"""``incarnate demo``: an order that survives the death of its process.

An order chart fans out to one packing child per item and, in parallel,
charges the customer through a task whose first attempt fails and is
retried; then it waits at a human gate for approval. The demo runs it in a
child OS process, kills that process with SIGKILL mid-flight, and lets a
fresh engine over the same SQLite file recover the exact incarnations and
finish the order.

The demo runs on a file of its own (:data:`DEFAULT_DB`), never on the
default store of the other commands, and it never destroys a store it did
not create: it replaces an existing file only when :func:`demo_store_problem`
proves the file holds nothing but an earlier demo's records.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import attrs

from aggregates import ChartVersion, Instance, InstanceStatus, Ref
from incarnate._engine import Engine
from incarnate._runners import ThreadedRunner
from incarnate._storage import Storage
from incarnate._tasks import TaskCall
from incarnate._work import UnitOfWork
from incarnate.errors import CommandError
from incarnate.store._sql import HEARTBEATS_TABLE, LEASES_TABLE, ROWS_TABLE, TRACKING_TABLE
from projections import TreeNode, call_tree, render_timeline, render_tree, timeline
from statechart import (
    Chart,
    Event,
    JsonValue,
    RetryPolicy,
    after,
    assign,
    final,
    in_state,
    invoke,
    parallel,
    state,
    transition,
)

ORDER_ID = UUID("0d3e0000-0000-4000-8000-00000000d3e0")
KILL_MARK = "KILL-POINT"
DEFAULT_DB = "incarnate-demo.db"
"""The demo's own default file: not ``incarnate.db``, the default store of every other command."""


@attrs.frozen
class Order:
    """The order being fulfilled."""

    items: tuple[str, ...] = ("teapot", "cups", "kettle")
    packed: tuple[str, ...] = ()
    receipt: str = ""


def _packed(order: Order, event: Event) -> Order:
    data = event.data if isinstance(event.data, dict) else {}
    return attrs.evolve(order, packed=tuple(sorted(str(v) for v in data.values())))


def _members(order: Order) -> dict[str, JsonValue]:
    return {item: {"item": item} for item in order.items}


def _receipt(order: Order, event: Event) -> Order:
    return attrs.evolve(order, receipt=str(event.data))


ORDER = Chart(
    "order",
    parallel(
        "fulfilment",
        state(
            "packing",
            state(
                "packing_items",
                invoke=[invoke("pack", chart="packer", map=_members)],
                on=[transition("done.invoke.pack", "packed", actions=[assign(_packed)])],
            ),
            final("packed"),
        ),
        state(
            "payment",
            state(
                "charging",
                invoke=[
                    invoke(
                        "charge",
                        task="charge_card",
                        input=lambda o: {"amount": 10 * len(o.items)},
                        output=_receipt,
                        retry=RetryPolicy(max_attempts=3, backoff=1.0),
                    )
                ],
                on=[transition("done.invoke.charge", "paid"), transition("error.invoke.charge", "declined")],
            ),
            final("paid"),
            final("declined"),
        ),
        on=[
            transition("done.state.fulfilment", "awaiting_approval", guard=in_state("paid")),
            transition("done.state.fulfilment", "rejected"),
        ],
    ),
    state("awaiting_approval", on=[transition("approve", "shipped"), transition("reject", "rejected")]),
    final("shipped", done_data=lambda o, e: {"packed": list(o.packed), "receipt": o.receipt}),
    final("rejected"),
    context=Order,
    description="An order: pack every item and charge the card in parallel, then wait for approval.",
)


@attrs.frozen
class Parcel:
    """What a packer packs."""

    item: str = ""


PACKER = Chart(
    "packer",
    state("packing", on=[after(2.0, "packed")]),
    final("packed", done_data=lambda p, e: p.item),
    context=Parcel,
)


def charge_card(call: TaskCall) -> str:
    """Charge the card: the first attempt of every order is declined by the bank."""
    if call.attempt == 1:
        raise RuntimeError("the bank declined the first attempt")
    amount = call.input["amount"] if isinstance(call.input, dict) else 0
    return f"receipt {amount} EUR ({call.idempotency_key.rsplit('/', 1)[-1]})"


CHARTS: list[Chart[Any]] = [ORDER, PACKER]
TASKS = {"charge_card": charge_card}


def build_engine(db: str, *, workers: int = 2) -> Engine:
    """An engine for the demo over the SQLite file ``db`` with a threaded runner."""
    return Engine(CHARTS, TASKS, storage=Storage.sqlite(db), runner=ThreadedRunner(workers))


# ------------------------------------------------------------------ worker


WORKER_LEASE = 2.0
"""Seconds the demo's worker stays live after its last heartbeat (30 s for real engines)."""


def worker(db: str) -> int:
    """Run the order until a retry is scheduled, announce the kill point, and keep working."""
    engine = build_engine(db)
    # An engine that runs work is live while its heartbeat lasts, and nobody takes its trees
    # meanwhile; a short lease keeps the wait after the kill short.
    engine.parts.heartbeat.configure(group="default", lease=WORKER_LEASE)
    engine.parts.heartbeat.beat()
    pending: dict[int, list[str]] = {}
    writing = threading.Lock()

    def hook(point: str, uow: UnitOfWork) -> None:
        if point == "before-commit":
            pending[id(uow)] = [
                f"{i.record.name}:{type(e).__name__}" for i in uow.pending() for e in i.pending_events
            ]
        elif point == "after-commit":
            names = pending.pop(id(uow), [])
            text = "commit " + " ".join(names) + "\n"
            if any(name.endswith("ChildRetry") for name in names):
                text += KILL_MARK + "\n"
            # Threads commit concurrently: each commit's lines are written whole, or two of them
            # interleave (a line without its end) and the demo misses the kill point.
            with writing:
                sys.stdout.write(text)
                sys.stdout.flush()

    engine.parts.commits.hooks.append(hook)
    engine.start("order", id=ORDER_ID)
    assert isinstance(engine.runner, ThreadedRunner)
    engine.runner.start()
    time.sleep(60)  # the demo kills this process long before
    return 0


# ------------------------------------------------------- the demo's store

_SQLITE_HEADER = b"SQLite format 3\x00"
_EVENT_TABLES = ("stored_events", "stored_snapshots", "snapshots")
"""The tables of the library's SQLite recorders whose rows name an aggregate."""
_MAX_GENERATION = 1000
"""Generations of the order's child slots recognised as the demo's (one run uses fewer than 10)."""


def _demo_ids() -> set[UUID]:
    """Every id a demo record can have: the order, its possible children, the demo's chart versions."""
    slots = [("pack", item) for item in Order().items] + [("charge", "")]
    children = {
        Ref(ORDER_ID, site, key, generation).child_id
        for site, key in slots
        for generation in range(1, _MAX_GENERATION + 1)
    }
    versions = {ChartVersion.id_for(chart.name, chart.fingerprint) for chart in CHARTS}
    return {ORDER_ID} | children | versions


def demo_store_problem(db: str) -> str | None:
    """Why the file ``db`` may not be replaced by the demo, or None when it may.

    It may be replaced when it does not exist, is empty, or is a SQLite store
    whose every record belongs to the demo: the order (:data:`ORDER_ID`), a
    child in one of the order's slots (their ids derive from the order's id,
    the site, the member key and the generation), or the registration of one
    of the demo's charts. Anything that cannot be proved so is a problem: the
    file is only read, never changed (a database with a write-ahead log is
    read from a temporary copy, so that not even a lock file appears beside
    it).
    """
    path = Path(db)
    if not path.exists():
        return None
    if path.is_dir():
        return "it is a directory"
    if not path.is_file():
        return "it is not a regular file"
    try:
        with path.open("rb") as file:
            header = file.read(len(_SQLITE_HEADER))
    except OSError as err:
        return f"it cannot be read ({err.strerror})"
    if not header:
        return None  # an empty file holds nothing to lose
    if header != _SQLITE_HEADER:
        return "it is not a SQLite database"
    wal = Path(f"{path}-wal")
    try:
        if wal.is_file() and wal.stat().st_size > 0:
            with tempfile.TemporaryDirectory(prefix="incarnate-demo-") as folder:
                copy = Path(folder) / "store.db"
                shutil.copyfile(path, copy)
                shutil.copyfile(wal, f"{copy}-wal")
                return _foreign_records(sqlite3.connect(copy))
        uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
        return _foreign_records(sqlite3.connect(uri, uri=True))
    except (OSError, sqlite3.Error) as err:
        return f"it cannot be read as a SQLite database ({err})"


def _foreign_records(connection: sqlite3.Connection) -> str | None:
    """What in the open store is not the demo's, or None (the connection is closed)."""
    try:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        other = sorted(tables - {*_EVENT_TABLES, ROWS_TABLE, TRACKING_TABLE, HEARTBEATS_TABLE, LEASES_TABLE})
        if other:
            return f"it has tables the demo does not write ({', '.join(other)})"
        owned = _demo_ids()
        charts: dict[UUID, str] = {}
        if ROWS_TABLE in tables:  # only to name what is foreign
            for instance_id, name in connection.execute(f"SELECT id, name FROM {ROWS_TABLE}"):
                charts[UUID(str(instance_id))] = str(name)
        foreign: set[UUID] = set()
        for table in sorted(tables & set(_EVENT_TABLES)):
            for (originator,) in connection.execute(f"SELECT DISTINCT originator_id FROM {table}"):
                if UUID(str(originator)) not in owned:
                    foreign.add(UUID(str(originator)))
    finally:
        connection.close()
    if not foreign:
        return None
    names = sorted({f"{charts[i]!r}" for i in foreign if i in charts})
    what = f" (instances of {', '.join(names)})" if names else ""
    return f"it holds the records of {len(foreign)} instance(s) or chart(s) that are not the demo's{what}"


def _claim_store(path: Path) -> None:
    """Remove an earlier demo's file, or raise :class:`CommandError` and leave the file as it is."""
    problem = demo_store_problem(str(path))
    if problem is not None:
        raise CommandError(
            f"{str(path)!r} exists and {problem}; the demo never replaces a store it did not write. "
            "Run it on another file: incarnate demo --db NEW_PATH"
        )
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _say(line: str) -> None:
    print(line, flush=True)  # a narration: each line shows as it happens, even through a pipe


# ---------------------------------------------------------------- the demo


def _configuration(engine: Engine) -> Callable[[Instance], tuple[str, ...]]:
    def configuration(instance: Instance) -> tuple[str, ...]:
        chart = engine.charts.get(instance.record.name)
        if chart is None or instance.record.snapshot_parts is None:
            return ()
        return chart.atomic(engine.parts.copies.decode(chart, instance).configuration)

    return configuration


def _tree(engine: Engine) -> TreeNode:
    """The order's call tree, finished children included."""
    instances: dict[UUID, Instance] = {}
    born: dict[UUID, list[tuple[int, UUID]]] = {}
    for instance_id in engine.parts.journal.instance_ids():
        instance = engine.instance(instance_id)
        instances[instance_id] = instance
        ref = instance.record.parent
        if ref is not None:
            born.setdefault(ref.parent, []).append((ref.generation, instance_id))
    return call_tree(
        instances.get,
        ORDER_ID,
        configuration=_configuration(engine),
        children=lambda i: [child for _, child in sorted(born.get(i.id, []))],
    )


def _incarnations(node: TreeNode) -> dict[UUID, tuple[Ref | None, int]]:
    return {n.id: n.incarnation for n in node.walk()}


def _others_live(engine: Engine) -> bool:
    """Whether another engine's heartbeat still holds (the killed worker's, until its lease runs out)."""
    coordination = engine.parts.coordination
    now = coordination.now()
    beats = coordination.heartbeats().values()
    return any(beat.expires_at > now for beat in beats if beat.engine_id != engine.engine_id)


def _wait(engine: Engine, done: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(0.05)
    return done()


def run_demo(db: str = DEFAULT_DB, out: Callable[[str], None] = _say, *, timeout: float = 30.0) -> int:
    """Run, kill and recover the order; print the call tree and the timeline before and after.

    An existing ``db`` is replaced only when it holds nothing but an earlier
    demo's records; otherwise :class:`~incarnate.errors.CommandError` is raised
    and the file is left untouched.
    """
    path = Path(db)
    _claim_store(path)
    out(f"incarnate demo: an order, its children and a task on {path.resolve()}")
    out("")
    out("1. A worker process runs the order: one packer child per item, a card charge whose")
    out("   first attempt fails and is retried, then a human approval gate.")
    process = subprocess.Popen(
        [sys.executable, "-m", "incarnate._demo", "--db", str(path), "worker"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    commits = 0
    killed = False
    started = time.monotonic()
    try:
        for raw in process.stdout:
            line = raw.rstrip()
            if line == KILL_MARK:
                os.kill(process.pid, signal.SIGKILL)
                killed = True
                break
            if line.startswith("commit"):
                commits += 1
                out(f"   worker {process.pid} | {line}")
            if time.monotonic() - started > timeout:
                break
    except BaseException:  # an interrupt, or our output closed: never leave the worker running
        process.kill()
        process.wait()
        raise
    if not killed:
        process.kill()
        process.wait()
        stderr = process.stderr.read() if process.stderr else ""
        out(f"the worker never reached the kill point:\n{stderr}")
        return 1
    process.wait()
    out(f"2. Killed worker {process.pid} with SIGKILL after {commits} commits, mid-flight.")
    out("")
    engine = build_engine(str(path))
    try:
        before = _tree(engine)
        out("3. What the store holds (read by a fresh engine, nothing run yet):")
        out(render_tree(before, indent="   "))
        out("")
        began = time.monotonic()
        _wait(engine, lambda: not _others_live(engine), WORKER_LEASE + timeout)
        out(
            f"   (the killed worker held its call tree for {time.monotonic() - began:.1f}s more, "
            f"until its {WORKER_LEASE:g}s heartbeat lease ran out: a live owner's trees are never taken)"
        )
        recovered = engine.resume_all()
        assert isinstance(engine.runner, ThreadedRunner)
        engine.runner.start()
        out(f"4. The fresh engine resumes {recovered} unfinished instances and runs them.")
        gate = _wait(
            engine,
            lambda: "awaiting_approval" in _configuration(engine)(engine.instance(ORDER_ID)),
            timeout,
        )
        if not gate:
            out("the order did not reach the approval gate in time")
            return 1
        out("5. The order waits at the human gate; answering it: approve.")
        engine.send(ORDER_ID, "approve")
        finished = _wait(engine, lambda: engine.instance(ORDER_ID).record.status.finished, timeout)
        after_tree = _tree(engine)
        out("")
        out("6. The call tree after recovery:")
        out(render_tree(after_tree, indent="   "))
        out("")
        out("7. Incarnations before and after the restart (Ref with generation, attempt):")
        after_map = _incarnations(after_tree)
        same = True
        for instance_id, (ref, attempt) in _incarnations(before).items():
            now = after_map.get(instance_id)
            if now is None:
                now_instance = engine.instance(instance_id)
                birth = now_instance.record.birth
                now = (now_instance.record.parent, birth.attempt if birth else 1)
            verdict = "same" if now == (ref, attempt) else "CHANGED"
            same = same and now == (ref, attempt)
            label = "root" if ref is None else f"{ref.site}[{ref.key}] gen {ref.generation}"
            out(f"   {str(instance_id)[:8]} {label:<22} attempt {attempt}: {verdict}")
        retried = [n for n in after_tree.walk() if n.ref is not None and n.attempt > 1]
        for node in retried:
            assert node.ref is not None
            label = f"{node.ref.site}[{node.ref.key}] gen {node.ref.generation}"
            out(
                f"   {str(node.id)[:8]} {label:<22} attempt {node.attempt}: new — the site's retry "
                "policy, not the restart, made this incarnation"
            )
        out("")
        names = {ORDER_ID: "order"}
        events = []
        for node in after_tree.walk():
            names[node.id] = (
                node.name if node.ref is None else f"{node.ref.site}[{node.ref.key}]#{node.ref.generation}"
            )
        for instance_id in engine.parts.journal.instance_ids():
            instance = engine.instance(instance_id)
            if instance_id not in names and instance.record.parent is not None:
                ref = instance.record.parent
                names[instance_id] = f"{ref.site}[{ref.key}]#{ref.generation}"
            events.extend(engine.events_of(instance_id))
        events.sort(key=lambda e: e.timestamp)
        out("8. The timeline of every instance:")
        out(render_timeline(timeline(events), names=names))
        out("")
        record = engine.instance(ORDER_ID).record
        out(f"The order is {record.status.value}: {record.output}")
        out(
            "Every incarnation that existed before the kill was recovered with the same Ref, generation "
            "and attempt"
            if same
            else "Some incarnation changed across the restart: this is a bug"
        )
        return 0 if finished and same and record.status is InstanceStatus.DONE else 1
    finally:
        engine.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m incarnate._demo [--db PATH] [worker]``."""
    parser = argparse.ArgumentParser(prog="incarnate demo")
    parser.add_argument("--db", default=DEFAULT_DB)
    parser.add_argument("role", nargs="?", default="demo", choices=["demo", "worker"])
    args = parser.parse_args(argv)
    if args.role == "worker":
        return worker(args.db)
    return run_demo(args.db)


if __name__ == "__main__":
    raise SystemExit(main())

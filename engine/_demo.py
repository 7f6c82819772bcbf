"""``incarnate demo``: an order that survives the death of its process.

An order chart fans out to one packing child per item and, in parallel,
charges the customer through a task whose first attempt fails and is
retried; then it waits at a human gate for approval. The demo runs it in a
child OS process, kills that process with SIGKILL mid-flight, and lets a
fresh engine over the same SQLite file recover the exact incarnations and
finish the order.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import attrs

from aggregates import Instance, InstanceStatus, Ref
from engine._engine import Engine
from engine._runners import ThreadedRunner
from engine._storage import Storage
from engine._tasks import TaskCall
from engine._work import UnitOfWork
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


def worker(db: str) -> int:
    """Run the order until a retry is scheduled, announce the kill point, and keep working."""
    engine = build_engine(db)
    pending: dict[int, list[str]] = {}

    def hook(point: str, uow: UnitOfWork) -> None:
        if point == "before-commit":
            pending[id(uow)] = [
                f"{i.record.name}:{type(e).__name__}" for i in uow.pending() for e in i.pending_events
            ]
        elif point == "after-commit":
            names = pending.pop(id(uow), [])
            print("commit " + " ".join(names), flush=True)
            if any(name.endswith("ChildRetry") for name in names):
                print(KILL_MARK, flush=True)

    engine.hooks.append(hook)
    engine.start("order", id=ORDER_ID)
    assert isinstance(engine.runner, ThreadedRunner)
    engine.runner.start()
    time.sleep(60)  # the demo kills this process long before
    return 0


# ---------------------------------------------------------------- the demo


def _configuration(engine: Engine) -> Callable[[Instance], tuple[str, ...]]:
    def configuration(instance: Instance) -> tuple[str, ...]:
        chart = engine.charts.get(instance.record.name)
        if chart is None or instance.record.snapshot is None:
            return ()
        return chart.atomic(engine.decode(chart, instance).configuration)

    return configuration


def _tree(engine: Engine) -> TreeNode:
    """The order's call tree, finished children included."""
    instances: dict[UUID, Instance] = {}
    born: dict[UUID, list[tuple[int, UUID]]] = {}
    for instance_id in engine.instance_ids():
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


def _wait(engine: Engine, done: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(0.05)
    return done()


def run_demo(db: str, out: Callable[[str], None] = print, *, timeout: float = 30.0) -> int:
    """Run, kill and recover the order; print the call tree and the timeline before and after."""
    path = Path(db)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    out(f"incarnate demo: an order, its children and a task on {path.resolve()}")
    out("")
    out("1. A worker process runs the order: one packer child per item, a card charge whose")
    out("   first attempt fails and is retried, then a human approval gate.")
    process = subprocess.Popen(
        [sys.executable, "-m", "engine._demo", "--db", str(path), "worker"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    commits = 0
    killed = False
    started = time.monotonic()
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
        for instance_id in engine.instance_ids():
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
    """``python -m engine._demo [--db PATH] [worker]``."""
    parser = argparse.ArgumentParser(prog="incarnate demo")
    parser.add_argument("--db", default="incarnate.db")
    parser.add_argument("role", nargs="?", default="demo", choices=["demo", "worker"])
    args = parser.parse_args(argv)
    if args.role == "worker":
        return worker(args.db)
    return run_demo(args.db)


if __name__ == "__main__":
    raise SystemExit(main())

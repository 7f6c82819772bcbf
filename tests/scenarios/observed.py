"""The call tree the observability tests watch, and a process that continues it from a store.

``python -m tests.scenarios.observed DB KID`` opens the SQLite file ``DB``
as a fresh engine (another process than the one that gave the kid its
birth), takes the tree over, finishes the kid ``KID`` and prints the spans
it recorded, one JSON object a line.
"""

from __future__ import annotations

import json
import sys
from uuid import UUID

import attrs

from incarnate import Clock, Engine, Storage, TaskCall
from statechart import Chart, Event, JsonValue, RetryPolicy, assign, final, invoke, state, transition
from tests.scenarios.charts import KID


@attrs.frozen
class Order:
    """The parent's context: what the failing charge said."""

    note: str = ""


def note_failure(order: Order, event: Event) -> Order:
    return attrs.evolve(order, note=str(event.data))


def explode(order: Order, event: Event) -> Order:
    raise ValueError("the price list is unreachable")


ORDER = Chart(
    "order",
    state(
        "working",
        invoke=[
            invoke("courier", chart="kid", input={"name": "courier"}),
            invoke(
                "charge", task="charge", input={"amount": 5}, retry=RetryPolicy(max_attempts=2, backoff=1.0)
            ),
        ],
        on=[
            transition("error.invoke.charge", actions=[assign(note_failure)]),
            transition("poke", actions=[assign(explode)]),
            transition("done.invoke.courier", "delivered"),
        ],
    ),
    final("delivered"),
    context=Order,
)
"""A parent with a chart child (``courier``, a ``kid`` awaiting ``finish``) and a task that always fails."""

DECLINED = "card declined"


def charge(call: TaskCall) -> JsonValue:
    raise RuntimeError(DECLINED)


def engine(storage: Storage, engine_id: str, clock: Clock | None = None) -> Engine:
    """An engine running the observed charts."""
    return Engine([ORDER, KID], {"charge": charge}, storage=storage, engine_id=engine_id, clock=clock)


def main(database: str, kid: UUID) -> None:
    """Continue the tree on a fresh engine and print its spans."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    with engine(Storage.sqlite(database), "restarted") as fresh:
        fresh.resume_all()
        fresh.send(kid, "finish")
        fresh.run_until_idle()
    for span in exporter.get_finished_spans():
        parent = span.parent
        print(
            json.dumps(
                {
                    "name": span.name,
                    "instance_id": dict(span.attributes or {}).get("incarnate.instance_id"),
                    "trace_id": f"{span.context.trace_id:032x}",
                    "parent_span_id": f"{parent.span_id:016x}" if parent is not None else None,
                    "remote_parent": parent.is_remote if parent is not None else None,
                }
            )
        )


if __name__ == "__main__":
    main(sys.argv[1], UUID(sys.argv[2]))

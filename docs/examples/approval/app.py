"""A Starlette web application that starts approvals and answers their human gate.

The web process runs no chart itself: its engine only stores what arrives
(a new approval, a decision), and the workers (``incarnate worker``) do the
work. It talks to the store through an :class:`~incarnate.AsyncEngine`,
whose calls run on threads of their own, so a slow store never blocks the
event loop.

Run it from the repository root::

    APPROVAL_DB=approvals.db python -m uvicorn docs.examples.approval.app:app

Routes:

- ``POST /approvals`` with ``{"title": ..., "amount": ..., "reviewer": ...}``
  starts an approval: ``201`` and its view, ``422`` for an input the chart
  does not accept.
- ``GET /approvals/{id}``: its status, configuration, context and output.
- ``POST /approvals/{id}/decision`` with ``{"decision": "approve" | "reject",
  "by": ..., "comment": ...}`` and an ``Idempotency-Key`` header answers
  the gate: ``202`` once the decision is stored. Submitting again with the
  same key stores nothing and gets the same answer (the decision first
  stored under that key). ``?wait=S`` also waits up to ``S`` seconds for
  the step the decision caused and adds it as ``step``. ``409`` when the
  approval has already ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from uuid import UUID

import attrs
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aggregates import Instance
from docs.examples.approval.charts import CHARTS, TASKS
from incarnate import AsyncEngine, EngineError, InstanceTerminated, Storage, StorageError, UnknownInstance
from statechart import JsonValue
from statechart.errors import CodecError

DB_VARIABLE = "APPROVAL_DB"
"""The environment variable naming the store: a SQLite file path or a ``postgresql://`` URL."""
DECISIONS = ("approve", "reject")
KEY_HEADER = "Idempotency-Key"
MAX_WAIT = 30.0
"""The longest ``?wait=`` a decision may ask for, in seconds."""


def engine_of(request: Request) -> AsyncEngine:
    """The process's engine, opened at start-up."""
    engine: AsyncEngine = request.app.state.engine
    return engine


def error(status: int, message: str) -> JSONResponse:
    """A JSON error response."""
    return JSONResponse({"error": message}, status_code=status)


async def json_object(request: Request) -> dict[str, JsonValue] | None:
    """The request's body as a JSON object, or None when it is not one."""
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return body if isinstance(body, dict) else None


async def view(engine: AsyncEngine, approval_id: UUID) -> dict[str, JsonValue]:
    """What a client sees of an approval (raises UnknownInstance for anything else)."""
    record = (await engine.instance(approval_id)).record
    if record.name != "approval" or record.parent is not None:
        raise UnknownInstance(approval_id)
    snapshot = await engine.snapshot(approval_id)
    context = snapshot.context
    return {
        "id": str(approval_id),
        "status": record.status.value,
        "configuration": list(snapshot.configuration),
        "context": attrs.asdict(context) if attrs.has(type(context)) else None,
        "output": record.output,
        "error": record.error,
    }


async def accepted_under(engine: AsyncEngine, approval_id: UUID, key: str) -> dict[str, JsonValue]:
    """The decision the approval accepted under ``key``: the answer to every submit with that key."""
    for event in await engine.events_of(approval_id):
        if isinstance(event, Instance.Accepted) and event.message.key == key:
            return {
                "id": str(approval_id),
                "key": key,
                "decision": event.message.event.name,
                "data": event.message.event.data,
                "seq": event.message.seq,
            }
    raise EngineError(f"approval {approval_id} remembers key {key!r} but holds no decision under it")


async def start_approval(request: Request) -> JSONResponse:
    """Start an approval from the JSON body; 201 with its view."""
    body = await json_object(request)
    if body is None:
        return error(400, 'send a JSON object: {"title": ..., "amount": ..., "reviewer": ...}')
    engine = engine_of(request)
    try:
        handle = await engine.start("approval", body)
    except CodecError as err:
        return error(422, str(err))
    shown = await view(engine, handle.id)
    return JSONResponse(shown, status_code=201, headers={"Location": f"/approvals/{handle.id}"})


async def show_approval(request: Request) -> JSONResponse:
    """An approval's view; 404 when there is none with this id."""
    approval_id: UUID = request.path_params["id"]
    try:
        return JSONResponse(await view(engine_of(request), approval_id))
    except UnknownInstance:
        return error(404, f"no approval {approval_id}")


def wait_of(request: Request) -> float | None:
    """The ``?wait=S`` of a request in seconds (at most ``MAX_WAIT``), None without one; ValueError if bad."""
    text = request.query_params.get("wait")
    if text is None:
        return None
    seconds = float(text)
    if not 0 <= seconds <= MAX_WAIT:
        raise ValueError(text)
    return seconds


async def decide_approval(request: Request) -> JSONResponse:
    """Answer an approval's gate once per idempotency key; 202 with the decision stored under the key."""
    approval_id: UUID = request.path_params["id"]
    key = request.headers.get(KEY_HEADER, "").strip()
    if not key:
        return error(400, f"send an {KEY_HEADER} header (any unique text per decision, e.g. a form id)")
    try:
        wait = wait_of(request)
    except ValueError:
        return error(400, f"?wait= takes a number of seconds from 0 to {MAX_WAIT:g}")
    body = await json_object(request)
    decision = body.get("decision") if body is not None else None
    if body is None or not isinstance(decision, str) or decision not in DECISIONS:
        return error(
            400, 'send a JSON object: {"decision": "approve" or "reject", "by": ..., "comment": ...}'
        )
    engine = engine_of(request)
    try:
        await view(engine, approval_id)  # 404 for an id that is not an approval
        # A repeated key stores nothing: its receipt is the first decision's.
        receipt = await engine.send_receipt(
            approval_id, decision, {"by": body.get("by"), "comment": body.get("comment")}, key=key
        )
    except UnknownInstance:
        return error(404, f"no approval {approval_id}")
    except InstanceTerminated as err:
        return error(409, f"approval {approval_id} is {err.status}: it takes no more decisions")
    answer = await accepted_under(engine, approval_id, key)
    if wait is not None:
        try:
            step = await receipt.wait_async(wait, run=engine.call)
        except TimeoutError:
            answer["step"] = None  # not stepped yet (no worker, or a worker being recovered)
        else:
            answer["step"] = {"status": step.status.value, "configuration": list(step.configuration)}
    return JSONResponse(answer, status_code=202)


async def storage_failed(request: Request, exc: Exception) -> JSONResponse:
    """503 when the store fails: nothing of the request was committed, so the client may retry."""
    return error(503, f"the store failed, nothing was changed; retry later ({exc})")


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    """Open one engine for the process (connecting and registering the charts), close it at shutdown."""
    storage = Storage.from_url(os.environ.get(DB_VARIABLE, "approvals.db"))
    engine = await asyncio.to_thread(AsyncEngine.open, CHARTS, TASKS, storage=storage)
    async with engine:
        app.state.engine = engine
        yield


app = Starlette(
    routes=[
        Route("/approvals", start_approval, methods=["POST"]),
        Route("/approvals/{id:uuid}", show_approval, methods=["GET"]),
        Route("/approvals/{id:uuid}/decision", decide_approval, methods=["POST"]),
    ],
    lifespan=lifespan,
    exception_handlers={StorageError: storage_failed},
)

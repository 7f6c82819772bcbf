"""The console's time travel: an instance (or its call tree) at one position, stepped back and forth.

``/instances/{id}/at/{k}`` shows the instance at version ``k`` (with
``?tree=1``: its call tree at position ``k`` of its interleaved history):
the diagram with the configuration of that moment highlighted, the
context, armed timers, inbox and retained children, each instance of the
tree then, and links to the first, previous, next and last positions and
to every position of the history. ``?format=json`` serves the moment as
``incarnate show ID --at K --json`` prints it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from markupsafe import Markup
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from aggregates import InstanceKind
from incarnate import _moments
from incarnate._engine import Engine
from incarnate._inspect import detail_of
from incarnate.cli._common import redact
from incarnate.console._console import Console, instance_id_of, json_response, render, shape_of, wants_json
from incarnate.console._diagram import diagram_svg
from incarnate.console._security import CSRF_FIELD, Refused
from incarnate.errors import PositionOutOfRange, RedriveRefused, UnknownInstance
from statechart.errors import IncarnateError

WINDOW = 40
"""How many positions around the current one the page lists (links to each)."""


def _view(engine: Engine, instance_id: UUID, position: int, tree: bool) -> dict[str, Any]:
    moment = engine.at(instance_id, position, tree=tree, window=WINDOW // 2)
    subject = moment.instance
    detail = detail_of(subject)
    shape = None
    if subject.record.kind is InstanceKind.CHART:
        shape = shape_of(engine, detail.name, subject.record.fingerprint)
    rows = _moments.positions(moment)
    low = max(0, position - moment.first - WINDOW // 2)
    return {
        "moment": moment,
        "document": _moments.moment_json(moment),
        "detail": detail,
        "subject": _moments.instance_json(subject),
        "others": [_moments.instance_json(i) for i in moment.instances.values() if i.id != moment.subject],
        "diagram": None if shape is None else Markup(diagram_svg(shape, detail.configuration)),
        "rows": rows[low : low + WINDOW],
        "row": rows[position - moment.first],
        "tree": tree,
        "query": "?tree=1" if tree else "",
        "previous": position - 1 if position > 1 else None,
        "next": position + 1 if position < moment.positions else None,
        "can_fork": not tree
        and subject.record.kind is InstanceKind.CHART
        and subject.record.steps > 0
        and not subject.record.status.finished
        and not subject.record.activations,
    }


async def travel_page(request: Request) -> Response:
    """``/instances/{id}/at/{k}``: the instance (``?tree=1``: its call tree) as it was at position ``k``."""
    console: Console = request.app.state.console
    instance_id = instance_id_of(request.path_params["id"])
    text = request.path_params["k"]
    try:
        position = int(text)
    except ValueError:
        raise Refused(400, f"the position must be a whole number (1 is the creation), got {text!r}") from None
    tree = request.query_params.get("tree") in ("1", "on", "true")
    try:
        view = await console.read(lambda engine: _view(engine, instance_id, position, tree))
    except UnknownInstance as err:
        raise Refused(404, redact(str(err)), code=err.code) from err
    except PositionOutOfRange as err:
        raise Refused(404, redact(str(err)), code=err.code) from err
    if wants_json(request):
        return json_response(view["document"])
    return render(console, request, "travel.html", **view)


# --------------------------------------------------------------- fork and redrive


async def _do(request: Request, back: str, do: Callable[[Engine, FormData], tuple[str, str]]) -> Response:
    """Check the form's CSRF token, run ``do``, and redirect to where it says (or ``back``) with a flash."""
    console: Console = request.app.state.console
    form = await request.form()
    console.secrets.check_form(form.get(CSRF_FIELD))
    try:
        path, message = await console.call(lambda engine: do(engine, form))
    except IncarnateError as err:
        path, message, kind = back, f"{err} (code: {err.code})", "error"
    else:
        kind = "ok"
    return RedirectResponse(f"{path}?flash={console.flash(kind, redact(message))}", status_code=303)


async def fork_action(request: Request) -> Response:
    """Start a new root from the instance's checkpoint at the form's ``version``; go to the new root."""
    instance_id = instance_id_of(request.path_params["id"])

    def fork(engine: Engine, form: FormData) -> tuple[str, str]:
        text = form.get("version")
        if not isinstance(text, str) or not text.strip().isdigit():
            raise PositionOutOfRange(instance_id, 0, engine.instance(instance_id).version)
        version = int(text)
        handle = engine.fork(instance_id, version)
        return f"/instances/{handle.id}", f"forked {instance_id} at version {version} as {handle.id}"

    return await _do(request, f"/instances/{instance_id}", fork)


async def redrive_action(request: Request) -> Response:
    """Redrive a failed or parked root, once the operator ticked the confirmation."""
    instance_id = instance_id_of(request.path_params["id"])

    def redrive(engine: Engine, form: FormData) -> tuple[str, str]:
        if form.get("confirm") != "yes":
            dry = engine.redrive(instance_id, dry_run=True)
            raise RedriveRefused(
                instance_id,
                f"tick the confirmation to redrive it from version {dry.version}, its last good checkpoint",
            )
        reason = form.get("reason")
        done = engine.redrive(
            instance_id, reason if isinstance(reason, str) and reason else "redriven by an operator"
        )
        return (
            f"/instances/{instance_id}",
            f"redrove {instance_id} ({done.was}) from version {done.version}; a worker runs it again",
        )

    return await _do(request, f"/instances/{instance_id}", redrive)

"""The console's actions: each a POST that carries the form's CSRF token and redirects back with a flash.

Every action is offered only where the chart and the instance allow it, and
checked again here: an event must have a transition from the instance's
configuration, a migration must come from the dry run this console showed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from uuid import UUID

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from aggregates import InstanceStatus
from incarnate._engine import Engine
from incarnate.cli._common import parse_json_option, redact
from incarnate.console._console import Console, enabled, instance_id_of, shape_of
from incarnate.console._migrate import apply_migration, parse_mapping
from incarnate.console._security import CSRF_FIELD
from statechart import JsonValue
from statechart.errors import IncarnateError

# --------------------------------------------------------------- the actions


async def _form(console: Console, request: Request) -> FormData:
    form = await request.form()
    console.secrets.check_form(form.get(CSRF_FIELD))
    return form


def _back(path: str, console: Console, kind: str, text: str) -> RedirectResponse:
    joint = "&" if "?" in path else "?"
    return RedirectResponse(f"{path}{joint}flash={console.flash(kind, redact(text))}", status_code=303)


async def act(request: Request, path: str, do: Callable[[Engine, FormData], str]) -> Response:
    """Check the form, run ``do`` on the engine, and go back to ``path`` with what happened."""
    console: Console = request.app.state.console
    form = await _form(console, request)
    try:
        message = await console.call(lambda engine: do(engine, form))
    except IncarnateError as err:
        return _back(path, console, "error", f"{err} (code: {err.code})")
    except (ValueError, LookupError) as err:
        return _back(path, console, "error", str(err))
    return _back(path, console, "ok", message)


def _text(form: FormData, field: str, default: str = "") -> str:
    value = form.get(field, default)
    return value if isinstance(value, str) else default


async def send_action(request: Request) -> Response:
    """Durably accept an event the instance's configuration has a transition for."""
    instance_id = instance_id_of(request.path_params["id"])

    def send(engine: Engine, form: FormData) -> str:
        event = _text(form, "event").strip()
        raw = _text(form, "data").strip()
        data: JsonValue = None if not raw else parse_json_option("data", raw)
        instance = engine.instance(instance_id)
        record = instance.record
        configuration = tuple(str(s) for s in (record.snapshot or {}).get("configuration", ()))
        shape = shape_of(engine, record.name, record.fingerprint)
        offered = enabled(engine, shape, record.name, configuration)
        if record.status not in (InstanceStatus.BORN, InstanceStatus.RUNNING) or event not in offered:
            shown = ", ".join(offered) or "none"
            raise ValueError(
                f"{event!r} is not enabled for {instance_id}: it is {record.status.value} in "
                f"{', '.join(configuration) or 'no state'}; the events it may be sent now: {shown}"
            )
        seq = engine.send(instance_id, event, data)
        return f"accepted {event!r} for {instance_id} as inbox message {seq}; a worker processes it"

    return await act(request, f"/instances/{instance_id}", send)


async def cancel_action(request: Request) -> Response:
    """Ask an instance (and its children) to stop."""
    instance_id = instance_id_of(request.path_params["id"])

    def cancel(engine: Engine, form: FormData) -> str:
        reason = _text(form, "reason").strip() or "cancelled from the console"
        if engine.instance(instance_id).record.status.finished:
            raise ValueError(f"{instance_id} has finished; there is nothing to cancel")
        if not engine.cancel(instance_id, reason):
            return f"a cancel of {instance_id} was requested already"
        return f"cancel of {instance_id} requested ({reason!r}); it stops when a worker next runs it"

    return await act(request, f"/instances/{instance_id}", cancel)


def _root(engine: Engine, instance_id: UUID, verb: str) -> None:
    record = engine.instance(instance_id).record
    if record.parent is not None:
        raise ValueError(f"{instance_id} is a child; {verb} applies to a whole call tree: use its root")


async def terminate_action(request: Request) -> Response:
    """End a call tree without running it (roots only)."""
    instance_id = instance_id_of(request.path_params["id"])

    def terminate(engine: Engine, form: FormData) -> str:
        _root(engine, instance_id, "terminate")
        if _text(form, "confirm").strip().lower() != str(instance_id)[:8]:
            raise ValueError(
                f"nothing was terminated: type {str(instance_id)[:8]} (the first 8 characters of the id) "
                "in the confirmation box to confirm terminating this call tree"
            )
        reason = _text(form, "reason").strip() or "terminated from the console"
        ended = engine.terminate(instance_id, reason)
        return f"terminated the call tree of {instance_id}: {ended} instance(s) cancelled"

    return await act(request, f"/instances/{instance_id}", terminate)


async def resolve_action(request: Request) -> Response:
    """Unpark a parked root whose call tree validates again."""
    instance_id = instance_id_of(request.path_params["id"])

    def resolve(engine: Engine, form: FormData) -> str:
        _root(engine, instance_id, "resolve")
        if engine.instance(instance_id).record.status is not InstanceStatus.PARKED:
            raise ValueError(f"{instance_id} is not parked; there is nothing to resolve")
        reason = _text(form, "reason").strip() or "resolved from the console"
        checkpoint = engine.resolve(instance_id, reason)
        state = "not parked any more" if checkpoint is None else checkpoint.status.value
        return f"resolved {instance_id}: it is {state}"

    return await act(request, f"/instances/{instance_id}", resolve)


async def migrate_action(request: Request) -> Response:
    """Apply a migration whose dry run this console showed (the form carries the dry run's proof)."""
    console: Console = request.app.state.console
    name = request.path_params["name"]

    def migrate(engine: Engine, form: FormData) -> str:
        mapping = parse_mapping(_text(form, "mapping"))
        if not console.secrets.check_proof(
            form.get("proof"), "migrate", name, json.dumps(mapping, sort_keys=True)
        ):
            raise ValueError("this migration's dry run was not shown by this console; run the dry run first")
        return apply_migration(engine, name, mapping)

    return await act(request, f"/charts/{name}", migrate)

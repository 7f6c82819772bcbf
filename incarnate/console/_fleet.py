"""The console's ``/workers`` page: every engine of the store, read through :func:`incarnate._fleet.fleet`.

``?group=G`` shows one engine group, ``?all=1`` the engines long gone too,
``?format=json`` the fleet's JSON document (the one ``incarnate workers
--json`` prints). The page refreshes its table while *live* is ticked, by
reading itself again.
"""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from incarnate._engine import Engine
from incarnate._fleet import Fleet, fleet
from incarnate.console._console import REFRESH_SECONDS, Console, json_response, render, wants_json


async def workers_page(request: Request) -> Response:
    """``/workers``: each engine's group, state, last beat, leadership, trees owned and load."""
    console: Console = request.app.state.console
    group = request.query_params.get("group") or None
    everyone = request.query_params.get("all") in ("1", "on", "true")

    def read(engine: Engine) -> tuple[Fleet, list[str], str]:
        groups = sorted({beat.group for beat in engine.parts.coordination.heartbeats().values()})
        return fleet(engine, group=group, everyone=everyone), groups, engine.engine_id

    found, groups, own = await console.read(read)
    if wants_json(request):
        return json_response(found.to_json())
    query = urlencode([(k, v) for k, v in (("group", group), ("all", "1" if everyone else None)) if v])
    return render(
        console,
        request,
        "workers.html",
        fleet=found,
        groups=groups,
        group=group,
        everyone=everyone,
        own=own,
        query=query,
        refresh=REFRESH_SECONDS,
    )

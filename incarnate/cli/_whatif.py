"""``incarnate check --replay``: the what-if replay of new charts over the live instances, as text or JSON.

The replay and its classification are :mod:`incarnate._whatif`'s; this
module prints them beside the mapping verdicts ``check`` gives anyway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from incarnate._engine import Engine
from incarnate._whatif import WhatIf, replay_all, replay_summary
from incarnate.cli._output import StatusLine, emit_json, out, table
from statechart import JsonValue


def _where(result: WhatIf) -> str:
    replay = result.replay
    if replay.at is not None:
        return (
            f"at event {replay.at}: {','.join(replay.recorded) or '-'} -> {','.join(replay.replayed) or '-'}"
        )
    return ",".join(replay.replayed) or "-"


def _rows(results: Sequence[WhatIf]) -> list[tuple[str, ...]]:
    return [
        (
            str(r.instance_id),
            r.name,
            r.status,
            r.verdict.verdict.value if r.verdict is not None else "-",
            r.replay.outcome.value,
            _where(r),
            r.replay.reason,
        )
        for r in results
    ]


def fine(results: Sequence[WhatIf]) -> bool:
    """Whether every instance replays the same and its verdict runs it under the new charts."""
    return all(
        r.replay.outcome.value == "same" and (r.verdict is None or r.verdict.verdict.fine) for r in results
    )


def document(results: Sequence[WhatIf]) -> dict[str, JsonValue]:
    """The report as one JSON document (see ``docs/reference/cli.md``)."""
    from incarnate._migration import summary

    verdicts = [r.verdict for r in results if r.verdict is not None]
    return {
        "instances": [r.to_json() for r in results],
        "replay": replay_summary(results),
        "summary": summary(verdicts),
        "ok": fine(results),
    }


def check_replay(engine: Engine, *, chart: str | None, mapping: Mapping[str, str], as_json: bool) -> int:
    """Replay every live instance (of ``chart``) under the engine's charts and print the report."""
    bar = StatusLine("replaying recorded inputs", total=None)

    def progress(done: int, total: int) -> None:
        bar.show(f"replayed {done} of {total}", key=done, completed=done, total=total)

    try:
        results = replay_all(engine.parts, chart=chart, mapping=mapping or None, progress=progress)
    finally:
        bar.close()
    ok = fine(results)
    if as_json:
        emit_json(document(results))
        return 0 if ok else 1
    if results:
        table(("ID", "CHART", "STATUS", "VERDICT", "REPLAY", "WHERE", "WHY"), _rows(results))
    counts = replay_summary(results)
    replayed = ", ".join(f"{n} {outcome}" for outcome, n in counts.items() if n) or "nothing"
    out(f"{len(results)} live instance(s) replayed under the new charts: {replayed}; nothing was written")
    if not ok:
        out(
            "Not every instance goes on as it went: see WHY, change the charts, or map the states "
            "(incarnate migrate --chart NAME --map OLD=NEW --dry-run)."
        )
    return 0 if ok else 1

"""How a :class:`~incarnate.Moment` is shown: as JSON (``--json``, the console's JSON view) and as text.

Each instance of a moment is shown with the operator's detail
(:func:`incarnate._inspect.detail_of`: status, configuration, context,
timers, incidents) as it was then, its inbox messages and its retained
child incarnations (activations) with their state. ``changed_at`` is the
time of the instance's last event at that position.
"""

from __future__ import annotations

import json
from typing import Any

from aggregates import Activation, Instance, Message
from incarnate._inspect import detail_of, iso, label
from incarnate._travel import Moment
from projections import timeline
from statechart import JsonValue


def positions(moment: Moment) -> list[dict[str, JsonValue]]:
    """The moment's history as timeline rows, one per position (``position`` 1-based, ``label``, ``summary``).

    A macrostep whose action failed adds its ``error.execution`` lines to
    the ``errors`` of that position's row.
    """
    names = {instance_id: label(instance) for instance_id, instance in moment.instances.items()}
    names.update(labels(moment.events))
    rows: list[dict[str, JsonValue]] = []
    first = moment.events[0].timestamp if moment.events else None
    for entry in timeline(moment.events):
        if entry.event == "error.execution" and rows:
            errors = rows[-1]["errors"]
            assert isinstance(errors, list)
            errors.append(entry.summary)
            continue
        rows.append(
            {
                "position": moment.first + len(rows),
                "at": iso(entry.at.timestamp()),
                "offset": 0.0 if first is None else (entry.at - first).total_seconds(),
                "instance": str(entry.instance),
                "label": names.get(entry.instance, str(entry.instance)[:8]),
                "version": entry.version,
                "event": entry.event,
                "summary": entry.summary,
                "errors": [],
            }
        )
    return rows


def labels(events: Any) -> dict[Any, str]:
    """How the timeline names each instance of ``events``, read from their creation events (see ``label``)."""
    names = {}
    for event in events:
        if event.originator_version == 1 and hasattr(event, "parent"):
            ref = event.parent
            if ref is None:
                names[event.originator_id] = str(event.name)
            else:
                member = f"[{ref.key}]" if ref.key else ""
                names[event.originator_id] = f"{ref.site}{member}#{ref.generation}"
    return names


def message_json(message: Message) -> dict[str, JsonValue]:
    """An inbox message: ``seq``, ``event``, ``data``, ``source``, ``key``, ``sent_at`` (ISO)."""
    return {
        "seq": message.seq,
        "event": message.event.name,
        "data": message.event.data,
        "source": None if message.source is None else str(message.source),
        "key": message.key,
        "sent_at": iso(message.sent_at),
    }


def activation_json(activation: Activation) -> dict[str, JsonValue]:
    """A retained child incarnation: slot, generation, child id, chart or task, state, attempt, provenance."""
    return {
        "site": activation.site,
        "key": activation.key,
        "generation": activation.generation,
        "child_id": str(activation.child_id),
        "kind": activation.kind.value,
        "name": activation.name,
        "state": activation.state.value,
        "attempt": activation.attempt,
        "provenance": activation.provenance.value,
        "retries": len(activation.journal),
    }


def instance_json(instance: Instance) -> dict[str, JsonValue]:
    """One instance as it was: its detail, ``inbox`` and ``activations``."""
    document = detail_of(instance).to_json()
    document["label"] = label(instance)
    document["inbox"] = [message_json(m) for m in instance.record.inbox]
    document["activations"] = [activation_json(a) for a in instance.record.activations]
    return document


def moment_json(moment: Moment, *, history: bool = False) -> dict[str, JsonValue]:
    """A moment as JSON: ``id``, ``tree``, ``position``, ``positions``, ``version``, ``event`` (the
    timeline row of that position), ``instances`` (the subject first) and, with ``history``, every
    position's timeline row as ``timeline``."""
    rows = positions(moment)
    document: dict[str, JsonValue] = {
        "id": str(moment.subject),
        "tree": moment.tree,
        "position": moment.position,
        "positions": moment.positions,
        "version": moment.version,
        "event": rows[moment.position - moment.first],
        "instances": [instance_json(instance) for instance in moment.instances.values()],
    }
    if history:
        document["timeline"] = list[JsonValue](rows)
    return document


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def render_instance(instance: Instance) -> list[str]:
    """An instance as it was, as ``name: value`` lines (the subject's part of ``show --at``)."""
    document = instance_json(instance)
    lines = [f"{document['kind']} {document['name']!r} {document['id']}"]

    def field(name: str, value: str) -> None:
        lines.append(f"{name + ':':<15}{value}")

    field("status", str(document["status"]))
    field("version", f"{document['version']} ({document['steps']} step(s)), at {document['changed_at']}")
    configuration = document["configuration"]
    assert isinstance(configuration, list)
    field("configuration", ", ".join(map(str, configuration)) or "-")
    field("context", _text(document["context"]))
    if document["error"] is not None:
        field("error", _text(document["error"]))
    timers = instance_timers(instance)
    field("timers", f"{len(timers)}" if timers else "none")
    lines.extend(f"  {line}" for line in timers)
    inbox = instance.record.inbox
    field("inbox", f"{len(inbox)} pending message(s)")
    lines.extend(f"  #{m.seq} {m.event.name!r} {_text(m.event.data)}" for m in inbox)
    activations = instance.record.activations
    field("children", f"{len(activations)} retained")
    for a in activations:
        member = f"[{a.key}]" if a.key else ""
        lines.append(
            f"  {a.site}{member}#{a.generation} {a.kind.value} {a.name!r} {a.state.value}, "
            f"attempt {a.attempt} ({a.provenance.value}) id {a.child_id}"
        )
    return lines


def instance_timers(instance: Instance) -> list[str]:
    """The armed timers of an instance's stored snapshot, as text, by deadline."""
    document = detail_of(instance).to_json()
    timers = document["timers"]
    assert isinstance(timers, list)
    return [f"{t['event']!r} at {t['deadline']} ({t['id']})" for t in timers if isinstance(t, dict)]


def render_moment(moment: Moment) -> str:
    """A moment as text: where it is in the history, the subject, and (a tree) every other instance."""
    row = positions(moment)[moment.position - moment.first]
    what = "position" if moment.tree else "version"
    scope = f"the call tree of {moment.subject}" if moment.tree else str(moment.subject)
    lines = [
        f"{scope} at {what} {moment.position} of {moment.positions}",
        f"event:         {row['label']} v{row['version']} {row['summary']} ({row['at']})",
        "",
        *render_instance(moment.instance),
    ]
    others = [i for i in moment.instances.values() if i.id != moment.subject]
    if moment.tree:
        lines += ["", f"instances of the call tree then: {len(moment.instances)}"]
        for instance in [moment.instance, *others]:
            document = detail_of(instance)
            where = ", ".join(document.configuration)
            lines.append(
                f"  {label(instance):<24} {document.kind} {document.name!r} v{document.version} "
                f"{document.status}{' in ' + where if where else ''}; inbox {document.pending_messages}, "
                f"timers {len(document.timers)}, children {document.children} (id {str(instance.id)[:8]})"
            )
    return "\n".join(lines)


def render_positions(moment: Moment) -> str:
    """The moment's history, one position a line, the current one marked with ``>``."""
    lines = []
    for row in positions(moment):
        mark = ">" if row["position"] == moment.position else " "
        lines.append(
            f"{mark}{row['position']:>6}  {row['offset']:8.3f}s  {row['label']!s:<22} v{row['version']!s:<4} "
            f"{row['summary']}"
        )
        errors = row["errors"]
        assert isinstance(errors, list)
        lines.extend(f"{'':>8}  ! {error}" for error in errors)
    return "\n".join(lines)

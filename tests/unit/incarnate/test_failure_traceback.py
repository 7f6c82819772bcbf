"""A failed task or action keeps its traceback on its own ``Failed`` event; its parent is told less.

An operator reads the traceback with ``incarnate show ID`` and on the
console's instance page; the parent's ``error.invoke`` data, which a chart
may store in its context, carries only the error's type and message.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from starlette.testclient import TestClient

from aggregates import InstanceStatus
from incarnate import DeterministicRunner, Engine, InstanceFailed, Storage, TaskCall
from incarnate._process import MAX_TRACEBACK_CHARS, traceback_text
from incarnate.cli import main
from incarnate.console import create_app
from statechart import Chart, Event, JsonValue, always, assign, final, invoke, state, transition


def _charge(call: TaskCall) -> str:
    raise _declined(call.attempt)


def _declined(attempt: int) -> RuntimeError:
    return RuntimeError(f"the bank declined attempt {attempt}")


@attrs.frozen
class Told:
    """What the parent was told of its task's failure."""

    told: JsonValue = None


def _seen(context: Told, event: Event) -> Told:
    return Told(event.data)


PAYMENT = Chart(
    "payment",
    state(
        "charging",
        invoke=[invoke("charge", task="charge")],
        on=[transition("error.invoke.charge", "declined", actions=[assign(_seen)])],
    ),
    final("declined"),
    context=Told,
)


SPINNING = Chart(
    "spinning",
    state("idle", on=[transition("go", "a")]),
    state("a", on=[always("b")]),
    state("b", on=[always("a")]),
    max_microsteps=10,
)
"""A macrostep that never settles: it fails the instance (an action's exception is error.execution)."""


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "failures.db"


@pytest.fixture
def engine(path: Path) -> Iterator[Engine]:
    with Engine(
        [PAYMENT, SPINNING],
        {"charge": _charge},
        storage=Storage.sqlite(str(path)),
        runner=DeterministicRunner(),
    ) as built:
        yield built


def _task_of(engine: Engine, root: object) -> object:
    [task] = [i for i in engine.instances() if i.record.root == root and i.id != root]
    return task


def test_a_failed_task_keeps_its_traceback_and_its_parent_is_told_the_error_only(engine: Engine) -> None:
    payment = engine.start(PAYMENT)
    engine.run_until_idle()
    task = engine.instance(_task_of(engine, payment).id)  # type: ignore[attr-defined]
    error: Any = task.record.error
    assert task.record.status is InstanceStatus.FAILED
    assert error["error"] == "RuntimeError" and error["message"] == "the bank declined attempt 1"
    trace = error["traceback"]
    assert trace.startswith("Traceback (most recent call last):")
    assert "in _charge" in trace and "in _declined" not in trace  # raised in _charge, made in _declined
    assert trace.rstrip().endswith("RuntimeError: the bank declined attempt 1")
    told = engine.snapshot(payment).context
    assert told == Told({"error": "RuntimeError", "message": "the bank declined attempt 1"})


def test_a_macrostep_that_fails_its_instance_keeps_the_traceback(engine: Engine) -> None:
    spinning = engine.start(SPINNING)
    engine.run_until_idle()
    engine.send(spinning, "go")
    engine.run_until_idle()
    error: Any = engine.instance(spinning).record.error
    assert error["error"] == "RunawayMacrostep"
    assert error["traceback"].startswith("Traceback") and "RunawayMacrostep:" in error["traceback"]
    with pytest.raises(InstanceFailed) as failed:
        spinning.result(timeout=1)
    assert "Traceback" not in str(failed.value) and f"incarnate show {spinning}" in str(failed.value)
    assert failed.value.error == error


def test_show_and_the_console_print_the_traceback(
    engine: Engine, path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    payment = engine.start(PAYMENT)
    engine.run_until_idle()
    task_id = _task_of(engine, payment).id  # type: ignore[attr-defined]
    assert main(["show", str(task_id), "--db", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "traceback:" in shown and "  RuntimeError: the bank declined attempt 1" in shown
    assert '"traceback"' not in shown  # the error line leaves it to its own block
    assert main(["tree", str(payment), "--db", str(path)]) == 0
    tree = capsys.readouterr().out
    assert "the bank declined" in tree and "Traceback" not in tree
    with TestClient(
        base_url="http://127.0.0.1", app=create_app(str(path), charts=[PAYMENT, SPINNING])
    ) as client:
        page = client.get(f"/instances/{task_id}").text
    assert '<pre class="traceback" id="traceback">Traceback (most recent call last):' in page
    assert "in _charge" in page


def test_a_long_traceback_keeps_its_end() -> None:
    def fail(n: int) -> None:
        try:
            if n == 0:
                raise KeyError("the innermost frame")
            fail(n - 1)
        except (KeyError, RuntimeError) as error:
            raise RuntimeError(f"level {n} " + "of a long story " * 20) from error

    try:
        fail(30)
    except RuntimeError as error:
        text = traceback_text(error)
    assert len(text) < MAX_TRACEBACK_CHARS + 100
    assert text.startswith("[the first ") and "characters of this traceback were left out]" in text
    assert text.rstrip().endswith("RuntimeError: level 30 " + ("of a long story " * 20).rstrip())
    assert "KeyError: 'the innermost frame'" not in text  # the first cause is printed first, so left out

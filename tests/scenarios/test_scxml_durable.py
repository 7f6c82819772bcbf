"""The SCXML example (an invoked child document and a delayed send) killed with SIGKILL and recovered.

``docs/examples/scxml/order.scxml`` invokes ``payment.scxml`` and sends
itself a reminder after 500 ms. A process runs it and is killed at a commit
point; a fresh process loads the same documents, recovers the same
incarnations (identity, birth facts, snapshots; nothing re-published) and
runs the order to its end.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from incarnate import Engine, Storage
from statechart.scxml import load
from tests.scenarios.test_cold_recovery_processes import store_args  # noqa: F401 - the store fixture
from tests.scenarios.test_cold_recovery_processes import worker as _worker

SEED = int(os.environ.get("INCARNATE_KILL_SEED", random.SystemRandom().randrange(1_000_000)))
KILL_POINTS = [
    (
        random.Random(SEED + n).choice(["before-commit", "after-commit"]),
        random.Random(SEED * 3 + n).randint(1, 6),
    )
    for n in range(3)
]


def worker(*args: str) -> tuple[int, list[dict[str, object]]]:
    """Run the SCXML worker module in a fresh process."""
    return _worker(*args, module="tests.scenarios.scxml_worker")


@pytest.mark.slow
@pytest.mark.parametrize("kill", KILL_POINTS, ids=[f"{p}-{k}" for p, k in KILL_POINTS])
def test_scxml_order_recovers_the_same_incarnations(store_args: list[str], kill: tuple[str, int]) -> None:  # noqa: F811
    """Killed at a commit point, the order and its payment child come back exactly and finish."""
    point, kill_at = kill
    code, lines = worker("run", *store_args, "--kill-at", str(kill_at), "--point", point)
    assert code == -9, f"the worker was not killed (seed {SEED}): {lines}"
    _, committed_lines = worker("facts", *store_args)
    committed = committed_lines[0]["facts"]
    _, recovered_lines = worker("recover", *store_args)
    recovered = recovered_lines[0]["recovered"]
    assert isinstance(committed, dict) and isinstance(recovered, dict)
    assert recovered["tree"] == committed["tree"], f"seed {SEED}, kill {kill}"
    assert recovered["births"] == committed["births"], "recovery published a Birth"
    assert recovered["events"] == committed["events"], "recovery committed something"
    if committed["tree"]:
        assert recovered_lines[-1] == {"final": "done", "output": {"receipt": "R-42", "reminded": True}}
    else:
        assert recovered_lines[-1] == {"final": "never started"}


PICKER = """
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python" name="picker">
  <datamodel><data id="which" expr="'file:fast.scxml'"/><data id="got"/></datamodel>
  <state id="picking">
    <onentry><assign location="which" expr="'file:slow.scxml'"/></onentry>
    <invoke id="worker" srcexpr="which" autoforward="true">
      <finalize><assign location="got" expr="_event.data"/></finalize>
    </invoke>
    <transition event="done.invoke.worker" target="done"/>
  </state>
  <final id="done"><donedata><content expr="got"/></donedata></final>
</scxml>
"""

WORKER = """
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python" name="{name}">
  <state id="waiting"><transition event="go" target="end"/></state>
  <final id="end"><donedata><content expr="'{name}'"/></donedata></final>
</scxml>
"""


def test_a_srcexpr_child_is_recovered_with_the_chart_its_birth_picked(tmp_path: Path) -> None:
    """srcexpr picks the child's document at invoke time; a fresh engine recovers that child exactly (6.4)."""
    for name in ("fast", "slow"):
        (tmp_path / f"{name}.scxml").write_text(WORKER.format(name=name))
    (tmp_path / "picker.scxml").write_text(PICKER)
    store = str(tmp_path / "store.db")
    engine = Engine([load(tmp_path / "picker.scxml")], storage=Storage.sqlite(store))
    handle = engine.start("picker")
    engine.run_until_idle()
    (child,) = [engine.instance(a.child_id) for a in engine.instance(handle.id).record.activations]
    assert child.record.name == "slow"  # not the first of the charts, nor the value before onentry
    engine.close()

    engine = Engine([load(tmp_path / "picker.scxml")], storage=Storage.sqlite(store))
    assert engine.resume_all() == 2  # the picker and its child
    engine.send(handle.id, "go")  # forwarded to the child
    engine.run_until_idle()
    assert engine.instance(handle.id).record.output == "slow"
    engine.close()

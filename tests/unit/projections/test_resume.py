"""The ResumePlan on hand-made corruptions that the property tests do not draw."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from engine import VirtualClock
from engine.testing import memory_engine
from projections import MismatchedActivation, resume_plan
from tests.scenarios import charts


def retrying_parent() -> tuple[list[Any], Any]:
    """The events of a parent whose only child failed and waits for its retry, and its chart."""
    clock = VirtualClock(1000.0)
    engine = memory_engine(charts.ALL, {"charge": lambda call: "ok"}, clock=clock)
    parent = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    engine.cancel(engine.instance(parent).record.activations[0].child_id, "failed")
    engine.run_until_idle()
    events = list(engine.events.get(parent))
    chart = engine.charts["parent"]
    engine.close()
    return events, chart


@pytest.mark.parametrize("field", ["deadline", "error"])
def test_altered_retry_cursor_is_a_mismatch(field: str) -> None:
    """A ChildRetry whose deadline disagrees with the slot's retry deadline is a mismatched activation."""
    events, chart = retrying_parent()
    resume_plan(events, chart)  # the clean stream plans
    index = next(n for n, e in enumerate(events) if type(e).__name__ == "ChildRetry")
    retry: Any = events[index]
    if field == "deadline":
        events[index] = dataclasses.replace(retry, deadline=retry.deadline + 100)
        with pytest.raises(MismatchedActivation, match=r"team\[a\].*retry"):
            resume_plan(events, chart)
    else:
        # The error text is journal-only evidence: it does not change what resumes.
        events[index] = dataclasses.replace(retry, error={"changed": True})
        assert resume_plan(events, chart).activations[0].journal[-1].error == {"changed": True}

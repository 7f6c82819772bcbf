"""An event that takes no transition is reported as :class:`Ignored`, on the ordinary and the planned path."""

from __future__ import annotations

import attrs

from statechart import Chart, Event, final, invoke, start, state, step, transition
from statechart.effects import Ignored


@attrs.frozen
class Amount:
    """The context: an amount that decides the guard."""

    amount: int = 0


def big(amount: Amount, event: Event) -> bool:
    """Approve only large amounts."""
    return isinstance(event.data, int) and event.data > 100


PLAIN = Chart(
    "plain",
    state("review", on=[transition("approve", "approved"), transition("note")]),
    final("approved"),
)
"""No guard, no action: its macrosteps are planned once and reused."""

GUARDED = Chart(
    "guarded",
    state("review", on=[transition("approve", "approved", guard=big)]),
    final("approved"),
    context=Amount,
)


def test_a_misspelt_event_is_reported_ignored() -> None:
    """An event no transition of the configuration matches changes nothing and yields Ignored(name)."""
    snapshot, _ = start(PLAIN)
    after, effects = step(PLAIN, snapshot, Event("aprove"))
    assert effects == (Ignored("aprove"),)
    assert after.configuration == ("review",)


def test_a_planned_ignored_event_is_still_reported() -> None:
    """The second time, when the chart's plan answers without the interpreter, it is still reported."""
    snapshot, _ = start(PLAIN)
    for _ in range(3):
        snapshot, effects = step(PLAIN, snapshot, Event("aprove"))
        assert effects == (Ignored("aprove"),)
    assert PLAIN.plans is not None and any(key[2] == "aprove" for key in PLAIN.plans)


def test_an_event_whose_guards_are_all_false_is_ignored() -> None:
    """A matching transition whose guard refuses the event leaves it ignored too."""
    snapshot, _ = start(GUARDED)
    _, effects = step(GUARDED, snapshot, Event("approve", 5))
    assert effects == (Ignored("approve"),)
    after, effects = step(GUARDED, snapshot, Event("approve", 500))
    assert not any(isinstance(effect, Ignored) for effect in effects)
    assert after.configuration == ("approved",)


def test_a_targetless_transition_takes_the_event() -> None:
    """An event taken by a transition without a target is handled, though the configuration stays."""
    snapshot, _ = start(PLAIN)
    for _ in range(2):
        snapshot, effects = step(PLAIN, snapshot, Event("note"))
        assert effects == ()


def test_an_event_forwarded_to_a_child_is_not_ignored() -> None:
    """An autoforwarding site passes the event to its running child: that counts as taken."""
    kid = Chart("kid", state("idle", on=[transition("poke", "poked")]), final("poked"))
    parent = Chart(
        "forwarding",
        state("running", invoke=[invoke("kid", chart="kid", autoforward=True)]),
        companions=[kid],
    )
    snapshot, _ = start(parent)
    _, effects = step(parent, snapshot, Event("poke"))
    assert not any(isinstance(effect, Ignored) for effect in effects)
    assert effects  # the copy sent to the child

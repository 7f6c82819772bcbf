"""SCION conformance tests of the 'multiple-events-per-transition' group, ported to Python charts.

Ported from the SCION test corpus (Apache-2.0): each case is the group's
SCXML chart written with the incarnate authoring API, and its event script.
"""

from statechart import Chart, state, transition
from tests.conformance.cases import Case, Step

CASES = [
    Case(
        "multiple-events-per-transition/test1",
        lambda: Chart(
            "multiple_events_per_transition.test1",
            state(
                "a",
                on=[transition("foo bar bat", "b")],
            ),
            state(
                "b",
                on=[transition("foo bar bat", "c")],
            ),
            state(
                "c",
                on=[transition("foo bar bat", "d")],
            ),
            state(
                "d",
            ),
        ),
        initial=["a"],
        script=[Step("foo", ["b"]), Step("bar", ["c"]), Step("bat", ["d"])],
    ),
]

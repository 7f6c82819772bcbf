"""SCION conformance tests of the 'default-initial-state' group, ported to Python charts.

Ported from the SCION test corpus (Apache-2.0): each case is the group's
SCXML chart written with the incarnate authoring API, and its event script.
"""

from statechart import Chart, state, transition
from tests.conformance.cases import Case, Step

CASES = [
    Case(
        "default-initial-state/initial1",
        lambda: Chart(
            "default_initial_state.initial1",
            state(
                "a",
                on=[transition("t", "b")],
            ),
            state(
                "b",
            ),
        ),
        initial=["a"],
        script=[Step("t", ["b"])],
    ),
    Case(
        "default-initial-state/initial2",
        lambda: Chart(
            "default_initial_state.initial2",
            state(
                "a",
                on=[transition("t", "b")],
            ),
            state(
                "b",
            ),
            initial="a",
        ),
        initial=["a"],
        script=[Step("t", ["b"])],
    ),
]

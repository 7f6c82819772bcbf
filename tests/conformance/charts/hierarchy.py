"""SCION conformance tests of the 'hierarchy' group, ported to Python charts.

Ported from the SCION test corpus (Apache-2.0): each case is the group's
SCXML chart written with the incarnate authoring API, and its event script.
"""

from statechart import Chart, state, transition
from tests.conformance.cases import Case, Step

CASES = [
    Case(
        "hierarchy/hier0",
        lambda: Chart(
            "hierarchy.hier0",
            state(
                "a",
                state(
                    "a1",
                    on=[transition("t", "a2")],
                ),
                state(
                    "a2",
                ),
            ),
        ),
        initial=["a1"],
        script=[Step("t", ["a2"])],
    ),
    Case(
        "hierarchy/hier1",
        lambda: Chart(
            "hierarchy.hier1",
            state(
                "a",
                state(
                    "a1",
                    on=[transition("t", "a2")],
                ),
                state(
                    "a2",
                ),
                on=[transition("t", "b")],
            ),
            state(
                "b",
            ),
        ),
        initial=["a1"],
        script=[Step("t", ["a2"])],
    ),
    Case(
        "hierarchy/hier2",
        lambda: Chart(
            "hierarchy.hier2",
            state(
                "a",
                state(
                    "a1",
                    on=[transition("t", "b")],
                ),
                state(
                    "a2",
                ),
                on=[transition("t", "a2")],
            ),
            state(
                "b",
            ),
        ),
        initial=["a1"],
        script=[Step("t", ["b"])],
    ),
]

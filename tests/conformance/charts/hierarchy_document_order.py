"""SCION conformance tests of the 'hierarchy+documentOrder' group, ported to Python charts.

Ported from the SCION test corpus (Apache-2.0): each case is the group's
SCXML chart written with the incarnate authoring API, and its event script.
"""

from statechart import Chart, state, transition
from tests.conformance.cases import Case, Step

CASES = [
    Case(
        "hierarchy+documentOrder/test0",
        lambda: Chart(
            "hierarchy_document_order.test0",
            state(
                "a",
                state(
                    "a1",
                    on=[transition("t", "a2"), transition("t", "c")],
                ),
                state(
                    "a2",
                ),
                on=[transition("t", "b")],
            ),
            state(
                "b",
            ),
            state(
                "c",
            ),
        ),
        initial=["a1"],
        script=[Step("t", ["a2"])],
    ),
    Case(
        "hierarchy+documentOrder/test1",
        lambda: Chart(
            "hierarchy_document_order.test1",
            state(
                "a",
                state(
                    "a1",
                    on=[transition("t", "b"), transition("t", "c")],
                ),
                state(
                    "a2",
                ),
                on=[transition("t", "a2")],
            ),
            state(
                "b",
            ),
            state(
                "c",
            ),
        ),
        initial=["a1"],
        script=[Step("t", ["b"])],
    ),
]

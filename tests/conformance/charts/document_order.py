"""SCION conformance tests of the 'documentOrder' group, ported to Python charts.

Ported from the SCION test corpus (Apache-2.0): each case is the group's
SCXML chart written with the incarnate authoring API, and its event script.
"""

from statechart import Chart, state, transition
from tests.conformance.cases import Case, Step

CASES = [
    Case(
        "documentOrder/documentOrder0",
        lambda: Chart(
            "document_order.documentOrder0",
            state(
                "a",
                on=[transition("t", "b"), transition("t", "c")],
            ),
            state(
                "b",
            ),
            state(
                "c",
            ),
        ),
        initial=["a"],
        script=[Step("t", ["b"])],
    ),
]

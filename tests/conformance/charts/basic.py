"""SCION conformance tests of the 'basic' group, ported to Python charts.

Ported from the SCION test corpus (Apache-2.0): each case is the group's
SCXML chart written with the incarnate authoring API, and its event script.
"""

from statechart import Chart, state, transition
from tests.conformance.cases import Case, Step

CASES = [
    Case(
        "basic/basic0",
        lambda: Chart(
            "basic.basic0",
            state(
                "a",
            ),
            initial="a",
        ),
        initial=["a"],
        script=[],
    ),
    Case(
        "basic/basic1",
        lambda: Chart(
            "basic.basic1",
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
        "basic/basic2",
        lambda: Chart(
            "basic.basic2",
            state(
                "a",
                on=[transition("t", "b")],
            ),
            state(
                "b",
                on=[transition("t2", "c")],
            ),
            state(
                "c",
            ),
        ),
        initial=["a"],
        script=[Step("t", ["b"]), Step("t2", ["c"])],
    ),
]

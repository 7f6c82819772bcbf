"""SCION conformance tests of the 'parallel' group, ported to Python charts.

Ported from the SCION test corpus (Apache-2.0): each case is the group's
SCXML chart written with the incarnate authoring API, and its event script.
"""

from statechart import Chart, parallel, state, transition
from tests.conformance.cases import Case, Step

CASES = [
    Case(
        "parallel/test0",
        lambda: Chart(
            "parallel.test0",
            parallel(
                "p",
                state(
                    "a",
                ),
                state(
                    "b",
                ),
            ),
        ),
        initial=["a", "b"],
        script=[],
    ),
    Case(
        "parallel/test1",
        lambda: Chart(
            "parallel.test1",
            parallel(
                "p",
                state(
                    "a",
                    state(
                        "a1",
                        on=[transition("t", "a2")],
                    ),
                    state(
                        "a2",
                    ),
                    initial="a1",
                ),
                state(
                    "b",
                    state(
                        "b1",
                        on=[transition("t", "b2")],
                    ),
                    state(
                        "b2",
                    ),
                    initial="b1",
                ),
            ),
        ),
        initial=["a1", "b1"],
        script=[Step("t", ["a2", "b2"])],
    ),
    Case(
        "parallel/test2",
        lambda: Chart(
            "parallel.test2",
            parallel(
                "p1",
                state(
                    "s1",
                    parallel(
                        "p2",
                        state(
                            "s3",
                        ),
                        state(
                            "s4",
                        ),
                        on=[transition("t", "p3")],
                    ),
                    parallel(
                        "p3",
                        state(
                            "s5",
                        ),
                        state(
                            "s6",
                        ),
                    ),
                    initial="p2",
                ),
                state(
                    "s2",
                    parallel(
                        "p4",
                        state(
                            "s7",
                        ),
                        state(
                            "s8",
                        ),
                        on=[transition("t", "p5")],
                    ),
                    parallel(
                        "p5",
                        state(
                            "s9",
                        ),
                        state(
                            "s10",
                        ),
                    ),
                    initial="p4",
                ),
            ),
        ),
        initial=["s3", "s4", "s7", "s8"],
        script=[Step("t", ["s5", "s6", "s9", "s10"])],
    ),
    Case(
        "parallel/test3",
        lambda: Chart(
            "parallel.test3",
            parallel(
                "p1",
                state(
                    "s1",
                    parallel(
                        "p2",
                        state(
                            "s3",
                            state(
                                "s3.1",
                                on=[transition("t", "s3.2")],
                            ),
                            state(
                                "s3.2",
                            ),
                            initial="s3.1",
                        ),
                        state(
                            "s4",
                        ),
                    ),
                    parallel(
                        "p3",
                        state(
                            "s5",
                        ),
                        state(
                            "s6",
                        ),
                    ),
                    initial="p2",
                ),
                state(
                    "s2",
                    parallel(
                        "p4",
                        state(
                            "s7",
                        ),
                        state(
                            "s8",
                        ),
                        on=[transition("t", "p5")],
                    ),
                    parallel(
                        "p5",
                        state(
                            "s9",
                        ),
                        state(
                            "s10",
                        ),
                    ),
                    initial="p4",
                ),
            ),
            initial="p1",
            allow_unreachable=["p3"],
        ),
        initial=["s3.1", "s4", "s7", "s8"],
        script=[Step("t", ["s3.2", "s4", "s9", "s10"])],
    ),
]

"""SCION conformance tests of the 'more-parallel' group, ported to Python charts.

Ported from the SCION test corpus (Apache-2.0): each case is the group's
SCXML chart written with the incarnate authoring API, and its event script.
"""

from statechart import Chart, parallel, state, transition
from tests.conformance.cases import Case, Step

CASES = [
    Case(
        "more-parallel/test0",
        lambda: Chart(
            "more_parallel.test0",
            parallel(
                "p",
                state(
                    "a",
                    on=[transition("t", "a")],
                ),
                state(
                    "b",
                ),
            ),
        ),
        initial=["a", "b"],
        script=[Step("t", ["a", "b"])],
    ),
    Case(
        "more-parallel/test1",
        lambda: Chart(
            "more_parallel.test1",
            parallel(
                "p",
                state(
                    "a",
                    state(
                        "a1",
                    ),
                    state(
                        "a2",
                    ),
                    on=[transition("t", "a")],
                ),
                state(
                    "b",
                    state(
                        "b1",
                    ),
                    state(
                        "b2",
                    ),
                ),
            ),
            allow_unreachable=["a2", "b2"],
        ),
        initial=["a1", "b1"],
        script=[Step("t", ["a1", "b1"])],
    ),
    Case(
        "more-parallel/test2",
        lambda: Chart(
            "more_parallel.test2",
            parallel(
                "p",
                state(
                    "a",
                    state(
                        "a1",
                    ),
                    state(
                        "a2",
                    ),
                    on=[transition("t", "a")],
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
                ),
            ),
            allow_unreachable=["a2"],
        ),
        initial=["a1", "b1"],
        script=[Step("t", ["a1", "b1"])],
    ),
    Case(
        "more-parallel/test2b",
        lambda: Chart(
            "more_parallel.test2b",
            parallel(
                "p",
                state(
                    "b",
                    state(
                        "b1",
                        on=[transition("t", "b2")],
                    ),
                    state(
                        "b2",
                    ),
                ),
                state(
                    "a",
                    state(
                        "a1",
                    ),
                    state(
                        "a2",
                    ),
                    on=[transition("t", "a")],
                ),
            ),
            allow_unreachable=["a2"],
        ),
        initial=["a1", "b1"],
        script=[Step("t", ["a1", "b2"])],
    ),
    Case(
        "more-parallel/test3",
        lambda: Chart(
            "more_parallel.test3",
            parallel(
                "p",
                state(
                    "a",
                    state(
                        "a1",
                    ),
                    state(
                        "a2",
                    ),
                    on=[transition("t", "a2")],
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
                ),
            ),
        ),
        initial=["a1", "b1"],
        script=[Step("t", ["a2", "b1"])],
    ),
    Case(
        "more-parallel/test3b",
        lambda: Chart(
            "more_parallel.test3b",
            parallel(
                "p",
                state(
                    "b",
                    state(
                        "b1",
                        on=[transition("t", "b2")],
                    ),
                    state(
                        "b2",
                    ),
                ),
                state(
                    "a",
                    state(
                        "a1",
                    ),
                    state(
                        "a2",
                    ),
                    on=[transition("t", "a2")],
                ),
            ),
        ),
        initial=["a1", "b1"],
        script=[Step("t", ["a1", "b2"])],
    ),
    Case(
        "more-parallel/test4",
        lambda: Chart(
            "more_parallel.test4",
            parallel(
                "p",
                state(
                    "a",
                    state(
                        "a1",
                    ),
                    state(
                        "a2",
                    ),
                    on=[transition("t", "a")],
                ),
                state(
                    "b",
                    state(
                        "b1",
                    ),
                    state(
                        "b2",
                    ),
                    on=[transition("t", "b")],
                ),
            ),
            allow_unreachable=["a2", "b2"],
        ),
        initial=["a1", "b1"],
        script=[Step("t", ["a1", "b1"])],
    ),
    Case(
        "more-parallel/test5",
        lambda: Chart(
            "more_parallel.test5",
            parallel(
                "p",
                state(
                    "a",
                    state(
                        "a1",
                    ),
                    state(
                        "a2",
                    ),
                    on=[transition("t", "a2")],
                ),
                state(
                    "b",
                    state(
                        "b1",
                    ),
                    state(
                        "b2",
                    ),
                    on=[transition("t", "b2")],
                ),
            ),
        ),
        initial=["a1", "b1"],
        script=[Step("t", ["a2", "b1"])],
    ),
    Case(
        "more-parallel/test6",
        lambda: Chart(
            "more_parallel.test6",
            parallel(
                "p",
                state(
                    "a",
                    state(
                        "a1",
                        state(
                            "a11",
                        ),
                        state(
                            "a12",
                        ),
                    ),
                    state(
                        "a2",
                        state(
                            "a21",
                        ),
                        state(
                            "a22",
                        ),
                    ),
                    on=[transition("t", "a22")],
                ),
                state(
                    "b",
                    state(
                        "b1",
                        state(
                            "b11",
                            on=[transition("t", "b12")],
                        ),
                        state(
                            "b12",
                        ),
                    ),
                    state(
                        "b2",
                        state(
                            "b21",
                        ),
                        state(
                            "b22",
                        ),
                    ),
                ),
            ),
            allow_unreachable=["a12", "a21", "b2"],
        ),
        initial=["a11", "b11"],
        script=[Step("t", ["a22", "b11"])],
    ),
    Case(
        "more-parallel/test6b",
        lambda: Chart(
            "more_parallel.test6b",
            parallel(
                "p",
                state(
                    "b",
                    state(
                        "b1",
                        state(
                            "b11",
                            on=[transition("t", "b12")],
                        ),
                        state(
                            "b12",
                        ),
                    ),
                    state(
                        "b2",
                        state(
                            "b21",
                        ),
                        state(
                            "b22",
                        ),
                    ),
                ),
                state(
                    "a",
                    state(
                        "a1",
                        state(
                            "a11",
                        ),
                        state(
                            "a12",
                        ),
                    ),
                    state(
                        "a2",
                        state(
                            "a21",
                        ),
                        state(
                            "a22",
                        ),
                    ),
                    on=[transition("t", "a22")],
                ),
            ),
            allow_unreachable=["b2", "a12", "a21"],
        ),
        initial=["a11", "b11"],
        script=[Step("t", ["a11", "b12"])],
    ),
    Case(
        "more-parallel/test7",
        lambda: Chart(
            "more_parallel.test7",
            parallel(
                "p",
                state(
                    "a",
                    state(
                        "a1",
                        state(
                            "a11",
                        ),
                        state(
                            "a12",
                        ),
                    ),
                    state(
                        "a2",
                        state(
                            "a21",
                        ),
                        state(
                            "a22",
                        ),
                    ),
                    on=[transition("t", "a22")],
                ),
                state(
                    "b",
                    state(
                        "b1",
                        state(
                            "b11",
                        ),
                        state(
                            "b12",
                        ),
                    ),
                    state(
                        "b2",
                        state(
                            "b21",
                        ),
                        state(
                            "b22",
                        ),
                    ),
                    on=[transition("t", "b22")],
                ),
            ),
            allow_unreachable=["a12", "a21", "b12", "b21"],
        ),
        initial=["a11", "b11"],
        script=[Step("t", ["a22", "b11"])],
    ),
    Case(
        "more-parallel/test8",
        lambda: Chart(
            "more_parallel.test8",
            state(
                "x",
                on=[transition("t", "a22")],
            ),
            parallel(
                "p",
                state(
                    "a",
                    state(
                        "a1",
                        state(
                            "a11",
                        ),
                        state(
                            "a12",
                        ),
                    ),
                    state(
                        "a2",
                        state(
                            "a21",
                        ),
                        state(
                            "a22",
                        ),
                    ),
                ),
                state(
                    "b",
                    state(
                        "b1",
                        state(
                            "b11",
                        ),
                        state(
                            "b12",
                        ),
                    ),
                    state(
                        "b2",
                        state(
                            "b21",
                        ),
                        state(
                            "b22",
                        ),
                    ),
                ),
            ),
            allow_unreachable=["a1", "a21", "b12", "b2"],
        ),
        initial=["x"],
        script=[Step("t", ["a22", "b11"])],
    ),
    Case(
        "more-parallel/test9",
        lambda: Chart(
            "more_parallel.test9",
            state(
                "x",
                on=[transition("t", "a22 b22")],
            ),
            parallel(
                "p",
                state(
                    "a",
                    state(
                        "a1",
                        state(
                            "a11",
                        ),
                        state(
                            "a12",
                        ),
                    ),
                    state(
                        "a2",
                        state(
                            "a21",
                        ),
                        state(
                            "a22",
                        ),
                    ),
                ),
                state(
                    "b",
                    state(
                        "b1",
                        state(
                            "b11",
                        ),
                        state(
                            "b12",
                        ),
                    ),
                    state(
                        "b2",
                        state(
                            "b21",
                        ),
                        state(
                            "b22",
                        ),
                    ),
                ),
            ),
            allow_unreachable=["a1", "a21", "b12", "b21"],
        ),
        initial=["x"],
        script=[Step("t", ["a22", "b22"])],
    ),
]

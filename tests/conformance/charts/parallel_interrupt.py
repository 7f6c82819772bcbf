"""SCION conformance tests of the 'parallel+interrupt' group, ported to Python charts.

Ported from the SCION test corpus (Apache-2.0): each case is the group's
SCXML chart written with the incarnate authoring API, and its event script.
"""

from statechart import Chart, parallel, state, transition
from tests.conformance.cases import Case, Step

CASES = [
    Case(
        "parallel+interrupt/test0",
        lambda: Chart(
            "parallel_interrupt.test0",
            parallel(
                "b",
                state(
                    "c",
                    on=[transition("t", "a1")],
                ),
                state(
                    "d",
                    on=[transition("t", "a2")],
                ),
            ),
            state(
                "a1",
            ),
            state(
                "a2",
            ),
            initial="b",
        ),
        initial=["c", "d"],
        script=[Step("t", ["a1"])],
    ),
    Case(
        "parallel+interrupt/test1",
        lambda: Chart(
            "parallel_interrupt.test1",
            parallel(
                "b",
                state(
                    "c",
                    state(
                        "c1",
                        on=[transition("t", "c2")],
                    ),
                    state(
                        "c2",
                    ),
                    initial="c1",
                ),
                state(
                    "d",
                    state(
                        "d1",
                        on=[transition("t", "a1")],
                    ),
                    initial="d1",
                ),
            ),
            state(
                "a1",
            ),
            initial="b",
        ),
        initial=["c1", "d1"],
        script=[Step("t", ["c2", "d1"])],
    ),
    Case(
        "parallel+interrupt/test2",
        lambda: Chart(
            "parallel_interrupt.test2",
            parallel(
                "b",
                state(
                    "c",
                    state(
                        "c1",
                        on=[transition("t", "a1")],
                    ),
                    state(
                        "c2",
                    ),
                    initial="c1",
                ),
                state(
                    "d",
                    state(
                        "d1",
                        on=[transition("t", "d2")],
                    ),
                    state(
                        "d2",
                    ),
                    initial="d1",
                ),
            ),
            state(
                "a1",
            ),
            initial="b",
            allow_unreachable=["c2"],
        ),
        initial=["c1", "d1"],
        script=[Step("t", ["a1"])],
    ),
    Case(
        "parallel+interrupt/test3",
        lambda: Chart(
            "parallel_interrupt.test3",
            parallel(
                "b",
                parallel(
                    "c",
                    state(
                        "e",
                        on=[transition("t", "a1")],
                    ),
                    state(
                        "f",
                        on=[transition("t", "a2")],
                    ),
                    on=[transition("t", "a3")],
                ),
                state(
                    "d",
                    on=[transition("t", "a4")],
                ),
            ),
            state(
                "a1",
            ),
            state(
                "a2",
            ),
            state(
                "a3",
            ),
            state(
                "a4",
            ),
            initial="b",
        ),
        initial=["e", "f", "d"],
        script=[Step("t", ["a1"])],
    ),
    Case(
        "parallel+interrupt/test4",
        lambda: Chart(
            "parallel_interrupt.test4",
            parallel(
                "b",
                parallel(
                    "p",
                    state(
                        "e",
                        on=[transition("t", "a1")],
                    ),
                    state(
                        "f",
                        on=[transition("t", "a2")],
                    ),
                    on=[transition("t", "a3")],
                ),
                state(
                    "d",
                    state(
                        "g",
                        on=[transition("t", "h")],
                    ),
                    state(
                        "h",
                    ),
                    initial="g",
                ),
            ),
            state(
                "a1",
            ),
            state(
                "a2",
            ),
            state(
                "a3",
            ),
            state(
                "a4",
            ),
            initial="b",
            allow_unreachable=["a4"],
        ),
        initial=["e", "f", "g"],
        script=[Step("t", ["a1"])],
    ),
    Case(
        "parallel+interrupt/test5",
        lambda: Chart(
            "parallel_interrupt.test5",
            parallel(
                "b",
                state(
                    "d",
                    state(
                        "g",
                        on=[transition("t", "h")],
                    ),
                    state(
                        "h",
                    ),
                    initial="g",
                ),
                parallel(
                    "p",
                    state(
                        "e",
                        on=[transition("t", "a1")],
                    ),
                    state(
                        "f",
                        on=[transition("t", "a2")],
                    ),
                    on=[transition("t", "a3")],
                ),
            ),
            state(
                "a1",
            ),
            state(
                "a2",
            ),
            state(
                "a3",
            ),
            state(
                "a4",
            ),
            initial="b",
            allow_unreachable=["a4"],
        ),
        initial=["e", "f", "g"],
        script=[Step("t", ["e", "f", "h"])],
    ),
    Case(
        "parallel+interrupt/test6",
        lambda: Chart(
            "parallel_interrupt.test6",
            parallel(
                "b",
                state(
                    "c",
                    state(
                        "g",
                        on=[transition("t", "h")],
                    ),
                    state(
                        "h",
                    ),
                    initial="g",
                ),
                parallel(
                    "d",
                    state(
                        "e",
                        state(
                            "e1",
                            on=[transition("t", "e2")],
                        ),
                        state(
                            "e2",
                        ),
                        initial="e1",
                    ),
                    state(
                        "f",
                        state(
                            "f1",
                            on=[transition("t", "f2")],
                        ),
                        state(
                            "f2",
                        ),
                        initial="f1",
                    ),
                ),
            ),
            initial="b",
        ),
        initial=["g", "e1", "f1"],
        script=[Step("t", ["h", "e2", "f2"])],
    ),
    Case(
        "parallel+interrupt/test7",
        lambda: Chart(
            "parallel_interrupt.test7",
            parallel(
                "b",
                state(
                    "c",
                    on=[transition("t", "a1")],
                ),
                parallel(
                    "d",
                    state(
                        "e",
                        state(
                            "e1",
                            on=[transition("t", "e2")],
                        ),
                        state(
                            "e2",
                        ),
                        initial="e1",
                    ),
                    state(
                        "f",
                        state(
                            "f1",
                            on=[transition("t", "f2")],
                        ),
                        state(
                            "f2",
                        ),
                        initial="f1",
                    ),
                ),
            ),
            state(
                "a1",
            ),
            initial="b",
        ),
        initial=["c", "e1", "f1"],
        script=[Step("t", ["a1"])],
    ),
    Case(
        "parallel+interrupt/test7b",
        lambda: Chart(
            "parallel_interrupt.test7b",
            parallel(
                "b",
                parallel(
                    "d",
                    state(
                        "e",
                        state(
                            "e1",
                            on=[transition("t", "e2")],
                        ),
                        state(
                            "e2",
                        ),
                        initial="e1",
                    ),
                    state(
                        "f",
                        state(
                            "f1",
                            on=[transition("t", "f2")],
                        ),
                        state(
                            "f2",
                        ),
                        initial="f1",
                    ),
                ),
                state(
                    "c",
                    on=[transition("t", "a1")],
                ),
            ),
            state(
                "a1",
            ),
            initial="b",
        ),
        initial=["c", "e1", "f1"],
        script=[Step("t", ["c", "e2", "f2"])],
    ),
    Case(
        "parallel+interrupt/test8",
        lambda: Chart(
            "parallel_interrupt.test8",
            state(
                "a",
                parallel(
                    "b",
                    state(
                        "b1",
                    ),
                    state(
                        "b2",
                    ),
                    on=[transition("t", "c")],
                ),
                parallel(
                    "c",
                    state(
                        "c1",
                    ),
                    state(
                        "c2",
                    ),
                ),
                initial="b",
            ),
            initial="a",
        ),
        initial=["b1", "b2"],
        script=[Step("t", ["c1", "c2"])],
    ),
    Case(
        "parallel+interrupt/test9",
        lambda: Chart(
            "parallel_interrupt.test9",
            state(
                "a",
                parallel(
                    "b",
                    state(
                        "b1",
                        on=[transition("t", "c")],
                    ),
                    state(
                        "b2",
                    ),
                ),
                parallel(
                    "c",
                    state(
                        "c1",
                    ),
                    state(
                        "c2",
                    ),
                ),
                initial="b",
            ),
            initial="a",
        ),
        initial=["b1", "b2"],
        script=[Step("t", ["c1", "c2"])],
    ),
    Case(
        "parallel+interrupt/test10",
        lambda: Chart(
            "parallel_interrupt.test10",
            state(
                "a",
                parallel(
                    "b",
                    state(
                        "b1",
                    ),
                    state(
                        "b2",
                    ),
                ),
                parallel(
                    "c",
                    state(
                        "c1",
                    ),
                    state(
                        "c2",
                    ),
                ),
                initial="b",
                on=[transition("t", "c")],
            ),
            initial="a",
        ),
        initial=["b1", "b2"],
        script=[Step("t", ["c1", "c2"])],
    ),
    Case(
        "parallel+interrupt/test11",
        lambda: Chart(
            "parallel_interrupt.test11",
            state(
                "a",
                parallel(
                    "b",
                    state(
                        "b1",
                        on=[transition("t", "d")],
                    ),
                    state(
                        "b2",
                        on=[transition("t", "c")],
                    ),
                ),
                parallel(
                    "c",
                    state(
                        "c1",
                    ),
                    state(
                        "c2",
                    ),
                ),
                initial="b",
            ),
            state(
                "d",
            ),
            initial="a",
        ),
        initial=["b1", "b2"],
        script=[Step("t", ["d"])],
    ),
    Case(
        "parallel+interrupt/test12",
        lambda: Chart(
            "parallel_interrupt.test12",
            state(
                "a",
                parallel(
                    "b",
                    state(
                        "b1",
                        on=[transition("t", "c")],
                    ),
                    state(
                        "b2",
                        on=[transition("t", "d")],
                    ),
                ),
                parallel(
                    "c",
                    state(
                        "c1",
                    ),
                    state(
                        "c2",
                    ),
                ),
                initial="b",
            ),
            state(
                "d",
            ),
            initial="a",
        ),
        initial=["b1", "b2"],
        script=[Step("t", ["c1", "c2"])],
    ),
    Case(
        "parallel+interrupt/test13",
        lambda: Chart(
            "parallel_interrupt.test13",
            state(
                "a",
                parallel(
                    "b",
                    state(
                        "b1",
                        on=[transition("t", "c")],
                    ),
                    state(
                        "b2",
                    ),
                    on=[transition("t", "d")],
                ),
                parallel(
                    "c",
                    state(
                        "c1",
                    ),
                    state(
                        "c2",
                    ),
                ),
                initial="b",
            ),
            state(
                "d",
            ),
            initial="a",
        ),
        initial=["b1", "b2"],
        script=[Step("t", ["c1", "c2"])],
    ),
    Case(
        "parallel+interrupt/test14",
        lambda: Chart(
            "parallel_interrupt.test14",
            parallel(
                "a",
                parallel(
                    "b",
                    parallel(
                        "c",
                        parallel(
                            "d",
                            parallel(
                                "e",
                                state(
                                    "i",
                                    state(
                                        "i1",
                                        on=[transition("t", "l")],
                                    ),
                                    state(
                                        "i2",
                                    ),
                                    initial="i1",
                                ),
                                state(
                                    "j",
                                ),
                            ),
                            state(
                                "h",
                            ),
                        ),
                        state(
                            "g",
                        ),
                    ),
                    state(
                        "f",
                        state(
                            "f1",
                            on=[transition("t", "f2")],
                        ),
                        state(
                            "f2",
                        ),
                        initial="f1",
                    ),
                ),
                state(
                    "k",
                ),
            ),
            state(
                "l",
            ),
            initial="a",
            allow_unreachable=["i2"],
        ),
        initial=["i1", "j", "h", "g", "f1", "k"],
        script=[Step("t", ["l"])],
    ),
    Case(
        "parallel+interrupt/test15",
        lambda: Chart(
            "parallel_interrupt.test15",
            parallel(
                "a",
                parallel(
                    "b",
                    parallel(
                        "c",
                        parallel(
                            "d",
                            parallel(
                                "e",
                                state(
                                    "i",
                                    state(
                                        "i1",
                                        on=[transition("t", "i2")],
                                    ),
                                    state(
                                        "i2",
                                    ),
                                    initial="i1",
                                ),
                                state(
                                    "j",
                                ),
                            ),
                            state(
                                "h",
                            ),
                        ),
                        state(
                            "g",
                        ),
                    ),
                    state(
                        "f",
                        state(
                            "f1",
                            on=[transition("t", "l")],
                        ),
                        state(
                            "f2",
                        ),
                        initial="f1",
                    ),
                ),
                state(
                    "k",
                ),
            ),
            state(
                "l",
            ),
            initial="a",
            allow_unreachable=["f2"],
        ),
        initial=["i1", "j", "h", "g", "f1", "k"],
        script=[Step("t", ["i2", "j", "h", "g", "f1", "k"])],
    ),
    Case(
        "parallel+interrupt/test16",
        lambda: Chart(
            "parallel_interrupt.test16",
            parallel(
                "b",
                state(
                    "c",
                    on=[transition("t", "a")],
                ),
                state(
                    "d",
                    on=[transition("t", "a2")],
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
                initial="a1",
            ),
            initial="b",
            allow_unreachable=["a1"],
        ),
        initial=["c", "d"],
        script=[Step("t", ["a1"])],
    ),
    Case(
        "parallel+interrupt/test17",
        lambda: Chart(
            "parallel_interrupt.test17",
            parallel(
                "b",
                state(
                    "c",
                    on=[transition("t", "a2")],
                ),
                state(
                    "d",
                    on=[transition("t", "a")],
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
                initial="a1",
            ),
            initial="b",
        ),
        initial=["c", "d"],
        script=[Step("t", ["a2"])],
    ),
    Case(
        "parallel+interrupt/test18",
        lambda: Chart(
            "parallel_interrupt.test18",
            parallel(
                "b",
                state(
                    "c",
                ),
                state(
                    "d",
                    on=[transition("t", "a2")],
                ),
                on=[transition("t", "a1")],
            ),
            state(
                "a1",
            ),
            state(
                "a2",
            ),
            initial="b",
        ),
        initial=["c", "d"],
        script=[Step("t", ["a2"])],
    ),
    Case(
        "parallel+interrupt/test19",
        lambda: Chart(
            "parallel_interrupt.test19",
            parallel(
                "b",
                state(
                    "c",
                    state(
                        "c1",
                        on=[transition("t", "c2")],
                    ),
                    state(
                        "c2",
                    ),
                    initial="c1",
                ),
                state(
                    "d",
                    state(
                        "d1",
                        on=[transition("t", "d2")],
                    ),
                    state(
                        "d2",
                    ),
                    initial="d1",
                ),
                on=[transition("t", "a1")],
            ),
            state(
                "a1",
            ),
            initial="b",
        ),
        initial=["c1", "d1"],
        script=[Step("t", ["c2", "d2"])],
    ),
    Case(
        "parallel+interrupt/test20",
        lambda: Chart(
            "parallel_interrupt.test20",
            parallel(
                "b",
                state(
                    "c",
                    state(
                        "c1",
                        on=[transition("t", "c2")],
                    ),
                    state(
                        "c2",
                    ),
                    initial="c1",
                ),
                state(
                    "d",
                    on=[transition("t", "a1")],
                ),
                on=[transition("t", "a2")],
            ),
            state(
                "a1",
            ),
            state(
                "a2",
            ),
            initial="b",
        ),
        initial=["c1", "d"],
        script=[Step("t", ["c2", "d"])],
    ),
    Case(
        "parallel+interrupt/test21",
        lambda: Chart(
            "parallel_interrupt.test21",
            parallel(
                "b",
                state(
                    "c",
                    on=[transition("t", "a1")],
                ),
                state(
                    "d",
                    state(
                        "d1",
                        on=[transition("t", "d2")],
                    ),
                    state(
                        "d2",
                    ),
                    initial="d1",
                ),
                on=[transition("t", "a2")],
            ),
            state(
                "a1",
            ),
            state(
                "a2",
            ),
            initial="b",
        ),
        initial=["c", "d1"],
        script=[Step("t", ["a1"])],
    ),
    Case(
        "parallel+interrupt/test21b",
        lambda: Chart(
            "parallel_interrupt.test21b",
            parallel(
                "b",
                state(
                    "c",
                    on=[transition("t", "a1")],
                ),
                state(
                    "d",
                    state(
                        "d1",
                        on=[transition("t", "d2")],
                    ),
                    state(
                        "d2",
                    ),
                    initial="d1",
                ),
                on=[transition("t", "a2")],
            ),
            state(
                "a1",
            ),
            state(
                "a2",
            ),
            initial="b",
        ),
        initial=["c", "d1"],
        script=[Step("t", ["a1"])],
    ),
    Case(
        "parallel+interrupt/test21c",
        lambda: Chart(
            "parallel_interrupt.test21c",
            parallel(
                "b",
                state(
                    "d",
                    state(
                        "d1",
                        on=[transition("t", "d2")],
                    ),
                    state(
                        "d2",
                    ),
                    initial="d1",
                ),
                state(
                    "c",
                    on=[transition("t", "a1")],
                ),
                on=[transition("t", "a2")],
            ),
            state(
                "a1",
            ),
            state(
                "a2",
            ),
            initial="b",
        ),
        initial=["c", "d1"],
        script=[Step("t", ["c", "d2"])],
    ),
    Case(
        "parallel+interrupt/test22",
        lambda: Chart(
            "parallel_interrupt.test22",
            parallel(
                "b",
                state(
                    "c",
                    state(
                        "c1",
                        on=[transition("t", "c2")],
                    ),
                    state(
                        "c2",
                    ),
                    initial="c1",
                ),
                state(
                    "d",
                    state(
                        "d1",
                        on=[transition("t", "d2")],
                    ),
                    state(
                        "d2",
                    ),
                    initial="d1",
                ),
                on=[transition("t", "a1")],
            ),
            state(
                "a1",
            ),
            initial="b",
        ),
        initial=["c1", "d1"],
        script=[Step("t", ["c2", "d2"])],
    ),
    Case(
        "parallel+interrupt/test23",
        lambda: Chart(
            "parallel_interrupt.test23",
            parallel(
                "b",
                state(
                    "c",
                ),
                state(
                    "d",
                    on=[transition("t", "a2")],
                ),
                on=[transition("t", "a1")],
            ),
            state(
                "a1",
            ),
            state(
                "a2",
            ),
            initial="b",
        ),
        initial=["c", "d"],
        script=[Step("t", ["a2"])],
    ),
    Case(
        "parallel+interrupt/test24",
        lambda: Chart(
            "parallel_interrupt.test24",
            parallel(
                "b",
                state(
                    "c",
                    state(
                        "c1",
                        on=[transition("t", "c2")],
                    ),
                    state(
                        "c2",
                    ),
                    initial="c1",
                ),
                state(
                    "d",
                    state(
                        "d1",
                        on=[transition("t", "d2")],
                    ),
                    state(
                        "d2",
                    ),
                    initial="d1",
                ),
                on=[transition("t", "a1")],
            ),
            state(
                "a1",
            ),
            initial="b",
        ),
        initial=["c1", "d1"],
        script=[Step("t", ["c2", "d2"])],
    ),
    Case(
        "parallel+interrupt/test25",
        lambda: Chart(
            "parallel_interrupt.test25",
            parallel(
                "b",
                state(
                    "c",
                    state(
                        "c1",
                        on=[transition("t", "c2")],
                    ),
                    state(
                        "c2",
                    ),
                    initial="c1",
                ),
                state(
                    "d",
                    on=[transition("t", "a1")],
                ),
                on=[transition("t", "a2")],
            ),
            state(
                "a1",
            ),
            state(
                "a2",
            ),
            initial="b",
        ),
        initial=["c1", "d"],
        script=[Step("t", ["c2", "d"])],
    ),
    Case(
        "parallel+interrupt/test27",
        lambda: Chart(
            "parallel_interrupt.test27",
            parallel(
                "b",
                state(
                    "c",
                    state(
                        "c1",
                        on=[transition("t", "c2")],
                    ),
                    state(
                        "c2",
                    ),
                    initial="c1",
                ),
                state(
                    "d",
                    state(
                        "d1",
                        on=[transition("t", "d2")],
                    ),
                    state(
                        "d2",
                    ),
                    initial="d1",
                ),
                on=[transition("t", "a1")],
            ),
            state(
                "a1",
            ),
            initial="b",
        ),
        initial=["c1", "d1"],
        script=[Step("t", ["c2", "d2"])],
    ),
    Case(
        "parallel+interrupt/test28",
        lambda: Chart(
            "parallel_interrupt.test28",
            parallel(
                "b",
                state(
                    "c",
                ),
                state(
                    "d",
                    on=[transition("t", "a2")],
                ),
                on=[transition("t", "a")],
            ),
            state(
                "a",
                state(
                    "a1",
                ),
                state(
                    "a2",
                ),
                initial="a1",
            ),
            initial="b",
            allow_unreachable=["a1"],
        ),
        initial=["c", "d"],
        script=[Step("t", ["a2"])],
    ),
    Case(
        "parallel+interrupt/test29",
        lambda: Chart(
            "parallel_interrupt.test29",
            parallel(
                "b",
                state(
                    "c",
                ),
                state(
                    "d",
                    on=[transition("t", "a")],
                ),
                on=[transition("t", "a2")],
            ),
            state(
                "a",
                state(
                    "a1",
                ),
                state(
                    "a2",
                ),
                initial="a1",
            ),
            initial="b",
        ),
        initial=["c", "d"],
        script=[Step("t", ["a1"])],
    ),
    Case(
        "parallel+interrupt/test30",
        lambda: Chart(
            "parallel_interrupt.test30",
            parallel(
                "b",
                state(
                    "c",
                    state(
                        "c1",
                        on=[transition("t", "c2")],
                    ),
                    state(
                        "c2",
                    ),
                    initial="c1",
                ),
                state(
                    "d",
                    on=[transition("t", "a")],
                ),
                on=[transition("t", "a2")],
            ),
            state(
                "a",
                state(
                    "a1",
                ),
                state(
                    "a2",
                ),
                initial="a1",
            ),
            initial="b",
        ),
        initial=["c1", "d"],
        script=[Step("t", ["c2", "d"])],
    ),
    Case(
        "parallel+interrupt/test31",
        lambda: Chart(
            "parallel_interrupt.test31",
            parallel(
                "b",
                state(
                    "c",
                    state(
                        "c1",
                        on=[transition("t", "a")],
                    ),
                    initial="c1",
                ),
                state(
                    "d",
                    state(
                        "d1",
                        on=[transition("t", "d2")],
                    ),
                    state(
                        "d2",
                    ),
                    initial="d1",
                ),
                on=[transition("t", "a2")],
            ),
            state(
                "a",
                state(
                    "a1",
                ),
                state(
                    "a2",
                ),
                initial="a1",
            ),
            initial="b",
        ),
        initial=["c1", "d1"],
        script=[Step("t", ["a1"])],
    ),
]

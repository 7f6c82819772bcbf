"""SCION conformance tests of the 'history' group, ported to Python charts.

Ported from the SCION test corpus (Apache-2.0): each case is the group's
SCXML chart written with the incarnate authoring API, and its event script.
"""

from statechart import Chart, history, parallel, state, transition
from tests.conformance.cases import Case, Step

CASES = [
    Case(
        "history/history0",
        lambda: Chart(
            "history.history0",
            state(
                "a",
                on=[transition("t1", "h")],
            ),
            state(
                "b",
                history("h", "b2"),
                state(
                    "b1",
                ),
                state(
                    "b2",
                    on=[transition("t2", "b3")],
                ),
                state(
                    "b3",
                    on=[transition("t3", "a")],
                ),
                initial="b1",
            ),
            initial="a",
            allow_unreachable=["b1"],
        ),
        initial=["a"],
        script=[Step("t1", ["b2"]), Step("t2", ["b3"]), Step("t3", ["a"]), Step("t1", ["b3"])],
    ),
    Case(
        "history/history1",
        lambda: Chart(
            "history.history1",
            state(
                "a",
                on=[transition("t1", "h")],
            ),
            state(
                "b",
                history("h", "b1.2", deep=True),
                state(
                    "b1",
                    state(
                        "b1.1",
                    ),
                    state(
                        "b1.2",
                        on=[transition("t2", "b1.3")],
                    ),
                    state(
                        "b1.3",
                        on=[transition("t3", "a")],
                    ),
                    initial="b1.1",
                ),
                initial="b1",
            ),
            initial="a",
            allow_unreachable=["b1.1"],
        ),
        initial=["a"],
        script=[Step("t1", ["b1.2"]), Step("t2", ["b1.3"]), Step("t3", ["a"]), Step("t1", ["b1.3"])],
    ),
    Case(
        "history/history2",
        lambda: Chart(
            "history.history2",
            state(
                "a",
                on=[transition("t1", "h")],
            ),
            state(
                "b",
                history("h", "b1.2"),
                state(
                    "b1",
                    state(
                        "b1.1",
                    ),
                    state(
                        "b1.2",
                        on=[transition("t2", "b1.3")],
                    ),
                    state(
                        "b1.3",
                        on=[transition("t3", "a")],
                    ),
                    initial="b1.1",
                ),
                initial="b1",
            ),
            initial="a",
            allow_unreachable=["b1.1"],
        ),
        initial=["a"],
        script=[Step("t1", ["b1.2"]), Step("t2", ["b1.3"]), Step("t3", ["a"]), Step("t1", ["b1.1"])],
    ),
    Case(
        "history/history3",
        lambda: Chart(
            "history.history3",
            state(
                "a",
                on=[transition("t1", "p"), transition("t4", "h")],
            ),
            parallel(
                "p",
                history("h", "b", deep=True),
                state(
                    "b",
                    state(
                        "b1",
                        on=[transition("t2", "b2")],
                    ),
                    state(
                        "b2",
                    ),
                    initial="b1",
                ),
                state(
                    "c",
                    state(
                        "c1",
                        on=[transition("t2", "c2")],
                    ),
                    state(
                        "c2",
                    ),
                    initial="c1",
                ),
                on=[transition("t3", "a")],
            ),
            initial="a",
        ),
        initial=["a"],
        script=[
            Step("t1", ["b1", "c1"]),
            Step("t2", ["b2", "c2"]),
            Step("t3", ["a"]),
            Step("t4", ["b2", "c2"]),
        ],
    ),
    Case(
        "history/history4",
        lambda: Chart(
            "history.history4",
            state(
                "a",
                on=[transition("t1", "p"), transition("t6", "p"), transition("t9", "hp")],
            ),
            parallel(
                "p",
                history("hp", "b", deep=True),
                state(
                    "b",
                    history("hb", "b1", deep=True),
                    state(
                        "b1",
                        state(
                            "b1.1",
                            on=[transition("t2", "b1.2")],
                        ),
                        state(
                            "b1.2",
                            on=[transition("t3", "b2")],
                        ),
                        initial="b1.1",
                    ),
                    state(
                        "b2",
                        state(
                            "b2.1",
                            on=[transition("t4", "b2.2")],
                        ),
                        state(
                            "b2.2",
                            on=[transition("t5", "a"), transition("t8", "a")],
                        ),
                        initial="b2.1",
                    ),
                    initial="hb",
                ),
                state(
                    "c",
                    history("hc", "c1"),
                    state(
                        "c1",
                        state(
                            "c1.1",
                            on=[transition("t2", "c1.2")],
                        ),
                        state(
                            "c1.2",
                            on=[transition("t3", "c2")],
                        ),
                        initial="c1.1",
                    ),
                    state(
                        "c2",
                        state(
                            "c2.1",
                            on=[transition("t4", "c2.2"), transition("t7", "c2.2")],
                        ),
                        state(
                            "c2.2",
                        ),
                        initial="c2.1",
                    ),
                    initial="hc",
                ),
            ),
            initial="a",
        ),
        initial=["a"],
        script=[
            Step("t1", ["b1.1", "c1.1"]),
            Step("t2", ["b1.2", "c1.2"]),
            Step("t3", ["b2.1", "c2.1"]),
            Step("t4", ["b2.2", "c2.2"]),
            Step("t5", ["a"]),
            Step("t6", ["b2.2", "c2.1"]),
            Step("t7", ["b2.2", "c2.2"]),
            Step("t8", ["a"]),
            Step("t9", ["b2.2", "c2.2"]),
        ],
    ),
    Case(
        "history/history4b",
        lambda: Chart(
            "history.history4b",
            state(
                "a",
                on=[transition("t1", "p"), transition("t6", "hb hc"), transition("t9", "hp")],
            ),
            parallel(
                "p",
                history("hp", "b", deep=True),
                state(
                    "b",
                    history("hb", "b1", deep=True),
                    state(
                        "b1",
                        state(
                            "b1.1",
                            on=[transition("t2", "b1.2")],
                        ),
                        state(
                            "b1.2",
                            on=[transition("t3", "b2")],
                        ),
                        initial="b1.1",
                    ),
                    state(
                        "b2",
                        state(
                            "b2.1",
                            on=[transition("t4", "b2.2")],
                        ),
                        state(
                            "b2.2",
                            on=[transition("t5", "a"), transition("t8", "a")],
                        ),
                        initial="b2.1",
                    ),
                    initial="hb",
                ),
                state(
                    "c",
                    history("hc", "c1"),
                    state(
                        "c1",
                        state(
                            "c1.1",
                            on=[transition("t2", "c1.2")],
                        ),
                        state(
                            "c1.2",
                            on=[transition("t3", "c2")],
                        ),
                        initial="c1.1",
                    ),
                    state(
                        "c2",
                        state(
                            "c2.1",
                            on=[transition("t4", "c2.2"), transition("t7", "c2.2")],
                        ),
                        state(
                            "c2.2",
                        ),
                        initial="c2.1",
                    ),
                    initial="hc",
                ),
            ),
            initial="a",
        ),
        initial=["a"],
        script=[
            Step("t1", ["b1.1", "c1.1"]),
            Step("t2", ["b1.2", "c1.2"]),
            Step("t3", ["b2.1", "c2.1"]),
            Step("t4", ["b2.2", "c2.2"]),
            Step("t5", ["a"]),
            Step("t6", ["b2.2", "c2.1"]),
            Step("t7", ["b2.2", "c2.2"]),
            Step("t8", ["a"]),
            Step("t9", ["b2.2", "c2.2"]),
        ],
    ),
    Case(
        "history/history5",
        lambda: Chart(
            "history.history5",
            parallel(
                "a",
                history("ha", "b", deep=True),
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
                                        on=[transition("t1", "i2")],
                                    ),
                                    state(
                                        "i2",
                                        on=[transition("t2", "l")],
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
                            on=[transition("t1", "f2")],
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
                on=[transition("t3", "ha")],
            ),
            initial="a",
        ),
        initial=["i1", "j", "h", "g", "f1", "k"],
        script=[
            Step("t1", ["i2", "j", "h", "g", "f2", "k"]),
            Step("t2", ["l"]),
            Step("t3", ["i2", "j", "h", "g", "f2", "k"]),
        ],
    ),
]

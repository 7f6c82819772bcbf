"""SCION conformance tests of the 'actionSend' group, ported to Python charts.

Ported from the SCION test corpus (Apache-2.0): each case is the group's
SCXML chart written with the incarnate authoring API, and its event script.
"""

from statechart import Chart, always, raise_event, state, transition
from tests.conformance.cases import Case, Step

CASES = [
    Case(
        "actionSend/send1",
        lambda: Chart(
            "action_send.send1",
            state(
                "a",
                on=[transition("t", "b", actions=[raise_event("s")])],
            ),
            state(
                "b",
                on=[transition("s", "c")],
            ),
            state(
                "c",
            ),
            initial="a",
        ),
        initial=["a"],
        script=[Step("t", ["c"])],
    ),
    Case(
        "actionSend/send2",
        lambda: Chart(
            "action_send.send2",
            state(
                "a",
                on=[transition("t", "b")],
                exit=[raise_event("s")],
            ),
            state(
                "b",
                on=[transition("s", "c")],
            ),
            state(
                "c",
            ),
            initial="a",
        ),
        initial=["a"],
        script=[Step("t", ["c"])],
    ),
    Case(
        "actionSend/send3",
        lambda: Chart(
            "action_send.send3",
            state(
                "a",
                on=[transition("t", "b")],
            ),
            state(
                "b",
                on=[transition("s", "c")],
                entry=[raise_event("s")],
            ),
            state(
                "c",
            ),
            initial="a",
        ),
        initial=["a"],
        script=[Step("t", ["c"])],
    ),
    Case(
        "actionSend/send4",
        lambda: Chart(
            "action_send.send4",
            state(
                "a",
                on=[transition("t", "b")],
            ),
            state(
                "b",
                on=[transition("s", "c"), always("f1")],
                entry=[raise_event("s")],
            ),
            state(
                "c",
                on=[transition("s", "f2"), always("d")],
            ),
            state(
                "f1",
            ),
            state(
                "d",
            ),
            state(
                "f2",
            ),
            initial="a",
        ),
        initial=["a"],
        script=[Step("t", ["f1"])],
    ),
    Case(
        "actionSend/send4b",
        lambda: Chart(
            "action_send.send4b",
            state(
                "a",
                on=[transition("t", "b")],
            ),
            state(
                "b",
                on=[transition("s", "c")],
                entry=[raise_event("s")],
            ),
            state(
                "c",
            ),
            initial="a",
        ),
        initial=["a"],
        script=[Step("t", ["c"])],
    ),
    Case(
        "actionSend/send7",
        lambda: Chart(
            "action_send.send7",
            state(
                "a",
                on=[transition("t", "b", actions=[raise_event("s")])],
            ),
            state(
                "b",
                state(
                    "b1",
                    on=[transition("s", "b2"), always("b3")],
                ),
                state(
                    "b2",
                ),
                state(
                    "b3",
                ),
                initial="b1",
            ),
            initial="a",
        ),
        initial=["a"],
        script=[Step("t", ["b3"])],
    ),
    Case(
        "actionSend/send7b",
        lambda: Chart(
            "action_send.send7b",
            state(
                "a",
                on=[transition("t", "b", actions=[raise_event("s")])],
            ),
            state(
                "b",
                state(
                    "b1",
                    on=[transition("s", "b2")],
                ),
                state(
                    "b2",
                ),
                state(
                    "b3",
                ),
                initial="b1",
            ),
            initial="a",
            allow_unreachable=["b3"],
        ),
        initial=["a"],
        script=[Step("t", ["b2"])],
    ),
    Case(
        "actionSend/send8",
        lambda: Chart(
            "action_send.send8",
            state(
                "a",
                on=[transition("t", "b1", actions=[raise_event("s")])],
            ),
            state(
                "b",
                state(
                    "b1",
                    on=[transition("s", "b2"), always("b3")],
                ),
                state(
                    "b2",
                ),
                state(
                    "b3",
                ),
                initial="b1",
            ),
            initial="a",
        ),
        initial=["a"],
        script=[Step("t", ["b3"])],
    ),
    Case(
        "actionSend/send8b",
        lambda: Chart(
            "action_send.send8b",
            state(
                "a",
                on=[transition("t", "b1", actions=[raise_event("s")])],
            ),
            state(
                "b",
                state(
                    "b1",
                    on=[transition("s", "b2")],
                ),
                state(
                    "b2",
                ),
                state(
                    "b3",
                ),
                initial="b1",
            ),
            initial="a",
            allow_unreachable=["b3"],
        ),
        initial=["a"],
        script=[Step("t", ["b2"])],
    ),
    Case(
        "actionSend/send9",
        lambda: Chart(
            "action_send.send9",
            state(
                "a",
                on=[transition("t", "b", actions=[raise_event("s")])],
            ),
            state(
                "b",
                state(
                    "b1",
                    on=[transition("s", "b2"), always("b3")],
                ),
                state(
                    "b2",
                ),
                state(
                    "b3",
                ),
                initial="b1",
            ),
            initial="a",
        ),
        initial=["a"],
        script=[Step("t", ["b3"])],
    ),
]

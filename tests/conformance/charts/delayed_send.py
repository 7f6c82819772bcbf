"""SCION conformance tests of the 'delayedSend' group, ported to Python charts.

Ported from the SCION test corpus (Apache-2.0): each case is the group's
SCXML chart written with the incarnate authoring API, and its event script.
"""

from statechart import Chart, send, state, transition
from tests.conformance.cases import Case, Step

CASES = [
    Case(
        "delayedSend/send1",
        lambda: Chart(
            "delayed_send.send1",
            state(
                "a",
                on=[transition("t1", "b", actions=[send("s", delay=0.01)])],
            ),
            state(
                "b",
                on=[transition("s", "c")],
            ),
            state(
                "c",
                on=[transition("t2", "d")],
            ),
            state(
                "d",
            ),
        ),
        initial=["a"],
        script=[Step("t1", ["b"]), Step("t2", ["d"], after=0.1)],
    ),
    Case(
        "delayedSend/send2",
        lambda: Chart(
            "delayed_send.send2",
            state(
                "a",
                on=[transition("t1", "b")],
                exit=[send("s", delay=0.01)],
            ),
            state(
                "b",
                on=[transition("s", "c")],
            ),
            state(
                "c",
                on=[transition("t2", "d")],
            ),
            state(
                "d",
            ),
        ),
        initial=["a"],
        script=[Step("t1", ["b"]), Step("t2", ["d"], after=0.1)],
    ),
    Case(
        "delayedSend/send3",
        lambda: Chart(
            "delayed_send.send3",
            state(
                "a",
                on=[transition("t1", "b")],
            ),
            state(
                "b",
                on=[transition("s", "c")],
                entry=[send("s", delay=0.01)],
            ),
            state(
                "c",
                on=[transition("t2", "d")],
            ),
            state(
                "d",
            ),
        ),
        initial=["a"],
        script=[Step("t1", ["b"]), Step("t2", ["d"], after=0.1)],
    ),
]

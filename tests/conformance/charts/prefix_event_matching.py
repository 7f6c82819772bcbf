"""SCION conformance tests of the 'scxml-prefix-event-name-matching' group, ported to Python charts.

Ported from the SCION test corpus (Apache-2.0): each case is the group's
SCXML chart written with the incarnate authoring API, and its event script.
"""

from statechart import Chart, state, transition
from tests.conformance.cases import Case, Step

CASES = [
    Case(
        "scxml-prefix-event-name-matching/star0",
        lambda: Chart(
            "prefix_event_matching.star0",
            state(
                "a",
                on=[transition("*", "b"), transition("foo", "fail")],
            ),
            state(
                "b",
            ),
            state(
                "fail",
            ),
        ),
        initial=["a"],
        script=[Step("foo", ["b"])],
    ),
    Case(
        "scxml-prefix-event-name-matching/test0",
        lambda: Chart(
            "prefix_event_matching.test0",
            state(
                "a",
                on=[transition("foo", "b")],
            ),
            state(
                "b",
                on=[transition("foo.bar", "c")],
            ),
            state(
                "c",
                on=[transition("foo.bar.bat", "d")],
            ),
            state(
                "d",
                on=[transition("foo", "e")],
            ),
            state(
                "e",
                on=[transition("foo.bar", "f")],
            ),
            state(
                "f",
                on=[transition("foo.bar.bat", "g")],
            ),
            state(
                "g",
            ),
        ),
        initial=["a"],
        script=[
            Step("foo", ["b"]),
            Step("foo.bar", ["c"]),
            Step("foo.bar.bat", ["d"]),
            Step("foo.bar.bat", ["e"]),
            Step("foo", ["e"]),
            Step("foo.bar.bat", ["f"]),
            Step("foobar", ["f"]),
            Step("foo.bar.bat.bif", ["g"]),
        ],
    ),
    Case(
        "scxml-prefix-event-name-matching/test1",
        lambda: Chart(
            "prefix_event_matching.test1",
            state(
                "a",
                on=[transition("foo", "b")],
            ),
            state(
                "b",
                on=[transition("foo.bar", "c")],
            ),
            state(
                "c",
                on=[transition("foo.bar.bat", "d")],
            ),
            state(
                "d",
                on=[transition("foo.*", "e"), transition("foo", "fail")],
            ),
            state(
                "e",
                on=[transition("foo.bar.*", "f"), transition("foo.bar", "fail")],
            ),
            state(
                "f",
                on=[transition("foo.bar.bat.*", "g"), transition("foo.bar.bat", "fail")],
            ),
            state(
                "g",
            ),
            state(
                "fail",
            ),
        ),
        initial=["a"],
        script=[
            Step("foo", ["b"]),
            Step("foo.bar", ["c"]),
            Step("foo.bar.bat", ["d"]),
            Step("foo.bar.bat", ["e"]),
            Step("foo", ["e"]),
            Step("foo.bar.bat", ["f"]),
            Step("foobar", ["f"]),
            Step("foo.bar.bat.bif", ["g"]),
        ],
    ),
]

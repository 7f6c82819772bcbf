"""Diagram export: Mermaid stateDiagram-v2 and Graphviz DOT text of a compiled chart."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable

import attrs
import pytest

from statechart import (
    Chart,
    Event,
    NoContext,
    RetryPolicy,
    after,
    always,
    assign,
    final,
    history,
    in_state,
    invoke,
    log,
    parallel,
    raise_event,
    send,
    send_child,
    state,
    transition,
)
from statechart.diagram import to_dot, to_mermaid
from statechart.model import StateNode


@attrs.frozen
class Count:
    """A context with one counter."""

    n: int = 0


def is_open(context: Count, event: Event) -> bool:
    """A guard that always holds."""
    return True


def bump(context: Count, event: Event) -> Count:
    """Add one to the counter."""
    return Count(context.n + 1)


def small() -> Chart[NoContext]:
    """A light with a nested ``on`` state and a way out."""
    return Chart(
        "light",
        state("off", on=[transition("flip", "on")]),
        state(
            "on",
            state("dim", on=[transition("up", "bright")]),
            state("bright"),
            on=[transition("flip", "off"), transition("cut", "broken")],
        ),
        final("broken"),
    )


def features() -> Chart[Count]:
    """One of everything a diagram shows: parallel regions, history, finals, timers, guards, sites."""
    return Chart(
        "features",
        state("idle", on=[transition("go", "busy", guard=is_open, actions=[bump, raise_event("started")])]),
        state(
            "busy",
            history("busy.h", "busy.work", deep=True),
            parallel(
                "busy.work",
                state(
                    "left",
                    state("left.wait", on=[after(5, "left.done")]),
                    final("left.done"),
                    invoke=[
                        invoke(
                            "packer",
                            chart="packer",
                            map=lambda context: {},
                            retry=RetryPolicy(3),
                            group="g",
                            max_depth=4,
                        )
                    ],
                ),
                state(
                    "right",
                    state("right.wait", on=[transition("ok", "right.done", guard=in_state("left.wait"))]),
                    final("right.done"),
                ),
            ),
            state(
                "busy.check",
                on=[
                    always("idle", guard=lambda context, event: False, actions=[log("gave up")]),
                    transition("tick", actions=[send("ping", delay=2.5), send_child("charge", "poke")]),
                ],
                invoke=[invoke("charge", task="charge"), invoke("audit", task="audit")],
            ),
            on=[transition("stop", "stopped"), transition("pause", "idle")],
            initial="busy.work",
        ),
        final("stopped"),
        context=Count,
        allow_unreachable=["busy.check"],
    )


def large() -> Chart[NoContext]:
    """Thirty-one states: nested compound states, a parallel state with three regions, and histories."""

    def region(name: str) -> list[StateNode]:
        return [
            state(f"{name}.a", on=[transition(f"{name}-next", f"{name}.b")]),
            state(
                f"{name}.b",
                state(f"{name}.b.1", on=[transition("more", f"{name}.b.2")]),
                state(f"{name}.b.2", on=[after(1.5, f"{name}.end")]),
            ),
            final(f"{name}.end"),
        ]

    regions = [state(f"r{k}", *region(f"r{k}"), initial=f"r{k}.a") for k in (1, 2, 3)]
    return Chart(
        "large",
        state("start", on=[transition("begin", "main")]),
        state(
            "main",
            history("main-h", "main.p"),
            parallel("main.p", *regions, on=[transition("done.state.main.p", "main.review")]),
            state(
                "main.review",
                history("review-h", "review.draft", deep=True),
                state("review.draft", on=[transition("submit", "review.sent")]),
                state("review.sent", on=[transition("accept", "finished"), transition("reject", "review-h")]),
            ),
            on=[transition("suspend", "suspended")],
        ),
        state("suspended", on=[transition("resume", "main-h"), after(3600, "expired")]),
        final("finished"),
        final("expired"),
        state("audit-log", on=[always("start")]),
        allow_unreachable=["audit-log"],
    )


MERMAID: dict[str, Callable[[], str]] = {
    "small": lambda: to_mermaid(small()),
    "features": lambda: to_mermaid(features()),
    "large": lambda: to_mermaid(large()),
}
"""Mermaid text of each sample chart, by name."""

DOT: dict[str, Callable[[], str]] = {
    "small": lambda: to_dot(small()),
    "features": lambda: to_dot(features()),
    "large": lambda: to_dot(large()),
}
"""DOT text of each sample chart, by name."""


MERMAID_DECLARATION = re.compile(r'^\s*(?:state "[^"]*" as (\w+)(?: \{)?|state (\w+) \{|(\w+))$')


def mermaid_declared(text: str) -> list[tuple[int, str]]:
    """Each Mermaid state declaration (bare, aliased or as a block) as (line number, identifier)."""
    found = []
    for number, line in enumerate(text.splitlines()):
        match = MERMAID_DECLARATION.match(line)
        if match and line.strip() != "stateDiagram-v2":
            found.append((number, next(group for group in match.groups() if group)))
    return found


def mermaid_edges(text: str) -> list[tuple[int, str, str, str]]:
    """Each Mermaid edge as (line number, source, target, label)."""
    edges = []
    for number, line in enumerate(text.splitlines()):
        match = re.match(r"^\s*(\S+) --> (\S+)(?: : (.*))?$", line)
        if match:
            edges.append((number, match[1], match[2], match[3] or ""))
    return edges


DOT_NODE = re.compile(r'^\s*"((?:[^"\\]|\\.)*)"(?: \[.*\])?$')
DOT_CLUSTER = re.compile(r'^\s*subgraph "cluster ((?:[^"\\]|\\.)*)" \{$')


def dot_declarations(text: str) -> Counter[str]:
    """How often each DOT node is declared, a cluster's invisible anchor counted with its cluster."""
    found: Counter[str] = Counter()
    for line in text.splitlines():
        match = DOT_NODE.match(line)
        if match:
            found[match[1]] += 1
    return found


# ------------------------------------------------------------------ Mermaid


def test_mermaid_of_a_small_chart() -> None:
    """A small chart renders to the documented Mermaid text: title, nested block, initial and final."""
    assert to_mermaid(small()) == (
        "---\n"
        "title: light\n"
        "---\n"
        "stateDiagram-v2\n"
        "    off\n"
        "    state on {\n"
        "        dim\n"
        "        bright\n"
        "        [*] --> dim\n"
        "        dim --> bright : up\n"
        "    }\n"
        "    broken\n"
        "    [*] --> off\n"
        "    off --> on : flip\n"
        "    on --> off : flip\n"
        "    on --> broken : cut\n"
        "    broken --> [*]\n"
    )


def test_mermaid_aliases_ids_with_dots_and_dashes_uniquely() -> None:
    """Ids Mermaid cannot parse get word-character aliases, unique even against a state already named so."""
    chart = Chart(
        "aliases",
        state("b1_1", on=[transition("a", "b1.1"), transition("b", "b1-1")]),
        state("b1.1"),
        state("b1-1"),
    )
    text = to_mermaid(chart)
    assert "    b1_1\n" in text
    assert '    state "b1.1" as b1_1_2\n' in text
    assert '    state "b1-1" as b1_1_3\n' in text
    assert "    b1_1 --> b1_1_2 : a\n" in text
    assert "    b1_1 --> b1_1_3 : b\n" in text


def test_mermaid_prefixes_ids_the_lexer_reads_as_keywords() -> None:
    """States named like Mermaid keywords (``note``, ``default…``) are aliased with an ``s_`` prefix."""
    chart = Chart("words", state("note", on=[transition("go", "default-path")]), state("default-path"))
    text = to_mermaid(chart)
    assert '    state "note" as s_note\n' in text
    assert '    state "default-path" as s_default_path\n' in text
    assert "    s_note --> s_default_path : go\n" in text


def test_mermaid_separates_parallel_regions() -> None:
    """A parallel state is one block whose regions, themselves blocks, are separated by ``--``."""
    text = to_mermaid(features())
    block = text[text.index('state "busy.work" as busy_work {') :]
    assert block.index("state left {") < block.index("\n            --\n") < block.index("state right {")


def test_mermaid_draws_history_with_its_default() -> None:
    """A deep history state is a state labelled ``H*`` with an edge to its default target."""
    text = to_mermaid(features())
    assert '        state "H*" as busy_h\n' in text
    assert "        busy_h --> busy_work\n" in text


def test_mermaid_ends_final_states_in_their_block() -> None:
    """Each final state gets ``X --> [*]`` inside its parent's block."""
    text = to_mermaid(features())
    left = text[text.index("state left {") : text.index("\n            --\n")]
    assert "left_done --> [*]" in left
    assert text.endswith("    stopped --> [*]\n")


def test_mermaid_labels_triggers_guards_and_actions() -> None:
    """Labels show the trigger (events, ``after``, ``always``), the guard and the actions' short names."""
    text = to_mermaid(features())
    assert "    idle --> busy : go [is_open] / bump, raise(started)\n" in text
    assert "left_wait --> left_done : after 5s\n" in text
    assert "right_wait --> right_done : ok [in(left.wait)]\n" in text
    assert "busy_check --> idle : always [#lt;lambda#gt;] / log(gave up)\n" in text


def test_mermaid_draws_targetless_transitions_as_annotated_self_loops() -> None:
    """A targetless transition is a self-loop whose label says ``(targetless)``."""
    text = to_mermaid(features())
    assert (
        "busy_check --> busy_check : tick (targetless) / send(ping, 2.5s), send_child(charge, poke)\n" in text
    )


def test_mermaid_notes_child_sites() -> None:
    """A state's sites appear in a note: one line per site with what it invokes and its options."""
    text = to_mermaid(features())
    assert "note right of left : packer invokes chart 'packer' (map, 3 attempts, group g ≤ 4)\n" in text
    assert (
        "        note right of busy_check\n"
        "            charge invokes task 'charge'\n"
        "            audit invokes task 'audit'\n"
        "        end note\n"
    ) in text


@pytest.mark.parametrize("name", sorted(MERMAID))
def test_mermaid_declares_every_state_before_an_edge_mentions_it(name: str) -> None:
    """Each state is declared before the first edge naming it, so Mermaid nests it correctly."""
    text = MERMAID[name]()
    declared_at = {state: number for number, state in reversed(mermaid_declared(text))}
    for number, source, target, _ in mermaid_edges(text):
        for end in (source, target):
            assert end == "[*]" or declared_at[end] < number, end


def mermaid_blocks(text: str) -> list[str | None]:
    """For each line, the identifier of the innermost block it sits in (None at the top level)."""
    stack: list[str | None] = [None]
    inside = []
    for line in text.splitlines():
        inside.append(stack[-1])
        opened = re.match(r'^\s*state (?:"[^"]*" as )?(\w+) \{$', line)
        if opened:
            stack.append(opened[1])
        elif line.strip() == "}":
            stack.pop()
    return inside


@pytest.mark.parametrize("name", sorted(MERMAID))
def test_mermaid_writes_nested_edges_only_where_both_ends_are_declared(name: str) -> None:
    """An edge inside a block joins two states declared in that block; others go to the top level."""
    text = MERMAID[name]()
    block = mermaid_blocks(text)
    declared_in = {state: block[number] for number, state in mermaid_declared(text)}
    for number, source, target, _ in mermaid_edges(text):
        if block[number] is not None:
            for end in {source, target} - {"[*]"}:
                assert declared_in[end] == block[number], text.splitlines()[number]


def test_mermaid_lifts_an_edge_between_blocks_to_the_top_level() -> None:
    """An edge leaving a nested block is written unindented at the top level, after every declaration."""
    assert "\n    r1_b_2 --> r1_end : after 1.5s\n" in to_mermaid(large())


def test_mermaid_points_a_deep_initial_target_through_its_child() -> None:
    """An initial target below a direct child marks that child and names the target in the label."""
    chart = Chart(
        "deep",
        state("outer", state("mid", state("leaf1"), state("leaf2")), initial="leaf2"),
        allow_unreachable=["leaf1"],
    )
    text = to_mermaid(chart)
    assert "        [*] --> mid : enters leaf2\n" in text
    assert "            [*] --> leaf1\n" in text


def test_mermaid_of_a_thirty_state_chart() -> None:
    """Every state of a large nested chart is declared exactly once and the blocks balance."""
    chart = large()
    text = to_mermaid(chart)
    assert len(chart.state_ids) >= 30
    declared = Counter(name for _, name in mermaid_declared(text))
    assert len(declared) == len(chart.state_ids)
    assert set(declared.values()) == {1}
    assert (
        text.count("{")
        == text.count("}")
        == sum(1 for s in chart.state_ids if chart.kind_of(s).value in ("compound", "parallel"))
    )
    assert [line.strip() for line in text.splitlines()].count("--") == 2  # three regions


# ---------------------------------------------------------------------- DOT


def test_dot_of_a_small_chart() -> None:
    """A small chart renders to a compound digraph with a cluster, anchors, initial points and a final."""
    text = to_dot(small())
    assert text.startswith('digraph "light" {\n    graph [compound="true"')
    assert '    subgraph "cluster on" {\n' in text
    assert '        "on" [shape="point", style="invis", width="0", height="0", label=""]\n' in text
    assert '    "#initial" [shape="point", width="0.12"]\n' in text
    assert '        "on#initial" [shape="point", width="0.12"]\n' in text
    assert '    "broken" [shape="doublecircle", width="0.3", margin="0.02"]\n' in text
    assert '    "#initial" -> "off"\n' in text
    assert '    "on#initial" -> "dim"\n' in text
    assert '    "off" -> "on" [label="flip", lhead="cluster on"]\n' in text
    assert '    "on" -> "off" [label="flip", ltail="cluster on"]\n' in text
    assert '    "dim" -> "bright" [label="up"]\n' in text
    assert text.endswith("}\n")


def test_dot_dashes_parallel_regions_and_draws_history() -> None:
    """Regions of a parallel state are dashed clusters; history states are ``H``/``H*`` circles."""
    text = to_dot(features())
    assert '            graph [label="left", style="rounded,dashed"]\n' in text
    assert '        graph [label="busy.work", style="rounded"]\n' in text
    assert '"busy.h" [shape="circle", label="H*", width="0.3", fixedsize="true"]' in text
    assert '    "busy.h" -> "busy.work" [lhead="cluster busy.work"]\n' in text


def test_dot_labels_and_targetless_loops() -> None:
    """Edge labels put actions on a second line; targetless transitions are dashed self-loops."""
    text = to_dot(features())
    assert '"idle" -> "busy" [label="go [is_open]\\n/ bump, raise(started)", lhead="cluster busy"]' in text
    assert '"busy.check" -> "idle" [label="always [<lambda>]\\n/ log(gave up)"]' in text
    assert '"left.wait" -> "left.done" [label="after 5s"]' in text
    assert (
        '"busy.check" -> "busy.check" [label="tick (targetless)\\n/ send(ping, 2.5s), '
        'send_child(charge, poke)", style="dashed"]'
    ) in text


def test_dot_attaches_sites_as_notes() -> None:
    """Each site is a note node joined to its state by a dotted line, clipped at a composite's border."""
    text = to_dot(features())
    label = "packer invokes chart 'packer'\\n(map, 3 attempts, group g ≤ 4)"
    assert f'"packer#site" [shape="note", label="{label}", fontsize="9"]' in text
    assert '    "left" -> "packer#site" [style="dotted", arrowhead="none", ltail="cluster left"]\n' in text
    assert '    "busy.check" -> "charge#site" [style="dotted", arrowhead="none"]\n' in text


def test_dot_clips_only_at_clusters_the_other_end_is_outside_of() -> None:
    """An edge from a composite state into its own descendant is not clipped at that state's border."""
    chart = Chart(
        "inward",
        state("outer", state("inner", on=[transition("out", "outer")]), on=[transition("in", "inner")]),
    )
    text = to_dot(chart)
    assert '    "outer" -> "inner" [label="in"]\n' in text
    assert '    "inner" -> "outer" [label="out"]\n' in text


def test_dot_of_a_thirty_state_chart() -> None:
    """Every state of a large chart is declared once, as a node or as its cluster's anchor."""
    chart = large()
    text = to_dot(chart)
    declared = dot_declarations(text)
    assert all(declared[s] == 1 for s in chart.state_ids)
    assert text.count("{") == text.count("}")
    clusters = [match[1] for line in text.splitlines() if (match := DOT_CLUSTER.match(line))]
    assert clusters == [s for s in chart.state_ids if chart.kind_of(s).value in ("compound", "parallel")]


def require_dot() -> None:
    """Skip without Graphviz's ``dot``, except when ``INCARNATE_REQUIRE_GRAPHVIZ`` is set (CI): fail."""
    if shutil.which("dot") is not None:
        return
    reason = "Graphviz 'dot' is not installed (apt-get install graphviz)"
    if os.environ.get("INCARNATE_REQUIRE_GRAPHVIZ"):
        pytest.fail(f"{reason}, and INCARNATE_REQUIRE_GRAPHVIZ is set")
    pytest.skip(reason)


@pytest.mark.parametrize("name", sorted(DOT))
def test_dot_renders_with_graphviz(name: str) -> None:
    """Graphviz lays the DOT text out to SVG without an error or a warning."""
    require_dot()
    result = subprocess.run(
        ["dot", "-Tsvg"], input=DOT[name](), capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "<svg" in result.stdout


# ----------------------------------------------------------------- general


def test_output_is_deterministic() -> None:
    """Two builds of the same chart render to identical text."""
    assert to_mermaid(large()) == to_mermaid(large())
    assert to_dot(large()) == to_dot(large())


def test_assigner_names_drop_their_enclosing_function() -> None:
    """An assigner defined inside a function is labelled by its own name, not its qualified name."""

    def settle(context: Count, event: Event) -> Count:
        return context

    chart = Chart(
        "names",
        state("a", on=[transition("go", "b", actions=[settle, assign(bump, name="count.bump")])]),
        state("b"),
        context=Count,
    )
    assert "a --> b : go / settle, count.bump\n" in to_mermaid(chart)

"""Charts the scenario tests share."""

from __future__ import annotations

import attrs

from statechart import (
    Chart,
    Event,
    JsonValue,
    RetryPolicy,
    after,
    always,
    assign,
    final,
    invoke,
    parallel,
    send,
    send_parent,
    state,
    transition,
)


@attrs.frozen
class Family:
    """A parent's context: the members it fans out to and what came back."""

    members: tuple[str, ...] = ("a",)
    results: tuple[str, ...] = ()
    note: str = ""


def keep_output(family: Family, event: Event) -> Family:
    return attrs.evolve(family, results=(*family.results, str(event.data)))


def set_members(family: Family, event: Event) -> Family:
    assert isinstance(event.data, list)
    return attrs.evolve(family, members=tuple(str(m) for m in event.data))


def team(family: Family) -> dict[str, JsonValue]:
    """One member per name, its input naming it."""
    return {m: {"name": m} for m in family.members}


def left_team(family: Family) -> dict[str, JsonValue]:
    return {m: {"name": f"L{m}"} for m in family.members}


def right_team(family: Family) -> dict[str, JsonValue]:
    return {m: {"name": f"R{m}"} for m in family.members}


def note_error(family: Family, event: Event) -> Family:
    return attrs.evolve(family, note=str(event.data))


@attrs.frozen
class Kid:
    """A child's context: what it was asked to do."""

    name: str = ""


def kid_output(kid: Kid, event: Event) -> JsonValue:
    return f"done:{kid.name}"


KID = Chart(
    "kid",
    state(
        "working",
        on=[transition("finish", "finished"), transition("shout", actions=[send_parent("shouted")])],
    ),
    final("finished", done_data=kid_output),
    context=Kid,
)
"""A child that waits for ``finish`` (a human gate) and can message its parent."""

GRANDKID_PARENT = Chart(
    "middle",
    state("waiting", invoke=[invoke("inner", chart="kid", input={"name": "inner"})]),
    context=Family,
)
"""A child that itself keeps a child alive (for cascades)."""

PARENT = Chart(
    "parent",
    state(
        "gathering",
        invoke=[
            invoke(
                "team",
                chart="kid",
                map=team,
                output=keep_output,
                retry=RetryPolicy(max_attempts=3, backoff=5.0),
            )
        ],
        on=[
            transition("done.invoke.team", "reviewing"),
            transition("error.invoke.team", "failed", actions=[assign(note_error)]),
            transition("regroup", actions=[assign(set_members)]),
            transition("leave", "idle"),
            transition("shouted", actions=[assign(lambda f, e: attrs.evolve(f, note="heard"))]),
        ],
    ),
    state("idle", on=[transition("back", "gathering")]),
    state("reviewing", on=[transition("approve", "approved")]),
    final("approved", done_data=lambda f, e: {"results": list(f.results)}),
    final("failed", done_data=lambda f, e: {"error": f.note}),
    context=Family,
)
"""Fans out one ``kid`` per member, retries failures, then waits for approval."""

CASCADE = Chart(
    "cascade",
    state(
        "holding",
        invoke=[invoke("mid", chart="middle", input={"members": ["x"]})],
        on=[transition("drop", "dropped")],
    ),
    state("dropped"),
    context=Family,
)
"""A grandparent whose ``drop`` cancels a child and, through it, a grandchild."""


@attrs.frozen
class Charge:
    """Context of the charging chart."""

    amount: int = 10
    receipt: str = ""


CHARGING = Chart(
    "charging",
    state(
        "charging",
        invoke=[
            invoke(
                "charge",
                task="charge",
                input=lambda c: {"amount": c.amount},
                output=lambda c, e: attrs.evolve(c, receipt=str(e.data)),
                retry=RetryPolicy(max_attempts=3, backoff=2.0),
            )
        ],
        on=[transition("done.invoke.charge", "paid"), transition("error.invoke.charge", "declined")],
    ),
    final("paid", done_data=lambda c, e: c.receipt),
    final("declined"),
    context=Charge,
)
"""Invokes the ``charge`` task with a retry policy."""


@attrs.frozen
class Depth:
    """Context of the recursive chart."""

    level: int = 0
    refused: bool = False


TREE = Chart(
    "tree",
    state(
        "growing",
        invoke=[
            invoke(
                "branch",
                chart="tree",
                input=lambda d: {"level": d.level + 1},
                group="tree",
                max_depth=3,
            )
        ],
        on=[
            transition("done.invoke.branch", "grown"),
            transition(
                "error.invoke.branch", "leaf", actions=[assign(lambda d, e: attrs.evolve(d, refused=True))]
            ),
        ],
    ),
    state("leaf", on=[transition("wither", "grown")]),
    final("grown", done_data=lambda d, e: {"level": d.level}),
    context=Depth,
)
"""A chart that invokes itself until ``max_depth`` refuses the next birth."""


@attrs.frozen
class Pings:
    """Context of the timed chart: the pings in the order they arrived."""

    seen: tuple[str, ...] = ()


TIMED = Chart(
    "timed",
    state(
        "waiting",
        entry=[send("ping", "c", delay=30.0), send("ping", "a", delay=10.0), send("ping", "b", delay=20.0)],
        on=[
            transition("ping", actions=[assign(lambda p, e: attrs.evolve(p, seen=(*p.seen, str(e.data))))]),
            transition("poke", "poked"),
            after(50.0, "late"),
        ],
    ),
    state("late"),
    state("poked"),
    context=Pings,
)
"""Three delayed pings (10, 20 and 30 s) and a delayed transition to ``late`` at 50 s."""

GATE = Chart(
    "gate",
    state("awaiting_answer", on=[transition("answer", "answered")]),
    final("answered", done_data=lambda c, e: e.data),
)
"""A human gate: waits for ``answer`` however long it takes."""

ALL = [KID, GRANDKID_PARENT, PARENT, CASCADE, CHARGING, TREE, TIMED, GATE]


@attrs.frozen
class Rounds:
    """Context of the loop chart: how many rounds finished, and their outputs."""

    rounds: int = 0
    outputs: tuple[str, ...] = ()


def finish_round(rounds: Rounds, event: Event) -> Rounds:
    return attrs.evolve(rounds, rounds=rounds.rounds + 1, outputs=(*rounds.outputs, str(event.data)))


LOOP = Chart(
    "loop",
    state(
        "work",
        invoke=[invoke("round", chart="kid", input=lambda r: {"name": f"round-{r.rounds + 1}"})],
        on=[
            transition(
                "done.invoke.round",
                "tally",
                actions=[assign(finish_round)],
            )
        ],
    ),
    state("tally", on=[always("finished", guard=lambda r, e: r.rounds >= 3), always("work")]),
    final("finished", done_data=lambda r, e: list(r.outputs)),
    context=Rounds,
)
"""Runs the same site three times: each round is a fresh child of the same site."""

BRANCHES = Chart(
    "branches",
    parallel(
        "both",
        state(
            "left",
            state(
                "left_waiting",
                invoke=[invoke("left_team", chart="kid", map=left_team)],
            ),
        ),
        state(
            "right",
            state(
                "right_waiting",
                invoke=[invoke("right_team", chart="kid", map=right_team)],
            ),
        ),
    ),
    context=Family,
)
"""Two parallel branches fanning out over the same member keys."""

ALL.extend([LOOP, BRANCHES])

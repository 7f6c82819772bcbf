"""The test kit as a pytest plugin: fixtures, commit points and event sequences, run as a user would."""

from __future__ import annotations

import itertools
import uuid
from importlib.metadata import entry_points
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from incarnate import ConfigurationError, Engine, Storage
from incarnate.testing import (
    CrashPoint,
    RecoveryCheckFailed,
    advance,
    check_recovery,
    commit_points,
    event_names,
    event_sequences,
)
from statechart import Chart, Event, after, final, invoke, state, transition
from tests.stores import PG_DBNAME, PG_HOST, PG_PORT, require_postgres

pytest_plugins = ["pytester"]

CHARTS = """
import attrs

from statechart import Chart, Event, after, final, invoke, state, transition


@attrs.frozen
class Quote:
    sku: str = ""
    price: int = 0


def priced(quote: Quote, event: Event) -> Quote:
    return attrs.evolve(quote, price=int(event.data["price"]))


LOOKUP = Chart(
    "lookup",
    state("waiting", on=[after(30.0, "found")]),
    final("found", done_data=lambda context, event: {"price": 25}),
)

QUOTE = Chart(
    "quote",
    state(
        "pricing",
        invoke=[invoke("price", chart="lookup", output=priced)],
        on=[transition("done.invoke.price", "review")],
    ),
    state("review", on=[transition("approve", "approved"), transition("reject", "rejected")]),
    final("approved", done_data=lambda quote, event: {"sku": quote.sku, "price": quote.price}),
    final("rejected"),
    context=Quote,
)
"""

USER_TESTS = """
from hypothesis import given, settings
from hypothesis import strategies as st

from incarnate.testing import advance, commit_points, event_sequences
from charts import LOOKUP, QUOTE


def test_fixtures(incarnate_engine, incarnate_clock):
    engine = incarnate_engine([QUOTE, LOOKUP])
    quote = engine.start("quote", {"sku": "kettle"})
    engine.run_until_idle()
    incarnate_clock.advance(30.0)
    engine.run_until_idle()
    engine.send(quote, "approve")
    engine.run_until_idle()
    assert engine.instance(quote).record.output == {"sku": "kettle", "price": 25}


def scenario(engine):
    quote = engine.start("quote", {"sku": "kettle"})
    engine.run_until_idle()
    advance(engine, 30.0)
    engine.run_until_idle()
    engine.send(quote, "approve")
    engine.run_until_idle()


def test_every_commit_point():
    points = list(commit_points(scenario, [QUOTE, LOOKUP]))
    assert len(points) == 2 * points[0].total
    for point in points:
        with point as engine:
            (quote,) = [i for i in engine.instances() if i.record.name == "quote"]
            assert quote.record.output == {"sku": "kettle", "price": 25}


@settings(max_examples=20, deadline=None)
@given(events=event_sequences(QUOTE, max_size=4))
def test_any_answer_ends_the_quote(events):
    engine = incarnate_engine_for_hypothesis()
    try:
        quote = engine.start("quote", {"sku": "kettle"})
        engine.run_until_idle()
        advance(engine, 30.0)
        engine.run_until_idle()
        for event in events:
            if engine.instance(quote).record.status.finished:
                break
            engine.send(quote, event)
            engine.run_until_idle()
        assert engine.snapshot(quote).configuration != ("pricing",)
    finally:
        engine.close()


def incarnate_engine_for_hypothesis():
    from incarnate.testing import memory_engine

    return memory_engine([QUOTE, LOOKUP])
"""

FORGETFUL = '''
from incarnate.testing import check_recovery
from charts import LOOKUP, QUOTE


def scenario(engine):
    """The approval is kept in memory by a hook and sent once the quote is priced: a crash loses it."""
    quote = engine.start("quote", {"sku": "kettle"})
    held = ["approve"]

    def send_when_priced(where, uow):
        if where == "after-commit" and held and engine.snapshot(quote).configuration == ("review",):
            engine.send(quote, held.pop())

    engine.parts.commits.hooks.append(send_when_priced)
    engine.run_until_idle()
    engine.clock.advance(30.0)
    engine.run_until_idle()


def test_recovery():
    check_recovery(scenario, [QUOTE, LOOKUP])
'''


def user_project(pytester: pytest.Pytester, tests: str) -> None:
    pytester.makepyfile(charts=CHARTS, test_user=tests)


def test_the_plugin_is_registered_as_a_pytest11_entry_point() -> None:
    """Installing incarnate registers incarnate.testing with pytest under the name ``incarnate``."""
    plugins = {e.name: e.value for e in entry_points(group="pytest11")}
    assert plugins.get("incarnate") == "incarnate.testing"


def test_a_user_test_file_uses_the_fixtures_commit_points_and_event_sequences(
    pytester: pytest.Pytester,
) -> None:
    """A user's tests get incarnate_engine and incarnate_clock, and commit_points and event_sequences run."""
    user_project(pytester, USER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_without_the_plugin_the_fixtures_are_unknown(pytester: pytest.Pytester) -> None:
    """The fixtures come from the plugin: disabled with ``-p no:incarnate``, they are not found."""
    user_project(pytester, USER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:incarnate", "-k", "fixtures")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'incarnate_engine' not found*"])


def test_a_scenario_that_loses_an_event_fails_commit_points_with_a_clear_message(
    pytester: pytest.Pytester,
) -> None:
    """An event held in memory and lost in a crash fails the user's test, naming the point and outcome."""
    user_project(pytester, FORGETFUL)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*RecoveryCheckFailed: commit * of *, crash *: after recovery the scenario finished "
            "differently from the uncrashed run: root 1: uncrashed ('quote', 'done', "
            "{'sku': 'kettle', 'price': 25}, 1), recovered ('quote', 'running', None, 1)*"
        ]
    )


# ------------------------------------------------------------------ in this process


@attrs.frozen
class Quote:
    sku: str = ""
    price: int = 0


def priced(quote: Quote, event: Event) -> Quote:
    data = event.data
    assert isinstance(data, dict) and isinstance(data["price"], int)
    return attrs.evolve(quote, price=data["price"])


LOOKUP = Chart(
    "lookup",
    state("waiting", on=[after(30.0, "found")]),
    final("found", done_data=lambda context, event: {"price": 25}),
)

QUOTE = Chart(
    "quote",
    state(
        "pricing",
        invoke=[invoke("price", chart="lookup", output=priced)],
        on=[transition("done.invoke.price", "review")],
    ),
    state("review", on=[transition("approve", "approved"), transition("reject", "rejected")]),
    final("approved", done_data=lambda quote, event: {"sku": quote.sku, "price": quote.price}),
    final("rejected"),
    context=Quote,
)


def quote_scenario(engine: Engine) -> None:
    quote = engine.start("quote", {"sku": "kettle"})
    engine.run_until_idle()
    advance(engine, 30.0)
    engine.run_until_idle()
    engine.send(quote, "approve")
    engine.run_until_idle()


def test_commit_points_run_each_commit_at_each_point() -> None:
    """A scenario with N commits runs N times per crash point, numbered 1..N, each recovering."""
    points = list(commit_points(quote_scenario, [QUOTE, LOOKUP]))
    total = points[0].total
    assert total >= 4  # the start, the child's steps, the parent's steps
    assert [(p.number, p.where) for p in points] == [
        (n, w) for n in range(1, total + 1) for w in (CrashPoint.BEFORE_COMMIT, CrashPoint.AFTER_COMMIT)
    ]
    for point in points:
        with point as engine:
            (quote,) = [i for i in engine.instances() if i.record.name == "quote"]
            assert quote.record.output == {"sku": "kettle", "price": 25}


def test_commit_points_crash_inside_the_transaction_on_sqlite(tmp_path: Path) -> None:
    """On a SQL store every commit is also crashed inside its transaction, and recovery still holds."""
    files = (tmp_path / f"run-{n}.db" for n in itertools.count())
    checked = check_recovery(
        quote_scenario, [QUOTE, LOOKUP], storage=lambda: Storage.sqlite(str(next(files)))
    )
    points = list(commit_points(quote_scenario, [QUOTE, LOOKUP]))
    assert checked == 3 * points[0].total


@pytest.mark.postgres
def test_commit_points_on_postgresql_use_a_fresh_schema_per_run() -> None:
    """On PostgreSQL each run gets an empty schema, and crashes inside and after each commit recover."""
    import psycopg

    user = require_postgres()
    schemas: list[str] = []

    def fresh_schema() -> Storage:
        schemas.append(f"t_{uuid.uuid4().hex[:16]}")
        with psycopg.connect(host=PG_HOST, port=PG_PORT, dbname=PG_DBNAME, user=user, autocommit=True) as c:
            c.execute(f"CREATE SCHEMA {schemas[-1]}")
        return Storage.postgres(PG_DBNAME, host=PG_HOST, port=PG_PORT, user=user, schema=schemas[-1])

    try:
        where = [CrashPoint.DURING_COMMIT, CrashPoint.AFTER_COMMIT]
        checked = check_recovery(quote_scenario, [QUOTE, LOOKUP], storage=fresh_schema, points=where)
        assert checked >= 8 and checked % 2 == 0
    finally:
        with psycopg.connect(host=PG_HOST, port=PG_PORT, dbname=PG_DBNAME, user=user, autocommit=True) as c:
            for schema in schemas:
                c.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_a_scenario_that_differs_between_runs_is_reported() -> None:
    """A scenario that makes fewer commits when run again fails with a message asking for determinism."""
    runs = itertools.count()

    def shrinking(engine: Engine) -> None:
        for _ in range(2 if next(runs) == 0 else 1):
            engine.start("lookup")

    points = list(commit_points(shrinking, [LOOKUP], points=[CrashPoint.AFTER_COMMIT]))
    assert [p.number for p in points] == [1, 2]
    with pytest.raises(RecoveryCheckFailed, match="finished without reaching this commit"):
        points[1].check()


def test_a_scenario_without_commits_is_refused() -> None:
    """A scenario that commits nothing has no point to crash at, and says so instead of passing."""

    def idle(engine: Engine) -> None:
        engine.run_until_idle()

    with pytest.raises(ConfigurationError, match="'idle' made no commit, so there is no point to crash at"):
        list(commit_points(idle, [LOOKUP]))


def test_event_names_skip_wildcards_outcomes_and_timers() -> None:
    """Only names a test can send are drawn: no ``*``, no done/error events, no timers; prefixes as names."""
    chart = Chart(
        "names",
        state(
            "a",
            on=[
                transition("go", "b"),
                transition("order.*", "b"),
                transition("*", "b"),
                transition("done.state.a", "b"),
                transition("error.execution", "b"),
                after(5.0, "b"),
            ],
        ),
        final("b"),
    )
    assert event_names(chart) == ("go", "order")
    assert event_names(QUOTE) == ("approve", "reject")


@given(events=event_sequences(QUOTE, data={"approve": st.just({"by": "ann"})}, max_size=5))
def test_event_sequences_draw_the_charts_events_with_their_data(events: list[Event]) -> None:
    """Drawn events name the chart's transitions and carry the data strategy given for their name."""
    assert len(events) <= 5
    for event in events:
        assert event.name in ("approve", "reject")
        assert event.data == ({"by": "ann"} if event.name == "approve" else None)


def test_event_sequences_refuse_data_for_unknown_events_and_charts_without_events() -> None:
    """Data for an event the chart never names, or a chart with no sendable event, is refused by name."""
    with pytest.raises(
        ConfigurationError, match=r"names \['aprove'\].*its events are \['approve', 'reject'\]"
    ):
        event_sequences(QUOTE, data={"aprove": st.none()})
    with pytest.raises(ConfigurationError, match="chart 'lookup' names no event a test can send"):
        event_sequences(LOOKUP)


def test_advance_refuses_a_real_clock(tmp_path: Path) -> None:
    """Moving the clock of an engine on the system clock is refused with the fix."""
    with (
        Engine([LOOKUP], storage=Storage.sqlite(str(tmp_path / "x.db"))) as engine,
        pytest.raises(ConfigurationError, match="cannot be moved; build it with a VirtualClock"),
    ):
        advance(engine, 1.0)

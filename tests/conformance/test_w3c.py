"""Run the W3C SCXML IRP tests durably, from the project's own copy of their ECMAScript documents.

Each W3C test (``w3c/testNNN.txml.scxml``, kept unchanged) is translated to
the Python datamodel by the token rules of :mod:`tests.conformance.ecmascript`
(into a scratch folder, sub-documents and data files beside it), loaded with
:func:`statechart.scxml.load` and run by an :class:`incarnate.Engine` over an
in-memory store with a virtual clock and the deterministic runner: the root
is started, the engine is restarted over the same store (a fresh engine
recovers the root and any child from their events), and then, until the root
finishes, the engine runs until idle and the clock jumps to the earliest
armed timer of any instance, restarting the engine at each jump. The
Basic HTTP tests (C.2) post to a real ingress (:class:`incarnate.IngressServer`)
on a loopback port, started by the first run and stopped after the
session, which accepts into the running test's store; the engine's runner
does the posts, and a round that ends with an accepted message or an
unsent post runs again before the clock moves. A test
passes when the root ends in its top-level final state ``pass``. Each run
has a budget of clock jumps, units of work and wall-clock seconds.

The manifest (``w3c/manifest.xml``) classes each test as mandatory or
optional, and manual or not; a manual test's document ends in a final state
``final`` whatever happened, so ``MANUAL_CHECKS`` holds what a tester would
look for (mostly in the log) as a check. Every test that does not pass is in
``EXPECTED_FAILURES`` with its reason and is marked ``xfail(strict=True)``:
a fix shows as XPASS, which fails the run until the entry is removed.
``load(dump(chart))`` must end the same way as ``load(chart)`` on every
document the loader accepts. ``pytest tests/conformance -s -k summary``
prints the counts and the reasons.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from incarnate import DeterministicRunner, Engine, HttpConfig, IngressServer, Storage, VirtualClock
from incarnate.errors import UnknownInstance
from incarnate.testing import advance, memory_engine, restart
from statechart import Chart
from statechart.effects import Logged
from statechart.scxml import ScxmlError, dump, load
from statechart.snapshot import Status
from tests.conformance.ecmascript import translate_document

CORPUS = Path(__file__).resolve().parent / "w3c"
"""The W3C tests as ``@scion-scxml/test-framework`` 2.0.16 ships them (see ``w3c/README.md``)."""

ROUNDS = 50
"""Clock jumps a run may make before it is called stuck (no W3C test needs more than a few)."""

UNITS = 5_000
"""Units of work one ``run_until_idle`` may do (a test that loops forever is cut off here)."""

SECONDS = 20.0
"""Wall-clock seconds one run may take."""


@attrs.frozen
class W3cTest:
    """One test of the manifest: its number, class and documents (403 has three)."""

    number: str
    conformance: str
    """``mandatory`` or ``optional``, as the manifest says."""
    manual: bool
    documents: tuple[str, ...]
    """The stems of its documents in ``w3c/`` (empty for 513, which has none)."""


def _manifest() -> dict[str, W3cTest]:
    root = ET.parse(CORPUS / "manifest.xml").getroot()
    tests: dict[str, W3cTest] = {}
    for element in root.iter("test"):
        number = element.attrib["id"]
        documents = tuple(
            Path(start.attrib["uri"]).name[: -len(".txml")] + ".txml"
            for start in element.iter("start")
            if start.attrib["uri"].endswith(".txml")
        )
        present = tuple(stem for stem in documents if (CORPUS / f"{stem}.scxml").exists())
        tests[number] = W3cTest(
            number, element.attrib["conformance"], element.attrib["manual"] == "true", present
        )
    return tests


TESTS = _manifest()

UNLISTED = ("303-1", "303-2")
"""Documents in the package that the manifest does not list (variants of 303 that SCION added)."""

# ---------------------------------------------------------------------------------------- reasons

EXPECTED_FAILURES: dict[str, str] = {
    # manual mandatory
    "307": (
        "ECMAScript-specific reading: the tester compares s0's read of the late-bound, not yet "
        "assigned Var1 with s1's read of a missing field, Var1.bar; ECMAScript gives undefined for "
        "both, while in the Python datamodel the unassigned Var1 is None (no error) and Var1.bar on "
        "the number 1 raises AttributeError, so error.execution (its own <log expr=''> raises "
        "error.execution too: an empty expression has no value, 5.9)"
    ),
    # optional: the Basic HTTP Event I/O processor
    "201": (
        "Basic HTTP Event I/O processor (optional, C.2): on entry the test posts event1 to itself "
        "over HTTP, then sends itself 'timeout' with no delay, and passes only if event1 comes "
        "first; the timeout is on the external queue in the commit of that macrostep, while "
        "event1 reaches the instance only after the commit, the post and the ingress's accept "
        "(an HTTP round trip cannot overtake an event queued before it, SCXML 6.2)"
    ),
    "513": "manual HTTP test (a shell script using wget); the package has no document for it",
    # optional: ECMAScript-profile tests with no JSON-safe Python reading
    "452": (
        "ECMAScript-only (B.2): the test assigns to a field of an object made by 'new testobject()' "
        "from a function its <script> defines; the Python datamodel keeps no functions or objects"
    ),
    "453": (
        "ECMAScript-only (B.2): the test stores a function expression in a variable and calls it; "
        "the Python datamodel keeps JSON values only (a callable is refused)"
    ),
    # documents the manifest does not list
    "303-1": (
        "unlisted (SCION's variant of 303): its <script> declares several variables in one "
        "'var a = 1, b = 2;' statement with // comments, ECMAScript syntax the token rules do not "
        "translate"
    ),
    "303-2": (
        "unlisted (SCION's variant of 303): its <script> relies on ECMAScript function scope "
        "(a 'var' inside a function it defines and calls); the rules translate no function definitions"
    ),
}
"""Tests that do not pass, with the cause; each is an ``xfail(strict=True)``."""

ROUNDTRIP_FAILURES: dict[str, str] = {}
"""Documents whose ``load(dump(chart))`` does not end as ``load(chart)`` does, with the cause."""

# ---------------------------------------------------------------------------------------- running


@attrs.frozen
class Outcome:
    """How a run ended: the root's configuration and status, and every instance's log lines."""

    configuration: tuple[str, ...]
    status: str
    logs: tuple[tuple[str, Any], ...] = ()

    @property
    def passed(self) -> bool:
        """The txml convention: the root ended in its top-level final state ``pass``."""
        return self.status == Status.DONE.value and self.configuration == ("pass",)


def _folder(stem: str) -> str:
    """The folder a document runs in: its test's number, as the W3C lays the tests out (``216/``)."""
    return re.sub(r"^test(\d+).*$", r"\1", stem)


@pytest.fixture(scope="session")
def translated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The corpus translated to the Python datamodel, one folder per test as the W3C lays it out.

    Each folder holds the test's documents with its sub-documents and data
    files (``216/test216.txml.scxml`` beside ``216/test216sub1.scxml``), so a
    ``srcexpr`` finds only its own test's documents beside it.
    """
    root = tmp_path_factory.mktemp("w3c-python")
    for path in CORPUS.iterdir():
        if path.suffix not in (".scxml", ".txt"):
            continue
        folder = root / _folder(path.name)
        folder.mkdir(exist_ok=True)
        if path.suffix == ".scxml":
            (folder / path.name).write_text(translate_document(path.read_text("utf-8")), "utf-8")
        else:
            shutil.copy(path, folder / path.name)
    return root


def _logs(engine: Engine) -> tuple[tuple[str, Any], ...]:
    lines: list[tuple[str, Any]] = []
    for instance in engine.instances():
        for event in engine.events_of(instance.id):
            for effect in getattr(event, "effects", ()):
                if isinstance(effect, Logged):
                    lines.append((effect.label, effect.data))
    return tuple(lines)


def _next_deadline(engine: Engine) -> float | None:
    deadlines = []
    for instance in engine.instances():
        if instance.record.status.finished or instance.record.snapshot_parts is None:
            continue
        deadline = engine.snapshot(instance.id).next_deadline()
        if deadline is not None:
            deadlines.append(deadline)
    return min(deadlines, default=None)


class Ingress:
    """One Basic HTTP ingress on a loopback port for the whole session; each run points it at its store.

    The ingress accepts events with an engine of its own over the running
    test's store and clock, as a web front end beside the workers would
    (``use``); the engine under test posts its HTTP sends to it with its
    runner, and steps what the ingress accepted after a restart or when
    its delivery's commit follows the instance.
    """

    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.server: IngressServer | None = None

    def url(self) -> str:
        if self.server is None:
            self.server = IngressServer(self.send).start()
        return self.server.url

    def send(self, *args: Any, **kwargs: Any) -> int | None:
        if self.engine is None:
            raise UnknownInstance(args[0])  # no W3C test is running
        return self.engine.send(*args, **kwargs)

    @contextlib.contextmanager
    def use(self, store: str, clock: VirtualClock) -> Iterator[HttpConfig]:
        """Accept events into the memory store ``store`` while the block runs; yields the HTTP settings."""
        self.engine = Engine(storage=Storage.popo(store), clock=clock, runner=DeterministicRunner())
        try:
            yield HttpConfig(self.url(), attempts=2, backoff=0.05, timeout=HTTP_SECONDS)
        finally:
            self.engine.close()
            self.engine = None

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


INGRESS = Ingress()
"""The session's ingress (started by the first run, stopped by the ``ingress`` fixture)."""

HTTP_SECONDS = 5.0
"""How long one post waits for the ingress to answer."""


@pytest.fixture(scope="session", autouse=True)
def ingress() -> Iterator[Ingress]:
    """Stops the session's ingress after the last test."""
    yield INGRESS
    INGRESS.stop()


def _pending(engine: Engine) -> bool:
    """Whether an unfinished instance still has a message or an HTTP send to work on."""
    return any(
        instance.record.outbox or (instance.record.inbox and not instance.record.status.finished)
        for instance in engine.instances()
    )


def run(chart: Chart[Any]) -> Outcome:
    """Start ``chart`` in an engine, restart the engine, then run it until the root finishes (bounded)."""
    began = time.monotonic()
    store, clock = f"w3c-{uuid.uuid4().hex}", VirtualClock(0.0)
    with INGRESS.use(store, clock) as http:
        return _run(chart, memory_engine([chart], name=store, clock=clock, http=http), began)


def _run(chart: Chart[Any], engine: Engine, began: float) -> Outcome:
    try:
        root = engine.start(chart.name).id
        for _ in range(ROUNDS):
            engine = restart(engine)  # a fresh engine recovers everything from the store
            engine.run_until_idle(UNITS)
            snapshot = engine.snapshot(root)
            if snapshot.status is not Status.RUNNING:
                return Outcome(snapshot.configuration, snapshot.status.value, _logs(engine))
            if _pending(engine):
                continue  # accepted over HTTP meanwhile: the next round steps it
            deadline = _next_deadline(engine)
            if deadline is None:
                return Outcome(snapshot.configuration, "idle", _logs(engine))
            if time.monotonic() - began > SECONDS:
                return Outcome(snapshot.configuration, "out of time", _logs(engine))
            advance(engine, max(deadline - engine.clock.now(), 0.0))
        return Outcome(engine.snapshot(root).configuration, "out of rounds", _logs(engine))
    finally:
        engine.close()


def _load(root: Path, stem: str) -> Chart[Any]:
    return load(root / _folder(stem) / f"{stem}.scxml")


# ---------------------------------------------------------------------------------------- manual tests


def _logged(label: str) -> Callable[[Outcome], list[Any]]:
    def values(outcome: Outcome) -> list[Any]:
        return [data for found, data in outcome.logs if found.strip() == label]

    return values


def _check_178(folder: Path) -> None:
    """The logged ``_event.raw`` holds both values of the repeated ``<param>`` name, in order.

    ``raw`` is the event as JSON text (the engine's SCXML processor carries
    its messages as JSON objects), so the two pairs ``Var1=2`` and
    ``Var1=3`` appear as the one key ``Var1`` with both values.
    """
    outcome = run(_load(folder, "test178.txml"))
    assert outcome.configuration == ("final",)
    raw = _logged("_event")(outcome)
    assert len(raw) == 1 and isinstance(raw[0], str), outcome.logs
    message = json.loads(raw[0])
    assert (message["name"], message["type"], message["data"]) == ("event1", "external", {"Var1": [2, 3]}), (
        raw
    )


def _check_230(folder: Path) -> None:
    outcome = run(_load(folder, "test230.txml"))
    assert outcome.configuration == ("final",)
    fields = ("name is", "type is", "sendid is", "origin is", "origintype is", "invokeid is", "data is")
    for field in fields:  # the parent's and the child's copy of childToParent, field by field
        values = _logged(field)(outcome)
        assert len(values) == 2 and values[0] == values[1], (field, outcome.logs)
    # The copies agree on what identifies the sender, not merely on blanks.
    (invokeid, _), (origin, _) = _logged("invokeid is")(outcome), _logged("origin is")(outcome)
    assert _logged("name is")(outcome) == ["childToParent"] * 2, outcome.logs
    assert re.fullmatch(r"s0\.\d+", invokeid) and origin == f"#_{invokeid}", outcome.logs


def _check_250(folder: Path) -> None:
    outcome = run(_load(folder, "test250.txml"))
    assert outcome.configuration == ("final",)
    said = [data for _label, data in outcome.logs]
    assert "Exiting sub01" in said and "Exiting sub0" in said, outcome.logs
    assert "entering final state, invocation was not cancelled" not in said


def _check_301(folder: Path) -> None:
    with pytest.raises(ScxmlError, match=r"<script>: cannot read src="):
        _load(folder, "test301.txml")


def _check_307(folder: Path) -> None:
    outcome = run(_load(folder, "test307.txml"))
    assert outcome.configuration == ("final",)
    in_s0 = [label for label, _ in outcome.logs if label.startswith(("error in state s0", "no error in s0"))]
    in_s1 = [label for label, _ in outcome.logs if label.startswith(("error in state s1", "No error in s1"))]
    assert in_s0 and in_s1 and in_s0[0].lower().startswith("no") == in_s1[0].lower().startswith("no"), (
        outcome.logs
    )


def _check_pass(stem: str) -> Callable[[Path], None]:
    """313, 314: the processor may refuse the document; if it runs it, it must reach ``pass``."""

    def check(folder: Path) -> None:
        try:
            chart = _load(folder, stem)
        except ScxmlError:
            return
        assert run(chart).passed

    return check


def _check_415(folder: Path) -> None:
    outcome = run(_load(folder, "test415.txml"))
    assert (outcome.configuration, outcome.status) == (("final",), Status.DONE.value)


MANUAL_CHECKS: dict[str, Callable[[Path], None]] = {
    "178": _check_178,
    "230": _check_230,
    "250": _check_250,
    "301": _check_301,
    "307": _check_307,
    "313": _check_pass("test313.txml"),
    "314": _check_pass("test314.txml"),
    "415": _check_415,
}
"""What a tester looks for in each manual test, as a check (the manifest's 513 has no document)."""

# ---------------------------------------------------------------------------------------- tests


def _param(name: str) -> Any:
    if name in EXPECTED_FAILURES:
        return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=EXPECTED_FAILURES[name]))
    return name


def _stems(name: str) -> tuple[str, ...]:
    return TESTS[name].documents if name in TESTS else (f"test{name}.txml",)


CASES = sorted(TESTS, key=lambda n: (int(re.sub(r"\D", "", n)), n)) + list(UNLISTED)


@pytest.mark.parametrize("name", [_param(name) for name in CASES])
def test_w3c(name: str, translated: Path) -> None:
    """The test's document(s) end in ``pass`` (a manual test: what its tester looks for holds)."""
    test = TESTS.get(name)
    if test is not None and test.manual:
        if name not in MANUAL_CHECKS:
            pytest.fail(f"manual test {name} has no document to run")
        MANUAL_CHECKS[name](translated)
        return
    stems = _stems(name)
    assert stems, f"test {name} has no document"
    for stem in stems:
        outcome = run(_load(translated, stem))
        assert outcome.passed, f"{stem}: {outcome}"


def _roundtrip_names() -> Iterator[str]:
    for name in CASES:
        yield from (stem[4 : -len(".txml")] for stem in _stems(name))


@pytest.mark.parametrize(
    "stem",
    [
        pytest.param(stem, marks=pytest.mark.xfail(strict=True, reason=ROUNDTRIP_FAILURES[stem]))
        if stem in ROUNDTRIP_FAILURES
        else stem
        for stem in _roundtrip_names()
    ],
)
def test_w3c_dump_roundtrip(stem: str, translated: Path, tmp_path: Path) -> None:
    """``load(dump(chart))``, beside the same documents, ends exactly as ``load(chart)`` does."""
    document = f"test{stem}.txml"
    try:
        chart = _load(translated, document)
    except ScxmlError:
        pytest.skip("the loader refuses the document (see test_w3c)")
    beside = shutil.copytree(translated / _folder(document), tmp_path / _folder(document))
    (beside / f"{document}.scxml").write_text(dump(chart), "utf-8")
    again = _load(tmp_path, document)
    assert again.fingerprint == chart.fingerprint

    # Error messages name the document's file and line; the copies differ in folder and layout.
    # Each run's root has a session id of its own, which a logged _event.raw shows (178).
    def seen(outcome: Outcome, folder: Path) -> str:
        text = re.sub(r"\.scxml:\d+ ", ".scxml:LINE ", repr(outcome).replace(str(folder), "<folder>"))
        return re.sub(r"#_scxml_[0-9a-f-]{36}", "#_scxml_<session>", text)

    assert seen(run(again), beside) == seen(run(chart), translated / _folder(document))


def test_w3c_summary(capsys: pytest.CaptureFixture[str]) -> None:
    """The manifest's 200 tests are all run (or listed with a reason); prints the counts and reasons."""
    assert len(TESTS) == 200
    assert set(EXPECTED_FAILURES) <= set(TESTS) | set(UNLISTED)
    assert {n for n, t in TESTS.items() if t.manual} - set(MANUAL_CHECKS) == {"513"}
    rows = []
    for group in ("mandatory", "optional"):
        for manual in (False, True):
            members = [n for n, t in TESTS.items() if t.conformance == group and t.manual == manual]
            passed = [n for n in members if n not in EXPECTED_FAILURES]
            rows.append((f"{group}{' (manual)' if manual else ''}", len(passed), len(members)))
    with capsys.disabled():
        print("\nW3C SCXML IRP tests (manifest.xml), run durably:")
        for label, count, total in rows:
            print(f"  {label:<22} {count:>3} / {total:<3} passed")
        unlisted = [name for name in UNLISTED if name not in EXPECTED_FAILURES]
        print(f"  {'unlisted (SCION)':<22} {len(unlisted):>3} / {len(UNLISTED):<3} passed")
        print("Expected failures:")
        for name in CASES:
            if name in EXPECTED_FAILURES:
                test = TESTS.get(name)
                kind = "unlisted" if test is None else test.conformance + (" manual" if test.manual else "")
                print(f"  {name} ({kind}): {EXPECTED_FAILURES[name]}")

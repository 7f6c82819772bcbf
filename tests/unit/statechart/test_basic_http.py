"""The Basic HTTP event I/O processor on the pure side (SCXML Appendix C.2): sends become effects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from statechart import Chart, Event, start, step
from statechart.codec import make_converter
from statechart.effects import SendHttp
from statechart.event import EventKind
from statechart.scxml import load

HTTP = "http://www.w3.org/TR/scxml/#BasicHTTPEventProcessor"

DOCUMENT = """<scxml xmlns="http://www.w3.org/2005/07/scxml" datamodel="python" initial="s0" version="1.0">
  <datamodel><data id="Var1" expr="2"/><data id="where" expr="None"/></datamodel>
  <state id="s0">
    <onentry>
      <assign location="where" expr="_ioprocessors.get('basichttp', {{}}).get('location')"/>
      <send id="s1" type="{type}" targetexpr="{target}" event="ping" namelist="Var1">
        <param name="p" expr="'x'"/>
      </send>
    </onentry>
    <transition event="error.communication" target="failed"/>
  </state>
  <final id="failed"/>
</scxml>"""


def _chart(tmp_path: Path, kind: str = HTTP, target: str = "where") -> Chart[Any]:
    path = tmp_path / "http.scxml"
    path.write_text(DOCUMENT.format(type=kind, target=target), "utf-8")
    return load(path)


def test_a_basic_http_send_is_returned_as_an_effect_with_the_sender_location(tmp_path: Path) -> None:
    """A send of the Basic HTTP type to a URL is a ``SendHttp`` effect carrying its data and origin."""
    chart = _chart(tmp_path)
    here = "http://127.0.0.1:8080/instances/me/events"
    snapshot, effects = start(chart, session="me", http_location=here)
    (post,) = [effect for effect in effects if isinstance(effect, SendHttp)]
    assert post == SendHttp(here, "ping", {"Var1": 2, "p": "x"}, "s1", here)
    assert snapshot.configuration == ("s0",) and snapshot.timers == ()


def test_the_short_type_name_is_accepted(tmp_path: Path) -> None:
    """``type="basichttp"`` names the same processor as its URI."""
    chart = _chart(tmp_path, kind="basichttp", target="'https://example.org/hook'")
    _, effects = start(chart, session="me")
    assert [e.target for e in effects if isinstance(e, SendHttp)] == ["https://example.org/hook"]


def test_without_an_http_ingress_the_processor_has_no_location(tmp_path: Path) -> None:
    """No ingress: ``_ioprocessors`` has no ``basichttp`` entry and the send carries no origin."""
    chart = _chart(tmp_path, target="'http://example.org/hook'")
    snapshot, effects = start(chart, session="me")
    assert snapshot.context.vars["where"] is None
    assert [e.origin for e in effects if isinstance(e, SendHttp)] == [None]


def test_a_send_without_a_target_raises_error_communication_at_once(tmp_path: Path) -> None:
    """W3C 577: a Basic HTTP send with no target is ``error.communication`` on the internal queue."""
    path = tmp_path / "untargeted.scxml"
    path.write_text(
        f"""<scxml xmlns="http://www.w3.org/2005/07/scxml" datamodel="python" initial="s0" version="1.0">
  <state id="s0">
    <onentry><send event="event1"/><send event="test" type="{HTTP}"/></onentry>
    <transition event="error.communication" target="pass"/>
    <transition event="*" target="fail"/>
  </state>
  <final id="pass"/><final id="fail"/>
</scxml>""",
        "utf-8",
    )
    snapshot, effects = start(load(path), session="me")
    assert snapshot.configuration == ("pass",)
    assert not [e for e in effects if isinstance(e, SendHttp)]


def test_a_target_that_is_not_an_http_url_raises_error_communication(tmp_path: Path) -> None:
    """SCXML 6.2 / C.2: a target the processor cannot reach is ``error.communication``, no effect."""
    chart = _chart(tmp_path, target="'ftp://example.org/'")
    snapshot, effects = start(chart, session="me")
    assert not [e for e in effects if isinstance(e, SendHttp)]
    assert snapshot.configuration == ("failed",)


def test_an_event_from_http_shows_its_origin_type_and_raw_message(tmp_path: Path) -> None:
    """``_event.origintype`` and ``_event.raw`` come from the event when the HTTP processor set them."""
    path = tmp_path / "seen.scxml"
    path.write_text(
        """<scxml xmlns="http://www.w3.org/2005/07/scxml" datamodel="python" initial="s0" version="1.0">
  <datamodel><data id="seen" expr="None"/></datamodel>
  <state id="s0">
    <transition event="hello" target="s1">
      <assign location="seen" expr="[_event.origintype, _event.origin, _event.raw]"/>
    </transition>
  </state>
  <state id="s1"/>
</scxml>""",
        "utf-8",
    )
    chart = load(path)
    snapshot, _ = start(chart, session="me")
    raw = "POST /instances/me/events HTTP/1.1\r\n\r\n_scxmleventname=hello"
    event = Event("hello", None, EventKind.EXTERNAL, origin="http://peer/", origin_type=HTTP, raw=raw)
    snapshot, _ = step(chart, snapshot, event, session="me")
    assert snapshot.context.vars["seen"] == [HTTP, "http://peer/", raw]


def test_events_without_the_new_fields_encode_as_before() -> None:
    """``origin_type`` and ``raw`` are stored only when set, so older events keep their stored form."""
    converter = make_converter()
    assert converter.unstructure(Event("a", 1)) == {
        "name": "a",
        "data": 1,
        "kind": "external",
        "send_id": None,
        "invoke_id": None,
        "origin": None,
    }
    event = Event("a", 1, origin="http://x/", origin_type=HTTP, raw="POST")
    assert converter.structure(converter.unstructure(event), Event) == event

"""SCXML invocations run by the engine: each document ends in ``pass`` when the behaviour is right.

Each case names the section of SCXML 1.0 it follows. The documents are run by
an engine over a SQLite file, children and all, until the root finishes.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from aggregates import Instance
from incarnate import Engine, Storage
from incarnate.testing import memory_engine
from statechart.event import InvokeId
from statechart.scxml import load

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python"'
VERDICTS = (
    '<final id="pass"><donedata><content expr="\'pass\'"/></donedata></final>'
    '<final id="fail"><donedata><content expr="\'fail: \' + _event.name"/></donedata></final>'
)

CASES = {
    "send-to-invokeid": (
        "#_<invokeid> reaches the child; its reply carries the invoke id (6.2.4, 5.10.1)",
        f"""<scxml {NS} initial="s0">
<datamodel><data id="iid"/></datamodel>
<state id="s0">
  <onentry><send event="timeout" delay="2s"/></onentry>
  <invoke idlocation="iid"><content><scxml {NS} name="send-to-invokeid-child">
     <state id="c0"><onentry><send target="#_parent" event="ready"/></onentry>
       <transition event="ping"><send target="#_parent" event="pong"/></transition></state></scxml>
         </content></invoke>
  <transition event="ready"><send targetexpr="'#_' + iid" event="ping"/></transition>
  <transition event="pong" cond="_event.invokeid == iid and _event.origin == '#_' + iid" target="pass"/>
  <transition event="*" target="fail"/>
</state>
{VERDICTS}</scxml>""",
    ),
    "finalize-before-transitions": (
        "<finalize> runs before transitions are selected on the child's event, and sees its data (6.5)",
        f"""<scxml {NS} initial="s0">
<datamodel><data id="v" expr="1"/></datamodel>
<state id="s0">
  <onentry><send event="timeout" delay="2s"/></onentry>
  <invoke id="k"><content><scxml {NS} name="finalize-before-transitions-child"><final id="f"><onentry>
    <send target="#_parent" event="childToParent"><param name="aParam" expr="2"/></send></onentry></final>
      </scxml></content>
    <finalize><assign location="v" expr="_event.data['aParam']"/></finalize></invoke>
  <transition event="childToParent" cond="v == 2" target="pass"/>
  <transition event="*" target="fail"/>
</state>
{VERDICTS}</scxml>""",
    ),
    "cancelled-child-is-silent": (
        "a child cancelled by leaving its state sends nothing the parent sees (6.4)",
        f"""<scxml {NS} initial="s0">
<state id="s0" initial="s01">
  <onentry><send event="timeout" delay="1s"/></onentry>
  <transition event="timeout" target="pass"/>
  <transition event="childToParent" target="fail"/>
  <transition event="done.invoke" target="fail"/>
  <state id="s01">
    <invoke id="k"><content><scxml {NS} name="cancelled-child-is-silent-child"><state id="c0"><onexit>
      <send target="#_parent" event="childToParent"/></onexit></state></scxml></content></invoke>
    <transition target="s02"/>
  </state>
  <state id="s02"/>
</state>
{VERDICTS}</scxml>""",
    ),
    "queued-before-cancel": (
        "what a child sent before its invocation was cancelled is still processed, as ordinary events "
        "that name the invocation: its messages, then its done.invoke (6.4, W3C 236)",
        f"""<scxml {NS} initial="s0">
<datamodel><data id="seen" expr="[]"/></datamodel>
<state id="s0">
  <onentry><send event="timeout" delay="1s"/></onentry>
  <invoke id="k"><content><scxml {NS} name="queued-before-cancel-child"><final id="f"><onentry>
    <send target="#_parent" event="first"/><send target="#_parent" event="second"/></onentry></final>
      </scxml></content>
    <finalize><assign location="seen" expr="seen + ['finalize ' + _event.name]"/></finalize></invoke>
  <transition event="first" target="s1"/>
  <transition event="*" target="fail"/>
</state>
<state id="s1">
  <transition event="second" cond="_event.invokeid == 'k' and _event.origin == '#_k'">
    <assign location="seen" expr="seen + [_event.name]"/></transition>
  <transition event="done.invoke.k" cond="_event.invokeid == 'k'" target="s2"/>
  <transition event="*" target="fail"/>
</state>
<state id="s2">
  <transition event="timeout" cond="seen == ['finalize first', 'second']" target="pass"/>
  <transition event="*" target="fail"/>
</state>
{VERDICTS}</scxml>""",
    ),
    "namelist-and-param": (
        "namelist and <param> give the child's declared data their values (6.4)",
        f"""<scxml {NS} initial="s0">
<datamodel><data id="Var1" expr="1"/></datamodel>
<state id="s0" initial="s01">
  <onentry><send event="timeout" delay="2s"/></onentry>
  <transition event="timeout" target="fail"/>
  <state id="s01">
    <invoke namelist="Var1"><content><scxml {NS} name="namelist-and-param-child-a">
      <datamodel><data id="Var1" expr="0"/>
      </datamodel>
      <state id="c"><transition cond="Var1 == 1" target="ok"><send target="#_parent" event="success"/>
        </transition>
      <transition target="ok"><send target="#_parent" event="failure"/></transition></state>
        <final id="ok"/></scxml></content></invoke>
    <transition event="success" target="s02"/><transition event="failure" target="fail"/>
  </state>
  <state id="s02">
    <invoke><param name="Var1" expr="1"/><content><scxml {NS} name="namelist-and-param-child-b"><datamodel>
      <data id="Var1" expr="0"/></datamodel>
      <state id="c"><transition cond="Var1 == 1" target="ok"><send target="#_parent" event="success"/>
        </transition>
      <transition target="ok"><send target="#_parent" event="failure"/></transition></state>
        <final id="ok"/></scxml></content></invoke>
    <transition event="success" target="pass"/><transition event="failure" target="fail"/>
  </state>
</state>
{VERDICTS}</scxml>""",
    ),
    "invoke-at-macrostep-end": (
        "only the states active at the end of the macrostep invoke (6.4)",
        f"""<scxml {NS} initial="s1">
<datamodel><data id="Var1" expr="0"/></datamodel>
<state id="s1" initial="s11">
  <onentry><send event="timeout" delay="2s"/></onentry>
  <transition event="invokeS1 invokeS12"><assign location="Var1" expr="Var1 + 1"/></transition>
  <transition event="invokeS11" target="fail"/>
  <transition event="timeout" cond="Var1 == 2" target="pass"/>
  <transition event="timeout" target="fail"/>
  <invoke><content><scxml {NS} name="invoke-at-macrostep-end-a"><final id="f"><onentry>
    <send target="#_parent" event="invokeS1"/></onentry></final></scxml></content></invoke>
  <state id="s11">
    <invoke><content><scxml {NS} name="invoke-at-macrostep-end-b"><final id="f"><onentry>
      <send target="#_parent" event="invokeS11"/></onentry></final></scxml></content></invoke>
    <transition target="s12"/>
  </state>
  <state id="s12">
    <invoke><content><scxml {NS} name="invoke-at-macrostep-end-c"><final id="f"><onentry>
      <send target="#_parent" event="invokeS12"/></onentry></final></scxml></content></invoke>
  </state>
</state>
{VERDICTS}</scxml>""",
    ),
    "autoforward": (
        "autoforward sends the parent's external events to the child, its own included (6.4, W3C 229)",
        f"""<scxml {NS} initial="s0">
<state id="s0">
  <onentry><send event="timeout" delay="1s"/></onentry>
  <invoke autoforward="true"><content><scxml {NS} name="autoforward-child"><state id="c">
     <onentry><send target="#_parent" event="childToParent"/></onentry>
     <transition event="childToParent"><send target="#_parent" event="eventReceived"/></transition></state>
       </scxml></content></invoke>
  <transition event="childToParent"/>
  <transition event="eventReceived" target="pass"/>
  <transition event="*" target="fail"/>
</state>
{VERDICTS}</scxml>""",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_invocation(name: str, tmp_path: Path) -> None:
    """The document reaches ``pass`` (see each case's description)."""
    _, document = CASES[name]
    engine = Engine([load(document, name=name)], storage=Storage.sqlite(str(tmp_path / "store.db")))
    try:
        handle = engine.start(name)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            engine.run_until_idle()
            if engine.instance(handle.id).record.status.finished:
                break
            time.sleep(0.02)
        assert engine.instance(handle.id).record.output == "pass", CASES[name][0]
    finally:
        engine.close()


def test_what_an_older_generation_sent_before_its_cancellation_is_still_stale() -> None:
    """A child's message queued before its invocation was cancelled is rejected, and recorded, when
    the slot already holds a newer generation (the state was re-entered): invariant 5 (6.4)."""
    document = f"""<scxml {NS} initial="s0">
<datamodel><data id="rounds" expr="0"/><data id="seen" expr="[]"/></datamodel>
<state id="s0">
  <invoke id="k"><content><scxml {NS} name="stale-child"><state id="c"><onentry>
    <send target="#_parent" event="first"/><send target="#_parent" event="second"/></onentry></state>
      </scxml></content></invoke>
  <transition event="first" cond="rounds == 0" target="s0"><assign location="rounds" expr="rounds + 1"/>
    </transition>
  <transition event="second"><assign location="seen" expr="seen + [_event.invokeid]"/></transition>
  <transition event="finish" target="end"/>
</state>
<final id="end"><donedata><content expr="seen"/></donedata></final></scxml>"""
    engine = memory_engine([load(document, name="stale")])
    try:
        root = engine.start("stale").id
        engine.run_until_idle()
        engine.send(root, "finish")
        engine.run_until_idle()
        assert engine.instance(root).record.output == ["k"], "only the live generation's second counts"
        rejected = [e for e in engine.events_of(root) if isinstance(e, Instance.EvidenceRejected)]
        assert [(e.event.name, e.event.invoke_id) for e in rejected] == [("second", InvokeId("k", "", 1))]
        assert "stale" in rejected[0].reason
    finally:
        engine.close()

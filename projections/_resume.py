"""The ResumePlan: an instance's checkpoint rebuilt from its events, and validated.

:func:`resume_plan` folds an instance's stored events — from the start, or
from an ``eventsourcing`` snapshot — into its checkpoint: the authoritative
statechart snapshot plus exactly the child activations it needs. It checks
as it folds that every activation fact arrives in causal order
(``Birth``, then ``ChildRetry`` and ``ChildResume`` in turn, then
``ChildSettled``), that every birth fact agrees with the instance itself
(its type, root and ancestry) and with the ``BirthChild`` or
``ResumeChild`` effect of the macrostep that decided it (child chart or
task, state, input, attempt, lineage), and at every macrostep boundary that the activations
cover the snapshot's live child slots exactly: same slots, same order, same
incarnation. Anything omitted, duplicated, reordered or mismatched raises a
:class:`CheckpointError` naming the slot and what differs. A plan is never
approximated: there is no fallback that builds a child from a chart name
and a key.

The fold is a plain function over the events, independent of the
aggregate's own ``apply`` methods, so it checks them too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from uuid import UUID

import attrs

from aggregates import (
    Activation,
    ActivationState,
    AncestryFrame,
    BirthFacts,
    Instance,
    InstanceKind,
    InstanceSnapshot,
    InstanceStatus,
    JsonObject,
    Provenance,
    Ref,
    RetryEntry,
    Settlement,
)
from projections.errors import (
    CheckpointError,
    CheckpointUndecodable,
    CorruptedDelta,
    DuplicatedActivation,
    MismatchedActivation,
    OmittedActivation,
    ReorderedActivation,
)
from statechart import Chart
from statechart.codec import SnapshotCodec
from statechart.effects import BirthChild, ResumeChild
from statechart.errors import CodecError
from statechart.event import InvokeId
from statechart.snapshot import Snapshot, check_snapshot

_NIL = UUID(int=0)
"""The id a fold holds before it meets its first event."""

_LIVE = ("running", "retrying")


@attrs.frozen
class Checkpoint:
    """An instance's snapshot and exactly the activations it needs."""

    instance_id: UUID
    version: int
    status: InstanceStatus
    snapshot: Snapshot[Any] | None
    activations: tuple[Activation, ...]

    @classmethod
    def of(cls, instance: Instance, chart: Chart[Any] | None) -> Checkpoint:
        """The checkpoint a live aggregate holds (for comparison with a plan)."""
        record = instance.record
        snapshot = None
        if chart is not None and record.snapshot is not None:
            snapshot = SnapshotCodec(chart).decode(record.snapshot)
        return cls(instance.id, instance.version, record.status, snapshot, record.activations)


def _slot_name(site: str, key: str) -> str:
    return f"{site}[{key}]" if key else site


def _type_name(topic: str) -> str:
    """The class name in an ``eventsourcing`` topic (``module:Class``)."""
    return topic.rpartition(":")[2].rpartition(".")[2]


SlotKey = tuple[str, str]


class _Fold:
    """The state of the fold: only what a checkpoint needs.

    Slots and activations are kept by ``(site, key)`` in insertion order
    (a replaced one keeps its place), so each fact costs O(1); the check at
    a macrostep boundary looks only at the slots touched since the last one
    (see :meth:`check`).
    """

    def __init__(self) -> None:
        self.instance_id = _NIL
        self.version = 0
        self.status = InstanceStatus.BORN
        self.kind = InstanceKind.CHART
        self.parts: JsonObject | None = None
        self.slots: dict[SlotKey, JsonObject] = {}
        self.steps = 0
        self.activations: dict[SlotKey, Activation] = {}
        self.inputs: dict[tuple[str, str], Any] = {}
        # What every birth fact is checked against: the instance itself, and the effects of
        # the macrostep whose commit records the fact (none after a migration; unknown, None,
        # after an eventsourcing snapshot, which may be taken in the middle of a commit).
        self.type_name = Instance.__name__
        self.root = _NIL
        self.ancestry: tuple[AncestryFrame, ...] = ()
        self.births: dict[tuple[type, InvokeId], BirthChild | ResumeChild] | None = None
        self.states: dict[tuple[str, str], str] = {}
        # Insertion numbers (a slot or activation put anew goes last), the numbers at the last
        # check, and the keys touched since; ``full`` asks the next check to look at everything.
        self.slot_seq: dict[SlotKey, int] = {}
        self.activation_seq: dict[SlotKey, int] = {}
        self.next_seq = 0
        self.mark = 0
        self.dirty: dict[SlotKey, None] = {}
        self.full = True

    # -------------------------------------------------------------- errors

    def error(self, cls: type[CheckpointError], site: str, key: str, problem: str) -> CheckpointError:
        return cls(self.instance_id, _slot_name(site, key), problem, version=self.version)

    def find(self, site: str, key: str) -> Activation | None:
        return self.activations.get((site, key))

    @property
    def snapshot(self) -> JsonObject | None:
        """The encoded snapshot, whole."""
        if self.parts is None:
            return None
        return {**self.parts, "children": list(self.slots.values())}

    # ------------------------------------------------------------- changes

    def _seq(self) -> int:
        self.next_seq += 1
        return self.next_seq

    def put_activation(self, activation: Activation) -> None:
        key = (activation.site, activation.key)
        if key not in self.activations:
            self.activation_seq[key] = self._seq()
        self.activations[key] = activation
        self.dirty[key] = None

    def drop_activation(self, key: SlotKey) -> None:
        del self.activations[key]
        del self.activation_seq[key]
        self.dirty[key] = None

    def replace_snapshot(self, data: JsonObject) -> None:
        """A whole encoded snapshot (events before deltas, a migration): every slot is checked next."""
        self.parts = {name: value for name, value in data.items() if name != "children"}
        self.slots = {}
        self.slot_seq = {}
        for slot in data.get("children", []):
            key = (slot["site"], slot["key"])
            self.slots[key] = slot
            self.slot_seq[key] = self._seq()
        self.full = True

    def apply_delta(self, event: Any) -> None:
        """A macrostep's changes, each checked against the slots they name."""
        if event.parts is None:
            raise CorruptedDelta(
                self.instance_id,
                "-",
                "a Stepped event with neither a snapshot nor a delta",
                version=self.version,
            )
        if self.parts is None:
            self.parts = dict(event.parts)
        else:
            self.parts = {**self.parts, **event.parts}
        slots = self.slots
        for site, key in event.removed:
            if (site, key) not in slots:
                raise self.error(
                    CorruptedDelta, site, key, "the Stepped event removes a slot the snapshot does not have"
                )
            del slots[(site, key)]
            del self.slot_seq[(site, key)]
            self.dirty[(site, key)] = None
        for slot in event.changed:
            site, key = self.slot_key(slot)
            if (site, key) not in slots:
                raise self.error(
                    CorruptedDelta, site, key, "the Stepped event changes a slot the snapshot does not have"
                )
            slots[(site, key)] = slot
            self.dirty[(site, key)] = None
        for slot in event.added:
            site, key = self.slot_key(slot)
            if (site, key) in slots:
                raise self.error(
                    CorruptedDelta, site, key, "the Stepped event adds a slot the snapshot has already"
                )
            slots[(site, key)] = slot
            self.slot_seq[(site, key)] = self._seq()
            self.dirty[(site, key)] = None

    def slot_key(self, slot: Any) -> SlotKey:
        site = slot.get("site") if isinstance(slot, dict) else None
        key = slot.get("key") if isinstance(slot, dict) else None
        if not isinstance(site, str) or not isinstance(key, str):
            raise CorruptedDelta(
                self.instance_id, "-", f"a slot without a site and key: {slot!r}", version=self.version
            )
        return (site, key)

    # --------------------------------------------------------------- check

    def check(self) -> None:
        """At a macrostep boundary: activations cover the live slots exactly, in order.

        Only the slots touched since the last check can have changed; each
        is checked, and the ones put anew (last, in both orders) must come
        in the same order among slots as among activations. Anything that
        is not plainly so is checked in full, which decides exactly as a
        check of everything would.
        """
        if self.full or self.parts is None:
            self.check_all()
            return
        dirty = self.dirty
        if not dirty:
            return
        slots, activations = self.slots, self.activations
        for key in dirty:
            slot = slots.get(key)
            live = slot is not None and slot.get("status") in _LIVE
            activation = activations.get(key)
            if live and activation is None:
                assert slot is not None
                raise self.error(
                    OmittedActivation, *key, f"the snapshot keeps generation {slot['generation']} alive"
                )
            if activation is not None and not live:
                raise self.error(
                    MismatchedActivation,
                    *key,
                    f"generation {activation.generation} is retained but the snapshot keeps no live slot",
                )
            if activation is not None and slot is not None:
                self.compare(activation, slot)
        mark = self.mark
        new_slots = [
            k for k in dirty if k in slots and slots[k].get("status") in _LIVE and self.slot_seq[k] > mark
        ]
        new_activations = [k for k in dirty if k in activations and self.activation_seq[k] > mark]
        if set(new_slots) != set(new_activations) or sorted(
            new_slots, key=self.slot_seq.__getitem__
        ) != sorted(new_activations, key=self.activation_seq.__getitem__):
            self.check_all()
            return
        self.checked()

    def checked(self) -> None:
        self.mark = self.next_seq
        self.dirty = {}
        self.full = False

    def check_all(self) -> None:
        """Every live slot against every activation, and their orders."""
        if self.parts is None:
            if self.activations:
                a = next(iter(self.activations.values()))
                raise self.error(ReorderedActivation, a.site, a.key, "an activation precedes any macrostep")
            self.checked()
            return
        live = [(k, slot) for k, slot in self.slots.items() if slot.get("status") in _LIVE]
        for (site, key), slot in live:
            activation = self.activations.get((site, key))
            if activation is None:
                raise self.error(
                    OmittedActivation, site, key, f"the snapshot keeps generation {slot['generation']} alive"
                )
            self.compare(activation, slot)
        kept = {k for k, _ in live}
        for (site, key), activation in self.activations.items():
            if (site, key) not in kept:
                raise self.error(
                    MismatchedActivation,
                    site,
                    key,
                    f"generation {activation.generation} is retained but the snapshot keeps no live slot",
                )
        order = list(self.activations)
        expected = [k for k, _ in live]
        if order != expected:
            for (site, key), (want_site, want_key) in zip(order, expected, strict=False):
                if (site, key) != (want_site, want_key):
                    raise self.error(
                        ReorderedActivation,
                        site,
                        key,
                        f"activations are ordered {[_slot_name(*o) for o in order]}, the snapshot's "
                        f"slots {[_slot_name(*e) for e in expected]}",
                    )
        self.checked()

    def compare(self, activation: Activation, slot: dict[str, Any]) -> None:
        differences = []
        state = ActivationState.RUNNING if slot["status"] == "running" else ActivationState.RETRYING
        for name, mine, theirs in (
            ("generation", activation.generation, slot["generation"]),
            ("attempt", activation.attempt, slot["attempt"]),
            ("state", activation.state, state),
            ("armed step", activation.armed_step, slot["armed_step"]),
            ("Ref generation", activation.ref.generation, slot["generation"]),
            ("Ref parent", activation.ref.parent, self.instance_id),
            ("input", self.inputs.get((activation.site, activation.key)), slot.get("input")),
            ("state", self.states.get((activation.site, activation.key)), slot.get("state")),
        ):
            if mine != theirs:
                differences.append(f"{name} is {mine!r} in the activation, {theirs!r} in the snapshot")
        if state is ActivationState.RETRYING:
            last = activation.journal[-1] if activation.journal else None
            deadline = last.deadline if last is not None else None
            wanted = slot.get("retry_deadline")
            if last is None or last.ref != activation.ref or deadline != wanted:
                differences.append(
                    f"the retry journal ends with {last!r}, the snapshot retries at {wanted!r}"
                )
        if differences:
            raise self.error(MismatchedActivation, activation.site, activation.key, "; ".join(differences))

    # --------------------------------------------------------------- apply

    def start(self, event: Any) -> None:
        self.instance_id = event.originator_id
        self.kind = event.kind
        self.status = InstanceStatus.BORN
        self.type_name = _type_name(event.originator_topic)
        self.root = event.root
        self.ancestry = event.ancestry

    def restore(self, snapshot: InstanceSnapshot) -> None:
        record = snapshot.state.record
        self.instance_id = snapshot.originator_id
        self.version = snapshot.originator_version
        self.status = record.status
        self.kind = record.kind
        self.parts = dict(record.snapshot_parts) if record.snapshot_parts is not None else None
        self.slots = {}
        for slot in record.slots.values():
            key = (slot["site"], slot["key"])
            self.slots[key] = slot
            self.slot_seq[key] = self._seq()
            # Inputs and states are kept by the snapshot's own slots; the record holds no copy.
            self.inputs[key] = slot.get("input")
            self.states[key] = slot["state"]
        self.steps = record.steps
        self.activations = {}
        for activation in record.activations:
            self.put_activation(activation)
        self.type_name = _type_name(snapshot.topic)
        self.root = record.root
        self.ancestry = record.ancestry
        self.full = True

    def migrate(self, event: Any) -> None:
        """An operator's state mapping renames the states the slots sit on, not the facts."""
        self.replace_snapshot(event.snapshot)
        self.births = {}
        mapping = dict(event.mapping)
        self.states = {slot: mapping.get(name, name) for slot, name in self.states.items()}

    def witness(self, facts: BirthFacts, effect_type: type[BirthChild] | type[ResumeChild]) -> None:
        """The facts agree with this instance and with the effect of the macrostep that decided them."""
        ref = facts.ref
        fact = "Birth" if effect_type is BirthChild else "ChildResume"
        expected: list[tuple[str, object, object, str]] = [
            ("parent_type", facts.parent_type, self.type_name, "the parent"),
            ("root", facts.root, self.root, "the parent"),
        ]
        if self.births is not None:  # unknown only right after a snapshot taken mid-commit
            effect = self.births.get((effect_type, ref.invoke_id))
            if effect is None:
                raise self.error(
                    MismatchedActivation,
                    ref.site,
                    ref.key,
                    f"a {fact} of generation {ref.generation}, which macrostep {self.steps - 1} "
                    "did not decide",
                )
            previous = facts.previous.invoke_id if facts.previous is not None else None
            kind = InstanceKind.CHART if effect.chart is not None else InstanceKind.TASK
            expected += [
                (field, mine, theirs, "the macrostep's effect")
                for field, mine, theirs in (
                    ("kind", facts.kind, kind),
                    ("name", facts.name, effect.chart if effect.chart is not None else effect.task),
                    ("state", facts.state, effect.state),
                    ("attempt", facts.attempt, effect.attempt),
                    ("input", facts.input, effect.input),
                    ("ancestry lineage", facts.lineage, effect.lineage),
                    ("previous", previous, effect.previous if isinstance(effect, ResumeChild) else None),
                )
            ]
        elif effect_type is BirthChild and facts.previous is not None:
            expected.append(("previous", facts.previous, None, "any first incarnation"))
        differences = [
            f"{field} is {mine!r} in the {fact}, {theirs!r} in {source}"
            for field, mine, theirs, source in expected
            if mine != theirs
        ]
        own = self.ancestry
        extra = facts.ancestry[len(own) :]
        ancestry_fits = facts.ancestry[: len(own)] == own and all(frame.ref == ref for frame in extra)
        if not ancestry_fits or len(extra) > 1:
            differences.append(
                f"ancestry is {facts.ancestry!r} in the {fact}, which does not extend the parent's "
                f"{own!r} by at most one frame naming {ref}"
            )
        if differences:
            raise self.error(MismatchedActivation, ref.site, ref.key, "; ".join(differences))

    def embeds(self, facts: BirthFacts, embedded: bool) -> None:
        """Only a task child may be embedded in its parent (a chart child steps, and needs a stream)."""
        if embedded and facts.kind is not InstanceKind.TASK:
            ref = facts.ref
            raise self.error(
                MismatchedActivation,
                ref.site,
                ref.key,
                f"generation {ref.generation} is an embedded {facts.kind.value} child: only a task "
                "child may be embedded",
            )

    def birth(self, facts: BirthFacts, embedded: bool, traceparent: str | None) -> None:
        ref = facts.ref
        site, key = ref.site, ref.key
        if self.parts is None:
            raise self.error(ReorderedActivation, site, key, "a Birth precedes any macrostep")
        if ref.parent != self.instance_id:
            raise self.error(MismatchedActivation, site, key, f"the Ref names parent {ref.parent}")
        if self.find(site, key) is not None:
            raise self.error(DuplicatedActivation, site, key, f"a second Birth (generation {ref.generation})")
        if facts.provenance is not Provenance.BIRTH or facts.attempt != 1:
            raise self.error(
                MismatchedActivation,
                site,
                key,
                f"a Birth with provenance {facts.provenance.value} at attempt {facts.attempt}",
            )
        if facts.armed_step != self.steps - 1:
            raise self.error(
                ReorderedActivation,
                site,
                key,
                f"armed at macrostep {facts.armed_step} but recorded after macrostep {self.steps - 1}",
            )
        self.witness(facts, BirthChild)
        self.embeds(facts, embedded)
        self.put_activation(
            Activation(
                site,
                key,
                ref.generation,
                ref,
                ActivationState.RUNNING,
                1,
                facts.armed_step,
                Provenance.BIRTH,
                facts.kind,
                facts.name,
                (),
                embedded,
                traceparent,
            )
        )
        self.inputs[(site, key)] = facts.input
        self.states[(site, key)] = facts.state

    def retry(self, event: Any) -> None:
        ref = event.ref
        current = self.find(ref.site, ref.key)
        if current is None:
            raise self.error(
                OmittedActivation, ref.site, ref.key, "a ChildRetry for a slot with no activation"
            )
        if current.ref != ref:
            raise self.error(
                MismatchedActivation,
                ref.site,
                ref.key,
                f"a ChildRetry names generation {ref.generation}, the activation {current.generation}",
            )
        if current.state is ActivationState.RETRYING:
            raise self.error(DuplicatedActivation, ref.site, ref.key, "a second ChildRetry before its resume")
        if event.attempt != current.attempt + 1:
            raise self.error(
                MismatchedActivation,
                ref.site,
                ref.key,
                f"a ChildRetry to attempt {event.attempt} after attempt {current.attempt}",
            )
        entry = RetryEntry(ref, current.attempt, event.error, event.deadline)
        self.put_activation(
            attrs.evolve(current, state=ActivationState.RETRYING, journal=(*current.journal, entry))
        )

    def resume(self, facts: BirthFacts, embedded: bool, traceparent: str | None) -> None:
        ref = facts.ref
        site, key = ref.site, ref.key
        current = self.find(site, key)
        if current is None:
            raise self.error(OmittedActivation, site, key, "a ChildResume for a slot with no activation")
        if current.ref == ref:
            raise self.error(
                DuplicatedActivation,
                site,
                key,
                f"a second ChildResume of generation {ref.generation}: the activation holds it already",
            )
        if current.state is not ActivationState.RETRYING:
            raise self.error(ReorderedActivation, site, key, "a ChildResume before its ChildRetry")
        if facts.previous != current.ref:
            raise self.error(
                MismatchedActivation,
                site,
                key,
                f"a ChildResume replaces {facts.previous}, the activation holds {current.ref}",
            )
        if (
            facts.attempt != current.attempt + 1
            or ref.generation <= current.generation
            or facts.provenance is not Provenance.RETRY
            or ref.parent != self.instance_id
        ):
            raise self.error(
                MismatchedActivation,
                site,
                key,
                f"a ChildResume to generation {ref.generation} attempt {facts.attempt} "
                f"({facts.provenance.value}) after generation {current.generation} attempt {current.attempt}",
            )
        if facts.armed_step != self.steps - 1:
            raise self.error(
                ReorderedActivation,
                site,
                key,
                f"resumed at macrostep {facts.armed_step} but recorded after macrostep {self.steps - 1}",
            )
        self.witness(facts, ResumeChild)
        self.embeds(facts, embedded)
        self.put_activation(
            attrs.evolve(
                current,
                generation=ref.generation,
                ref=ref,
                state=ActivationState.RUNNING,
                attempt=facts.attempt,
                armed_step=facts.armed_step,
                provenance=Provenance.RETRY,
                embedded=embedded,
                traceparent=traceparent,
            ),
        )
        self.inputs[(site, key)] = facts.input
        self.states[(site, key)] = facts.state

    def settle(self, event: Any) -> None:
        self.settle_ref(event.ref, event.settlement)

    def settle_ref(self, ref: Ref, settlement: Settlement) -> None:
        current = self.find(ref.site, ref.key)
        if current is None or current.ref != ref:
            raise self.error(
                DuplicatedActivation if current is None else MismatchedActivation,
                ref.site,
                ref.key,
                f"a ChildSettled ({settlement.value}) for generation {ref.generation}, which is not retained",
            )
        self.drop_activation((ref.site, ref.key))
        self.inputs.pop((ref.site, ref.key), None)
        self.states.pop((ref.site, ref.key), None)


def fold(events: Iterable[Any], *, start: InstanceSnapshot | None = None) -> _Fold:
    """Fold stored events (after ``start``, if given) and validate them as they come."""
    state = _Fold()
    if start is not None:
        state.restore(start)
    for event in events:
        if start is not None and event.originator_version <= start.originator_version:
            continue
        name = type(event).__name__
        if name == "Stepped":
            state.check()
            if event.snapshot is not None:
                state.replace_snapshot(event.snapshot)  # stored before deltas: the whole snapshot
            else:
                state.apply_delta(event)
            state.births = {
                (type(e), e.invoke_id): e for e in event.effects if isinstance(e, BirthChild | ResumeChild)
            }
            state.steps += 1
            if state.status is InstanceStatus.BORN:
                state.status = InstanceStatus.RUNNING
            for ref, settlement in event.settled:  # format 2: the ChildSettled facts of this macrostep
                state.settle_ref(ref, settlement)
        elif name == "Started":
            state.start(event)
        elif name == "Birth":
            state.birth(event.facts, event.embedded, event.traceparent)
        elif name == "ChildRetry":
            state.retry(event)
        elif name == "ChildResume":
            state.resume(event.facts, event.embedded, event.traceparent)
        elif name == "ChildSettled":
            state.settle(event)
        elif name == "Migrated":
            state.check()
            state.migrate(event)
        elif name == "Completed":
            state.status = InstanceStatus.DONE
        elif name == "Failed":
            state.status = InstanceStatus.FAILED
        elif name == "Cancelled":
            state.status = InstanceStatus.CANCELLED
        elif name == "Orphaned":
            state.status = InstanceStatus.ORPHAN
        # ``Claimed`` (a new owner and incarnation), ``Accepted`` and the other events that
        # change no checkpoint only move the version.
        elif name == "IncidentRecorded" and event.incident.parked:
            state.status = InstanceStatus.PARKED
        elif name in ("Resolved", "Redriven"):
            state.status = InstanceStatus.RUNNING if state.parts is not None else InstanceStatus.BORN
        state.version = event.originator_version
    state.check()
    return state


def resume_plan(
    events: Iterable[Any], chart: Chart[Any] | None, *, start: InstanceSnapshot | None = None
) -> Checkpoint:
    """The validated checkpoint of one instance, decoded through its registered chart.

    ``events`` are the instance's stored events in version order (those up
    to ``start``'s version are skipped when a snapshot is given). ``chart``
    is the chart registered for the instance (None for a task). Raises a
    :class:`CheckpointError` subclass when the events do not make an exact
    checkpoint, or :class:`CheckpointUndecodable` when the snapshot does not
    fit the chart.
    """
    state = fold(events, start=start)
    snapshot: Snapshot[Any] | None = None
    data = state.snapshot
    if data is not None and chart is not None:
        try:
            snapshot = SnapshotCodec(chart).decode(data)
            check_snapshot(chart, snapshot)
        except CodecError as error:
            raise CheckpointUndecodable(state.instance_id, "-", str(error), version=state.version) from error
    return Checkpoint(
        state.instance_id, state.version, state.status, snapshot, tuple(state.activations.values())
    )

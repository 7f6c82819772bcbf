"""The Instance aggregate: one chart or task instance, root or child.

Every fact is a past-tense event. Commands check that they apply, then
trigger exactly one event each; the engine composes the commands of one
macrostep (on the parent, its new children and the instances it messages)
and saves them together, so a macrostep is committed whole or not at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, ClassVar
from uuid import UUID

import attrs
from eventsourcing.domain import Aggregate, OriginatorIDError, OriginatorVersionError
from eventsourcing.utils import get_topic

from aggregates._identity import AncestryFrame, BirthFacts, InstanceKind, Provenance, Ref
from aggregates._records import (
    Activation,
    ActivationState,
    CancelRequest,
    Incident,
    InstanceRecord,
    InstanceStatus,
    JsonObject,
    Message,
    Outbound,
    RetryEntry,
    Settlement,
    apply_slot_changes,
    evolve_record,
    split_snapshot,
)
from aggregates._snapshot import InstanceSnapshot
from aggregates.errors import InvalidCommand
from statechart import Event, JsonValue
from statechart.codec import SnapshotDelta
from statechart.effects import Effect, SendHttp


def _holds(inbox: tuple[Message, ...], seq: int) -> bool:
    """Whether message ``seq`` is in the inbox (the head, usually: checked first)."""
    return (bool(inbox) and inbox[0].seq == seq) or any(m.seq == seq for m in inbox)


def _without(inbox: tuple[Message, ...], seq: int) -> tuple[Message, ...]:
    """The inbox without message ``seq``; taking the head (the usual case) is a slice, not a scan."""
    if inbox and inbox[0].seq == seq:
        return inbox[1:]
    return tuple(m for m in inbox if m.seq != seq)


Settled = tuple[Ref, Settlement]
"""An activation a macrostep ended, and how (what a ``ChildSettled`` event records alone)."""


def _accepted(record: InstanceRecord, message: Message) -> InstanceRecord:
    """``record`` having accepted ``message``: its sequence number and key taken, not yet in the inbox."""
    # Concatenation copies the tuple in C; ``(*keys, key)`` builds it item by item.
    keys = record.keys if message.key is None else record.keys + (message.key,)
    return evolve_record(record, message_seq=message.seq, keys=keys)


def _unaccepted(record: InstanceRecord, message: Message) -> InstanceRecord:
    """``record`` as it was before it accepted ``message``, the last thing that changed it."""
    keys = record.keys if message.key is None else record.keys[:-1]
    return evolve_record(record, inbox=record.inbox[:-1], message_seq=message.seq - 1, keys=keys)


def _settle(retained: Any, ref: Ref) -> Any:
    """The activations without ``ref``'s (unchanged when the slot holds another incarnation)."""
    a = retained.get((ref.site, ref.key))
    if a is None or a.ref != ref:
        return retained
    return retained.remove((a.site, a.key))


def _detach_cancelled(inbox: tuple[Message, ...], settled: Iterable[Settled]) -> tuple[Message, ...]:
    """The inbox with the messages from the incarnations ``settled`` cancelled marked ``detached``.

    Those messages were accepted before the cancellation: SCXML (6.4)
    ignores only the events of a cancelled invocation that arrive after it,
    so they are still processed, as ordinary events. One pass over the
    inbox, and none when nothing was cancelled or nothing waits.
    """
    if not inbox:
        return inbox
    cancelled = {ref.invoke_id for ref, settlement in settled if settlement is Settlement.CANCELLED}
    if not cancelled or not any(m.event.invoke_id in cancelled for m in inbox):
        return inbox
    return tuple(
        attrs.evolve(m, detached=True) if m.event.invoke_id in cancelled and not m.detached else m
        for m in inbox
    )


def _with_settled(stepped: Any, settled: tuple[Settled, ...]) -> Any:
    """``dataclasses.replace(stepped, settled=settled)`` without calling ``__init__`` again.

    The event is a frozen dataclass whose other fields stay as they are: a
    copy of its ``__dict__`` with ``settled`` replaced is the same event,
    at a fifth of the cost (a settlement joins the macrostep of every
    child outcome).
    """
    joined = object.__new__(type(stepped))
    joined.__dict__.update(stepped.__dict__)
    joined.__dict__["settled"] = settled
    return joined


def _check_embedded(
    instance_id: UUID, command: str, facts: BirthFacts, embedded: bool, traceparent: str | None
) -> None:
    """Only a task child may be embedded in its parent: a chart child steps, and needs a stream.

    Only an embedded birth carries a trace context: a child with a stream keeps its own.
    """
    if embedded and facts.kind is not InstanceKind.TASK:
        raise InvalidCommand(
            instance_id,
            command,
            f"{facts.ref} is a {facts.kind.value} child: only a task child may be embedded",
        )
    if traceparent is not None and not embedded:
        raise InvalidCommand(
            instance_id,
            command,
            f"{facts.ref} has a stream of its own: its trace context goes on its Started, not here",
        )


class Instance(Aggregate):
    """A chart or task instance, event-sourced."""

    Snapshot = InstanceSnapshot

    class Fact(Aggregate.Event):
        """The base of every Instance event after ``Started``: applied with less ceremony.

        ``mutate`` checks, applies and counts exactly as the library's does,
        reading the aggregate's id and version directly instead of through
        its properties: every committed event and every replayed one goes
        through it. The class is never stored (each event's topic names its
        own class).

        Its fields are plain JSON by the converter's construction, but for
        the paths ``untyped_paths`` names (see
        :class:`aggregates._codec.CattrsMapper`): only those are checked when
        the event is stored.
        """

        untyped_paths: ClassVar[tuple[tuple[str, ...], ...]] = ()

        def mutate(self, aggregate: Any) -> Any:
            if aggregate is None:
                raise TypeError(f"{type(self).__qualname__} needs the instance it applies to")
            originator_id = self.originator_id
            if originator_id is not aggregate._id and originator_id != aggregate._id:
                raise OriginatorIDError(originator_id, aggregate._id)
            if self.originator_version != aggregate._version + 1:
                raise OriginatorVersionError(self.originator_version, aggregate._version + 1)
            self.apply(aggregate)
            aggregate._version = self.originator_version
            aggregate._modified_on = self.timestamp
            return aggregate

    class Started(Aggregate.Created):
        """The instance exists: what it runs, on what input, and where it sits in its tree."""

        untyped_paths: ClassVar[tuple[tuple[str, ...], ...]] = ()  # plain JSON by construction (see Fact)

        kind: InstanceKind
        name: str
        fingerprint: str
        input: JsonValue
        owner: str
        root: UUID
        parent: Ref | None
        birth: BirthFacts | None
        ancestry: tuple[AncestryFrame, ...]
        traceparent: str | None = None
        """The W3C trace context of the step that decided the birth (absent in older records).

        Kept out of :class:`BirthFacts`: it says where a trace continues, not
        which incarnation this is, so a re-delivered birth decided in another
        span is still the same birth.
        """

        def mutate(self, aggregate: Any) -> Any:
            """The new instance: what the library's ``Created.mutate`` builds, without its introspection.

            The library resolves the aggregate class from the stored topic and
            matches the event's fields to the two ``__init__`` methods by their
            signatures, for every creation and every replay; an Instance's are
            known. An unfamiliar topic (an aggregate class moved and registered
            under its old name) still goes the library's way.
            """
            if self.originator_topic != _INSTANCE_TOPIC:
                return super().mutate(aggregate)
            instance: Instance = Instance.__new__(Instance)
            instance.__base_init__(self.originator_id, self.originator_version, self.timestamp)
            instance.__init__(  # type: ignore[misc]
                self.kind,
                self.name,
                self.fingerprint,
                self.input,
                self.owner,
                self.root,
                self.parent,
                self.birth,
                self.ancestry,
                self.traceparent,
            )
            self.apply(instance)
            return instance

    def __init__(
        self,
        kind: InstanceKind,
        name: str,
        fingerprint: str,
        input: JsonValue,
        owner: str,
        root: UUID,
        parent: Ref | None,
        birth: BirthFacts | None,
        ancestry: tuple[AncestryFrame, ...],
        traceparent: str | None = None,
    ) -> None:
        self.record = InstanceRecord(
            kind, name, fingerprint, input, owner, root, parent, birth, ancestry, traceparent=traceparent
        )

    def trigger_event(self, event_class: type[Any], **kwargs: Any) -> None:
        """Make the next event of this instance, apply it and keep it pending.

        What the library's ``trigger_event`` does, without the steps an
        Instance never needs (an explicit-topic check, a caller's timestamp,
        copying the keyword arguments): every command triggers one event.
        """
        event = event_class(
            originator_id=self.id,
            originator_version=self.version + 1,
            timestamp=event_class.create_timestamp(),
            **kwargs,
        )
        event.mutate(self)
        self._pending_events.append(event)

    @classmethod
    def _create(cls, event_class: type[Any], *, id: Any = None, **kwargs: Any) -> Any:
        """A new instance from its creation event: the library's ``_create`` for the one way it is used.

        Every Instance is created with its id given (a new uuid4 for a root,
        the Ref's uuid5 for a child); anything else goes the library's way.
        """
        if cls is not Instance or id is None:
            return super()._create(event_class, id=id, **kwargs)
        event = event_class(
            originator_topic=_INSTANCE_TOPIC,
            originator_id=id,
            originator_version=cls.INITIAL_VERSION,
            timestamp=event_class.create_timestamp(),
            **kwargs,
        )
        instance = event.mutate(None)
        instance.pending_events.append(event)
        return instance

    # ------------------------------------------------------------ creation

    @classmethod
    def start_root(
        cls, *, id: UUID, kind: InstanceKind, name: str, fingerprint: str, input: JsonValue, owner: str
    ) -> Instance:
        """A new root instance (no parent)."""
        instance: Instance = cls._create(
            cls.Started,
            id=id,
            kind=kind,
            name=name,
            fingerprint=fingerprint,
            input=input,
            owner=owner,
            root=id,
            parent=None,
            birth=None,
            ancestry=(),
        )
        return instance

    @classmethod
    def born(
        cls, facts: BirthFacts, *, fingerprint: str, owner: str, traceparent: str | None = None
    ) -> Instance:
        """A new child instance carrying its birth facts; its id is derived from the Ref.

        ``traceparent`` is the trace context its spans continue (see ``incarnate._tracing``).
        """
        event = cls.started_by_birth(
            facts,
            fingerprint=fingerprint,
            owner=owner,
            timestamp=cls.Started.create_timestamp(),
            traceparent=traceparent,
        )
        instance: Instance = event.mutate(None)
        instance.pending_events.append(event)
        return instance

    @classmethod
    def started_by_birth(
        cls,
        facts: BirthFacts,
        *,
        fingerprint: str,
        owner: str,
        timestamp: datetime,
        traceparent: str | None = None,
    ) -> Any:
        """The ``Started`` event of the child ``facts`` describe, at ``timestamp`` (not applied, not pending).

        :meth:`born` creates a child with it; an embedded task child's is
        rebuilt from its parent's ``Birth`` (see ``projections.embedded_tasks``).
        """
        return cls.Started(  # type: ignore[call-arg]  # the domain's metaclass makes the fields
            originator_topic=_INSTANCE_TOPIC,
            originator_id=facts.child_id,
            originator_version=cls.INITIAL_VERSION,
            timestamp=timestamp,
            kind=facts.kind,
            name=facts.name,
            fingerprint=fingerprint,
            input=facts.input,
            owner=owner,
            root=facts.root,
            parent=facts.ref,
            birth=facts,
            ancestry=facts.ancestry,
            traceparent=traceparent,
        )

    # ----------------------------------------------------------- guards

    def _require_live(self, command: str) -> None:
        status = self.record.status
        if status.finished:
            raise InvalidCommand(self.id, command, f"the instance is {status.value}")

    # ------------------------------------------------------- macrosteps

    class Stepped(Fact):
        """One committed macrostep: what triggered it and what it changed in the snapshot.

        ``parts`` holds the encoded top-level fields of the snapshot that
        changed, and ``added``, ``changed`` and ``removed`` the child slots
        (see :class:`~statechart.codec.SnapshotDelta`): a parent's event carries
        what changed, never every slot. Events stored before this form carry
        the whole encoded ``snapshot`` instead, and still apply as they did.

        Stored format 2 (the class's ``class_version``) joins the facts one
        commit used to store apart: ``received`` is a message accepted by
        this very macrostep (sent to an instance its engine steps at once, or
        a child's outcome committed with its parent's reaction), so it never
        waited in the inbox (``consumed`` names it all the same); ``settled``
        are the activations the macrostep ended, as ``ChildSettled`` events
        after it record them. Applying it is applying the ``Accepted``, the
        ``Stepped`` and the ``ChildSettled`` events it stands for, in that
        order. Format-1 events (neither field) are read as they were.
        """

        class_version = 2
        untyped_paths = (("parts", "context"), ("snapshot",))
        """The author-typed data a step stores: the context it changed, or an older form's whole snapshot."""

        trigger: Event | None
        consumed: int | None
        timer: str | None
        effects: tuple[Effect, ...]
        now: float
        snapshot: JsonObject | None = None
        parts: JsonObject | None = None
        added: tuple[JsonObject, ...] = ()
        changed: tuple[JsonObject, ...] = ()
        removed: tuple[tuple[str, str], ...] = ()
        received: Message | None = None
        settled: tuple[Settled, ...] = ()

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            """A format-1 ``Stepped`` is a format-2 one that received and settled nothing."""

        def configuration_after(self, before: tuple[str, ...]) -> tuple[str, ...]:
            """The configuration after this macrostep, given the one before it (carried only when changed)."""
            if self.snapshot is not None:
                return tuple(self.snapshot.get("configuration", ()))
            return tuple((self.parts or {}).get("configuration", before))

        def apply(self, aggregate: Any) -> None:
            record: InstanceRecord = aggregate.record
            inbox = record.inbox
            received = self.received
            message_seq, keys = record.message_seq, record.keys
            if received is not None:  # accepted and consumed at once: it never entered the inbox
                message_seq = received.seq  # as _accepted, in the one record this makes
                if received.key is not None:
                    keys = keys + (received.key,)
            elif self.consumed is not None:
                inbox = _without(inbox, self.consumed)
            status = InstanceStatus.RUNNING if record.status is InstanceStatus.BORN else record.status
            if self.snapshot is not None:
                parts, slots = split_snapshot(self.snapshot)
            else:
                parts = {**(record.snapshot_parts or {}), **(self.parts or {})}
                slots = apply_slot_changes(record.slots, self.added, self.changed, self.removed)
            retained = record.retained
            for ref, _ in self.settled:
                retained = _settle(retained, ref)
            inbox = _detach_cancelled(inbox, self.settled)
            steps = record.steps + 1
            posts = [effect for effect in self.effects if type(effect) is SendHttp]
            outbox = record.outbox
            if posts:  # recorded with the macrostep, delivered after its commit (at least once)
                outbox += tuple(Outbound(f"{steps}.{n}", post) for n, post in enumerate(posts))
            aggregate.record = evolve_record(
                record,
                snapshot_parts=parts,
                slots=slots,
                steps=steps,
                inbox=inbox,
                status=status,
                retained=retained,
                outbox=outbox,
                message_seq=message_seq,
                keys=keys,
            )

    def record_step(
        self,
        *,
        trigger: Event | None,
        consumed: int | None,
        timer: str | None,
        effects: tuple[Effect, ...],
        now: float,
        delta: SnapshotDelta | None = None,
        snapshot: JsonObject | None = None,
    ) -> None:
        """Commit a macrostep (the initial one has no trigger).

        ``delta`` is what the macrostep changed (relative to the snapshot the
        record holds); a whole encoded ``snapshot`` may be given instead.
        """
        self._require_live("record a macrostep")
        if self.record.status is InstanceStatus.PARKED:
            raise InvalidCommand(self.id, "record a macrostep", "the instance is parked")
        if consumed is not None and not _holds(self.record.inbox, consumed):
            raise InvalidCommand(self.id, "record a macrostep", f"message {consumed} is not in the inbox")
        if (delta is None) == (snapshot is None):
            raise InvalidCommand(self.id, "record a macrostep", "give either a delta or a whole snapshot")
        received = self._take_unsaved_acceptance(consumed)
        if delta is not None:
            self.trigger_event(
                self.Stepped,
                trigger=trigger,
                consumed=consumed,
                timer=timer,
                effects=effects,
                now=now,
                parts=delta.parts,
                added=delta.added,
                changed=delta.changed,
                removed=delta.removed,
                received=received,
            )
        else:
            self.trigger_event(
                self.Stepped,
                trigger=trigger,
                consumed=consumed,
                timer=timer,
                effects=effects,
                now=now,
                snapshot=snapshot,
                received=received,
            )

    def _take_unsaved_acceptance(self, consumed: int | None) -> Message | None:
        """The message ``consumed`` when its ``Accepted`` is this instance's last unsaved event, withdrawn.

        The macrostep that consumes a message accepted in the same commit
        records it as ``received`` instead: one stored event for the two
        facts, which apply as the two did. Anything else (no message, one
        accepted earlier, or other events after its acceptance) keeps its
        ``Accepted`` event.
        """
        pending = self._pending_events
        if consumed is None or not pending:
            return None
        last = pending[-1]
        if type(last) is not Instance.Accepted or last.message.seq != consumed:
            return None
        pending.pop()
        self.record = _unaccepted(self.record, last.message)
        self._version -= 1
        return last.message

    # ------------------------------------------------------ child slots

    class Birth(Fact):
        """A child incarnation was decided by this macrostep; it is retained as an activation.

        Stored format 2 adds ``embedded``: the child is a task with no
        event stream of its own (this fact is its birth; its outcome will be
        a message to this instance). Format-1 births were all of children
        with streams of their own. An embedded birth also carries its
        ``traceparent`` (stored only when set): the trace context of the
        step that decided it, as a child's ``Started`` does.
        """

        class_version = 2
        stored_if_set: ClassVar[tuple[str, ...]] = ("traceparent",)

        facts: BirthFacts
        embedded: bool = False
        traceparent: str | None = None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            """A format-1 ``Birth`` is a format-2 one of a child with a stream of its own."""

        def apply(self, aggregate: Any) -> None:
            record: InstanceRecord = aggregate.record
            facts = self.facts
            activation = Activation(
                facts.ref.site,
                facts.ref.key,
                facts.ref.generation,
                facts.ref,
                ActivationState.RUNNING,
                facts.attempt,
                facts.armed_step,
                facts.provenance,
                facts.kind,
                facts.name,
                (),
                self.embedded,
                self.traceparent,
            )
            aggregate.record = evolve_record(record, retained=record.retained.put(activation))

    def record_birth(
        self, facts: BirthFacts, *, embedded: bool = False, traceparent: str | None = None
    ) -> None:
        """Retain a first incarnation of a slot (``embedded``: a task child with no stream of its own).

        ``traceparent`` is an embedded task's trace context (see :class:`Birth`).
        """
        self._require_live("record a birth")
        if facts.ref.parent != self.id:
            raise InvalidCommand(self.id, "record a birth", f"Ref {facts.ref} names another parent")
        if self.record.activation(facts.ref.site, facts.ref.key) is not None:
            raise InvalidCommand(
                self.id, "record a birth", f"slot {facts.ref.site}[{facts.ref.key}] already has an activation"
            )
        _check_embedded(self.id, "record a birth", facts, embedded, traceparent)
        self.trigger_event(self.Birth, facts=facts, embedded=embedded, traceparent=traceparent)

    class ChildRetry(Fact):
        """The retained incarnation failed; attempt ``attempt`` is due at ``deadline`` (the retry cursor)."""

        ref: Ref
        attempt: int
        deadline: float
        error: JsonValue

        def apply(self, aggregate: Any) -> None:
            record: InstanceRecord = aggregate.record
            a = record.activation(self.ref.site, self.ref.key)
            if a is None or a.ref != self.ref:
                return
            retrying = attrs.evolve(
                a,
                state=ActivationState.RETRYING,
                journal=(*a.journal, RetryEntry(self.ref, a.attempt, self.error, self.deadline)),
            )
            aggregate.record = evolve_record(record, retained=record.retained.put(retrying))

    def record_retry(self, ref: Ref, attempt: int, deadline: float, error: JsonValue) -> None:
        """Move a running activation to retrying."""
        self._require_live("record a child retry")
        activation = self.record.activation(ref.site, ref.key)
        if activation is None or activation.ref != ref or activation.state is not ActivationState.RUNNING:
            raise InvalidCommand(self.id, "record a child retry", f"{ref} is not the running incarnation")
        if attempt != activation.attempt + 1:
            raise InvalidCommand(
                self.id, "record a child retry", f"attempt {attempt} does not follow {activation.attempt}"
            )
        self.trigger_event(self.ChildRetry, ref=ref, attempt=attempt, deadline=deadline, error=error)

    class ChildResume(Fact):
        """A fresh incarnation of a retried slot (new generation and Ref, next attempt).

        Stored format 2 adds ``embedded`` and ``traceparent``, as for :class:`Birth`.
        """

        class_version = 2
        stored_if_set: ClassVar[tuple[str, ...]] = ("traceparent",)

        facts: BirthFacts
        embedded: bool = False
        traceparent: str | None = None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            """A format-1 ``ChildResume`` is a format-2 one of a child with a stream of its own."""

        def apply(self, aggregate: Any) -> None:
            record: InstanceRecord = aggregate.record
            facts = self.facts
            a = record.activation(facts.ref.site, facts.ref.key)
            if a is None or a.ref != facts.previous:
                return
            fresh = attrs.evolve(
                a,
                generation=facts.ref.generation,
                ref=facts.ref,
                state=ActivationState.RUNNING,
                attempt=facts.attempt,
                armed_step=facts.armed_step,
                provenance=Provenance.RETRY,
                embedded=self.embedded,
                traceparent=self.traceparent,
            )
            aggregate.record = evolve_record(record, retained=record.retained.put(fresh))

    def record_resume(
        self, facts: BirthFacts, *, embedded: bool = False, traceparent: str | None = None
    ) -> None:
        """Replace a retrying activation by its fresh incarnation (``embedded``, ``traceparent``: see
        :meth:`record_birth`)."""
        self._require_live("record a child resume")
        previous = facts.previous
        activation = self.record.activation(facts.ref.site, facts.ref.key)
        if (
            previous is None
            or activation is None
            or activation.ref != previous
            or activation.state is not ActivationState.RETRYING
        ):
            raise InvalidCommand(
                self.id, "record a child resume", f"{previous} is not a retrying incarnation of this instance"
            )
        if facts.attempt != activation.attempt + 1 or facts.ref.generation <= previous.generation:
            raise InvalidCommand(
                self.id, "record a child resume", "a resume needs the next attempt and a newer generation"
            )
        _check_embedded(self.id, "record a child resume", facts, embedded, traceparent)
        self.trigger_event(self.ChildResume, facts=facts, embedded=embedded, traceparent=traceparent)

    class ChildSettled(Fact):
        """A slot no longer needs its activation: output consumed, failed for good, or cancelled."""

        ref: Ref
        settlement: Settlement

        def apply(self, aggregate: Any) -> None:
            record: InstanceRecord = aggregate.record
            retained = _settle(record.retained, self.ref)
            inbox = _detach_cancelled(record.inbox, ((self.ref, self.settlement),))
            if retained is not record.retained or inbox is not record.inbox:
                aggregate.record = evolve_record(record, retained=retained, inbox=inbox)

    def record_settled(self, ref: Ref, settlement: Settlement) -> None:
        """Drop the activation of ``ref``.

        Right after an unsaved macrostep (the usual case: the macrostep
        that consumed the child's outcome or left its state), the settlement
        joins that ``Stepped`` event's ``settled`` instead of being an event
        of its own; it applies exactly as a ``ChildSettled`` after it would.
        """
        activation = self.record.activation(ref.site, ref.key)
        if activation is None or activation.ref != ref:
            raise InvalidCommand(self.id, "settle a child", f"{ref} is not retained")
        pending = self._pending_events
        if pending and type(pending[-1]) is Instance.Stepped:
            stepped: Any = pending[-1]  # the domain's metaclass makes the fields, unseen by type checkers
            pending[-1] = _with_settled(stepped, (*stepped.settled, (ref, settlement)))
            self.record = evolve_record(
                self.record,
                retained=_settle(self.record.retained, ref),
                inbox=_detach_cancelled(self.record.inbox, ((ref, settlement),)),
            )
            return
        self.trigger_event(self.ChildSettled, ref=ref, settlement=settlement)

    # ------------------------------------------------------------ inbox

    class Accepted(Fact):
        """An event was accepted into the inbox; it will be processed exactly once."""

        message: Message

        def apply(self, aggregate: Any) -> None:
            record: InstanceRecord = aggregate.record
            message = self.message
            # Concatenation copies the tuple in C; ``(*inbox, message)`` builds it item by
            # item, nearly three times slower on a parent's inbox of thousands of outcomes.
            keys = record.keys if message.key is None else record.keys + (message.key,)
            aggregate.record = evolve_record(
                record, inbox=record.inbox + (message,), message_seq=message.seq, keys=keys
            )

    def accept(
        self,
        event: Event,
        *,
        source: UUID | None,
        sent_at: float,
        key: str | None = None,
        trace: str | None = None,
    ) -> Message | None:
        """Append ``event`` to the inbox; ``None`` when ``key`` was accepted before.

        A key, once accepted, is remembered for the life of the instance (the
        record keeps it through replay and snapshots), so a repeat is a no-op
        whatever the instance's status, finished ones included.
        """
        if key is not None and key in self.record.keys:
            return None
        self._require_live("accept an event")
        message = Message(self.record.message_seq + 1, event, source, sent_at, key, trace=trace)
        self.trigger_event(self.Accepted, message=message)
        return message

    class HttpSendSettled(Fact):
        """A Basic HTTP send left the outbox: delivered (``status``, the answer's code) or given up.

        ``error`` says why a send was given up (refused, unreachable, an
        error answer after the bounded retries); the same commit accepts
        the ``error.communication`` event that tells the chart, when it
        still runs.
        """

        key: str
        status: int | None
        error: str | None = None

        def apply(self, aggregate: Any) -> None:
            record: InstanceRecord = aggregate.record
            outbox = tuple(entry for entry in record.outbox if entry.key != self.key)
            aggregate.record = evolve_record(record, outbox=outbox)

    def settle_http_send(self, key: str, *, status: int | None, error: str | None = None) -> None:
        """Take the send ``key`` out of the outbox: delivered with ``status``, or given up with ``error``."""
        if not any(entry.key == key for entry in self.record.outbox):
            raise InvalidCommand(self.id, "settle an HTTP send", f"send {key!r} is not in the outbox")
        self.trigger_event(self.HttpSendSettled, key=key, status=status, error=error)

    class EvidenceRejected(Fact):
        """An inbox message was refused (stale evidence, or no such slot) and never applied."""

        consumed: int
        event: Event
        reason: str

        def apply(self, aggregate: Any) -> None:
            record: InstanceRecord = aggregate.record
            aggregate.record = evolve_record(record, inbox=_without(record.inbox, self.consumed))

    def reject(self, message: Message, reason: str) -> None:
        """Consume ``message`` without applying it, recording why."""
        if not _holds(self.record.inbox, message.seq):
            raise InvalidCommand(self.id, "reject a message", f"message {message.seq} is not in the inbox")
        self.trigger_event(self.EvidenceRejected, consumed=message.seq, event=message.event, reason=reason)

    # ----------------------------------------------------------- endings

    class CancelRequested(Fact):
        """Someone (the parent, an operator) asked the instance to stop."""

        by: UUID | None
        reason: str

        def apply(self, aggregate: Any) -> None:
            aggregate.record = evolve_record(aggregate.record, cancel=CancelRequest(self.by, self.reason))

    def request_cancel(self, by: UUID | None, reason: str) -> bool:
        """Ask the instance to stop; False when it has finished or was asked already."""
        if self.record.status.finished or self.record.cancel is not None:
            return False
        self.trigger_event(self.CancelRequested, by=by, reason=reason)
        return True

    class Completed(Fact):
        """The instance finished with ``output``."""

        output: JsonValue

        def apply(self, aggregate: Any) -> None:
            aggregate.record = evolve_record(aggregate.record, status=InstanceStatus.DONE, output=self.output)

    def complete(self, output: JsonValue) -> None:
        """Finish successfully."""
        self._require_live("complete")
        self.trigger_event(self.Completed, output=output)

    class Failed(Fact):
        """The instance failed with ``error``."""

        error: JsonValue

        def apply(self, aggregate: Any) -> None:
            aggregate.record = evolve_record(aggregate.record, status=InstanceStatus.FAILED, error=self.error)

    def fail(self, error: JsonValue) -> None:
        """Finish with a failure."""
        self._require_live("fail")
        self.trigger_event(self.Failed, error=error)

    class Cancelled(Fact):
        """The instance stopped on request."""

        reason: str

        def apply(self, aggregate: Any) -> None:
            aggregate.record = evolve_record(
                aggregate.record, status=InstanceStatus.CANCELLED, error={"cancelled": self.reason}
            )

    def mark_cancelled(self, reason: str) -> None:
        """Finish as cancelled."""
        self._require_live("cancel")
        self.trigger_event(self.Cancelled, reason=reason)

    class Orphaned(Fact):
        """Recovery ended the instance: its counterpart (its parent) is gone."""

        reason: str

        def apply(self, aggregate: Any) -> None:
            aggregate.record = evolve_record(
                aggregate.record, status=InstanceStatus.ORPHAN, error={"orphan": self.reason}
            )

    def mark_orphan(self, reason: str) -> None:
        """Finish as an orphan (its parent is gone past the grace period)."""
        self._require_live("mark as orphan")
        self.trigger_event(self.Orphaned, reason=reason)

    class IncidentRecorded(Fact):
        """Something went wrong that needs an operator; a parking incident holds the instance."""

        incident: Incident

        def apply(self, aggregate: Any) -> None:
            record: InstanceRecord = aggregate.record
            status = InstanceStatus.PARKED if self.incident.parked else record.status
            aggregate.record = evolve_record(
                record, incidents=(*record.incidents, self.incident), status=status
            )

    def record_incident(self, kind: str, detail: str, *, park: bool) -> None:
        """Record an incident, parking the instance when ``park``."""
        self.trigger_event(self.IncidentRecorded, incident=Incident(kind, detail, self.version + 1, park))

    class Resolved(Fact):
        """An operator resolved the incidents that parked the instance; it runs again."""

        resolution: str

        def apply(self, aggregate: Any) -> None:
            record: InstanceRecord = aggregate.record
            status = InstanceStatus.RUNNING if record.snapshot_parts is not None else InstanceStatus.BORN
            aggregate.record = evolve_record(record, status=status)

    def resolve(self, resolution: str) -> None:
        """Unpark the instance."""
        if self.record.status is not InstanceStatus.PARKED:
            raise InvalidCommand(
                self.id, "resolve", f"the instance is {self.record.status.value}, not parked"
            )
        self.trigger_event(self.Resolved, resolution=resolution)

    class Migrated(Fact):
        """An operator mapped the stored snapshot onto a new version of the chart."""

        untyped_paths = (("snapshot",),)

        mapping: tuple[tuple[str, str], ...]
        fingerprint: str
        snapshot: JsonObject
        batch: str = ""
        """The migration batch that decided it (empty for a single operator migration)."""
        reason: str = ""
        """Why, as the operator gave it; events stored before these fields decode with them empty."""

        def apply(self, aggregate: Any) -> None:
            parts, slots = split_snapshot(self.snapshot)
            aggregate.record = evolve_record(
                aggregate.record, snapshot_parts=parts, slots=slots, fingerprint=self.fingerprint
            )

    def migrate(
        self,
        mapping: tuple[tuple[str, str], ...],
        fingerprint: str,
        snapshot: JsonObject,
        *,
        batch: str = "",
        reason: str = "",
    ) -> None:
        """Replace the stored snapshot by its migrated form (validated by the caller)."""
        self._require_live("migrate")
        self.trigger_event(
            self.Migrated,
            mapping=mapping,
            fingerprint=fingerprint,
            snapshot=snapshot,
            batch=batch,
            reason=reason,
        )

    # --------------------------------------------------------- ownership

    class Claimed(Fact):
        """An engine took ownership of the instance under a new incarnation (the fencing token)."""

        owner: str
        incarnation: int
        previous: str
        reason: str

        def apply(self, aggregate: Any) -> None:
            aggregate.record = evolve_record(aggregate.record, owner=self.owner, incarnation=self.incarnation)

    def claim(self, owner: str, *, previous_incarnation: int | None = None, reason: str) -> int:
        """Make ``owner`` the owner under the next incarnation; returns that incarnation.

        With ``previous_incarnation``, :class:`InvalidCommand` is raised
        unless this copy is at that incarnation: a check of the copy in
        hand, not a compare-and-swap. What fences a concurrent claim is the
        save's version check in the store (the engine's take-over relies on
        it alone and passes no ``previous_incarnation``).
        """
        self._require_live("claim")
        current = self.record.incarnation
        if previous_incarnation is not None and previous_incarnation != current:
            raise InvalidCommand(
                self.id,
                "claim",
                f"expected incarnation {previous_incarnation}, found {current} (owner {self.record.owner!r})",
            )
        self.trigger_event(
            self.Claimed, owner=owner, incarnation=current + 1, previous=self.record.owner, reason=reason
        )
        return current + 1

    # ---------------------------------------------------- fork and redrive

    class Forked(Fact):
        """This root was forked from ``source`` at ``version``; the macrostep after it holds that state."""

        source: UUID
        version: int
        source_root: UUID

        def apply(self, aggregate: Any) -> None:
            pass  # provenance only: the Stepped that follows carries the checkpoint

    def record_fork(self, source: UUID, version: int, source_root: UUID) -> None:
        """Record where this new root was forked from (its first fact after ``Started``)."""
        if self.version != 1 or self.record.parent is not None:
            raise InvalidCommand(
                self.id, "record a fork", "only a new root, right after its creation, is a fork"
            )
        self.trigger_event(self.Forked, source=source, version=version, source_root=source_root)

    class Redriven(Fact):
        """An operator drove the instance again from its last good checkpoint, at ``version``."""

        version: int
        was: str
        reason: str

        def apply(self, aggregate: Any) -> None:
            record: InstanceRecord = aggregate.record
            status = InstanceStatus.RUNNING if record.snapshot_parts is not None else InstanceStatus.BORN
            aggregate.record = evolve_record(record, status=status, error=None)

    def redrive(self, version: int, reason: str) -> None:
        """Run a failed or parked instance again from its checkpoint at ``version`` (its last good one)."""
        status = self.record.status
        if status not in (InstanceStatus.FAILED, InstanceStatus.PARKED):
            raise InvalidCommand(self.id, "redrive", f"the instance is {status.value}, not failed or parked")
        self.trigger_event(self.Redriven, version=version, was=status.value, reason=reason)

    # ------------------------------------------------------------ views

    @property
    def status(self) -> InstanceStatus:
        """The instance's status."""
        return self.record.status

    def __repr__(self) -> str:
        record = self.record
        return (
            f"<Instance {self.id} {record.kind.value} {record.name!r} {record.status.value} v{self.version}>"
        )


_INSTANCE_TOPIC = get_topic(Instance)
"""The topic stored with every Instance's ``Started`` event."""

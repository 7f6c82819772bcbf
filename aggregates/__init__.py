"""Chart instances as event-sourced aggregates: identity, events and the codec.

An :class:`Instance` is one chart or task instance, root or child. Child
identity is a :class:`Ref` (parent id, site, member key, generation) from
which the child's id is derived; :class:`BirthFacts` are the immutable
facts of one incarnation, recorded on the parent (``Birth``) and on the
child (``Started``) in one commit.
"""

from aggregates._chart_version import ChartVersion
from aggregates._codec import (
    CONVERTER,
    CattrsMapper,
    decode_event,
    encode_event,
    make_event_converter,
    read_stored_json,
    resolve_stored_topic,
    stored_json,
    stored_topic,
    uuid_of,
)
from aggregates._identity import NAMESPACE, AncestryFrame, BirthFacts, InstanceKind, Provenance, Ref
from aggregates._instance import Instance
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
)
from aggregates._snapshot import InstanceSnapshot, InstanceState
from aggregates.errors import DecodeError, InputMismatch, InvalidCommand

__all__ = [
    "CONVERTER",
    "NAMESPACE",
    "Activation",
    "ActivationState",
    "AncestryFrame",
    "BirthFacts",
    "CancelRequest",
    "CattrsMapper",
    "ChartVersion",
    "DecodeError",
    "Incident",
    "InputMismatch",
    "Instance",
    "InstanceKind",
    "InstanceRecord",
    "InstanceSnapshot",
    "InstanceState",
    "InstanceStatus",
    "InvalidCommand",
    "JsonObject",
    "Message",
    "Outbound",
    "Provenance",
    "Ref",
    "RetryEntry",
    "Settlement",
    "decode_event",
    "encode_event",
    "make_event_converter",
    "read_stored_json",
    "resolve_stored_topic",
    "stored_json",
    "stored_topic",
    "uuid_of",
]

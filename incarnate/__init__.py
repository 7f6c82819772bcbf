"""The engine: runs chart instances durably, and the ``incarnate`` command line.

:class:`Engine` runs on an ``eventsourcing`` Application of its own. Every macrostep of
every instance — and every child it births, retries, resumes, cancels or
messages — is saved in one atomic commit before anything is enacted.
A :class:`Worker` makes an engine one member of a fleet sharing a store.
"""

from incarnate._async import AsyncEngine, AsyncInstanceHandle
from incarnate._clock import Clock, SystemClock, VirtualClock
from incarnate._engine import Engine, Runner
from incarnate._handles import InstanceHandle, SendReceipt, StepOutcome
from incarnate._http import HttpConfig
from incarnate._ingress import IngressServer
from incarnate._listing import Listing
from incarnate._manager import RecoveryManager, RecoverySettings, SweepReport
from incarnate._migration import InstanceVerdict, MigrationReport, Verdict
from incarnate._ownership import TakeOver
from incarnate._process import Decision
from incarnate._recovery import ParkedRoot
from incarnate._redrive import Redrive
from incarnate._runners import DeterministicRunner, ThreadedRunner
from incarnate._storage import Storage, register_storage
from incarnate._tasks import TaskCall, TaskFunction
from incarnate._travel import Moment
from incarnate._worker import Worker
from incarnate.errors import (
    ConfigurationError,
    EngineError,
    Fenced,
    ForkRefused,
    InstanceCancelled,
    InstanceExists,
    InstanceFailed,
    InstanceTerminated,
    MigrationRejected,
    NotARoot,
    PayloadTooLarge,
    PositionOutOfRange,
    RedriveRefused,
    StorageError,
    StoreUnreachable,
    TreeHeld,
    UnknownInstance,
)
from incarnate.store._memory import MemoryStorage
from incarnate.store._postgres_storage import PostgresStorage
from incarnate.store._sqlite import SQLiteStorage

__all__ = [
    "AsyncEngine",
    "AsyncInstanceHandle",
    "Clock",
    "ConfigurationError",
    "Decision",
    "DeterministicRunner",
    "Engine",
    "EngineError",
    "Fenced",
    "ForkRefused",
    "HttpConfig",
    "IngressServer",
    "InstanceCancelled",
    "InstanceFailed",
    "InstanceHandle",
    "InstanceTerminated",
    "InstanceExists",
    "InstanceVerdict",
    "Listing",
    "MemoryStorage",
    "MigrationRejected",
    "MigrationReport",
    "Moment",
    "NotARoot",
    "ParkedRoot",
    "PayloadTooLarge",
    "PositionOutOfRange",
    "PostgresStorage",
    "RecoveryManager",
    "RecoverySettings",
    "Redrive",
    "RedriveRefused",
    "Runner",
    "SQLiteStorage",
    "SendReceipt",
    "StepOutcome",
    "Storage",
    "StorageError",
    "StoreUnreachable",
    "SweepReport",
    "SystemClock",
    "TakeOver",
    "TaskCall",
    "TaskFunction",
    "ThreadedRunner",
    "TreeHeld",
    "UnknownInstance",
    "Verdict",
    "VirtualClock",
    "Worker",
    "register_storage",
]

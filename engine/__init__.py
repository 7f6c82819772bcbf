"""The engine: runs chart instances durably, and the ``incarnate`` command line.

:class:`Engine` is an ``eventsourcing`` Application. Every macrostep of
every instance — and every child it births, retries, resumes, cancels or
messages — is saved in one atomic commit before anything is enacted.
"""

from engine._clock import Clock, SystemClock, VirtualClock
from engine._engine import Engine
from engine._listing import Listing
from engine._process import Decision
from engine._recovery import MigrationRejected, ParkedRoot
from engine._runners import DeterministicRunner, Runner, ThreadedRunner
from engine._storage import Storage
from engine._tasks import TaskCall, TaskFunction
from engine.errors import (
    ConfigurationError,
    EngineError,
    InstanceTerminated,
    PayloadTooLarge,
    StorageError,
    StoreUnreachable,
    UnknownInstance,
)

__all__ = [
    "Clock",
    "ConfigurationError",
    "Decision",
    "DeterministicRunner",
    "Engine",
    "EngineError",
    "InstanceTerminated",
    "Listing",
    "MigrationRejected",
    "ParkedRoot",
    "PayloadTooLarge",
    "Runner",
    "Storage",
    "StorageError",
    "StoreUnreachable",
    "SystemClock",
    "TaskCall",
    "TaskFunction",
    "ThreadedRunner",
    "UnknownInstance",
    "VirtualClock",
]

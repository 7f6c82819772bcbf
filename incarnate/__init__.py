"""The engine: runs chart instances durably, and the ``incarnate`` command line.

:class:`Engine` is an ``eventsourcing`` Application. Every macrostep of
every instance — and every child it births, retries, resumes, cancels or
messages — is saved in one atomic commit before anything is enacted.
"""

from incarnate._clock import Clock, SystemClock, VirtualClock
from incarnate._engine import Engine
from incarnate._listing import Listing
from incarnate._process import Decision
from incarnate._recovery import MigrationRejected, ParkedRoot
from incarnate._runners import DeterministicRunner, Runner, ThreadedRunner
from incarnate._storage import Storage
from incarnate._tasks import TaskCall, TaskFunction
from incarnate.errors import (
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

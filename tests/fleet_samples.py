"""A worker's load as the fleet tests report it with a heartbeat (vary it with ``attrs.evolve``)."""

from __future__ import annotations

from incarnate._fleet import WorkerLoad

LOAD = WorkerLoad(
    running=2,
    queued=3,
    retrying=0,
    timers=1,
    held=4,
    threads=4,
    task_threads=4,
    leading=True,
    position=120,
    behind=7,
    lag=0.31,
    pid=4242,
    host="web-1",
)
"""Worker ``web-1`` (pid 4242): two units running, three queued, leading, 0.31 s (7 notifications) behind."""

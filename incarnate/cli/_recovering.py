"""``incarnate recover``: acquire every unfinished call tree of a store and run it until idle.

The summary says how the run ended; the exit status says whether an
operator has anything left to do: 1 when work raised, 4 when parked roots
remain (they wait for ``migrate``, ``resolve`` or ``terminate``), 3 when
timers are still pending (work remains, no operator needed), 0 otherwise,
in that order of precedence.
"""

from __future__ import annotations

import time

import attrs
import click

from incarnate._runners import ThreadedRunner
from incarnate.cli._output import StatusLine, emit_json, out, when
from incarnate.cli._store import StoreOptions, json_option, opened, store_options
from incarnate.errors import CommandError
from statechart import JsonValue

RECOVER_WAIT = 30.0
"""How long ``recover`` waits, by default, for timers (retry backoffs, delays) to fall due."""

TIMERS_PENDING = 3
"""The exit status of ``recover`` when it went idle with timers still pending: work remains."""

PARKED_REMAIN = 4
"""The exit status of ``recover`` when parked roots remain: they wait for an operator."""


@attrs.frozen
class Summary:
    """How one run of ``recover`` ended."""

    store: str
    elapsed: float
    ending: str
    """``idle``, ``idle-with-timers``, ``timeout`` or ``interrupted``."""
    wait: float
    timeout: float
    acquired: int
    processed: int
    in_flight: int
    parked: int
    left_alone: tuple[tuple[str, str], ...]
    timers: int
    next_due: float | None
    now: float
    errors: tuple[str, ...]

    @property
    def status(self) -> int:
        """The exit status: errors (1), then parked roots (4), then pending timers (3), else 0."""
        if self.errors:
            return 1
        if self.parked:
            return PARKED_REMAIN
        if self.ending == "idle-with-timers":
            return TIMERS_PENDING
        return 0

    def to_json(self) -> dict[str, JsonValue]:
        """The summary as JSON (see the reference for the keys)."""
        return {
            "store": self.store,
            "elapsed": round(self.elapsed, 3),
            "ending": self.ending,
            "acquired": self.acquired,
            "processed": self.processed,
            "in_flight": self.in_flight,
            "parked": self.parked,
            "left_alone": [{"root": root, "holder": holder} for root, holder in self.left_alone],
            "timers": {
                "pending": self.timers,
                "next_due": None if self.next_due is None else when(self.next_due),
                "next_due_epoch": self.next_due,
            },
            "errors": list(self.errors),
            "exit_status": self.status,
        }

    def lines(self) -> list[str]:
        """The summary as text."""
        waiting = ", waiting for events, timers or children"
        if self.ending == "idle-with-timers":
            ending = f"idle, with timers due after the {self.wait:g}s --wait"
        elif self.ending == "idle":
            ending = "idle"
        else:
            stopped = (
                "interrupted" if self.ending == "interrupted" else f"stopped by the {self.timeout:g}s timeout"
            )
            ending, waiting = f"{stopped} with work left; run it again", ""
        lines = [
            f"recovered {self.store} in {self.elapsed:.1f}s: {ending}",
            f"acquired:   {self.acquired} instance(s)",
            f"processed:  {self.processed} unit(s) of work",
            f"in flight:  {self.in_flight} instance(s){waiting}",
            f"parked:     {self.parked} root(s){' (see `incarnate parked`)' if self.parked else ''}",
        ]
        if self.left_alone:
            shown = ", ".join(f"{root} (held by {holder})" for root, holder in self.left_alone[:5])
            more = f" and {len(self.left_alone) - 5} more" if len(self.left_alone) > 5 else ""
            lines.append(
                f"left alone: {len(self.left_alone)} call tree(s) held by live workers: {shown}{more}; "
                "they run there (stop that worker, or let its heartbeat lapse, to recover them here)"
            )
        if self.next_due is not None:
            lines.append(
                f"timers:     {self.timers} pending, next due at {when(self.next_due)} "
                f"(in {max(0.0, self.next_due - self.now):.0f}s): "
                "run `incarnate recover` again then, or keep an engine running on this store"
            )
        if self.errors:
            lines.append(f"errors:     {len(self.errors)}")
            lines.extend(f"  {error}" for error in self.errors[:5])
        if self.parked and not self.errors:
            lines.append(
                "parked roots remain (exit status 4): see `incarnate parked`, then `incarnate check` and "
                "`incarnate migrate --chart NAME --map OLD=NEW --dry-run`"
            )
        return lines


@click.command()
@click.option("--workers", type=int, default=4, show_default=True, metavar="N", help="worker threads")
@click.option(
    "--timeout",
    type=float,
    default=60.0,
    show_default=True,
    metavar="S",
    help="stop after S seconds even if work remains",
)
@click.option(
    "--wait",
    type=float,
    default=RECOVER_WAIT,
    show_default=True,
    metavar="S",
    help="once the work runs out, keep running for timers that fall due within S more seconds",
)
@json_option
@store_options(charts="run the recovered instances", tasks="one for every task the charts invoke")
def recover(
    workers: int,
    timeout: float,
    wait: float,
    as_json: bool,
    db: str | None,
    charts: str | None,
    tasks: str | None,
) -> int:
    """Acquire every unfinished call tree and run it until idle.

    Progress goes to standard error (a bar on a terminal, plain lines
    otherwise), the summary to standard output (--json: one document).
    Exit status 1 when work raised, 4 when parked roots remain, 3 when
    timers are still pending, else 0, in that order of precedence.
    """
    if workers < 1:
        raise CommandError(f"--workers must be at least 1, got {workers}")
    if not timeout > 0:
        raise CommandError(f"--timeout must be a positive number of seconds, got {timeout}")
    if not wait >= 0:
        raise CommandError(f"--wait must be zero or a positive number of seconds, got {wait}")
    runner = ThreadedRunner(workers)
    options = StoreOptions(db, charts, tasks)
    with opened(options, charts_for="run the recovered instances", runner=runner, run_tasks=True) as engine:
        where = engine.storage.describe()
        progress = StatusLine(f"acquiring the unfinished call trees of {where}")
        try:
            started = time.monotonic()
            progress.show(f"acquiring the unfinished call trees of {where}", key="acquiring")
            acquired = engine.resume_all()
            left_alone = engine.left_alone
            runner.start()
            idle = interrupted = False
            horizon: float | None = None  # timers due by then are waited for
            try:
                while not idle:
                    elapsed = time.monotonic() - started
                    if elapsed >= timeout:
                        break
                    status = f"acquired {acquired}  processed {runner.units}  {elapsed:.1f}s"
                    progress.show(status, key=(acquired, runner.units))
                    if not runner.wait_until_idle(min(0.2, timeout - elapsed)):
                        continue
                    now = engine.clock.now()
                    horizon = now + wait if horizon is None else horizon
                    due = runner.next_deadline()
                    if due is None or due > horizon:
                        idle = True
                    else:  # the timer thread releases it when due
                        time.sleep(max(0.0, min(0.2, due - now, timeout - elapsed)))
            except KeyboardInterrupt:
                interrupted = True  # stop as on a timeout: the units in progress finish first
            runner.stop()
            elapsed = time.monotonic() - started
            processed, errors = runner.units, list(runner.errors)
            timers, now = runner.pending_timers(), engine.clock.now()
            final = f"acquired {acquired}  processed {processed}  {elapsed:.1f}s"
            progress.show(final, key=None, final=True)
        finally:
            progress.close()
        engine.listing.catch_up()
        in_flight = engine.listing.rows(in_flight=True)
    if idle:
        ending = "idle-with-timers" if timers else "idle"
    else:
        ending = "interrupted" if interrupted else "timeout"
    summary = Summary(
        store=where,
        elapsed=elapsed,
        ending=ending,
        wait=wait,
        timeout=timeout,
        acquired=acquired,
        processed=processed,
        in_flight=len(in_flight),
        parked=sum(1 for row in in_flight if row.parked and row.is_root),
        left_alone=tuple((str(held.root), held.holder) for held in left_alone),
        timers=len(timers),
        next_due=timers[0][0] if timers else None,
        now=now,
        errors=tuple(f"{type(error).__name__}: {error}" for error in errors),
    )
    if as_json:
        emit_json(summary.to_json())
    else:
        out("\n".join(summary.lines()))
    return summary.status

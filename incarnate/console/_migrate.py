"""The console's migration: a dry run of :func:`incarnate._migration.check` first, then ``apply``.

The dry run is shown with the verdict on every live instance of the chart;
only that page carries the apply button, and its form carries a proof
(see :meth:`~incarnate.console._security.Secrets.proof`) that this console
showed the dry run of exactly this mapping. ``apply`` takes its verdicts
anew anyway, so a dry run never goes stale.
"""

from __future__ import annotations

from uuid import UUID

import attrs

from incarnate._engine import Engine
from incarnate._migration import InstanceVerdict, apply, check, summary
from incarnate._migration import parse_mapping as parse_pairs
from incarnate._whatif import WhatIf, replay_all, replay_summary
from projections import ReplayVerdict
from statechart import JsonValue
from statechart.errors import IncarnateError


def parse_mapping(text: str) -> dict[str, str]:
    """The mapping of ``OLD=NEW`` pairs, one per line or separated by commas; raises ``ValueError``."""
    return parse_pairs(text.replace(",", "\n").splitlines())


@attrs.frozen
class MigrationView:
    """A dry run: the verdicts on the chart's live instances and their what-if replays, or why not."""

    chart: str
    mapping: dict[str, str]
    verdicts: tuple[InstanceVerdict, ...] = ()
    error: str | None = None
    replays: tuple[WhatIf, ...] = ()
    """The what-if replay of each instance's recorded inputs under the console's charts."""

    @property
    def replayed(self) -> dict[UUID, ReplayVerdict]:
        """Each instance's replay verdict, by id."""
        return {r.instance_id: r.replay for r in self.replays}

    @property
    def replay_counts(self) -> dict[str, JsonValue]:
        """How many instances each replay outcome has."""
        return replay_summary(self.replays)

    @property
    def counts(self) -> dict[str, JsonValue]:
        """How many instances got each verdict."""
        return summary(self.verdicts)

    @property
    def applicable(self) -> bool:
        """Whether applying would write anything: some instance migrates."""
        return self.error is None and any(v.verdict.value == "migrates" for v in self.verdicts)

    def to_json(self) -> dict[str, JsonValue]:
        """The dry run as JSON: chart, mapping, error, summary and verdicts."""
        return {
            "chart": self.chart,
            "mapping": dict(self.mapping),
            "error": self.error,
            "summary": self.counts,
            "verdicts": [v.to_json() for v in self.verdicts],
            "replay": self.replay_counts,
            "replays": [r.to_json() for r in self.replays],
        }


def dry_run(engine: Engine, chart: str, mapping: dict[str, str]) -> MigrationView:
    """What applying ``mapping`` to the live instances of ``chart`` would do; writes nothing."""
    try:
        verdicts = check(engine.parts, chart=chart, mapping=mapping)
    except IncarnateError as err:
        return MigrationView(chart, mapping, error=str(err))
    ids = {v.instance_id for v in verdicts}
    replays = replay_all(engine.parts, chart=chart, mapping=mapping, ids=ids)
    return MigrationView(chart, mapping, tuple(verdicts), replays=tuple(replays))


def apply_migration(engine: Engine, chart: str, mapping: dict[str, str]) -> str:
    """Apply ``mapping`` to the live instances of ``chart``; what was done, in one sentence."""
    report = apply(engine.parts, chart=chart, mapping=mapping, reason="migrated from the console")
    skipped = f"; {len(report.skipped)} skipped (written concurrently)" if report.skipped else ""
    return (
        f"migration {report.batch} of chart {chart!r}: {len(report.migrated)} instance(s) migrated, "
        f"{len(report.resolved)} parked root(s) resolved{skipped}"
    )

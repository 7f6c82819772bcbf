"""``incarnate demo`` and ``incarnate diagram``: the commands that need no store of the user's."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import click

from incarnate._demo import DEFAULT_DB, run_demo
from incarnate.cli._common import load_chart
from incarnate.errors import CommandError
from statechart import Chart
from statechart.diagram import to_dot, to_mermaid

_RENDERERS: dict[str, Callable[[Chart[object]], str]] = {"mermaid": to_mermaid, "dot": to_dot}


@click.command(short_help="Run an order in a worker, kill it, recover it exactly.")
@click.option(
    "--db",
    default=DEFAULT_DB,
    show_default=True,
    metavar="PATH",
    help="the SQLite file to run the demo on; a file from an earlier demo is replaced, any other "
    "existing file is refused and left untouched",
)
def demo(db: str) -> int:
    """Run an order with children and a task in a worker process, kill it, and recover exactly."""
    return run_demo(db)


@click.command()
@click.argument("chart", metavar="CHART")
@click.option(
    "--format",
    "-f",
    "format_",
    type=click.Choice(tuple(_RENDERERS)),
    default="mermaid",
    show_default=True,
    help="Mermaid stateDiagram-v2 or Graphviz DOT",
)
@click.option("--output", "-o", metavar="FILE", help="write the diagram to FILE instead of standard output")
def diagram(chart: str, format_: str, output: str | None) -> int:
    """Draw a chart as a Mermaid or Graphviz DOT diagram.

    CHART is the import path 'package.module:attribute' of a Chart, or of a
    function that takes no arguments and returns one, or the path of an
    SCXML document (*.scxml).
    """
    text = _RENDERERS[format_](load_chart(chart))
    if output is None or output == "-":
        sys.stdout.write(text)
        return 0
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as err:
        raise CommandError(f"cannot write the diagram to {output!r}: {err.strerror}") from err
    return 0

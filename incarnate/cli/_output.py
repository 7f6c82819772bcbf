"""How the commands print: rich tables, trees and progress bars on a terminal, stable plain text elsewhere.

A command decides *what* to print; this module decides *how*, by asking
whether the stream is a terminal when it prints. Piped or redirected output
is plain text: no ANSI escape codes, no wrapping, no truncation, the same
bytes on every run, so that ``incarnate list | awk`` and the tests read it.
JSON documents (``--json``) are printed the same way everywhere.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TextIO

import attrs
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from projections import TreeNode, render_tree
from statechart import JsonValue


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is an interactive terminal (a closed or fake stream is not)."""
    try:
        return stream.isatty()
    except (AttributeError, OSError, ValueError):
        return False


def console(stream: TextIO) -> Console:
    """A rich console over ``stream`` (for a terminal: the commands print plain text elsewhere)."""
    return Console(file=stream, highlight=False, emoji=False, soft_wrap=True)


def out(text: str = "") -> None:
    """Print a line of plain text on standard output."""
    print(text, file=sys.stdout)


def note(text: str) -> None:
    """Print a remark about the output (not part of it) on standard error."""
    print(text, file=sys.stderr)


def emit_json(document: JsonValue) -> None:
    """Print one JSON document on standard output: indented, keys in the documented order."""
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def when(epoch: float | None) -> str:
    """A store time (seconds since the epoch) as an ISO-8601 UTC string with milliseconds."""
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


def moment(epoch: float | None) -> str:
    """A store time to the second, as a table shows it: ``2026-12-03T11:40:12Z``."""
    if epoch is None or epoch <= 0:
        return "-"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, two spaces apart, no trailing spaces."""
    widths = [max(len(row[n]) for row in [headers, *rows]) for n in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *rows]
    )


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print a table on standard output: a rich table on a terminal, plain columns elsewhere."""
    if not is_terminal(sys.stdout):
        out(plain_table(headers, rows))
        return
    shown = Table(header_style="bold", box=None, pad_edge=False, padding=(0, 2, 0, 0))
    for header in headers:
        shown.add_column(header, no_wrap=True)
    for row in rows:
        shown.add_row(*row)
    # Never cut an id to fit the terminal: a table wider than it is drawn whole, and the terminal wraps.
    terminal = console(sys.stdout)
    needed = max([len(line) for line in plain_table(headers, rows).splitlines()], default=0)
    if needed > terminal.width:
        terminal = Console(file=sys.stdout, highlight=False, emoji=False, soft_wrap=True, width=needed)
    terminal.print(shown, markup=False)


def tree(node: TreeNode) -> None:
    """Print a call tree on standard output: a rich tree on a terminal, indented lines elsewhere."""
    if not is_terminal(sys.stdout):
        out(render_tree(node))
        return
    console(sys.stdout).print(_rich_tree(node))


def _node_label(node: TreeNode) -> str:
    # The first line of the plain rendering is the node's own line.
    return render_tree(attrs.evolve(node, children=(), missing=())).strip()


def _rich_tree(node: TreeNode, parent: Tree | None = None) -> Tree:
    label = Text(_node_label(node))
    branch = Tree(label) if parent is None else parent.add(label)
    for child in node.children:
        _rich_tree(child, branch)
    for ref in node.missing:
        branch.add(Text(f"missing {ref}", style="red"))
    return branch


class StatusLine:
    """Progress of a long command on standard error: a rich status bar on a terminal, else plain lines.

    Off a terminal a line is printed when the shown value changed and at
    least ``interval`` seconds passed since the last line, and always for the
    final one, so that a log stays short and stable.
    """

    def __init__(self, description: str, *, total: int | None = None, interval: float = 1.0) -> None:
        self.interval = interval
        self.shown: object = None
        self.at = float("-inf")
        self.stream = sys.stderr
        self.progress: Progress | None = None
        self.task = None
        if is_terminal(self.stream):
            columns: list[ProgressColumn] = [TextColumn("{task.description}")]
            if total is not None:
                columns.extend([BarColumn(), MofNCompleteColumn()])
            self.progress = Progress(*columns, TimeElapsedColumn(), console=console(self.stream))
            self.progress.start()
            self.task = self.progress.add_task(description, total=total)

    def show(
        self,
        text: str,
        key: object,
        *,
        completed: int | None = None,
        total: int | None = None,
        final: bool = False,
    ) -> None:
        """Show ``text``; ``key`` tells whether anything changed since the last plain line."""
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, description=text, completed=completed, total=total)
            if final:
                self.close()
            return
        now = time.monotonic()
        if final or (key != self.shown and now - self.at >= self.interval):
            self.stream.write(text + "\n")
            self.stream.flush()
            self.shown, self.at = key, now

    def close(self) -> None:
        """Stop redrawing the bar (it stays on the terminal as last shown)."""
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

"""The reference of every ``incarnate`` command, rendered from the click command tree as markdown.

``docs/reference/cli.md`` holds it between the markers :data:`BEGIN` and
:data:`END`; the hand-written parts of the page (exit statuses, JSON keys,
errors, examples) stay outside them. After changing a command::

    python -m incarnate.cli.reference            # rewrite the page between the markers
    python -m incarnate.cli.reference --check    # exit 1 when the page is stale

Every command is rendered, ``incarnate console`` included: its command is
importable without the ``console`` extra (only serving needs it), so the
page is the same whichever extras are installed.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from incarnate.cli._main import root

BEGIN = "<!-- cli-reference -->"
END = "<!-- /cli-reference -->"
PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md"
"""The page that holds the reference (in a checkout of the repository)."""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _ours(command: click.Command) -> bool:
    module = getattr(command.callback, "__module__", "") or ""
    return module.startswith(("incarnate.cli.", "incarnate.console."))


def _option(param: click.Option, context: click.Context) -> tuple[str, str, str]:
    names = ", ".join(f"`{name}`" for name in param.opts)
    if param.secondary_opts:  # an on/off pair: --flag/--no-flag
        names += " / " + ", ".join(f"`{name}`" for name in param.secondary_opts)
    if not param.is_flag:
        metavar = param.metavar or param.make_metavar(context)
        names = f"{names} `{metavar}`"
    if param.multiple:
        names += " (repeatable)"
    if param.required:
        default = "required"
    else:
        value = param.get_default(context, call=False)
        unset = value is None or value in ((), "") or type(value).__name__ == "Sentinel"
        if param.is_flag and param.secondary_opts:
            default = "on" if value else "off"
        else:
            default = "" if param.is_flag or unset else f"`{value}`"
    return names.replace("|", "\\|"), default, _cell(param.help or "")


def render_command(name: str, command: click.Command, parent: click.Context) -> list[str]:
    """One command's section: its usage, its help and a table of its options."""
    context = click.Context(command, info_name=name, parent=parent)
    usage = " ".join(["incarnate", name, *command.collect_usage_pieces(context)])
    lines = [f"### `incarnate {name}`", "", "```text", usage, "```", ""]
    help_text = inspect.cleandoc(command.help or "")
    if help_text:
        lines.extend([*help_text.splitlines(), ""])
    help_option = command.get_help_option(context)
    rows = [
        _option(param, context)
        for param in command.get_params(context)
        if isinstance(param, click.Option) and param is not help_option
    ]
    if rows:
        lines.extend(["| option | default | meaning |", "|---|---|---|"])
        lines.extend(f"| {names} | {default} | {meaning} |" for names, default, meaning in rows)
        lines.append("")
    return lines


def render(group: click.Group = root) -> str:
    """The reference of every command of ``group``, in the order ``incarnate --help`` lists them."""
    context = click.Context(group, info_name="incarnate")
    lines = [
        "<!-- Generated from the commands by `python -m incarnate.cli.reference`: do not edit by hand. -->",
        "",
    ]
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        if command is not None and _ours(command):
            lines.extend(render_command(name, command, context))
    return "\n".join(lines).rstrip() + "\n"


def updated(page: str, reference: str) -> str:
    """``page`` with ``reference`` between its markers (a page without them is refused)."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the page has no {BEGIN} ... {END} markers to put the reference between")
    return page[: start + len(BEGIN)] + "\n" + reference + page[end:]


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite the reference on the page (``--check``: only say whether it is stale); the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    paths = [arg for arg in args if arg != "--check"]
    page = Path(paths[0]) if paths else PAGE
    text = page.read_text(encoding="utf-8")
    fresh = updated(text, render())
    if fresh == text:
        return 0
    if check:
        print(f"{page} is stale: run `python -m incarnate.cli.reference` to regenerate it", file=sys.stderr)
        return 1
    page.write_text(fresh, encoding="utf-8")
    print(f"rewrote the command reference in {page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

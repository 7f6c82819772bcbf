"""Every action class has a handler in each table; a class without one is refused at import."""

from __future__ import annotations

import subprocess
import sys
import typing

import pytest

from statechart._model import ACTION_TYPES, Action, Log, Raise, for_every_action

TABLES = ("statechart._interpreter", "statechart._diagram", "statechart.scxml._dump")


def test_the_action_types_are_the_members_of_the_union() -> None:
    """``ACTION_TYPES`` lists exactly the classes of the ``Action`` union."""
    members = {typing.get_origin(m) or m for m in typing.get_args(Action)}
    assert set(ACTION_TYPES) == members


def test_a_table_missing_a_class_is_refused() -> None:
    """A table without a handler for one action class raises TypeError naming the class and the table."""
    table = {cls: "handler" for cls in ACTION_TYPES if cls is not Log}
    with pytest.raises(TypeError, match=r"the test table has no handler for the action class\(es\) Log"):
        for_every_action("the test table", table)


def test_a_table_handling_a_foreign_class_is_refused() -> None:
    """A handler for a class outside the union is refused too (it could never run)."""
    table: dict[type[object], str] = dict.fromkeys(ACTION_TYPES, "handler")
    table[int] = "handler"
    with pytest.raises(TypeError, match=r"handles int, which the Action union does not hold"):
        for_every_action("the test table", table)


def test_a_complete_table_is_returned_as_is() -> None:
    """A table with one handler per class comes back unchanged."""
    table = {cls: cls.__name__ for cls in ACTION_TYPES}
    assert for_every_action("the test table", table) == table
    assert table[Raise] == "Raise"


def test_a_new_action_class_without_handlers_fails_every_import() -> None:
    """Adding an action class to the union refuses to import the interpreter, the diagram and the dump."""
    code = f"""
import importlib
import attrs
import statechart._model as model

@attrs.frozen
class Toy:
    label: str

model.ACTION_TYPES = model.ACTION_TYPES + (Toy,)
for name in {TABLES!r}:
    try:
        importlib.reload(importlib.import_module(name))
    except TypeError as error:
        print(name, "refused:", error)
    else:
        print(name, "accepted")
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(TABLES)
    for name, line in zip(TABLES, lines, strict=True):
        assert line.startswith(f"{name} refused: "), line
        assert "no handler for the action class(es) Toy" in line

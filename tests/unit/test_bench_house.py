"""bench.house measures this checkout: no import circle, a small Engine, a walk from Engine.send."""

from __future__ import annotations

import json

import pytest

from bench import house


def test_the_figures_of_this_checkout(capsys: pytest.CaptureFixture[str]) -> None:
    assert house.main(["--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["circles"] == {"count": 0, "largest": 0, "members": []}
    assert figures["engine"]["public_methods"] <= 35  # the facade: what the tutorial and how-tos use
    walk = figures["walk"]["read, incarnate"]
    assert walk["steps"] > 0 and walk["modules"] > 1 and 0 <= walk["returns"] < walk["steps"]
    assert figures["public_names"]["statechart"] < 40


def test_the_table_names_each_figure(capsys: pytest.CaptureFixture[str]) -> None:
    assert house.main([]) == 0
    out = capsys.readouterr().out
    for label in (
        "largest class",
        "largest module",
        "Engine surface",
        "import circles",
        "walk from Engine.send",
    ):
        assert label in out

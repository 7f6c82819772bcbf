"""The README's first command: the demo kills its worker process and recovers exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine._demo import run_demo


@pytest.mark.slow
def test_demo_recovers_the_same_incarnations_after_sigkill(tmp_path: Path) -> None:
    """The worker is killed mid-flight and a fresh engine finishes the order with the same incarnations."""
    lines: list[str] = []
    assert run_demo(str(tmp_path / "demo.db"), lines.append, timeout=60.0) == 0
    text = "\n".join(lines)
    assert "with SIGKILL after" in text
    assert "CHANGED" not in text
    assert "Every incarnation that existed before the kill was recovered" in text
    assert "The order is done" in text

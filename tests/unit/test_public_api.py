"""Each package's public surface is exactly what docs/reference/api.md documents."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "statechart",
    "statechart.model",
    "statechart.effects",
    "statechart.event",
    "statechart.snapshot",
    "statechart.codec",
    "statechart.shape",
    "statechart.diagram",
    "statechart.scxml",
    "aggregates",
    "projections",
    "incarnate",
    "incarnate.testing",
)
PUBLIC_MODULES = {
    "statechart": {"model", "effects", "event", "snapshot", "codec", "shape", "diagram"},
}
"""The public submodules of a package besides ``errors`` and ``testing``, each documented in api.md."""


def documented() -> dict[str, list[str]]:
    """The names listed per package in the API reference."""
    text = (ROOT / "docs" / "reference" / "api.md").read_text()
    sections = re.split(r"^## `([\w.]+)`$", text, flags=re.MULTILINE)
    out: dict[str, list[str]] = {}
    for package, body in zip(sections[1::2], sections[2::2], strict=True):
        out[package] = re.findall(r"^\| `(\w+)` \|", body, flags=re.MULTILINE)
    return out


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_pinned_by_the_api_reference(package: str) -> None:
    """``__all__`` equals the documented names, in the same order, each once and each importable."""
    module = importlib.import_module(package)
    names = list(module.__all__)
    assert names == documented()[package]
    assert len(set(names)) == len(names)
    for name in names:
        assert hasattr(module, name), f"{package}.{name} is listed but missing"


@pytest.mark.parametrize("package", [p for p in PACKAGES if (ROOT / p.replace(".", "/")).is_dir()])
def test_private_modules_stay_private(package: str) -> None:
    """A package's modules are private (``_name``) except ``errors``, ``testing`` and declared ones."""
    public = {p.stem for p in (ROOT / package.replace(".", "/")).glob("*.py") if not p.stem.startswith("_")}
    assert public <= {"errors", "testing"} | PUBLIC_MODULES.get(package, set())


@pytest.mark.parametrize("module", sorted(f"statechart.{name}" for name in PUBLIC_MODULES["statechart"]))
def test_public_submodules_have_a_docstring_and_all(module: str) -> None:
    """Each public submodule of statechart says what it holds and lists its names in ``__all__``."""
    imported = importlib.import_module(module)
    assert imported.__doc__ and imported.__doc__.strip()
    assert imported.__all__


def test_each_statechart_name_has_one_home() -> None:
    """A public statechart name is exported by one module, except Event and JsonValue (root and event)."""
    homes: dict[str, list[str]] = {}
    for package in PACKAGES:
        if package.startswith("statechart"):
            for name in importlib.import_module(package).__all__:
                homes.setdefault(name, []).append(package)
    shared = {name: where for name, where in homes.items() if len(where) > 1}
    assert shared == {
        "Event": ["statechart", "statechart.event"],
        "JsonValue": ["statechart", "statechart.event"],
    }


def test_a_users_own_engine_package_does_not_clash(tmp_path: Path) -> None:
    """A project with its own ``engine`` package imports it and ours side by side, and the CLI runs."""
    import subprocess
    import sys

    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "__init__.py").write_text("MINE = True\n")
    code = "import engine, incarnate; assert engine.MINE; print(incarnate.Engine.__name__)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "Engine"), done.stderr
    cli = subprocess.run(
        [sys.executable, "-m", "incarnate", "--help"],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 0 and "usage" in cli.stdout.lower(), cli.stderr

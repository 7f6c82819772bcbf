"""mypy --strict on user code: correct charts pass, and each listed mistake is rejected.

``good/`` holds correct user files; each file in ``bad/`` holds one mistake,
marked by a comment line ``# E: <part of the expected mypy message>`` right
above the line mypy must report (so that the marked line stays short). One
mypy run checks all of them (its cache lives in the temporary directory, so
later runs are quick). The slow test builds the project as users install it
(a wheel, and ``pip install -e``) and checks that mypy finds the typed
packages from outside the repository.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from mypy import api

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GOOD = sorted((HERE / "good").glob("*.py"))
BAD = sorted((HERE / "bad").glob("*.py"))
MARKER = re.compile(r"^\s*#\s*E:\s*(?P<text>.+?)\s*$")
ERROR = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+): error: (?P<message>.*)$", re.MULTILINE)
PACKAGES = ("statechart", "aggregates", "projections", "incarnate", "incarnate/store")


def expected_errors(path: Path) -> dict[int, str]:
    """The lines a sample's markers point at, and the text each line's mypy error must contain."""
    found: dict[int, str] = {}
    pending: str | None = None
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = MARKER.match(line)
        if match:
            pending = match["text"]
        elif pending is not None and line.strip():
            found[number] = pending
            pending = None
    return found


def errors_by_file(report: str) -> dict[str, list[tuple[int, str]]]:
    """mypy's errors, per file name, as (line, message)."""
    out: dict[str, list[tuple[int, str]]] = {}
    for match in ERROR.finditer(report):
        out.setdefault(Path(match["path"]).name, []).append((int(match["line"]), match["message"]))
    return out


def write_config(directory: Path, mypy_path: Path | None) -> Path:
    """A mypy configuration as a user's project would have it: strict, nothing else."""
    config = directory / "mypy.ini"
    lines = ["[mypy]", "strict = True", "python_version = 3.11"]
    if mypy_path is not None:
        lines.append(f"mypy_path = {mypy_path}")
    config.write_text("\n".join(lines) + "\n")
    return config


def run_mypy(files: list[Path], config: Path, cache: Path, python: Path | None = None) -> str:
    """One mypy run over ``files``; returns its report (stdout and stderr)."""
    args = ["--config-file", str(config), "--cache-dir", str(cache), "--show-error-codes", "--no-pretty"]
    if python is not None:
        args += ["--python-executable", str(python)]
    stdout, stderr, _ = api.run(args + [str(f) for f in files])
    return stdout + stderr


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[int, str]]]:
    """The errors of one mypy run over every sample, the library's sources on the path."""
    config = write_config(tmp_path_factory.mktemp("mypy"), ROOT)
    cache = Path(tempfile.gettempdir()) / "incarnate-typing-mypy-cache"
    text = run_mypy(GOOD + BAD, config, cache)
    assert "error: Cannot find implementation or library stub" not in text, text
    return errors_by_file(text)


def test_samples_exist() -> None:
    """The suite has correct samples and marked mistakes to check."""
    assert GOOD and len(BAD) >= 10
    for path in BAD:
        assert expected_errors(path), f"{path.name} has no '# E:' marker"


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.stem)
def test_correct_user_code_passes_strict_mypy(path: Path, report: dict[str, list[tuple[int, str]]]) -> None:
    """A chart with context, guards, assign, done data, invoke and typed snapshots passes mypy --strict."""
    assert report.get(path.name, []) == []


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_each_listed_mistake_is_rejected(path: Path, report: dict[str, list[tuple[int, str]]]) -> None:
    """mypy --strict reports the expected error on the marked line, and nothing elsewhere."""
    expected = expected_errors(path)
    found = report.get(path.name, [])
    for line, text in expected.items():
        messages = [message for at, message in found if at == line]
        assert any(text in message for message in messages), (
            f"{path.name}:{line}: expected an error containing {text!r}, mypy said {messages or 'nothing'}"
        )
    stray = [(at, message) for at, message in found if at not in expected]
    assert stray == [], f"{path.name}: errors on unmarked lines"


# ------------------------------------------------------------------ installs


def _copy_project(target: Path) -> Path:
    """The repository as a source distribution holds it (no virtualenv, caches or build output)."""
    ignore = shutil.ignore_patterns(
        ".venv",
        ".git",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".hypothesis",
        "*.egg-info",
        "build",
        "dist",
        "*.db",
    )
    shutil.copytree(ROOT, target, ignore=ignore)
    return target


def _venv(path: Path) -> Path:
    """A fresh virtualenv whose extra path entry holds this one's dependencies (attrs, eventsourcing…)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    (Path(purelib) / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _pip(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"pip {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"


@pytest.fixture(scope="module")
def user_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[Path]]]:
    """A user's directory outside the repository, with one correct and one wrong sample."""
    user = tmp_path_factory.mktemp("user")
    samples = [HERE / "good" / "approval_workflow.py", HERE / "bad" / "guard_wrong_context.py"]
    copies = [Path(shutil.copy(sample, user)) for sample in samples]
    yield user, copies


def _check_installed(python: Path, user: Path, samples: list[Path]) -> None:
    config = write_config(user, None)
    text = run_mypy(samples, config, user / ".mypy_cache", python)
    assert "Cannot find implementation or library stub" not in text, text
    found = errors_by_file(text)
    assert found.get("approval_workflow.py", []) == [], text
    wrong = found.get("guard_wrong_context.py", [])
    expected = expected_errors(samples[1])
    assert [line for line, _ in wrong] == list(expected), text
    assert all(expected[line] in message for line, message in wrong), text


@pytest.mark.slow
def test_mypy_finds_the_packages_of_a_wheel(tmp_path: Path, user_project: tuple[Path, list[Path]]) -> None:
    """A wheel ships ``py.typed`` for every package, and mypy type-checks user code against it."""
    source = _copy_project(tmp_path / "src")
    _pip("wheel", str(source), "-w", str(tmp_path / "wheels"), "--no-deps")
    (wheel,) = (tmp_path / "wheels").glob("incarnate-*.whl")
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    for package in PACKAGES:
        assert f"{package}/py.typed" in names
        assert f"{package}/__init__.py" in names
    python = _venv(tmp_path / "venv")
    _pip("--python", str(python), "install", "--no-index", "--no-deps", str(wheel))
    user, samples = user_project
    _check_installed(python, user, samples)


@pytest.mark.slow
def test_mypy_finds_the_packages_of_an_editable_install(
    tmp_path: Path, user_project: tuple[Path, list[Path]]
) -> None:
    """``pip install -e .`` adds a plain path entry, so mypy finds the packages from another directory."""
    source = _copy_project(tmp_path / "src")
    python = _venv(tmp_path / "venv")
    _pip("--python", str(python), "install", "--no-deps", "-e", str(source))
    user, samples = user_project
    _check_installed(python, user, samples)

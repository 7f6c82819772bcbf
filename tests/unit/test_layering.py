"""The package layering: imports only point down statechart <- aggregates <- projections <- incarnate."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bench.house import import_graph

ROOT = Path(__file__).resolve().parents[2]

ALLOWED: dict[str, set[str]] = {
    "statechart": set(),
    "aggregates": {"statechart"},
    "projections": {"statechart", "aggregates"},
    "incarnate": {"statechart", "aggregates", "projections"},
}
OURS = set(ALLOWED)

IMPURE = {
    "eventsourcing",
    "time",
    "datetime",
    "random",
    "secrets",
    "uuid",
    "os",
    "io",
    "pathlib",
    "socket",
    "sqlite3",
    "threading",
    "asyncio",
    "subprocess",
    "pickle",
}
"""Modules the pure statechart package must not import: no I/O, clock, randomness or pickle."""


def _imports(package: str) -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.extend((path, alias.name.split(".")[0]) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.append((path, node.module.split(".")[0]))
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_point_down(package: str) -> None:
    """A package imports only the packages below it."""
    wrong = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path, module in _imports(package)
        if module in OURS and module != package and module not in ALLOWED[package]
    ]
    assert wrong == []


DOCUMENT_READER = ROOT / "statechart" / "scxml" / "_source.py"
"""The one statechart module that reads files: SCXML documents and their ``src`` files, when loaded."""


def test_statechart_is_pure() -> None:
    """The statechart package imports no eventsourcing, I/O, clock, randomness or pickle.

    The SCXML loader reads a document when it is loaded (definition time, as a
    chart is written); that reading lives in one module, which may import
    ``os`` and ``pathlib`` and nothing else impure. No macrostep reads a file.
    """
    wrong = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path, module in _imports("statechart")
        if module in IMPURE and not (path == DOCUMENT_READER and module in ("os", "pathlib"))
    ]
    assert wrong == []


def test_aggregates_and_projections_do_no_io() -> None:
    """Aggregates and projections import no database driver or process machinery."""
    forbidden = {"sqlite3", "psycopg", "psycopg_pool", "subprocess", "socket", "threading", "asyncio"}
    wrong = [
        f"{path.relative_to(ROOT)} imports {module}"
        for package in ("aggregates", "projections")
        for path, module in _imports(package)
        if module in forbidden
    ]
    assert wrong == []


def _module_imports(path: Path) -> set[str]:
    """The modules of ours a module imports when it is loaded (not under TYPE_CHECKING, not in functions)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for inner in ast.walk(node) if isinstance(node, ast.If | ast.Try) else [node]:
            if isinstance(inner, ast.ImportFrom) and inner.module and inner.module.split(".")[0] in OURS:
                found.add(inner.module)
            elif isinstance(inner, ast.Import):
                found.update(a.name for a in inner.names if a.name.split(".")[0] in OURS)
    return found


def test_no_import_circle_between_modules() -> None:
    """No module of ours imports, directly or through others, a module that imports it back."""
    graph: dict[str, set[str]] = {}
    for package in ALLOWED:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            graph[name] = {m for m in _module_imports(path) if m not in ALLOWED}  # packages re-export
    circles: list[list[str]] = []

    def visit(name: str, path: list[str]) -> None:
        for target in sorted(graph.get(name, ())):
            if target in path:
                circles.append([*path[path.index(target) :], target])
            elif len(path) < 50:
                visit(target, [*path, target])

    for name in sorted(graph):
        visit(name, [name])
    assert not circles, f"import circles: {circles[:5]}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def test_no_two_modules_import_each_other() -> None:
    """No import circle between the project's modules, counting imports under TYPE_CHECKING."""
    graph = import_graph()
    circles: list[list[str]] = []
    for start in graph:
        # A path from a module back to itself, found depth first (the graph is small).
        stack: list[tuple[str, list[str]]] = [(target, [start]) for target in graph[start]]
        seen: set[str] = set()
        while stack:
            node, path = stack.pop()
            if node == start:
                circles.append(path)
                break
            if node in seen:
                continue
            seen.add(node)
            stack.extend((target, [*path, node]) for target in graph.get(node, ()))
    assert circles == []


def test_only_the_journal_is_an_eventsourcing_application() -> None:
    """The engine composes its store (``incarnate._journal``), it does not inherit the library's API."""
    from eventsourcing.application import Application

    from incarnate import Engine
    from incarnate._journal import Journal

    assert not issubclass(Engine, Application)
    assert issubclass(Journal, Application)
    subclassing = [
        _module_name(path)
        for package in ALLOWED
        for path in sorted((ROOT / package).rglob("*.py"))
        if "(Application[" in path.read_text() or "(Application)" in path.read_text()
    ]
    assert subclassing == ["incarnate._journal"]

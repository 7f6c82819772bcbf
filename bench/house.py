"""The shape of the code: largest class and module, public names, import circles, and one walk.

Run from a checkout (any commit) to compare the house before and after a change::

    python -m bench.house              # a table
    python -m bench.house --json       # the same figures as JSON

What it measures, all without timing anything:

- the largest class (lines, methods, public methods) and the largest module (lines) of the four
  packages;
- the public names of each package (its ``__all__``) and of :class:`incarnate.Engine` (methods and
  attributes a user can reach without a leading underscore, inherited ones included);
- import circles between the project's modules, counting imports under ``TYPE_CHECKING`` and
  imports inside functions: the strongly connected components of more than one module;
- the walk from ``Engine.send``: the project's functions one event sent to a running instance
  (and the macrostep it causes) runs through, as a sequence of modules ("rooms"). The *read*
  walk takes each function once, at its first call — the order a reader follows the code —
  the *calls* walk every call. *steps* is the length of the sequence once consecutive
  functions of one module are merged, *returns* the steps that enter a module the walk had
  already left; both are given for the engine package alone and for all four packages.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PACKAGES = ("statechart", "aggregates", "projections", "incarnate")
ROOT = Path(__file__).resolve().parent.parent


def _modules() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join(parts), path


def largest() -> dict[str, Any]:
    """The largest class and the largest module, by lines."""
    best_class: dict[str, Any] = {"name": "", "lines": 0}
    best_module: dict[str, Any] = {"name": "", "lines": 0}
    for name, path in _modules():
        text = path.read_text()
        lines = text.count("\n")
        if lines > best_module["lines"]:
            best_module = {"name": name, "lines": lines}
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                span = (node.end_lineno or node.lineno) - node.lineno + 1
                if span > best_class["lines"]:
                    methods = [
                        item.name
                        for item in node.body
                        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                    ]
                    best_class = {
                        "name": f"{name}.{node.name}",
                        "lines": span,
                        "methods": len(methods),
                        "public_methods": sum(1 for m in methods if not m.startswith("_")),
                    }
    return {"class": best_class, "module": best_module}


def public_names() -> dict[str, int]:
    """``len(__all__)`` of each package and its public submodules."""
    counts: dict[str, int] = {}
    for name, _ in _modules():
        if any(part.startswith("_") for part in name.split(".")):
            continue
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        exported = getattr(module, "__all__", None)
        if exported is not None:
            counts[name] = len(exported)
    return counts


def engine_surface() -> dict[str, int]:
    """What a user of ``Engine`` can reach: public methods and public attributes."""
    from incarnate import Engine

    methods = [
        name for name in dir(Engine) if not name.startswith("_") and callable(getattr(Engine, name, None))
    ]
    properties = [
        name
        for name in dir(Engine)
        if not name.startswith("_") and isinstance(getattr(Engine, name, None), property)
    ]
    source = Path(sys.modules[Engine.__module__].__file__ or "").read_text()
    attributes: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == "Engine":
            for item in ast.walk(node):
                if isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Store):
                    target = item.value
                    if isinstance(target, ast.Name) and target.id == "self" and not item.attr.startswith("_"):
                        attributes.add(item.attr)
    return {
        "public_methods": len(methods),
        "properties": len(properties),
        "public_attributes_set": len(attributes),
    }


def _imports(name: str, path: Path) -> set[str]:
    known = {module for module, _ in _modules()}
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            # ``from package import module`` depends on the module; ``from module import name``
            # on the module (the package's __init__ runs either way, and is not counted).
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names
            ]
        for imported in targets:
            target = imported
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    """Each module of the four packages, and the project modules it imports.

    Imports under ``TYPE_CHECKING`` and inside functions count; ``from package import module``
    depends on the module, ``from module import name`` on the module, and the package
    ``__init__`` an import runs on the way is not counted.
    """
    return {name: _imports(name, path) for name, path in _modules()}


def circles() -> list[list[str]]:
    """Strongly connected components (more than one module) of the import graph."""
    graph = import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in graph:
        if node not in index:
            visit(node)
    return sorted(found, key=len, reverse=True)


def walk() -> dict[str, Any]:
    """The modules one ``Engine.send`` (and the macrostep it causes) passes through."""
    from incarnate import Engine, Storage
    from statechart import Chart, state, transition

    chart = Chart(
        "walk",
        state("idle", on=[transition("go", "busy")]),
        state("busy", on=[transition("go", "idle")]),
    )
    calls: list[str] = []
    read: list[str] = []
    functions: set[tuple[str, str]] = set()
    prefixes = tuple(f"{package}." for package in PACKAGES) + PACKAGES

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and not frame.f_code.co_name.startswith("<"):  # a comprehension is its function's
            module = frame.f_globals.get("__name__", "")
            if module.startswith(prefixes):
                calls.append(module)
                function = (module, frame.f_code.co_qualname)
                if function not in functions:  # a reader reads each function once
                    functions.add(function)
                    read.append(module)

    with Engine([chart], storage=Storage.popo()) as engine:
        handle = engine.start("walk")
        engine.run_until_idle()
        engine.send(handle.id, "go")  # warm every lazy import and cache once
        engine.run_until_idle()
        sys.setprofile(profile)
        try:
            engine.send(handle.id, "go")
            engine.run_until_idle()
        finally:
            sys.setprofile(None)
    figures: dict[str, Any] = {}
    walks = (
        ("read, incarnate", read, ("incarnate.", "incarnate")),
        ("read, all", read, prefixes),
        ("calls, incarnate", calls, ("incarnate.", "incarnate")),
        ("calls, all", calls, prefixes),
    )
    for label, sequence, prefix in walks:
        rooms = [module for module in sequence if module.startswith(prefix)]
        rooms = [
            module for position, module in enumerate(rooms) if not position or rooms[position - 1] != module
        ]
        seen: set[str] = set()
        returns = 0
        for room in rooms:
            returns += room in seen
            seen.add(room)
        figures[label] = {"steps": len(rooms), "returns": returns, "modules": len(seen)}
    return figures


def measure() -> dict[str, Any]:
    found = circles()
    return {
        "largest": largest(),
        "public_names": public_names(),
        "engine": engine_surface(),
        "circles": {"count": len(found), "largest": len(found[0]) if found else 0, "members": found},
        "walk": walk(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.house", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    options = parser.parse_args(argv)
    figures = measure()
    if options.json:
        print(json.dumps(figures, indent=2))
        return 0
    largest_class = figures["largest"]["class"]
    largest_module = figures["largest"]["module"]
    rows = [
        (
            "largest class",
            f"{largest_class['name']}: {largest_class['lines']} lines, "
            f"{largest_class['methods']} methods ({largest_class['public_methods']} public)",
        ),
        ("largest module", f"{largest_module['name']}: {largest_module['lines']} lines"),
        ("Engine surface", ", ".join(f"{k} {v}" for k, v in figures["engine"].items())),
        (
            "import circles",
            f"{figures['circles']['count']} (largest {figures['circles']['largest']} modules)",
        ),
        *(
            (f"walk from Engine.send ({label})", ", ".join(f"{k} {v}" for k, v in walk.items()))
            for label, walk in figures["walk"].items()
        ),
    ]
    rows += [(f"public names: {name}", str(count)) for name, count in sorted(figures["public_names"].items())]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    for member in figures["circles"]["members"]:
        print("circle:", " → ".join(member))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

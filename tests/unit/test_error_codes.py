"""Every error class of the four packages has its own stable code, and the errors reference lists each."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

from incarnate.cli._common import BUG_CODE, USAGE_CODE
from incarnate.console._security import REFUSAL_CODES
from statechart.errors import IncarnateError

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("statechart", "aggregates", "projections", "incarnate")
KEBAB = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
REFERENCE = ROOT / "docs" / "reference" / "errors.md"


def every_module() -> list[str]:
    """The name of every module of the four packages, each imported (an import error fails the test)."""
    names: list[str] = []
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        names.append(package_name)
        for found in pkgutil.walk_packages(package.__path__, prefix=f"{package_name}."):
            importlib.import_module(found.name)
            names.append(found.name)
    return names


def error_classes() -> list[type[IncarnateError]]:
    """Every subclass of the root defined in the four packages, once all their modules are imported."""
    every_module()
    seen: list[type[IncarnateError]] = []
    pending: list[type[IncarnateError]] = [IncarnateError]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub not in seen:
                seen.append(sub)
                pending.append(sub)
    return [cls for cls in seen if cls.__module__.split(".")[0] in PACKAGES]


def with_the_root() -> list[type[IncarnateError]]:
    """The root, then every error class of the four packages."""
    classes: list[type[IncarnateError]] = [IncarnateError]
    return classes + error_classes()


def documented_codes() -> set[str]:
    """Every code the errors reference shows (each between backticks)."""
    return set(re.findall(r"`([a-z][a-z0-9-]*)`", REFERENCE.read_text(encoding="utf-8")))


def name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_the_walk_finds_the_errors_of_every_package() -> None:
    """The classes collected come from all four packages, among them errors moved from other modules."""
    classes = error_classes()
    assert {cls.__module__.split(".")[0] for cls in classes} == set(PACKAGES)
    moved = {"InstanceFailed", "InstanceCancelled", "CommandError", "CommandFailed", "EventNotTaken"}
    moved |= {"MigrationRejected", "LoopGone", "UnreadableRow", "RecoveryCheckFailed"}
    assert {cls.__name__: cls.__module__ for cls in classes if cls.__name__ in moved} == dict.fromkeys(
        moved, "incarnate.errors"
    )


@pytest.mark.parametrize("package", PACKAGES)
def test_every_error_class_is_defined_in_its_package_errors_module(package: str) -> None:
    """An error class lives in ``PACKAGE.errors`` (statechart's SCXML ones in ``statechart.errors`` too)."""
    strays = [name(cls) for cls in error_classes() if cls.__module__.split(".")[0] == package]
    assert [stray for stray in strays if not stray.startswith(f"{package}.errors.")] == []


def test_every_error_class_declares_its_own_kebab_case_code() -> None:
    """Each class has ``code`` in its own ``__dict__`` (never inherited), in kebab-case."""
    missing = [name(cls) for cls in error_classes() if "code" not in vars(cls)]
    assert missing == [], f"error classes without a code of their own: {missing}"
    malformed = {name(cls): cls.code for cls in error_classes() if not KEBAB.fullmatch(cls.code)}
    assert malformed == {}


def test_codes_are_unique() -> None:
    """No two error classes, the root included, share a code."""
    holders: dict[str, list[str]] = {}
    for cls in with_the_root():
        holders.setdefault(cls.code, []).append(name(cls))
    assert {code: names for code, names in holders.items() if len(names) > 1} == {}


def test_every_code_is_in_the_errors_reference() -> None:
    """docs/reference/errors.md lists every class's code, and the codes the CLI and console add."""
    documented = documented_codes()
    undocumented = {name(cls): cls.code for cls in with_the_root()}
    assert {n: code for n, code in undocumented.items() if code not in documented} == {}
    extra = {USAGE_CODE, BUG_CODE, *REFUSAL_CODES.values()}
    assert extra - documented == set()


def test_codes_that_name_no_class_do_not_shadow_one() -> None:
    """The command line's and the console's own codes are kebab-case and none is a class's code."""
    extra = {USAGE_CODE, BUG_CODE, *REFUSAL_CODES.values()}
    assert all(KEBAB.fullmatch(code) for code in extra)
    assert extra & {cls.code for cls in with_the_root()} == set()

"""Every error class has its own stable, kebab-case code; a malformed or reused code is refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import aggregates.errors
import projections
import statechart.errors
from statechart.errors import IncarnateError

# The packages whose errors this test holds to their own codes; the engine's errors are pinned
# by the engine's tests.
PACKAGES = ("statechart", "aggregates", "projections")


def error_classes() -> list[type[IncarnateError]]:
    """Every subclass of the root defined in one of ``PACKAGES`` (imported above)."""
    assert statechart.errors and aggregates.errors and projections
    seen: list[type[IncarnateError]] = []
    pending: list[type[IncarnateError]] = [IncarnateError]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.append(sub)
                pending.append(sub)
    return [cls for cls in seen if cls.__module__.split(".")[0] in PACKAGES]


def test_the_root_has_the_generic_code() -> None:
    """``IncarnateError.code`` is ``incarnate-error``, also on an instance."""
    assert IncarnateError.code == "incarnate-error"
    assert IncarnateError("x").code == "incarnate-error"


def test_every_error_class_declares_its_own_unique_kebab_case_code() -> None:
    """No error class inherits its parent's code, and no two classes share one."""
    classes = error_classes()
    assert len(classes) > 25
    codes: dict[str, str] = {IncarnateError.code: "IncarnateError"}
    for cls in classes:
        assert "code" in vars(cls), f"{cls.__module__}.{cls.__qualname__} declares no code"
        assert re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", cls.code), cls
        assert cls.code not in codes, f"{cls.__qualname__} reuses {codes[cls.code]}'s code {cls.code!r}"
        codes[cls.code] = cls.__qualname__


def test_every_code_is_in_the_errors_reference() -> None:
    """docs/reference/errors.md lists each of these error classes with its code."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "reference" / "errors.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| `([a-z0-9-]+)` \|", text, flags=re.MULTILINE))
    for cls in error_classes():
        assert rows.get(cls.__name__) == cls.code, f"{cls.__name__} ({cls.code}) is not in errors.md"


def test_a_malformed_code_is_refused_when_the_class_is_defined() -> None:
    """A code that is not kebab-case raises TypeError at class definition."""
    with pytest.raises(TypeError, match="kebab-case"):

        class Bad(IncarnateError):
            code = "Bad_Code"


def test_a_reused_code_is_refused_when_the_class_is_defined() -> None:
    """A second class with an existing code raises TypeError naming the holder."""
    with pytest.raises(TypeError, match=r"already the code of statechart\.errors\.UnknownTarget"):

        class Again(IncarnateError):
            code = "unknown-target"

"""The package's public surface: ``__all__`` names what ``statechart`` exports."""

from __future__ import annotations

import statechart
import statechart.codec
import statechart.effects
import statechart.shape
import statechart.snapshot
from statechart import errors


def test_every_exported_name_exists_once() -> None:
    """Each name in ``statechart.__all__`` is defined on the package and listed once."""
    assert len(statechart.__all__) == len(set(statechart.__all__))
    for name in statechart.__all__:
        assert hasattr(statechart, name), name


def test_core_vocabulary_is_exported() -> None:
    """The authoring and stepping names are at the root; the rest is in its submodule."""
    core = {
        "Chart",
        "state",
        "parallel",
        "final",
        "history",
        "transition",
        "always",
        "after",
        "invoke",
        "assign",
        "raise_event",
        "send",
        "cancel",
        "send_parent",
        "send_child",
        "log",
        "in_state",
        "start",
        "step",
        "fire",
        "stop",
        "due_timers",
        "Registry",
        "Event",
    }
    assert core <= set(statechart.__all__)
    assert "SnapshotCodec" in statechart.codec.__all__
    assert "Snapshot" in statechart.snapshot.__all__
    assert "compare" in statechart.shape.__all__
    assert "ArmTimer" in statechart.effects.__all__


def test_the_root_is_small() -> None:
    """The root exports what an author writes (about thirty names), not every class of the package."""
    assert len(statechart.__all__) <= 35
    assert not {"SnapshotCodec", "ArmTimer", "Shape", "StateNode", "CONVERTER"} & set(statechart.__all__)


def test_every_error_derives_from_the_one_root() -> None:
    """All exception classes in ``statechart.errors`` derive from IncarnateError."""
    classes = [
        value
        for value in vars(errors).values()
        if isinstance(value, type)
        and issubclass(value, BaseException)
        and value.__module__ == errors.__name__
    ]
    assert len(classes) > 10
    for cls in classes:
        assert issubclass(cls, errors.IncarnateError), cls

"""Chart shapes, fingerprints and compatibility between versions of a chart."""

from __future__ import annotations

from statechart import Chart, Event, NoContext, RetryPolicy, after, history, invoke, state, transition
from statechart.shape import Compatibility, SiteShape, StateShape, compare


def yes(context: NoContext, event: Event) -> bool:
    return True


def no(context: NoContext, event: Event) -> bool:
    return False


def base(
    *,
    add_state: bool = False,
    drop_i2: bool = False,
    deep: bool = False,
    move_site: bool = False,
    task: str = "crunch",
    event: str = "go",
    initial: str = "i1",
    max_depth: int | None = None,
    attempts: int = 1,
    other_guard: bool = False,
) -> Chart[NoContext]:
    """A reference chart; each keyword produces one variant for the tests to compare."""
    site = invoke(
        "work",
        task=task,
        group="g" if max_depth is not None else None,
        max_depth=max_depth,
        retry=RetryPolicy(max_attempts=attempts),
    )
    return Chart(
        "versioned",
        state(
            "a",
            on=[
                transition(event, "b", guard=no if other_guard else yes),
                *([transition("extra", "extra")] if add_state else []),
            ],
            invoke=[] if move_site else [site],
        ),
        state(
            "b",
            history("h", "i1", deep=deep),
            *([state("i1")] if drop_i2 else [state("i1"), state("i2")]),
            initial=initial,
            on=[after(5, "a"), transition("h", "h")],
            invoke=[site] if move_site else [],
        ),
        *([state("extra")] if add_state else []),
        allow_unreachable=[] if drop_i2 else ["i2"],
    )


def test_fingerprint_is_stable_across_rebuilds() -> None:
    """Building the same definition twice gives the same shape and fingerprint."""
    assert base().shape == base().shape
    assert base().fingerprint == base().fingerprint
    assert len(base().fingerprint) == 64
    assert base().fingerprint[:12] in repr(base())


def test_fingerprint_ignores_guard_and_action_functions() -> None:
    """Swapping a guard function for another leaves the fingerprint alone; only ``guarded`` counts."""
    assert base(other_guard=True).fingerprint == base().fingerprint


def test_fingerprint_ignores_retry_policy() -> None:
    """Retry policies are behaviour, not structure: they do not change the fingerprint."""
    assert base(attempts=3).fingerprint == base().fingerprint


def test_fingerprint_changes_with_structure() -> None:
    """Any change to states, transitions or sites changes the fingerprint."""
    reference = base().fingerprint
    variants = [
        base(add_state=True),
        base(drop_i2=True),
        base(deep=True),
        base(move_site=True),
        base(task="other"),
        base(event="went"),
        base(initial="i2"),
        base(max_depth=2),
    ]
    fingerprints = [chart.fingerprint for chart in variants]
    assert reference not in fingerprints
    assert len(set(fingerprints)) == len(fingerprints)


def test_shape_lists_states_with_kind_parent_and_initial() -> None:
    """The shape records each state's kind, parent, initial children and history depth."""
    states = {s.id: s for s in base().shape.states}
    assert states["a"] == StateShape("a", "atomic", None)
    assert states["b"] == StateShape("b", "compound", None, ("i1",))
    assert states["h"] == StateShape("h", "history", "b", ("i1",), False)
    assert base().shape.sites == (SiteShape("work", "a", None, "crunch", False, None, None),)


def test_shape_names_delayed_transitions_by_delay_not_timer_event() -> None:
    """A delayed transition appears with its delay and no events."""
    delayed = [t for t in base().shape.transitions if t.delay is not None]
    assert [(t.source, t.events, t.delay) for t in delayed] == [("b", (), 5.0)]


def test_identical_shapes_compare_compatible_with_no_changes() -> None:
    """Comparing a shape with itself reports nothing."""
    result = compare(base().shape, base().shape)
    assert result == Compatibility((), ())
    assert result.compatible


def test_added_state_is_additive() -> None:
    """A new state (and transitions into it) is an additive change."""
    result = compare(base().shape, base(add_state=True).shape)
    assert result.compatible
    assert "state 'extra' was added" in result.additive
    assert any("transitions changed" in item for item in result.additive)


def test_removed_state_is_breaking() -> None:
    """Removing a state breaks stored snapshots that may reference it."""
    result = compare(base().shape, base(drop_i2=True).shape)
    assert not result.compatible
    assert result.breaking == ("state 'i2' was removed",)


def test_history_depth_change_is_breaking() -> None:
    """Turning a shallow history deep changes what stored history means."""
    result = compare(base().shape, base(deep=True).shape)
    assert result.breaking == ("state 'h' changed deep from False to True",)


def test_kind_and_parent_changes_are_breaking() -> None:
    """A state that changes kind or parent is a breaking change."""
    old = Chart(
        "k",
        state("a", on=[transition("go", "b")]),
        state("b"),
        state("p", state("c")),
        initial="a",
        allow_unreachable=["p"],
    ).shape
    new = Chart(
        "k",
        state("a", state("b"), on=[transition("go", "b")]),
        state("p", state("c")),
        allow_unreachable=["p"],
    ).shape
    result = compare(old, new)
    assert "state 'a' changed kind from 'atomic' to 'compound'" in result.breaking
    assert "state 'b' changed parent from None to 'a'" in result.breaking


def test_initial_change_is_additive() -> None:
    """Changing a compound's initial child only affects future entries."""
    result = compare(base().shape, base(initial="i2").shape)
    assert result.compatible
    assert result.additive == ("state 'b' changed initial from ('i1',) to ('i2',)",)


def test_site_moved_or_retargeted_is_breaking() -> None:
    """A site moved to another state, or naming another task, breaks stored slots."""
    moved = compare(base().shape, base(move_site=True).shape)
    assert moved.breaking == ("site 'work' changed state from 'a' to 'b'",)
    retargeted = compare(base().shape, base(task="other").shape)
    assert retargeted.breaking == ("site 'work' changed task from 'crunch' to 'other'",)


def test_site_removed_is_breaking_and_added_is_additive() -> None:
    """Removing a site is breaking; adding one is additive."""
    with_site = Chart("s", state("a", invoke=[invoke("w", task="t")])).shape
    without = Chart("s", state("a")).shape
    assert compare(with_site, without).breaking == ("site 'w' was removed",)
    added = compare(without, with_site)
    assert added.compatible
    assert added.additive == ("site 'w' was added",)


def test_fan_out_change_is_breaking() -> None:
    """Turning a single site into a fan-out changes how its slots are keyed."""

    def keys(context: NoContext) -> dict[str, None]:
        return {}

    single = Chart("f", state("a", invoke=[invoke("w", task="t")])).shape
    fan = Chart("f", state("a", invoke=[invoke("w", task="t", map=keys)])).shape
    assert compare(single, fan).breaking == ("site 'w' changed fanout from False to True",)


def test_recursion_bound_change_is_additive() -> None:
    """Changing a site's group or max_depth does not invalidate stored snapshots."""
    result = compare(base().shape, base(max_depth=2).shape)
    assert result.compatible
    assert "site 'work' changed max_depth from None to 2" in result.additive


def test_transition_changes_are_additive() -> None:
    """Snapshots hold no transitions, so changing one is additive."""
    result = compare(base().shape, base(event="went").shape)
    assert result.compatible
    assert result.additive == ("transitions changed (3 before, 3 now)",)


def test_canonical_text_is_sorted_compact_json() -> None:
    """The canonical text is compact JSON with sorted keys."""
    text = base().shape.canonical()
    assert text.startswith('{"chart":"versioned","sites":')
    assert ": " not in text and ", " not in text

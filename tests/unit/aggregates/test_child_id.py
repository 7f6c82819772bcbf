"""A child's instance id is ``uuid5(NAMESPACE, "parent/site/key/generation")`` of its Ref, always."""

from __future__ import annotations

import uuid
from uuid import UUID

from hypothesis import given
from hypothesis import strategies as st

from aggregates import NAMESPACE, Ref

TEXT = st.text(st.characters(exclude_categories=["Cs"]))  # no lone surrogates: not UTF-8


@given(st.uuids(), TEXT, TEXT, st.integers(min_value=0, max_value=2**63 - 1))
def test_the_child_id_is_the_uuid5_of_the_ref(parent: UUID, site: str, key: str, generation: int) -> None:
    child_id = Ref(parent, site, key, generation).child_id
    expected = uuid.uuid5(NAMESPACE, f"{parent}/{site}/{key}/{generation}")
    assert child_id == expected
    assert type(child_id) is UUID
    assert child_id.version == 5
    assert child_id.variant == uuid.RFC_4122
    assert str(child_id) == str(expected)
    assert hash(child_id) == hash(expected)

"""``uuid_of``: a UUID parsed once per text, the same as ``UUID(text)``."""

from __future__ import annotations

import uuid
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aggregates import _codec, uuid_of


@given(st.uuids())
def test_the_uuid_of_a_text_is_the_parsed_uuid(value: UUID) -> None:
    for text in (str(value), str(value).upper(), value.hex, "{" + str(value) + "}", value.urn):
        assert uuid_of(text) == UUID(text) == value
        assert type(uuid_of(text)) is UUID


def test_a_text_read_again_is_not_parsed_again() -> None:
    text = str(uuid.uuid4())
    assert uuid_of(text) is uuid_of(text)


@pytest.mark.parametrize("text", ["", "not a uuid", "0123", str(uuid.uuid4())[:-1]])
def test_a_text_that_is_no_uuid_is_refused_like_uuid_does(text: str) -> None:
    with pytest.raises(ValueError, match="badly formed"):
        uuid_of(text)
    assert text not in _codec._UUIDS


def test_what_it_remembers_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_codec, "_UUIDS_KEPT", 8)
    monkeypatch.setattr(_codec, "_UUIDS", {})
    texts = [str(uuid.uuid4()) for _ in range(20)]
    assert [uuid_of(text) for text in texts] == [UUID(text) for text in texts]
    assert len(_codec._UUIDS) <= 8

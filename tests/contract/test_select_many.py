"""``Store.select_many``: many originators' stored events in one query, as reading each would give them."""

from __future__ import annotations

from uuid import uuid4

from incarnate import Engine, MemoryStorage, Storage
from tests.scenarios import charts


def test_select_many_gives_what_reading_each_gives(storage: Storage) -> None:
    """Every event of each originator in version order; none for an unknown id; ``latest`` the newest."""
    engine = Engine(charts.ALL, {"charge": lambda call: "ok"}, storage=storage)
    try:
        roots = [engine.start("gate").id for _ in range(3)]
        engine.send(roots[0], "answer", 1)
        engine.run_until_idle()
        unknown = uuid4()
        found = engine.store.select_many(engine.recorder, [*roots, unknown])
        if isinstance(storage, MemoryStorage):
            assert found is None  # read one by one in memory
            return
        assert found is not None and set(found) == set(roots)
        for root in roots:
            each = engine.recorder.select_events(root)
            assert [(e.originator_version, e.topic, e.state) for e in found[root]] == [
                (e.originator_version, e.topic, bytes(e.state)) for e in each
            ]
            assert all(e.originator_id == root for e in found[root])
        newest = engine.store.select_many(engine.recorder, roots, latest=True)
        assert newest is not None
        assert {root: [e.originator_version for e in events] for root, events in newest.items()} == {
            root: [engine.recorder.select_events(root)[-1].originator_version] for root in roots
        }
    finally:
        engine.close()


def test_select_many_reads_more_originators_than_one_statement_names(storage: Storage) -> None:
    """SQLite bounds a statement's parameters: 1,200 ids are read in chunks, none lost."""
    engine = Engine(charts.ALL, {"charge": lambda call: "ok"}, storage=storage)
    try:
        roots = [engine.start("gate").id for _ in range(1_200)]
        found = engine.store.select_many(engine.recorder, roots)
        if found is None:
            assert isinstance(storage, MemoryStorage)
            return
        assert set(found) == set(roots)
        assert {len(events) for events in found.values()} == {len(engine.recorder.select_events(roots[0]))}
    finally:
        engine.close()

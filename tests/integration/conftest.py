"""Fixtures: every integration test runs once per store (POPO, SQLite file, PostgreSQL)."""

from tests.stores import EngineFactory, clock, make_engine, storage

__all__ = ["EngineFactory", "clock", "make_engine", "storage"]

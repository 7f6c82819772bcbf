"""ChartVersion: the shape of one chart version, stored once so later versions can be compared."""

from __future__ import annotations

from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate

from aggregates._identity import NAMESPACE
from statechart.shape import Shape


class ChartVersion(Aggregate):
    """The recorded structure of one chart under one fingerprint."""

    class Registered(Aggregate.Created):
        """A chart version was first seen by an engine of this store."""

        name: str
        fingerprint: str
        shape: Shape

    def __init__(self, name: str, fingerprint: str, shape: Shape) -> None:
        self.name = name
        self.fingerprint = fingerprint
        self.shape = shape

    @staticmethod
    def id_for(name: str, fingerprint: str) -> UUID:
        """The id of a chart version, derived from its name and fingerprint."""
        return uuid5(NAMESPACE, f"chart-version/{name}/{fingerprint}")

    @classmethod
    def register(cls, shape: Shape) -> ChartVersion:
        """A new record of ``shape``."""
        version: ChartVersion = cls._create(
            cls.Registered,
            id=cls.id_for(shape.chart, shape.fingerprint),
            name=shape.chart,
            fingerprint=shape.fingerprint,
            shape=shape,
        )
        return version

"""SCXML documents as charts: :func:`load` a document with the Python datamodel, :func:`dump` a chart.

A loaded chart is an ordinary :class:`~statechart.Chart` (its context a
:class:`Datamodel`), so the engine runs it durably like any other chart.
An SCXML document with a Python datamodel is code: load only documents you
trust.
"""

from statechart.errors import ScxmlError
from statechart.scxml._datamodel import Datamodel, EventView
from statechart.scxml._dump import dump
from statechart.scxml._load import SCXML_NS, SUPPORTED_DATAMODELS, load, parse_delay

__all__ = [
    "SCXML_NS",
    "SUPPORTED_DATAMODELS",
    "Datamodel",
    "EventView",
    "ScxmlError",
    "dump",
    "load",
    "parse_delay",
]

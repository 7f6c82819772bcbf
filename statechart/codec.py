"""The snapshot codec: snapshots and contexts to JSON data and back, strictly (nothing is converted).

:class:`SnapshotCodec` encodes and decodes the snapshots of one chart (and,
with ``encode_delta``, what one macrostep changed: a :class:`SnapshotDelta`).
:func:`context_from_input` builds a chart's context from a JSON input;
:func:`check_json` and :func:`check_text` refuse what cannot be stored;
:func:`plain_json` tells whether data is plain JSON without raising, and
:func:`finite_float` is the converter's check of every float.
:data:`CONVERTER` is the shared strict cattrs converter, and
:func:`make_converter` makes another to extend.
"""

from statechart._codec import (
    CONVERTER,
    SnapshotCodec,
    SnapshotDelta,
    check_json,
    check_text,
    context_from_input,
    finite_float,
    make_converter,
    plain_json,
)

__all__ = [
    "CONVERTER",
    "SnapshotCodec",
    "SnapshotDelta",
    "check_json",
    "check_text",
    "context_from_input",
    "finite_float",
    "make_converter",
    "plain_json",
]

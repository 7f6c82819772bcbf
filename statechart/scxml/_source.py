"""Reading SCXML documents and the files their ``src`` attributes name.

The one module of the statechart package that touches the file system, and
only when a document is loaded (definition time, like writing a chart in
Python): no macrostep ever reads a file.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

Source = str | os.PathLike[str]
"""A path, or an SCXML document's text (anything whose first non-blank character is ``<``)."""

Folder = Path | None
"""Where relative ``src`` attributes are read from (``None``: nowhere)."""


@attrs.frozen
class Document:
    """A document's text, the label its problems are reported under, and its folder for relative ``src``."""

    text: str | None
    label: str
    folder: Path | None
    stem: str | None
    error: str | None = None


def is_text(source: Source) -> bool:
    """Whether ``source`` is a document's text rather than a path."""
    return isinstance(source, str) and source.lstrip().startswith("<")


def read_document(source: Source, base: Source | None) -> Document:
    """Read the document (or take its text); ``error`` says why it could not be read."""
    folder = Path(base) if base is not None else None
    if is_text(source):
        assert isinstance(source, str)
        return Document(source, "<text>", folder, None)
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        return Document(
            None, str(path), folder, path.stem, f"cannot read the document: {error.strerror or error}"
        )
    return Document(text, str(path), folder or path.parent, path.stem)


def canonical(label: str) -> str:
    """The real path of a document's label (``<text>`` stays itself), to recognise a document twice."""
    return label if label.startswith("<") else os.path.realpath(label)


def _path(src: str) -> Path:
    """The path of a ``src``: a path, or a ``file:`` URI."""
    return Path(src.removeprefix("file://") if src.startswith("file://") else src.removeprefix("file:"))


def read_relative(folder: Path | None, src: str) -> tuple[str | None, str | None]:
    """The text of ``src`` (a path or a ``file:`` URI, relative to ``folder``), or why it cannot be read."""
    path = _path(src)
    if not path.is_absolute():
        if folder is None:
            return None, f"src={src!r} is relative and the document has no folder; pass load(base=...)"
        path = folder / path
    try:
        return path.read_text(encoding="utf-8"), None
    except OSError as error:
        return None, f"cannot read src={src!r}: {error.strerror or error}"


def document_key(folder: Folder | str, src: str) -> str | None:
    """The normalised path ``src`` names (a ``file:`` URI or a path, relative to ``folder``)."""
    path = _path(src)
    if not path.is_absolute():
        if folder is None:
            return None
        path = Path(folder) / path
    return os.path.realpath(path)


def sibling_documents(folder: Folder) -> list[str]:
    """The SCXML documents (``*.scxml``) in ``folder``, sorted: the documents a ``srcexpr`` may name."""
    if folder is None:
        return []
    try:
        return sorted(os.path.realpath(p) for p in folder.glob("*.scxml") if p.is_file())
    except OSError:
        return []

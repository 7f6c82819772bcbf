"""Reading SCXML documents and the files their ``src`` attributes name.

The one module of the statechart package that touches the file system, and
only when a document is loaded (definition time, like writing a chart in
Python): no macrostep ever reads a file.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

Source = str | bytes | os.PathLike[str]
"""A path, or an SCXML document's text (anything whose first non-blank character is ``<``) or bytes."""

Folder = Path | None
"""Where relative ``src`` attributes are read from (``None``: nowhere)."""


@attrs.frozen
class Document:
    """A document's text, the label its problems are reported under, and its folder for relative ``src``."""

    text: str | bytes | None
    label: str
    folder: Path | None
    stem: str | None
    error: str | None = None


def is_text(source: Source) -> bool:
    """Whether ``source`` is a document's text (or bytes) rather than a path."""
    return isinstance(source, bytes) or (isinstance(source, str) and source.lstrip().startswith("<"))


def read_document(source: Source, base: Source | None) -> Document:
    """Read the document (or take its text); ``error`` says why it could not be read.

    A file is read as bytes, so the XML declaration's encoding applies (UTF-8 when it names none).
    """
    if base is not None and not isinstance(base, str | os.PathLike):
        raise TypeError(f"load(base=...) takes a folder path, got {type(base).__name__} {base!r}")
    folder = Path(base) if base is not None else None
    if isinstance(source, str | bytes) and is_text(source):
        return Document(source, "<text>", folder, None)
    if not isinstance(source, str | os.PathLike) or source == "":
        raise TypeError(
            f"load() takes a path or an SCXML document's text (str or bytes), got {type(source).__name__} "
            f"{source!r}"
        )
    path = Path(source)
    try:
        data = path.read_bytes()
    except OSError as error:
        return Document(
            None, str(path), folder, path.stem, f"cannot read the document: {error.strerror or error}"
        )
    return Document(data, str(path), folder or path.parent, path.stem)


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
    except UnicodeDecodeError as error:
        return None, f"src={src!r} is not UTF-8 text ({error.reason} at byte {error.start})"


def document_key(folder: Folder | str, src: str) -> str | None:
    """The normalised path ``src`` names (a ``file:`` URI or a path, relative to ``folder``)."""
    path = _path(src)
    if not path.is_absolute():
        if folder is None:
            return None
        path = Path(folder) / path
    return os.path.realpath(path)


def folder_of(path: str) -> Path:
    """The folder of a document's real path (where its own relative ``src`` are read from)."""
    return Path(path).parent


def stem_of(path: str) -> str:
    """A document's file name without its extension (its chart's name when the document names none)."""
    return Path(path).stem


def sibling_documents(folder: Folder) -> list[str]:
    """The SCXML documents (``*.scxml``) in ``folder``, sorted: the documents a ``srcexpr`` may name."""
    if folder is None:
        return []
    try:
        return sorted(os.path.realpath(p) for p in folder.glob("*.scxml") if p.is_file())
    except OSError:
        return []

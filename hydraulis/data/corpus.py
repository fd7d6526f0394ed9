"""Corpora read offline through Hugging Face ``datasets``: JSONL, Parquet, plain text, or a
directory of source files.

The format follows the path: a directory (one file, one document; see
:mod:`hydraulis.data.sources`), ``.jsonl``/``.json`` (one JSON object per line), ``.parquet``,
or ``.txt``/``.text``/``.md`` (one document per line, paragraph or file, ``text_unit``). The
documents are the values of ``text_field`` (default ``text``). No hub access: the
``HF_DATASETS_OFFLINE``/``HF_HUB_OFFLINE`` switches are set before ``datasets`` is imported.

Loading reads every document once to check it (a string, valid UTF-8) and to compute the
content hash (:mod:`hydraulis.data.fingerprint`); empty documents are counted and later
skipped. A missing path, an unknown format or field, undecodable bytes in a file, or a corpus
without a non-empty document is a :class:`~hydraulis.base.errors.HydraulisError`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from hydraulis.base.errors import HydraulisError, require
from hydraulis.data.fingerprint import ContentHash
from hydraulis.data.sources import collect_sources

log = logging.getLogger(__name__)

SCAN_ROWS = 1024


class TextUnit(str, Enum):
    """What one document of a plain-text file is."""

    LINE = "line"
    PARAGRAPH = "paragraph"
    DOCUMENT = "document"


class CorpusFormat(str, Enum):
    """How a corpus is read; chosen from its path."""

    JSON = "json"
    PARQUET = "parquet"
    TEXT = "text"
    DIRECTORY = "directory"


SUFFIXES = {".jsonl": CorpusFormat.JSON, ".json": CorpusFormat.JSON, ".parquet": CorpusFormat.PARQUET,
            ".txt": CorpusFormat.TEXT, ".text": CorpusFormat.TEXT, ".md": CorpusFormat.TEXT}


@dataclass(frozen=True)
class CorpusSource:
    """Where a corpus is and how to read it; ``pattern`` selects a directory's files."""

    path: Path
    text_field: str = "text"
    text_unit: TextUnit = TextUnit.LINE
    pattern: str = "**/*"

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))
        require(isinstance(self.text_field, str) and bool(self.text_field), "text_field", self.text_field,
                "must be a non-empty field name")
        require(isinstance(self.text_unit, TextUnit), "text_unit", self.text_unit,
                f"must be one of {', '.join(u.value for u in TextUnit)}")

    @property
    def format(self) -> CorpusFormat:
        require(self.path.exists(), "corpus", str(self.path), "does not exist")
        if self.path.is_dir():
            return CorpusFormat.DIRECTORY
        found = SUFFIXES.get(self.path.suffix.lower())
        require(found is not None, "corpus", str(self.path),
                f"has an unsupported suffix; use a directory or one of {', '.join(SUFFIXES)}")
        return found


@dataclass(frozen=True)
class Corpus:
    """A loaded, checked corpus: ``documents`` rows of which ``empty`` are empty, ``bytes`` of
    UTF-8 text, ``skipped_undecodable`` files left out (directories only)."""

    source: CorpusSource
    dataset: Any = field(repr=False)
    documents: int
    empty: int
    bytes: int
    skipped_undecodable: int
    content_hash: str

    def texts(self, batch_size: int = SCAN_ROWS) -> Iterator[list[str]]:
        """The non-empty documents in corpus order, in lists of at most ``batch_size``."""
        column = self.dataset.data.column(self.source.text_field)
        for start in range(0, len(column), batch_size):
            texts = [t for t in column.slice(start, batch_size).to_pylist() if t]
            if texts:
                yield texts


def load_corpus(source: CorpusSource, cache_dir: str | Path | None = None) -> Corpus:
    """Read and check the corpus ``source``; ``cache_dir`` holds ``datasets``' Arrow cache
    (default: its own, ``~/.cache/huggingface/datasets``)."""
    kind = source.format
    skipped = 0
    if kind is CorpusFormat.DIRECTORY:
        collection = collect_sources(source.path, source.pattern)
        skipped = len(collection.skipped)
        dataset = _datasets().Dataset.from_dict({"text": list(collection.texts), "path": list(collection.paths)})
    else:
        require(source.path.stat().st_size > 0, "corpus", str(source.path), "is empty: it holds no documents")
        dataset = _load_file(source, kind, cache_dir)
    _check_field(dataset, source)
    documents, empty, size, digest = _scan(dataset, source)
    require(documents > empty, "corpus", str(source.path),
            "holds no documents" if documents == 0 else f"holds only empty documents ({documents})")
    log.info("corpus %s: %d documents (%d empty), %d bytes, %d undecodable files skipped",
             source.path, documents, empty, size, skipped)
    return Corpus(source, dataset, documents, empty, size, skipped, digest)


def _datasets() -> Any:
    """``datasets``, imported with the hub switched off."""
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "1"
    import datasets

    datasets.config.HF_HUB_OFFLINE = True
    datasets.config.HF_DATASETS_OFFLINE = True
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)
    return datasets


def _load_file(source: CorpusSource, kind: CorpusFormat, cache_dir: str | Path | None) -> Any:
    datasets = _datasets()
    import pyarrow

    options = {"sample_by": source.text_unit.value} if kind is CorpusFormat.TEXT else {}
    try:
        return datasets.load_dataset(kind.value, data_files=str(source.path), split="train",
                                     cache_dir=None if cache_dir is None else str(cache_dir), **options)
    except (datasets.exceptions.DatasetGenerationError, pyarrow.ArrowException, ValueError, OSError) as error:
        cause = error.__cause__ or error
        if isinstance(cause, UnicodeDecodeError):
            raise HydraulisError("corpus", str(source.path), f"is not valid UTF-8 ({cause.reason})") from None
        raise HydraulisError("corpus", str(source.path), f"cannot be read as {kind.value} "
                             f"({type(cause).__name__}: {cause})") from None


def _check_field(dataset: Any, source: CorpusSource) -> None:
    datasets = _datasets()
    fields = dataset.column_names
    require(source.text_field in fields, "text_field", source.text_field,
            f"is not a field of {source.path}; its fields: {', '.join(fields) or 'none'}")
    feature = dataset.features[source.text_field]
    require(isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string"),
            "text_field", source.text_field, f"holds {feature} values, not text: every value must be a string")


def _scan(dataset: Any, source: CorpusSource) -> tuple[int, int, int, str]:
    """Check every document (a string, valid UTF-8); count empty ones, bytes; hash them."""
    column = dataset.data.column(source.text_field)
    digest, empty, size = ContentHash(), 0, 0
    for start in range(0, len(column), SCAN_ROWS):
        rows = column.slice(start, SCAN_ROWS)
        for offset, text in enumerate(_decoded(rows, source, start)):
            if text is None:
                raise HydraulisError(f"{source.path.name}[{start + offset}].{source.text_field}", None,
                                     "is null; every document must be a string")
            data = text.encode("utf-8")
            digest.add(data)
            size += len(data)
            empty += not data
    return len(column), empty, size, digest.hexdigest()


def _decoded(rows: Any, source: CorpusSource, start: int) -> list[str | None]:
    try:
        return rows.to_pylist()
    except UnicodeDecodeError:
        for offset in range(len(rows)):
            try:
                rows[offset].as_py()
            except UnicodeDecodeError as error:
                raise HydraulisError(f"{source.path.name}[{start + offset}].{source.text_field}",
                                     rows[offset].as_buffer().to_pybytes()[:40],
                                     f"is not valid UTF-8 ({error.reason} at byte {error.start})") from None
        raise

"""Content hash of a corpus: SHA-256 over its documents, in order.

Each document contributes its UTF-8 length as 8 little-endian bytes, then its UTF-8 bytes, so
``("ab", "c")`` and ``("a", "bc")`` hash differently. The same texts give the same hash whether
they come from a directory, a JSONL file or a Parquet file; it keys the tokenizer cache and is
recorded in the stdlib corpus' manifest.
"""

from __future__ import annotations

import hashlib


class ContentHash:
    """Incremental hash of a sequence of documents."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()

    def add(self, data: bytes) -> None:
        self._sha.update(len(data).to_bytes(8, "little"))
        self._sha.update(data)

    def hexdigest(self) -> str:
        return "sha256:" + self._sha.hexdigest()

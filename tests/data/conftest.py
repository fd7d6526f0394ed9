"""Tiny corpora built in ``tmp_path``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hydraulis.io.stdlib_corpus import stdlib_root

CODE_MODULES = ("json/decoder.py", "json/encoder.py", "json/scanner.py", "textwrap.py", "heapq.py", "bisect.py")


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def code_texts() -> list[str]:
    """About 100 KB of real Python source from the running interpreter."""
    return [(stdlib_root() / name).read_text(encoding="utf-8") for name in CODE_MODULES]


def write_code_corpus(path: Path) -> Path:
    """A JSONL corpus of a few standard-library modules, one document per module and one per
    1500-character chunk of them, so lengths vary."""
    texts = code_texts()
    chunks = [t[i:i + 1500] for t in texts for i in range(0, len(t), 1500)]
    return write_jsonl(path, [{"text": t} for t in texts + chunks])


@pytest.fixture
def code_corpus(tmp_path) -> Path:
    return write_code_corpus(tmp_path / "code.jsonl")

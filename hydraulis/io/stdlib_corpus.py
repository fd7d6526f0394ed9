"""The CPython standard library of the running interpreter as a JSONL corpus.

A real long-tailed code corpus available on every machine (design §4): every ``.py`` file under
``sysconfig.get_paths()["stdlib"]``, test suites included (they are real code and most of the
tail), third-party packages excluded (``site-packages``, ``dist-packages``: they differ from
machine to machine). CPython 3.11 gives about 1,790 files and 31 MB, of which four test files
are deliberately not UTF-8; they are skipped and counted.

Each line of the corpus is ``{"text": <file contents>, "path": <path relative to the root>}``;
a manifest beside it (``corpus.jsonl`` → ``corpus.manifest.json``) records the file count,
bytes, skipped files and the content hash (:mod:`hydraulis.data.fingerprint`), which equals the
hash :func:`hydraulis.data.corpus.load_corpus` computes when it reads the corpus back.
"""

from __future__ import annotations

import json
import platform
import sysconfig
from pathlib import Path

from hydraulis.artifacts.corpus_manifest import write_corpus_manifest
from hydraulis.base.errors import require
from hydraulis.base.files import atomic_write
from hydraulis.data.sources import CorpusManifest, collect_sources

STDLIB_PATTERN = "**/*.py"
STDLIB_EXCLUDED_DIRS = ("site-packages", "dist-packages", "__pycache__")
TEXT_FIELD = "text"


def stdlib_root() -> Path:
    """The running interpreter's standard-library directory."""
    return Path(sysconfig.get_paths()["stdlib"])


def manifest_path(corpus: str | Path) -> Path:
    """``corpus.jsonl`` → ``corpus.manifest.json``."""
    return Path(corpus).with_suffix(".manifest.json")


def build_stdlib_corpus(output: str | Path, root: str | Path | None = None, *, created: str,
                        tool_version: str, command: str = "") -> CorpusManifest:
    """Collect the standard library under ``root`` (default: the running interpreter's) into
    the JSONL file ``output`` and write its manifest beside it."""
    output = Path(output)
    require(not output.is_dir(), "output", str(output), "is a directory; give a .jsonl file name")
    sources = collect_sources(stdlib_root() if root is None else root, STDLIB_PATTERN, STDLIB_EXCLUDED_DIRS)
    with atomic_write(output) as handle:
        for path, text in zip(sources.paths, sources.texts):
            handle.write(json.dumps({TEXT_FIELD: text, "path": path}, ensure_ascii=False) + "\n")
    manifest = CorpusManifest(
        root=str(sources.root), pattern=sources.pattern, excluded_dirs=sources.excluded_dirs,
        python=platform.python_version(), files=sources.files, bytes=sources.bytes,
        skipped_undecodable=sources.skipped, content_hash=sources.content_hash, text_field=TEXT_FIELD,
        created=created, tool_version=tool_version, command=command,
    )
    write_corpus_manifest(manifest_path(output), manifest)
    return manifest

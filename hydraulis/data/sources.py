"""A directory of source files as documents: one file, one document.

Files are matched by a glob pattern relative to the root, taken in sorted order of their
relative POSIX paths (so the order, and the content hash, do not depend on the file system),
and decoded as strict UTF-8. A file that cannot be read or decoded is skipped and counted, not
fatal: real source trees hold a few deliberately mis-encoded files (CPython's test suite has
four). Empty files are kept as empty documents; the tokenizer stage skips them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from hydraulis.base.errors import HydraulisError, require
from hydraulis.data.fingerprint import ContentHash

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceCollection:
    """The decodable files under ``root`` matching ``pattern`` outside ``excluded_dirs``."""

    root: Path
    pattern: str
    excluded_dirs: tuple[str, ...]
    paths: tuple[str, ...]
    texts: tuple[str, ...]
    bytes: int
    skipped: tuple[str, ...]
    content_hash: str

    @property
    def files(self) -> int:
        return len(self.paths)


def collect_sources(root: str | Path, pattern: str = "**/*", excluded_dirs: tuple[str, ...] = ()) -> SourceCollection:
    """Read every file under ``root`` matching ``pattern`` whose relative path has no component
    in ``excluded_dirs``; undecodable or unreadable files go to ``skipped``."""
    root = Path(root)
    require(root.is_dir(), "corpus", str(root), "does not exist or is not a directory")
    require(bool(pattern) and not Path(pattern).is_absolute(), "pattern", pattern,
            "must be a glob relative to the directory, e.g. **/*.py")
    candidates = sorted(
        (path.relative_to(root).as_posix(), path)
        for path in root.glob(pattern)
        if path.is_file() and not set(path.relative_to(root).parts[:-1]) & set(excluded_dirs)
    )
    paths, texts, skipped, digest, size = [], [], [], ContentHash(), 0
    for relative, path in candidates:
        try:
            data = path.read_bytes()
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            log.info("skipping %s: %s", relative, error)
            skipped.append(relative)
            continue
        paths.append(relative)
        texts.append(text)
        digest.add(data)
        size += len(data)
    if not paths:
        raise HydraulisError("corpus", str(root), f"holds no readable UTF-8 files matching {pattern!r}"
                             + (f" ({len(skipped)} undecodable skipped)" if skipped else ""))
    return SourceCollection(root, pattern, tuple(excluded_dirs), tuple(paths), tuple(texts), size,
                            tuple(skipped), digest.hexdigest())


@dataclass(frozen=True)
class CorpusManifest:
    """What a built corpus holds and where it came from."""

    root: str
    pattern: str
    excluded_dirs: tuple[str, ...]
    python: str
    files: int
    bytes: int
    skipped_undecodable: tuple[str, ...]
    content_hash: str
    text_field: str
    created: str
    tool_version: str
    command: str = ""

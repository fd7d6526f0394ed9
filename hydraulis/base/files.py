"""Every output file written atomically: a reader sees the old file or the whole new one, never
half of either.

Recipe (:func:`atomic_path`): the writer fills a temporary file in the target's own folder
(same file system, so the rename cannot copy), its data is flushed to disk (``fsync``), it is
renamed over the target (``os.replace``: atomic on POSIX) and the folder's entry is flushed
too. A failure at any point — a full disk, a kill between open and rename, an exception in the
writer — leaves the previous file untouched; the temporary file is removed where the process
lives to do so (a killed process leaves a hidden ``.tmp…`` file beside the target, never a
half-written target). Errors name the target path.

Worked example: ``write_text_atomically(Path("p/proposal.json"), text)`` writes
``p/.tmp4711-3fa2.proposal.json``, fsyncs it, renames it to ``p/proposal.json`` and fsyncs
``p``; the temporary name keeps the target's suffix, so writers that infer a format from it
(``savefig``, ``np.save``) behave as on the target.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from hydraulis.base.errors import HydraulisError


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer to fill; on leaving the block without an
    error it becomes ``path`` (module docstring), else it is removed and ``path`` is untouched."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise _failed(path, error) from None
    temporary = path.with_name(f".tmp{os.getpid()}-{secrets.token_hex(2)}.{path.name}")
    try:
        yield temporary
        fsync(temporary)
        os.replace(temporary, path)
        fsync_folder(path.parent)
    except OSError as error:
        raise _failed(path, error) from None
    finally:
        temporary.unlink(missing_ok=True)


@contextmanager
def atomic_write(path: str | Path, binary: bool = False) -> Iterator[IO]:
    """An open handle (text in UTF-8, or ``binary``) on a temporary file that becomes ``path``
    when the block ends without an error (:func:`atomic_path`)."""
    with atomic_path(path) as temporary:
        mode = "wb" if binary else "w"
        with open(temporary, mode, **({} if binary else {"encoding": "utf-8", "newline": ""})) as handle:
            yield handle


def write_text_atomically(path: str | Path, text: str) -> None:
    """``path`` holds exactly ``text`` (UTF-8) afterwards, or its old content after an error."""
    with atomic_write(path) as handle:
        handle.write(text)


def write_bytes_atomically(path: str | Path, data: bytes) -> None:
    """``path`` holds exactly ``data`` afterwards, or its old content after an error."""
    with atomic_write(path, binary=True) as handle:
        handle.write(data)


def file_digest(path: str | Path, chunk: int = 1 << 20) -> tuple[int, str]:
    """``(bytes, SHA-256 hex digest)`` of the file at ``path``, read ``chunk`` bytes at a time."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


def fsync(path: str | Path) -> None:
    """Flush ``path``'s data to disk."""
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def fsync_folder(folder: str | Path) -> None:
    """Flush ``folder``'s entries (a rename inside it) to disk."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _failed(path: Path, error: OSError) -> HydraulisError:
    return HydraulisError("output", str(path), f"could not be written ({error.strerror or error}); "
                                               f"any previous file there is intact")

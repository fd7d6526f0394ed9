"""Output directories presented whole: a reader finds the previous complete result or the new
complete one, never a mix (what :mod:`hydraulis.base.files` does for one file, for a folder of them).

Every directory a command writes ends with the marker :data:`MARKER`, a JSON list of the files
that run wrote; a directory without it is not a complete result.

* :func:`staged_directory` (``simulate -o``): the command writes into a sibling staging folder;
  at the end the marker is added, the entries of the old directory that are not outputs of ours
  (not in its marker) are hard-linked in, and the staging folder is exchanged with the old one
  in one step (Linux ``renameat2(RENAME_EXCHANGE)``; elsewhere two renames, the old directory
  moved aside for an instant). A kill at any point leaves the old directory as it was (and a
  hidden ``.tmp…`` folder beside it, as :mod:`hydraulis.base.files` leaves a file). A
  non-empty directory without a marker is not ours to replace: it is written in place instead.
* :func:`marked_directory`, or :func:`unmark` then :func:`mark` (``train --output-dir``, which
  may also hold checkpoints written while the job runs): written in place, the marker removed
  first and written last, so a directory left by a failed or killed run carries none.

Worked example: ``simulate -o out`` over an ``out`` of an earlier run plus a user's
``notes.txt``: the new files go to ``.tmp4711-3fa2.out``; ``notes.txt`` is linked in; the two
folders are exchanged and the old one removed.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import secrets
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hydraulis.base.errors import HydraulisError
from hydraulis.base.files import fsync_folder, write_text_atomically

MARKER = ".hydraulis-complete.json"
"""The completion marker: ``{"files": [relative paths written by the run]}``."""
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


@contextmanager
def staged_directory(path: str | Path) -> Iterator[Path]:
    """A folder for the writer to fill that replaces ``path`` whole when the block ends without
    an error (module docstring); after an error ``path`` is untouched and the folder removed."""
    path = Path(path)
    if _foreign(path):
        with marked_directory(path) as folder:
            yield folder
        return
    stage = path.with_name(f".tmp{os.getpid()}-{secrets.token_hex(2)}.{path.name}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        stage.mkdir()
        yield stage
        _mark(stage, written(stage))
        _carry_over(path, stage)
        _swap(stage, path)
    except OSError as error:
        raise _failed(path, error) from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


@contextmanager
def marked_directory(path: str | Path) -> Iterator[Path]:
    """``path`` itself, its marker removed now and written, listing the files the block wrote
    (those changed since it began), when the block ends without an error."""
    state = unmark(path)
    yield Path(path)
    mark(path, state)


def unmark(path: str | Path) -> dict[str, int]:
    """Create ``path`` if needed and remove its marker: from now on it is not a complete result.
    The state of its files, for :func:`mark`."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        (path / MARKER).unlink(missing_ok=True)
        return {name: (path / name).stat().st_mtime_ns for name in written(path)}
    except OSError as error:
        raise _failed(path, error) from None


def mark(path: str | Path, state: dict[str, int]) -> None:
    """Mark ``path`` complete, listing the files written since :func:`unmark` returned ``state``."""
    path = Path(path)
    _mark(path, [name for name in written(path) if state.get(name) != (path / name).stat().st_mtime_ns])


def complete_files(path: str | Path) -> list[str] | None:
    """The files the marker of ``path`` lists, or None when it has no readable marker."""
    try:
        files = json.loads((Path(path) / MARKER).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return [str(name) for name in files] if isinstance(files, list) else None


def written(folder: Path) -> list[str]:
    """Every file under ``folder`` (relative paths, sorted), the marker and hidden temporaries aside."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def _foreign(path: Path) -> bool:
    """A non-empty directory without a marker: not a result of ours."""
    return path.is_dir() and any(path.iterdir()) and complete_files(path) is None


def _mark(folder: Path, files: list[str]) -> None:
    write_text_atomically(folder / MARKER, json.dumps({"files": files}, indent=1) + "\n")


def _carry_over(old: Path, stage: Path) -> None:
    """Hard-link into ``stage`` every entry of ``old`` that its marker does not list and the
    new run did not write (a user's own files stay with the directory)."""
    if not old.is_dir():
        return
    ours = set(complete_files(old) or ()) | {MARKER}
    for source in sorted(old.rglob("*")):
        name = source.relative_to(old)
        target = stage / name
        if str(name) in ours or target.exists() or source.is_dir():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        elif source.is_file():
            try:
                os.link(source, target)
            except OSError:  # a file system without hard links
                shutil.copy2(source, target)


def _swap(stage: Path, path: Path) -> None:
    """Put ``stage`` at ``path``; ``stage`` then holds the old directory (if there was one)."""
    if not path.exists() or (path.is_dir() and not any(path.iterdir())):
        os.replace(stage, path)
    elif not _exchange(stage, path):
        aside = path.with_name(f".old{os.getpid()}-{secrets.token_hex(2)}.{path.name}")
        os.rename(path, aside)
        os.rename(stage, path)
        os.rename(aside, stage)
    fsync_folder(path.parent)


def _exchange(first: Path, second: Path) -> bool:
    """Exchange two paths atomically (Linux ``renameat2``); False where it is not available."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(second))


def _failed(path: Path, error: OSError) -> HydraulisError:
    return HydraulisError("output", str(path), f"could not be written ({error.strerror or error}); any previous "
                                               f"complete directory there is intact")

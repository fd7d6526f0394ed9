"""Lengths files: one positive integer (a document's length in tokens) per line.

Every length lies within :data:`hydraulis.base.limits.LENGTH` and a file holds at most
:data:`hydraulis.base.limits.LENGTHS` of them; errors name the line (or index) and the value.

Accepted forms: ``.txt`` (blank lines and lines starting with ``#`` are skipped), ``.txt.gz``
(the same, gzip-compressed) and ``.npy`` (a one-dimensional integer array). The planner, the
dispatcher's CLI, the simulator and the data analysis all read and write them here.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from hydraulis.base.errors import HydraulisError
from hydraulis.base.files import atomic_path
from hydraulis.base.limits import LENGTH, LENGTHS


def read_lengths(path: str | Path) -> np.ndarray:
    """The lengths in ``path`` as an ``int64`` array; errors name the line and the value."""
    path = Path(path)
    if not path.is_file():
        raise HydraulisError("lengths", str(path), "does not exist or is not a file")
    if path.suffix == ".npy":
        lengths = _read_npy(path)
    else:
        lengths = _read_text(path)
    if lengths.size == 0:
        raise HydraulisError("lengths", str(path), "holds no lengths")
    if lengths.size > LENGTHS.maximum:
        raise HydraulisError("lengths", str(path), f"holds {lengths.size} lengths, more than "
                                                   f"{int(LENGTHS.maximum)} ({LENGTHS.what})")
    return lengths


def write_lengths(path: str | Path, lengths: np.ndarray) -> None:
    """Write ``lengths`` in the form the suffix names (``.npy``, ``.txt.gz`` or text)."""
    path = Path(path)
    values = np.asarray(lengths, dtype=np.int64)
    text = "".join(f"{v}\n" for v in values.tolist())
    with atomic_path(path) as temporary:
        if path.suffix == ".npy":
            np.save(temporary, values)
        elif path.suffix == ".gz":
            with gzip.open(temporary, "wt", encoding="utf-8") as handle:
                handle.write(text)
        else:
            temporary.write_text(text, encoding="utf-8")


def _read_npy(path: Path) -> np.ndarray:
    try:
        array = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as error:
        raise HydraulisError("lengths", str(path), f"is not a readable .npy array ({error})") from None
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise HydraulisError("lengths", str(path), f"must hold a 1-D integer array, not {array.dtype} {array.shape}")
    bad = np.flatnonzero((array < LENGTH.minimum) | (array > LENGTH.maximum))
    if bad.size:
        raise HydraulisError(f"lengths[{int(bad[0])}]", int(array[bad[0]]), f"must be {LENGTH.range_text} "
                                                                            f"({LENGTH.what})")
    return array.astype(np.int64)


def _read_text(path: Path) -> np.ndarray:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        else:
            lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError, EOFError) as error:
        raise HydraulisError("lengths", str(path), f"cannot be read as text ({error})") from None
    values = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            value = int(text)
        except ValueError:
            raise HydraulisError(f"{path.name}:{number}", text[:40], "is not an integer") from None
        problem = LENGTH.problem(value)
        if problem:
            raise HydraulisError(f"{path.name}:{number}", value, problem)
        values.append(value)
        if len(values) > LENGTHS.maximum:
            break
    return np.asarray(values, dtype=np.int64)

"""Samples files: the user's sample ids with their lengths, one step or several.

Accepted forms (the suffix decides):

* ``.jsonl`` — one sample a line, ``{"id": "doc-17", "length": 2048}``, with an optional
  ``"step": k`` (an integer ≥ 0; absent: step 0); ``id`` a string or an integer;
* ``.tsv`` or text whose lines hold tabs — ``id<TAB>length``, or ``step<TAB>id<TAB>length``
  (ids are strings); blank lines and lines starting with ``#`` are skipped;
* any lengths file (:mod:`hydraulis.artifacts.lengths`) — one step, ids the positions 0, 1, ….

Steps are returned in ascending step number, samples in file order. Errors name the line.
"""

from __future__ import annotations

import json
from pathlib import Path

from hydraulis.artifacts.lengths import read_lengths
from hydraulis.base.errors import HydraulisError, require
from hydraulis.base.limits import LENGTH, LENGTHS
from hydraulis.dispatch.assigned_steps import SampleId, Samples


def read_sample_steps(path: str | Path) -> tuple[Samples, ...]:
    """The steps of the samples file ``path`` (module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise HydraulisError("lengths", str(path), "does not exist or is not a file")
    if path.suffix not in (".jsonl", ".tsv") and (path.suffix in (".npy", ".gz") or "\t" not in _text(path)):
        lengths = read_lengths(path)
        return (Samples(tuple(range(lengths.size)), tuple(int(s) for s in lengths.tolist())),)
    rows = _jsonl(path) if path.suffix == ".jsonl" else _tabbed(path)
    require(bool(rows), "lengths", str(path), "holds no samples")
    require(len(rows) <= LENGTHS.maximum, "lengths", str(path), f"holds more than {int(LENGTHS.maximum)} samples")
    steps: dict[int, list[tuple[SampleId, int]]] = {}
    for step, sample, length in rows:
        steps.setdefault(step, []).append((sample, length))
    return tuple(Samples(tuple(i for i, _ in found), tuple(s for _, s in found))
                 for _, found in sorted(steps.items()))


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise HydraulisError("lengths", str(path), f"cannot be read as text ({error})") from None


def _length(value: object, where: str) -> int:
    try:
        length = int(value) if isinstance(value, str) else value
    except ValueError:
        raise HydraulisError(where, str(value)[:40], "is not an integer") from None
    require(isinstance(length, int) and not isinstance(length, bool), where, value, "is not an integer")
    problem = LENGTH.problem(length)
    require(not problem, where, length, problem or "")
    return length


def _step(value: object, where: str) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    require(isinstance(value, int) and not isinstance(value, bool) and value >= 0, where, value,
            "must be an integer >= 0")
    return value


def _jsonl(path: Path) -> list[tuple[int, SampleId, int]]:
    rows = []
    for number, line in enumerate(_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path.name}:{number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as error:
            raise HydraulisError(where, line[:40], f"is not JSON ({error.msg})") from None
        require(isinstance(item, dict) and {"id", "length"} <= item.keys(), where, line[:40],
                'must be an object with "id" and "length" (and optionally "step")')
        unknown = sorted(set(item) - {"id", "length", "step"})
        require(not unknown, where, unknown, 'are unknown keys: give "id", "length", "step"')
        rows.append((_step(item.get("step", 0), f"{where}.step"), item["id"], _length(item["length"], f"{where}.length")))
    return rows


def _tabbed(path: Path) -> list[tuple[int, SampleId, int]]:
    rows = []
    for number, line in enumerate(_text(path).splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        where = f"{path.name}:{number}"
        fields = line.rstrip("\n").split("\t")
        require(len(fields) in (2, 3), where, line[:40], "must be id<TAB>length or step<TAB>id<TAB>length")
        step = _step(fields[0], f"{where} step") if len(fields) == 3 else 0
        rows.append((step, fields[-2], _length(fields[-1], f"{where} length")))
    return rows

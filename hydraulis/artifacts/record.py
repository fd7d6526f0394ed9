"""Reading untrusted JSON with errors that name the field, the value and the limit.

``Record`` wraps one JSON object and knows its path (``schemes[3].a``), so every complaint
points at the exact place in the file. Values are checked for type here; ranges and relations
are checked by the core dataclasses, whose errors :func:`build` prefixes with the path.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from hydraulis.base.errors import HydraulisError
from hydraulis.base.files import write_text_atomically

T = TypeVar("T")
E = TypeVar("E", bound=Enum)
_MISSING = object()


class Record:
    """One JSON object at ``path``."""

    def __init__(self, data: Any, path: str = "") -> None:
        if not isinstance(data, dict):
            raise HydraulisError(path or "document", _short(data), "must be a JSON object")
        self.data = data
        self.path = path

    def _where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        if key not in self.data:
            if default is _MISSING:
                raise HydraulisError(self._where(key), None, "is missing")
            return default
        return self.data[key]

    def int(self, key: str, default: Any = _MISSING) -> int:
        return _integer(self.raw(key, default), self._where(key))

    def float(self, key: str, default: Any = _MISSING) -> float:
        return _number(self.raw(key, default), self._where(key))

    def bool(self, key: str, default: Any = _MISSING) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            raise HydraulisError(self._where(key), _short(value), "must be true or false")
        return value

    def str(self, key: str, default: Any = _MISSING) -> str:
        value = self.raw(key, default)
        if not isinstance(value, str):
            raise HydraulisError(self._where(key), _short(value), "must be a string")
        return value

    def enum(self, key: str, kind: type[E], default: Any = _MISSING) -> E:
        """The string at ``key`` as a member of the string enum ``kind``."""
        value = self.str(key, default.value if isinstance(default, Enum) else default)
        try:
            return kind(value)
        except ValueError:
            raise HydraulisError(self._where(key), value,
                                 f"must be one of {', '.join(m.value for m in kind)}") from None

    def ints(self, key: str, default: Any = _MISSING) -> tuple[int, ...]:
        values = self.raw(key, default)
        if not isinstance(values, list):
            raise HydraulisError(self._where(key), _short(values), "must be a list of integers")
        if set(map(type, values)) <= {int}:
            return tuple(values)
        return tuple(_integer(v, f"{self._where(key)}[{i}]") for i, v in enumerate(values))

    def int_lists(self, key: str, default: Any = _MISSING) -> tuple[tuple[int, ...], ...]:
        """A list of lists of integers; an error names the entry, e.g. ``ranks[3].micro_batches[0][2]``."""
        values, where = self.raw(key, default), self._where(key)
        if not isinstance(values, list):
            raise HydraulisError(where, _short(values), "must be a list of lists of integers")
        for j, inner in enumerate(values):
            if not isinstance(inner, list):
                raise HydraulisError(f"{where}[{j}]", _short(inner), "must be a list of integers")
        return tuple(tuple(_integer(v, f"{where}[{j}][{k}]") for k, v in enumerate(inner))
                     for j, inner in enumerate(values))

    def floats(self, key: str, default: Any = _MISSING) -> tuple[float, ...]:
        values = self.raw(key, default)
        if not isinstance(values, list):
            raise HydraulisError(self._where(key), _short(values), "must be a list of numbers")
        return tuple(_number(v, f"{self._where(key)}[{i}]") for i, v in enumerate(values))

    def strs(self, key: str, default: Any = _MISSING) -> tuple[str, ...]:
        values = self.raw(key, default)
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise HydraulisError(self._where(key), _short(values), "must be a list of strings")
        return tuple(values)

    def sub(self, key: str) -> Record:
        return Record(self.raw(key), self._where(key))

    def optional_sub(self, key: str) -> Record | None:
        value = self.raw(key, None)
        return None if value is None else Record(value, self._where(key))

    def records(self, key: str) -> list[Record]:
        values = self.raw(key)
        if not isinstance(values, list):
            raise HydraulisError(self._where(key), _short(values), "must be a list")
        return [Record(v, f"{self._where(key)}[{i}]") for i, v in enumerate(values)]


def build(path: str, factory: Callable[..., T], **fields: Any) -> T:
    """``factory(**fields)``, with a core-type error's field prefixed by ``path``."""
    try:
        return factory(**fields)
    except HydraulisError as error:
        if not path:
            raise
        field = error.field.split(".")[-1]
        raise HydraulisError(f"{path}.{field}", error.value, error.problem) from None


def check_header(record: Record, kind: str, versions: tuple[int, ...]) -> None:
    """Check ``kind`` and ``schema_version`` of an artifact."""
    found = record.str("kind", kind)
    if found != kind:
        raise HydraulisError("kind", found, f"is not a {kind} artifact")
    version = record.int("schema_version")
    if version not in versions:
        raise HydraulisError("schema_version", version, f"is not supported (supported: {list(versions)})")


def read_json(path: str | Path) -> Any:
    """Parse a JSON file; a missing file or malformed JSON becomes a :class:`HydraulisError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HydraulisError("path", str(path), "does not exist") from None
    except IsADirectoryError:
        raise HydraulisError("path", str(path), "is a directory, not a JSON file") from None
    except UnicodeDecodeError as error:
        raise HydraulisError("path", str(path), f"is not UTF-8 text ({error.reason})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise HydraulisError("path", str(path), f"is not valid JSON: {error.msg} at line {error.lineno} "
                             f"column {error.colno}") from None


def write_json(path: str | Path, document: dict) -> None:
    """Write ``document`` as indented JSON, creating parent folders; atomically
    (:mod:`hydraulis.base.files`): after an error the previous file is intact."""
    write_text_atomically(path, json.dumps(document, indent=2) + "\n")


def timestamp() -> str:
    """Now, UTC, ISO 8601 to the second: the ``created`` of provenance records."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def _integer(value: Any, where: str) -> int:
    """``value`` as an integer (a float that is one included), else an error naming ``where``."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise HydraulisError(where, _short(value), "must be an integer")
    return value


def _number(value: Any, where: str) -> float:
    """``value`` as a float (an integer included), else an error naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise HydraulisError(where, _short(value), "must be a number")
    return float(value)


def _short(value: Any) -> Any:
    text = repr(value)
    return value if len(text) <= 60 else text[:57] + "..."

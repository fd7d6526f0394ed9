"""The project's one exception type for bad input.

Every check on user input raises :class:`HydraulisError` whose message names the field, the
value and the limit it broke, e.g. ``scheme.tp: 3 does not divide model.heads = 32``. The CLI
prints that one line and exits with status 2; the HTTP service answers 422 with it.
"""

from __future__ import annotations

from typing import Any


class HydraulisError(ValueError):
    """Bad input: ``field`` names where, ``value`` what was given, the message why."""

    def __init__(self, field: str, value: Any, problem: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        super().__init__(f"{field}: {value!r} {problem}")


def require(condition: bool, field: str, value: Any, problem: str) -> None:
    """Raise :class:`HydraulisError` unless ``condition`` holds."""
    if not condition:
        raise HydraulisError(field, value, problem)


def require_int(value: Any, field: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """Check that ``value`` is an integer (not a bool) within ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise HydraulisError(field, value, "must be an integer")
    if minimum is not None and value < minimum:
        raise HydraulisError(field, value, f"must be >= {minimum}")
    if maximum is not None and value > maximum:
        raise HydraulisError(field, value, f"must be <= {maximum}")
    return value


def require_number(value: Any, field: str, minimum: float | None = None, maximum: float | None = None) -> float:
    """Check that ``value`` is a finite real number within ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise HydraulisError(field, value, "must be a number")
    if value != value or value in (float("inf"), float("-inf")):
        raise HydraulisError(field, value, "must be finite")
    if minimum is not None and value < minimum:
        raise HydraulisError(field, value, f"must be >= {minimum}")
    if maximum is not None and value > maximum:
        raise HydraulisError(field, value, f"must be <= {maximum}")
    return float(value)


def require_http_url(value: Any, field: str) -> str:
    """Check that ``value`` is an ``http://`` or ``https://`` URL."""
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise HydraulisError(field, value, "must start with http:// or https://")
    return value

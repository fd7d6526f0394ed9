"""Two scheme spaces side by side: how differently they time the same micro-batches.

For every scheme in both spaces and every length ``s`` the relative difference of the
predicted time of a micro-batch holding one sequence of ``s`` tokens::

    δ(s) = (t_B(s) − t_A(s)) / t_A(s),      t(s) = c + a·s² + b·s

Worked example: A has ``(a, b, c) = (0, 0.1, 10)``, B ``(0, 0.1, 20)``; at ``s = 100``
``t_A = 20``, ``t_B = 30``, ``δ = +50 %``; at ``s = 1000`` ``δ = +9.1 %``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hydraulis.base.errors import require, require_int
from hydraulis.base.types import Scheme, SchemeSpace


@dataclass(frozen=True)
class SchemeComparison:
    """One scheme: ``t_A``, ``t_B`` and ``δ`` per length."""

    scheme: Scheme
    lengths: tuple[int, ...]
    time_a_ms: tuple[float, ...]
    time_b_ms: tuple[float, ...]

    @property
    def relative_differences(self) -> tuple[float, ...]:
        return tuple((b - a) / a if a > 0 else float("inf") for a, b in zip(self.time_a_ms, self.time_b_ms))


@dataclass(frozen=True)
class SpaceComparison:
    """The schemes of both spaces compared, and those only one space has."""

    common: tuple[SchemeComparison, ...]
    only_a: tuple[Scheme, ...]
    only_b: tuple[Scheme, ...]


def compare_spaces(space_a: SchemeSpace, space_b: SchemeSpace, lengths: Sequence[int]) -> SpaceComparison:
    """δ(s) of the module docstring for the schemes both spaces hold."""
    require(len(lengths) > 0, "lengths", list(lengths), "must list at least one length")
    for length in lengths:
        require_int(length, "lengths", minimum=1)
    schemes_a = {p.scheme for p in space_a.profiles}
    schemes_b = {p.scheme for p in space_b.profiles}
    common = sorted(schemes_a & schemes_b)
    require(bool(common), "schemes", [str(s) for s in sorted(schemes_a)],
            f"has none in common with the other space's {[str(s) for s in sorted(schemes_b)]}")
    lengths = tuple(lengths)
    rows = tuple(
        SchemeComparison(
            scheme, lengths,
            tuple(space_a.profile(scheme).time.microbatch_ms([s]) for s in lengths),
            tuple(space_b.profile(scheme).time.microbatch_ms([s]) for s in lengths),
        )
        for scheme in common
    )
    return SpaceComparison(rows, tuple(sorted(schemes_a - schemes_b)), tuple(sorted(schemes_b - schemes_a)))

"""The one bisection: the threshold of a monotone predicate, bracketed.

``feasible`` is False below some threshold ``x*`` and True from it on (a makespan long enough, a
hand-off slow enough). From ``lo`` infeasible and ``hi`` feasible — or, without ``hi``, doubling
``lo`` until a double is feasible, each infeasible one becoming the new ``lo`` — each halving
keeps the half whose ends still disagree, so after ``k`` halvings ``hi − lo`` is the starting
bracket's ``2^−k``: ``lo`` is a lower bound of ``x*``, ``hi`` a feasible value. Worked example:
``x* = 3``, ``lo = 1``, no ``hi``: 2 is infeasible, 4 feasible; ``[2, 4] → [2, 3] → [2.5, 3]``
after two halvings.
"""

from __future__ import annotations

from collections.abc import Callable


def threshold_bracket(feasible: Callable[[float], bool], lo: float, hi: float | None = None,
                      halvings: int = 40) -> tuple[float, float]:
    """``(lo, hi)`` around the threshold of ``feasible`` (module docstring); ``lo`` must be
    infeasible (and > 0 when ``hi`` is None), ``hi`` feasible."""
    if hi is None:
        hi = 2.0 * lo
        while not feasible(hi):
            lo, hi = hi, 2.0 * hi
    for _ in range(halvings):
        middle = 0.5 * (lo + hi)
        if feasible(middle):
            hi = middle
        else:
            lo = middle
    return lo, hi

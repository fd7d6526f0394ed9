"""How much of a step's reduction ran while a backward was computing, from recorded intervals.

Each rank's reduction is in flight over the union ``U_r`` of its buckets' intervals (issued →
complete); the step's backwards over the union ``B`` of every rank's backward operations (one
clock: the ranks' origins shifted onto the host's monotonic clock). Then

    in flight = Σ_r |U_r|,   hidden = Σ_r |U_r ∩ B|,   reduction_hidden_fraction = hidden / in flight

(summed over the steps of a run for its summary). Worked example: a rank whose two buckets fly
over [10, 14] and [12, 20] ms while backwards ran over [0, 11] and [15, 16]: ``U = [10, 20]``,
10 ms in flight, of which [10, 11] and [15, 16] are hidden, 2 ms — a fraction of 0.2.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Interval = tuple[float, float]


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Disjoint, sorted intervals covering the same points as ``intervals``."""
    merged: list[list[float]] = []
    for start, end in sorted((a, b) for a, b in intervals if b > a):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def length(intervals: Iterable[Interval]) -> float:
    """The measure of the union of ``intervals``."""
    return sum(b - a for a, b in union(intervals))


def covered(intervals: Iterable[Interval], cover: Sequence[Interval]) -> float:
    """The measure of ``union(intervals) ∩ union(cover)``."""
    cover = union(cover)
    total = 0.0
    for a, b in union(intervals):
        total += sum(max(0.0, min(b, d) - max(a, c)) for c, d in cover)
    return total


def reduction_overlap(reductions: Sequence[Sequence[Interval]], backwards: Iterable[Interval]) -> tuple[float, float]:
    """``(in flight, hidden)`` of the module docstring: ``reductions[r]`` rank ``r``'s bucket
    intervals, ``backwards`` every rank's backward operations."""
    cover = union(backwards)
    return sum(length(r) for r in reductions), sum(covered(r, cover) for r in reductions)

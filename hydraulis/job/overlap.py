"""How much of a step's reduction ran while the same rank's backward was computing, from
recorded intervals.

Rank ``r``'s reduction is in flight over the union ``U_r`` of its buckets' intervals (issued →
complete, waits for slower peers included); its own backward operations cover the union
``B_r``. Only a rank's own compute can hide its reduction — while it waits for a bucket after
its backward is done, another rank still computing hides nothing for it — so

    in flight = Σ_r |U_r|,   hidden = Σ_r |U_r ∩ B_r|,   reduction_hidden_fraction = hidden / in flight

(summed over the steps of a run for its summary). A rank that issues every bucket after its
last backward (the overlap off) hides nothing: the fraction is 0. Worked example: rank 0's two
buckets fly over [10, 14] and [12, 20] ms while its backwards ran over [0, 11] and [15, 16]:
``U_0 = [10, 20]``, 10 ms in flight, of which [10, 11] and [15, 16] are hidden, 2 ms; rank 1's
bucket flies over [30, 40] after its backwards over [0, 30]: 10 ms, none hidden — 2 / 20 = 0.1.
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


def rank_overlap(buckets: Iterable[Interval], backwards: Iterable[Interval]) -> tuple[float, float]:
    """``(|U_r|, |U_r ∩ B_r|)`` of one rank (module docstring): ``buckets`` its buckets'
    intervals, ``backwards`` its own backward operations, on one clock."""
    buckets = list(buckets)
    return length(buckets), covered(buckets, list(backwards))

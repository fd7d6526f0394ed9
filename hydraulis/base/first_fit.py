"""First-fit packing of sizes into bins of one capacity, ``O(log n)`` a run of sizes over a tree
of rooms: the dispatcher's packings (:mod:`hydraulis.dispatch.packing`) and the planner's judge
(:mod:`hydraulis.planner.evaluate`) share it."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import accumulate

MANY_BINS = 16
"""From this many expected micro-batches on, first-fit searches a tree of rooms."""


def first_fit_tree(sizes: list[int], capacity: int) -> list[list[int]]:
    """First-fit of ``sizes`` (sorted descending) over a max-tree of rooms: leaf ``j`` is
    micro-batch ``j``, an unopened one has the whole ``capacity``, so the leftmost leaf with
    room is the first micro-batch that fits or, when none does, the next to open (micro-batches
    open in index order, as in the linear scan). First-fit leaves at most one micro-batch half
    empty, so it opens at most ``2·⌈Σs/C⌉ + 1`` besides one per piece longer than ``C``: that
    many leaves.

    **Runs.** Where piece ``k`` goes to micro-batch ``j``, the pieces after it go there too while
    they are longer than every room left of ``j`` (``R``, a query on the tree) and fit together:
    pieces ``k … e−1`` with ``s_{e−1} > R`` and ``Σ_{k ≤ i < e} s_i ≤ room_j`` — each is then the
    leftmost fit, as the scan would find piece by piece. Both ends come from bisections (the sizes
    descend; their prefix sums ascend), so a run of short pieces costs ``O(log n)``. Worked
    example: ``C = 10``, sizes ``(6, 5, 2, 2, 2, 1)``: 6 opens micro-batch 0 (room 4); 5 opens 1
    (room 5); 2 goes to 0, nothing left of it, and the next 2 with it (``2 + 2 ≤ 4``); the last 2
    goes to 1 with ``R`` = 0, and the 1 with it (``2 + 1 ≤ 5``): ``[[0, 2, 3], [1, 4, 5]]``."""
    oversize = sum(1 for s in sizes if s > capacity)
    most = min(len(sizes), 2 * -(-sum(sizes) // capacity) + 1 + oversize)
    leaves = 1
    while leaves < most:
        leaves *= 2
    tree = [capacity] * (2 * leaves)
    descending = [-s for s in sizes]
    prefix = [0, *accumulate(sizes)]
    bins: list[list[int]] = []
    k, n = 0, len(sizes)
    while k < n:
        s = sizes[k]
        if tree[1] >= s:
            node = 1
            while node < leaves:
                node = 2 * node if tree[2 * node] >= s else 2 * node + 1
        else:
            node = leaves + len(bins)
        j = node - leaves
        if j == len(bins):
            bins.append([])
        room = tree[node]
        end = k + 1
        if end < n and sizes[end] <= room - s:
            left = _room_before(tree, leaves, j)
            end = min(bisect_left(descending, -left, end), bisect_right(prefix, prefix[k] + room, end) - 1)
        bins[j].extend(range(k, end))
        tree[node] = room - (prefix[end] - prefix[k])
        k = end
        node //= 2
        while node:
            left, right = tree[2 * node], tree[2 * node + 1]
            room = left if left > right else right
            if tree[node] == room:
                break
            tree[node] = room
            node //= 2
    return bins


def _room_before(tree: list[int], leaves: int, j: int) -> int:
    """The most room among leaves ``0 … j−1`` (−1 when ``j = 0``)."""
    best, lo, hi = -1, leaves, leaves + j
    while lo < hi:
        if lo & 1:
            if tree[lo] > best:
                best = tree[lo]
            lo += 1
        if hi & 1:
            hi -= 1
            if tree[hi] > best:
                best = tree[hi]
        lo //= 2
        hi //= 2
    return best

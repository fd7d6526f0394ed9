"""First-fit packing of sizes into bins of one capacity, ``O(log n)`` a piece over a tree of
rooms, compiled (numba): the dispatcher's packings (:mod:`hydraulis.dispatch.packing`) and the
planner's judge (:mod:`hydraulis.planner.evaluate`) share it."""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

MANY_BINS = 16
"""From this many expected micro-batches on, first-fit searches a tree of rooms."""


def first_fit_tree(sizes: Sequence[int] | np.ndarray, capacity: int) -> list[list[int]]:
    """First-fit of ``sizes`` (sorted descending): the positions in each bin, bins in opening
    order (:func:`first_fit_bins`). Worked example: ``C = 10``, sizes ``(6, 5, 2, 2, 2, 1)``:
    6 opens bin 0 (room 4), 5 opens bin 1 (room 5), the 2s go to 0, 0 and 1, the 1 to 1:
    ``[[0, 2, 3], [1, 4, 5]]``."""
    bins = first_fit_bins(np.asarray(sizes, dtype=np.int64), int(capacity))
    order = np.argsort(bins, kind="stable").tolist()
    ends = np.cumsum(np.bincount(bins)).tolist()
    return [order[start:end] for start, end in zip([0, *ends], ends)]


@numba.njit(cache=True)
def first_fit_bins(sizes, capacity):
    """The bin of every size (sorted descending), first-fit over a max-tree of rooms: leaf ``j``
    is bin ``j``, an unopened one has the whole ``capacity``, so the leftmost leaf with room is
    the first bin that fits or, when none does, the next to open (bins open in index order, as
    in the linear scan); a size above ``capacity`` gets a bin of its own. First-fit leaves at
    most one bin half empty, so it opens at most ``2·⌈Σs/C⌉ + 1`` besides one per oversize
    piece: that many leaves."""
    n = sizes.size
    total, oversize = 0, 0
    for k in range(n):
        total += sizes[k]
        if sizes[k] > capacity:
            oversize += 1
    most = min(n, 2 * ((total + capacity - 1) // capacity) + 1 + oversize)
    leaves = 1
    while leaves < most:
        leaves *= 2
    tree = np.full(2 * leaves, capacity, dtype=np.int64)
    bins = np.empty(n, dtype=np.int64)
    opened = 0
    for k in range(n):
        s = sizes[k]
        if tree[1] >= s:
            node = 1
            while node < leaves:
                node = 2 * node if tree[2 * node] >= s else 2 * node + 1
        else:
            node = leaves + opened
        j = node - leaves
        if j == opened:
            opened += 1
        bins[k] = j
        tree[node] -= s
        node //= 2
        while node > 0:
            left, right = tree[2 * node], tree[2 * node + 1]
            room = left if left > right else right
            if tree[node] == room:
                break
            tree[node] = room
            node //= 2
    return bins

"""First-fit packing of sizes into bins of one capacity, ``O(log n)`` a size over a tree of
rooms: the dispatcher's packings (:mod:`hydraulis.dispatch.packing`) and the planner's judge
(:mod:`hydraulis.planner.evaluate`) share it."""

from __future__ import annotations

MANY_BINS = 16
"""From this many expected micro-batches on, first-fit searches a tree of rooms."""


def first_fit_tree(sizes: list[int], capacity: int) -> list[list[int]]:
    """First-fit over a max-tree of rooms, ``O(log n)`` a piece: leaf ``j`` is micro-batch ``j``,
    an unopened one has the whole ``capacity``, so the leftmost leaf with room is the first
    micro-batch that fits or, when none does, the next to open (micro-batches open in index
    order, as in the linear scan). First-fit leaves at most one micro-batch half empty, so it
    opens at most ``2·⌈Σs/C⌉ + 1`` besides one per piece longer than ``C``: that many leaves."""
    oversize = sum(1 for s in sizes if s > capacity)
    most = min(len(sizes), 2 * -(-sum(sizes) // capacity) + 1 + oversize)
    leaves = 1
    while leaves < most:
        leaves *= 2
    tree = [capacity] * (2 * leaves)
    bins: list[list[int]] = []
    for k, s in enumerate(sizes):
        if tree[1] >= s:
            node = 1
            while node < leaves:
                node = 2 * node if tree[2 * node] >= s else 2 * node + 1
        else:
            node = leaves + len(bins)
        j = node - leaves
        if j == len(bins):
            bins.append([])
        bins[j].append(k)
        tree[node] -= s
        node //= 2
        while node:
            left, right = tree[2 * node], tree[2 * node + 1]
            room = max(left, right)
            if tree[node] == room:
                break
            tree[node] = room
            node //= 2
    return bins

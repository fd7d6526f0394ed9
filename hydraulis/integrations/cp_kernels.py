"""The two inner loops of :mod:`~hydraulis.integrations.cp_plan`, compiled with numba.

Both take the step's tables ``ms[j, i] = t_j(s_i)`` and ``fits[j, i]`` (option ``j``, sample
``i``) and return plain arrays; the arithmetic is IEEE in the order written, so a plan is the
same float for float as the loop in Python would give.

* :func:`deal` — samples in the given order, each to the block that would finish it first among
  the blocks of the options holding it (the least-loaded block of each option; ties to the
  narrower option, then the lower block). Worked example: two single ranks and one pair
  (counts ``(2, 1)``), samples of 30, 20 and 20 ms on one rank (18, 12, 12 ms on two): the 30 goes
  to the pair (done at 18 < 30), each 20 to a single rank (20 < 18 + 12); makespan 20 ms.
* :func:`fill` — one group of the layered plan: the group's time ``T`` is the first sample's on
  its need; each sample in turn joins the fullest block of its need with room, else opens a
  block of its need on free ranks, else joins the fullest wider block with room, else waits.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def deal(ms, fits, order, counts, lo, last):
    """``(makespan, block)``: ``block[p]`` the block of sample ``order[p]``, blocks numbered widest
    option first (option ``lo + x`` has ``counts[x]`` blocks); makespan ∞ when a sample fits no
    block or, for the ``last`` group, a block is left empty."""
    options = counts.size
    first = np.zeros(options, dtype=np.int64)
    total = 0
    for x in range(options - 1, -1, -1):
        first[x] = total
        total += counts[x]
    load = np.zeros(total)
    used = np.zeros(total, dtype=np.bool_)
    block = np.full(order.size, -1, dtype=np.int64)
    for p in range(order.size):
        i = order[p]
        finish, chosen = np.inf, -1
        for x in range(options):
            if counts[x] == 0 or not fits[lo + x, i]:
                continue
            least = first[x]
            for b in range(first[x] + 1, first[x] + counts[x]):
                if load[b] < load[least]:
                    least = b
            if load[least] + ms[lo + x, i] < finish:
                finish, chosen = load[least] + ms[lo + x, i], least
        if chosen < 0:
            return np.inf, block
        load[chosen] = finish
        used[chosen] = True
        block[p] = chosen
    if last and not used.all():
        return np.inf, block
    return load.max(), block


@numba.njit(cache=True)
def fill(ms, fits, need, cp, n, pool):
    """``(T, block, size)``: ``block[p]`` the block sample ``pool[p]`` joins (−1: waits),
    ``size[b]`` block ``b``'s option, blocks in the order opened; ``T`` the group's time."""
    limit = ms[need[pool[0]], pool[0]]
    block = np.full(pool.size, -1, dtype=np.int64)
    size = np.empty(n, dtype=np.int64)
    load = np.empty(n)
    opened, free = 0, n
    for p in range(pool.size):
        i = pool[p]
        j = need[i]
        chosen = _fullest(ms, fits, size, load, opened, j, j + 1, i, limit)
        if chosen < 0 and free >= cp[j] and ms[j, i] <= limit:
            chosen = opened
            size[opened] = j
            load[opened] = 0.0
            opened += 1
            free -= cp[j]
        if chosen < 0:
            chosen = _fullest(ms, fits, size, load, opened, j + 1, cp.size, i, limit)
        if chosen >= 0:
            load[chosen] += ms[size[chosen], i]
            block[p] = chosen
    return load[:opened].max(), block, size[:opened].copy()


@numba.njit(cache=True)
def _fullest(ms, fits, size, load, opened, lo, hi, i, limit):
    """The open block of an option in ``[lo, hi)`` holding sample ``i`` with the least room left
    after it within ``limit`` (ties: the narrower option, then the later block), or −1."""
    chosen, least = -1, np.inf
    for j in range(lo, hi):
        if not fits[j, i]:
            continue
        room = limit - ms[j, i]
        found = -1
        for b in range(opened):
            if size[b] == j and load[b] <= room and (found < 0 or load[b] >= load[found]):
                found = b
        if found >= 0 and room - load[found] < least:
            chosen, least = found, room - load[found]
    return chosen

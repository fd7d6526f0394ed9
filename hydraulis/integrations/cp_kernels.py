"""The inner loops of :mod:`~hydraulis.integrations.cp_plan`, compiled with numba.

Each takes the step's tables ``ms[j, i] = t_j(s_i)`` and ``fits[j, i]`` (option ``j``, sample
``i``) and returns plain arrays; the arithmetic is IEEE in the order written, so a plan is the
same float for float as the loop in Python would give.

* :func:`deal` — samples in the given order, each to the block that would finish it first among
  the blocks of the options holding it (the least-loaded block of each option; ties to the
  narrower option, then the lower block). Worked example: two single ranks and one pair
  (counts ``(2, 1)``), samples of 30, 20 and 20 ms on one rank (18, 12, 12 ms on two): the 30 goes
  to the pair (done at 18 < 30), each 20 to a single rank (20 < 18 + 12); makespan 20 ms.
* :func:`group` — one group's blocks: counts from the demand, a short descent, :func:`deal`.
* :func:`backfill` — earlier groups' idle time filled with the last group's samples.
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


@numba.njit(cache=True)
def group(ms, fits, need, cp, n, samples, last, max_moves):
    """``(makespan, lo, counts, block)``: one group of ``samples`` (longest first) — every sample
    on one block of all ``n`` ranks when that is no slower than the fluid time, else blocks of
    options ``lo..`` in ``counts`` from the demand, improved by :func:`_descend`, the samples
    dealt by :func:`deal` (``block[p]`` the block of ``samples[p]``); makespan ∞ when no counts
    give every block of the ``last`` group a sample."""
    options = cp.size
    total, peak, widest, lo = 0.0, 0.0, 0, options
    for i in samples:
        j = need[i]
        total += cp[j] * ms[j, i]
        peak = max(peak, ms[j, i])
        widest, lo = max(widest, j), min(lo, j)
    whole = np.inf
    if cp[options - 1] == n:
        whole = 0.0
        for i in samples:
            whole += ms[options - 1, i]
    fluid = np.inf if cp[widest] == n else max(total / n, peak)
    if whole <= fluid:
        return whole, options - 1, np.ones(1, dtype=np.int64), np.zeros(samples.size, dtype=np.int64)
    hi = _widest_useful(ms, need, cp, n, samples, total / n, widest)
    counts = _descend(ms, fits, cp, samples, lo, last, _demand(ms, need, cp, n, samples, lo, hi), max_moves)
    makespan, block = deal(ms, fits, samples, counts, lo, last)
    if not np.isfinite(makespan):
        counts = np.zeros(options - lo, dtype=np.int64)
        counts[-1] = n // cp[options - 1]
        makespan, block = deal(ms, fits, samples, counts, lo, last)
    return makespan, lo, counts, block


@numba.njit(cache=True)
def _widest_useful(ms, need, cp, n, samples, level, widest):
    """The width ``k`` of the longest sample ``ℓ`` (from the widest need, below ``n``) least
    bounding the group: ``max(t_k(s_ℓ), L + (k·t_k(s_ℓ) − k_ℓ·t_{k_ℓ}(s_ℓ))/n)``, ``L`` the
    fluid level; a wider block runs ``ℓ`` sooner but costs more rank-time."""
    top = cp.size - 2 if cp[cp.size - 1] == n else cp.size - 1
    longest = samples[0]
    own = cp[need[longest]] * ms[need[longest], longest]
    best, chosen = np.inf, widest
    for j in range(widest, max(widest, top) + 1):
        bound = max(ms[j, longest], level + (cp[j] * ms[j, longest] - own) / n)
        if bound < best:
            best, chosen = bound, j
    return chosen


@numba.njit(cache=True)
def _demand(ms, need, cp, n, samples, lo, hi):
    """Counts of options ``lo..hi``: ``n_k = ⌈D_k/(k·T)⌉`` for the wider ones (``D_k`` the
    rank-time of the samples needing ``k``, the longest at ``hi``; ``T`` the fluid time), the
    rest of the ranks in the narrowest."""
    size = hi - lo + 1
    demand = np.zeros(size)
    peak = 0.0
    for p in range(samples.size):
        i = samples[p]
        j = max(need[i], lo)
        if p == 0:
            j = max(j, hi)
        demand[j - lo] += cp[j] * ms[j, i]
        peak = max(peak, ms[j, i])
    level = max(demand.sum() / n, peak)
    counts = np.zeros(size, dtype=np.int64)
    left = n
    for x in range(size - 1, 0, -1):
        k = cp[lo + x]
        counts[x] = min(int(np.ceil(demand[x] / (k * level))), left // k)
        left -= counts[x] * k
    counts[0] = left // cp[lo]
    return counts


@numba.njit(cache=True)
def _descend(ms, fits, cp, samples, lo, last, counts, max_moves):
    """Split one block into narrower ones, or merge narrower ones into one, while the dealt
    makespan falls: each round judges the neighbours not judged yet (narrowest options first,
    a split before a merge) and moves to the first best; at most ``max_moves + 1`` counts in all."""
    size = counts.size
    judged = np.empty((max_moves + 1, size), dtype=np.int64)
    judged[0] = counts
    seen = 1
    best = deal(ms, fits, samples, counts, lo, last)[0]
    while seen <= max_moves:
        budget = max_moves + 1 - seen
        taken, found, found_ms = 0, counts, np.inf
        for x in range(size - 1):
            ratio = cp[lo + x + 1] // cp[lo + x]
            for merge in range(2):
                if taken >= budget or (merge == 0 and counts[x + 1] == 0) or (merge == 1 and counts[x] < ratio):
                    continue
                step = counts.copy()
                step[x] += -ratio if merge else ratio
                step[x + 1] += 1 if merge else -1
                if _was_judged(judged, seen, step):
                    continue
                judged[seen] = step
                seen += 1
                taken += 1
                makespan = deal(ms, fits, samples, step, lo, last)[0]
                if makespan < found_ms:
                    found, found_ms = step, makespan
        if taken == 0 or found_ms >= best:
            break
        counts, best = found, found_ms
    return counts


@numba.njit(cache=True)
def _was_judged(judged, seen, step):
    for row in range(seen):
        if (judged[row] == step).all():
            return True
    return False


@numba.njit(cache=True)
def backfill(ms, fits, option, slack, pool):
    """``(taken, block)``: each block ``b`` in turn (option ``option[b]``, idle ``slack[b]`` ms)
    takes, while one fits, the longest sample of ``pool`` (ascending by length) that it holds
    within its idle time; ``taken`` lists the pool positions taken, in order, ``block`` their blocks."""
    alive = np.ones(pool.size, dtype=np.bool_)
    taken = np.empty(pool.size, dtype=np.int64)
    block = np.empty(pool.size, dtype=np.int64)
    count = 0
    for b in range(option.size):
        j, room = option[b], slack[b]
        while True:
            at = pool.size - 1
            while at >= 0 and (not alive[at] or ms[j, pool[at]] > room):
                at -= 1
            while at >= 0 and (not alive[at] or not fits[j, pool[at]]):
                at -= 1
            if at < 0:
                break
            room -= ms[j, pool[at]]
            alive[at] = False
            taken[count], block[count] = at, b
            count += 1
    return taken[:count], block[:count]

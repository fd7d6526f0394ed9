"""The compiled loops of the hybrid CP plan against the same rules written plainly in Python."""

import math

import numpy as np
import pytest

from hydraulis.integrations import cp_kernels
from hydraulis.integrations.cp_plan import _Step
from hydraulis.integrations.cp_ranks import cp_ranks
from tests.integrations.helpers import cp_space, long_tailed


def _deal_reference(ms, fits, order, counts, lo, last):
    sizes = [x for x in range(len(counts) - 1, -1, -1) for _ in range(counts[x])]
    load = [0.0] * len(sizes)
    block = []
    for i in order:
        best = None
        for x in range(len(counts)):
            members = [b for b, y in enumerate(sizes) if y == x]
            if not members or not fits[lo + x, i]:
                continue
            least = min(members, key=lambda b: (load[b], b))
            finish = load[least] + ms[lo + x, i]
            if best is None or finish < best[0]:
                best = (finish, least)
        if best is None:
            return math.inf, block
        load[best[1]] = best[0]
        block.append(best[1])
    if last and len(set(block)) < len(sizes):
        return math.inf, block
    return max(load), block


def _fill_reference(ms, fits, need, cp, n, pool):
    limit = ms[need[pool[0]], pool[0]]
    blocks: list[list] = []
    free, placed = n, []

    def fullest(options, i):
        found = [(limit - ms[j, i] - load, j, -b) for b, (j, load) in enumerate(blocks)
                 if j in options and fits[j, i] and load <= limit - ms[j, i]]
        return -min(found)[2] if found else -1

    for i in pool:
        j = need[i]
        b = fullest({j}, i)
        if b < 0 and free >= cp[j] and ms[j, i] <= limit:
            blocks.append([j, 0.0])
            free -= cp[j]
            b = len(blocks) - 1
        if b < 0:
            b = fullest(set(range(j + 1, len(cp))), i)
        if b >= 0:
            blocks[b][1] += ms[blocks[b][0], i]
        placed.append(b)
    return max(load for _, load in blocks), placed, [j for j, _ in blocks]


def _step(size, per_rank, longest, seed):
    lengths = long_tailed(size * 12, longest, seed)
    ranks = cp_ranks(cp_space(size), 8, size, per_rank)
    ranks.check_lengths(lengths)
    return _Step.of(ranks, lengths)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("last", [False, True])
def test_deal_is_the_plain_rule(seed, last):
    step = _step(16, 4_096, 30_000, seed)
    rng = np.random.default_rng(seed)
    order = np.argsort(-step.lengths, kind="stable")
    lo = int(step.need.min())
    counts = np.array([4, 2, 1, 1, 0][: step.cp.size - lo], dtype=np.int64)
    counts[rng.integers(counts.size)] += 1
    makespan, block = cp_kernels.deal(step.ms, step.fits, order, counts, lo, last)
    expected, reference = _deal_reference(step.ms, step.fits, order.tolist(), counts.tolist(), lo, last)
    assert makespan == expected
    if math.isfinite(expected):
        assert block.tolist() == reference


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("size, per_rank", [(8, 4_096), (16, 8_192), (64, 4_096)])
def test_fill_is_the_plain_rule(seed, size, per_rank):
    step = _step(size, per_rank, 30_000, seed)
    own = step.ms[step.need, np.arange(step.need.size)]
    pool = np.lexsort((-own, -step.need))
    ms, block, opened = cp_kernels.fill(step.ms, step.fits, step.need, step.cp, step.n, pool)
    expected, placed, sizes = _fill_reference(step.ms, step.fits, step.need, step.cp, step.n, pool.tolist())
    assert (ms, block.tolist(), opened.tolist()) == (expected, placed, sizes)
    assert ms == own[pool[0]]
    assert int(step.cp[opened].sum()) <= step.n


def test_the_worked_example_of_deal():
    ms = np.array([[30.0, 20.0, 20.0], [18.0, 12.0, 12.0]])
    makespan, block = cp_kernels.deal(ms, np.ones_like(ms, dtype=bool), np.arange(3), np.array([2, 1]), 0, True)
    assert makespan == 20.0 and block.tolist() == [0, 1, 2]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("size, per_rank", [(8, 4_096), (16, 8_192), (64, 4_096)])
@pytest.mark.parametrize("last", [False, True])
def test_a_group_places_every_sample_once_and_lasts_its_slowest_block(seed, size, per_rank, last):
    step = _step(size, per_rank, 30_000, seed)
    samples = np.argsort(-step.lengths, kind="stable")[seed::3]
    makespan, lo, counts, block = cp_kernels.group(step.ms, step.fits, step.need, step.cp, step.n, samples, last, 3)
    sizes = np.repeat(step.cp[lo:lo + counts.size][::-1], counts[::-1])
    assert int(sizes.sum()) <= step.n and block.size == samples.size
    option = np.searchsorted(step.cp, sizes)
    assert all(step.fits[option[b], i] for i, b in zip(samples, block))
    loads = np.bincount(block, weights=step.ms[option[block], samples], minlength=sizes.size)
    assert makespan == pytest.approx(loads.max())
    if last:
        assert (np.bincount(block, minlength=sizes.size) > 0).all()


@pytest.mark.parametrize("seed", range(6))
def test_backfill_takes_the_longest_sample_that_fits_each_blocks_idle_time(seed):
    step = _step(16, 4_096, 30_000, seed)
    pool = np.argsort(step.lengths, kind="stable")[: step.lengths.size // 2]
    rng = np.random.default_rng(seed)
    option = rng.integers(0, step.cp.size, 6)
    slack = rng.uniform(0.0, 400.0, 6)
    taken, block = cp_kernels.backfill(step.ms, step.fits, option, slack, pool)
    left = list(range(pool.size))
    for b in range(option.size):
        room, j = slack[b], option[b]
        while True:
            held = [p for p in left if step.fits[j, pool[p]] and step.ms[j, pool[p]] <= room]
            if not held:
                break
            chosen = max(held)
            room -= step.ms[j, pool[chosen]]
            left.remove(chosen)
            assert (taken[0], block[0]) == (chosen, b)
            taken, block = taken[1:], block[1:]
    assert taken.size == 0

"""The local search over pipeline counts: its moves stay within the devices, a descent never
ends worse than it starts, and on a small instance it finds the two-group strategy that
exhaustive search proves best."""

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.base.types import OptimizerLayout, PipelineModel
from hydraulis.planner.evaluate import CostContext
from hydraulis.planner.propose import Judge, strategy_of
from hydraulis.planner.search import IMPROVEMENT, CountsSearch
from hydraulis.planner.validate import node_placement
from tests.planner.instances import option

SIZES = (2, 4, 8, 16)


@st.composite
def counts_on(draw, devices=32):
    counts, left = [], devices
    for size in SIZES:
        n = draw(st.integers(0, left // size))
        counts.append(n)
        left -= n * size
    return tuple(counts)


@given(counts_on(), st.sampled_from([2, 4, 8, 16]), st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True))
@settings(max_examples=100, deadline=None)
def test_moves_fit_the_devices_and_change_the_counts(counts, delta, active):
    search = CountsSearch(SIZES, 32, active, lambda c: 0.0, 10)
    for moved in search.neighbours(counts, delta):
        assert moved != counts and min(moved) >= 0 and sum(moved) > 0
        assert np.dot(moved, SIZES) <= 32
        changed = [k for k, (a, b) in enumerate(zip(counts, moved)) if a != b]
        assert len(changed) <= 2 and any(moved[k] > counts[k] and k in active for k in changed)


@given(counts_on().filter(any), st.integers(0, 2**32 - 1), st.integers(0, 60))
@settings(max_examples=60, deadline=None)
def test_a_descent_never_ends_worse_than_it_starts(start, seed, budget):
    """Any score at all (here a random table, ∞ on some counts): every accepted move lowers it
    by more than ε, so the end is no worse than the start, and the budget is respected."""
    def score(counts):
        value = np.random.default_rng([seed, *counts]).uniform()
        return np.inf if value > 0.9 else value

    search = CountsSearch(SIZES, 32, range(4), score, budget)
    search.memo[start] = 0.5
    descent = search.descend(start)
    assert descent.mean_ms <= descent.start_ms == 0.5
    assert descent.mean_ms == search.memo[descent.counts]
    assert descent.moves == 0 or descent.mean_ms < 0.5 * (1 - IMPROVEMENT) ** descent.moves * (1 + 1e-12)
    assert len(search.memo) <= budget + 1


def test_past_the_deadline_a_descent_judges_nothing_new():
    search = CountsSearch(SIZES, 32, range(4), lambda c: 100.0 - sum(c), 100, deadline=0.0)
    descent = search.descend((0, 0, 0, 2))
    assert descent.stopped and descent.counts == (0, 0, 0, 2) and list(search.memo) == [(0, 0, 0, 2)]
    unhurried = CountsSearch(SIZES, 32, range(4), lambda c: 100.0 - sum(c), 100).descend((0, 0, 0, 2))
    assert not unhurried.stopped and unhurried.moves > 0


# A small cluster where long sequences need the large scheme and short ones are cheapest on
# the small one: every step holds three 24K sequences and many short ones.
BIG = option(1, 8, 1, 6e-7, 0.020, 20.0, 30000, 0.0)
MEDIUM = option(1, 4, 1, 1.2e-6, 0.036, 15.0, 12000, 0.0)
SMALL = option(1, 2, 1, 2.4e-6, 0.060, 10.0, 4000, 0.0)
OPTIONS = (BIG, MEDIUM, SMALL)
DEVICES = 32


def judged(judge, counts):
    if counts[0] == 0 or node_placement(strategy_of(OPTIONS, counts), DEVICES, 8):
        return np.inf
    return judge.mean_ms(strategy_of(OPTIONS, counts), range(len(judge.steps)))


def test_from_every_start_it_finds_the_two_group_strategy_exhaustive_search_proves_best():
    """Exhaustive search: 3×BIG + 4×SMALL beats all 165 count vectors, the homogeneous 4×BIG
    among them; every descent from a start that holds the long sequences ends there, judging
    far fewer strategies than exhaustive search."""
    rng = np.random.default_rng(7)
    steps = [np.concatenate(([24000] * 3, rng.integers(200, 3000, size=int(rng.integers(60, 90))))) for _ in range(8)]
    judge = Judge(steps, CostContext(10**9, OptimizerLayout(DEVICES, 1, 1), 0.0, PipelineModel()))
    everything = [c for c in itertools.product(range(5), range(9), range(17))
                  if np.dot(c, [o.devices for o in OPTIONS]) <= DEVICES]
    best = min(everything, key=lambda c: (judged(judge, c), c))
    assert best == (3, 0, 4) and judged(judge, best) < 0.95 * judged(judge, (4, 0, 0))
    starts = [c for c in everything if np.isfinite(judged(judge, c))]
    assert len(starts) > 50
    for start in starts:
        search = CountsSearch([o.devices for o in OPTIONS], DEVICES, range(3), lambda c: judged(judge, c), 200)
        descent = search.descend(start)
        assert descent.counts == best
        assert len(search.memo) < len(everything) / 4

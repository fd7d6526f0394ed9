"""The mixed-cluster lower bound: the two-group split against brute force, and never above a plan."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.cost.mixed_bound import _two_groups, mixed_bound


def test_worked_example():
    assert _two_groups(np.array([[4.0], [2.0]]), np.array([1.0, 1.0])) == pytest.approx(4 / 3)


@settings(max_examples=100)
@given(st.lists(st.tuples(st.floats(0.1, 100), st.floats(0.1, 100)), min_size=1, max_size=6),
       st.integers(1, 16), st.integers(1, 16))
def test_two_groups_is_the_best_fractional_split(pairs, n1, n2):
    work = np.array(pairs, dtype=float).T
    found = _two_groups(work, np.array([n1, n2], dtype=float))
    grid = np.linspace(0.0, 1.0, 21)
    # any split (a grid of shares per sequence) is no better than W*
    rng = np.random.default_rng(len(pairs))
    for _ in range(200):
        f = grid[rng.integers(0, grid.size, size=len(pairs))]
        assert max((f * work[1]).sum() / n2, ((1 - f) * work[0]).sum() / n1) >= found - 1e-9
    whole = [max(work[1][m].sum() / n2, work[0][~m].sum() / n1)
             for m in (np.array([(k >> i) & 1 for i in range(len(pairs))], dtype=bool) for k in range(2 ** len(pairs)))]
    assert found <= min(whole) + 1e-9


def test_more_groups_use_the_cheapest_group_per_sequence():
    bound = mixed_bound([[(0.0, 2.0)], [(0.0, 1.0)], [(0.0, 4.0)]], [1, 1, 2], [10, 20], [])
    assert bound.work_ms == pytest.approx((10 + 20) / 4) and bound.bound_ms == bound.work_ms

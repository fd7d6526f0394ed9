"""The synthesis menu's costs and the fluid answer that starts per-step synthesis: the module
docstring's worked example, the compute floor, and (property test) feasible counts that fit the
devices and hold every piece in time."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.dispatch.menu import MenuCosts, fluid_answers, fluid_counts
from tests.dispatch.helpers import kind


def costs_of(groups, tokens, reduce=None):
    reduce = np.zeros(len(groups)) if reduce is None else np.asarray(reduce, dtype=float)
    return MenuCosts.of(groups, np.asarray(tokens), reduce, p2p_ms=0.0)


def test_worked_example_two_pipelines_at_60_ms():
    costs = costs_of([kind(1, 1, 100, 0.0, 1.0, 10.0)], [30, 50])
    assert fluid_counts(costs, np.array([True]), 60.0, devices=2) == (2,)
    assert fluid_counts(costs, np.array([True]), 59.9, devices=2) is None
    [(counts, origin)] = fluid_answers(costs, np.array([True]), costs.floor_ms(2), 1000.0, devices=2)
    assert counts == (2,) and origin == "fluid answer at reduction 0 ms"


def test_floor_is_the_spread_or_the_longest_crossing():
    costs = costs_of([kind(1, 1, 100, 0.0, 1.0, 10.0)], [30, 50])
    assert costs.floor_ms(2) == pytest.approx(max((30 + 10 * 0.3 + 50 + 10 * 0.5) / 2, 60.0))
    assert costs.floor_ms(1) == pytest.approx(88.0)


kinds = st.builds(kind, tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2, 4]), capacity=st.integers(50, 400),
                  a=st.floats(0.0, 1e-3), b=st.floats(1e-3, 0.5), c=st.floats(0.0, 20.0))


@settings(max_examples=100, deadline=None)
@given(groups=st.lists(kinds, min_size=1, max_size=3), tokens=st.lists(st.integers(1, 400), min_size=1, max_size=12),
       devices=st.sampled_from([4, 8, 16]), compute_ms=st.floats(1.0, 2000.0))
def test_feasible_counts_fit_the_devices_and_hold_every_piece_in_time(groups, tokens, devices, compute_ms):
    costs = costs_of(groups, tokens)
    counts = fluid_counts(costs, np.ones(len(groups), dtype=bool), compute_ms, devices)
    if counts is None:
        return
    used = np.asarray(counts) > 0
    assert int(np.asarray(counts) @ costs.size) <= devices
    in_time = costs.fits[used] & (costs.crossing[used] <= compute_ms)
    assert in_time.any(axis=0).all(), "every piece has a used scheme that holds it and crosses in time"


def test_repeated_pieces_count_as_many_pieces():
    """A 30-token piece given once with repeats 3 needs what three such pieces need: nothing at
    35 ms (one crosses in 40), a pipeline each at 60 ms (each above half of B = 50 ms), one
    pipeline at 100 ms (B = 90)."""
    group = kind(1, 1, 100, 0.0, 1.0, 10.0)
    once, thrice = costs_of([group], [30]), costs_of([group], [30, 30, 30])
    expected = {35.0: None, 60.0: (3,), 100.0: (1,)}
    for compute_ms, counts in expected.items():
        assert fluid_counts(once, np.array([True]), compute_ms, 8, np.array([3])) == counts
        assert fluid_counts(thrice, np.array([True]), compute_ms, 8) == counts

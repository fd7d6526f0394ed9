"""The fluid estimate that ranks synthesis' candidates: the module docstring's worked example,
and (property test) never below the spread bound ``L(n)`` it starts from, nor below the
longest piece's crossing plus the reduction."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.dispatch.fluid_estimate import fluid_step_ms, piece_groups
from hydraulis.dispatch.menu import MenuCosts
from tests.dispatch.helpers import kind


def costs_of(groups, tokens, reduce=None):
    reduce = np.zeros(len(groups)) if reduce is None else np.asarray(reduce, dtype=float)
    return MenuCosts.of(groups, np.sort(np.asarray(tokens))[::-1], reduce, p2p_ms=0.0)


def test_worked_example_two_pieces_on_two_pipelines():
    """u = 30 and 50 ms on one scheme without fixed costs: two pipelines share 80 ms, F = 40,
    but the 50 ms piece crosses alone in 50; one pipeline takes 80."""
    costs = costs_of([kind(1, 1, 100, 0.0, 1.0, 0.0)], [30, 50])
    groups = piece_groups(costs, np.array([50, 30]))
    assert groups.sum() == pytest.approx(80.0)
    assert fluid_step_ms(costs, groups, [(2,), (1,)], solo_free=True).tolist() == pytest.approx([50.0, 80.0])


def test_the_reduction_is_the_least_sharded_schemes_unless_one_pipeline_needs_none():
    """A 40-token piece: 40 ms on (1,1,1), 20 ms on (1,2,1); both schemes: the fluid share is
    40/3 ms, the crossing 20 ms, the reduction max(7, 3) ms; (1,1,1) alone: 40 ms, plus 7 ms
    unless one pipeline needs no reduction."""
    costs = costs_of([kind(1, 1, 100, 0.0, 1.0, 0.0), kind(2, 1, 100, 0.0, 0.5, 0.0)], [40], reduce=[7.0, 3.0])
    groups = piece_groups(costs, np.array([40]))
    assert fluid_step_ms(costs, groups, [(1, 1), (1, 0)], solo_free=True).tolist() == pytest.approx([27.0, 40.0])
    assert fluid_step_ms(costs, groups, [(1, 0)], solo_free=False).tolist() == pytest.approx([47.0])


kinds = st.builds(kind, tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2, 4]), capacity=st.integers(50, 400),
                  a=st.floats(0.0, 1e-3), b=st.floats(1e-3, 0.5), c=st.floats(0.0, 20.0))


@settings(max_examples=100, deadline=None)
@given(groups=st.lists(kinds, min_size=1, max_size=3, unique_by=lambda g: g.scheme),
       tokens=st.lists(st.integers(1, 400), min_size=1, max_size=40), data=st.data())
def test_never_below_the_spread_bound_nor_the_crossing(groups, tokens, data):
    costs = costs_of(groups, tokens, reduce=[float(i) for i in range(len(groups))])
    counts = data.draw(st.lists(st.tuples(*[st.integers(0, 4) for _ in groups]), min_size=1, max_size=5))
    counts = [n for n in counts if sum(n) > 0 and costs.fits[np.asarray(n) > 0].any(axis=0).all()]
    if not counts:
        return
    estimate = fluid_step_ms(costs, piece_groups(costs, np.sort(tokens)[::-1]), counts, solo_free=False)
    for n, e in zip(counts, estimate):
        used = np.asarray(n) > 0
        spread = costs.spread[used].min(axis=0).sum() / float(np.asarray(n) @ costs.size)
        crossing = np.where(costs.fits[used, 0], costs.crossing[used, 0], np.inf).min()
        assert e >= max(spread, crossing) + costs.reduce[used].max() - 1e-6 * max(e, 1.0)

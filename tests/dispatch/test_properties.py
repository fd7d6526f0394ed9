"""Invariants of every plan, every method (hypothesis): each sequence placed exactly once, no
micro-batch above its pipeline's capacity, no sequence on a pipeline that cannot hold it, exact
times, a valid bound, the fastest strategy chosen, same seed → same plan."""

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import BatchingMethod
from hydraulis.dispatch import DispatchOptions, OversizePolicy, dispatch
from tests.dispatch.helpers import check_plan, group, proposal

groups = st.builds(group, pp=st.integers(1, 4), count=st.integers(1, 3), capacity=st.integers(64, 4096),
                   a=st.floats(0.0, 1e-4), b=st.floats(1e-3, 0.1), c=st.floats(0.0, 20.0), tp=st.sampled_from([1, 2]))
strategies = st.lists(groups, min_size=1, max_size=3).map(tuple)
proposals = st.builds(
    lambda chosen, reductions, p2p, phi: proposal(*chosen, reduce_ms=tuple(reductions[:len(chosen)]),
                                                  p2p_ms=p2p, forward_fraction=phi),
    st.lists(strategies, min_size=1, max_size=3),
    st.lists(st.floats(0.0, 50.0), min_size=3, max_size=3),
    st.floats(0.0, 2.0),
    st.floats(0.2, 0.5),
)
lengths = st.lists(st.integers(1, 6000), min_size=1, max_size=50)
methods = st.sampled_from(list(BatchingMethod))
settings_ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _limit(prop, alignment):
    return max(s.strategy.max_seq_len for s in prop.strategies) // alignment * alignment


@settings_
@given(prop=proposals, batch=lengths, method=methods, alignment=st.sampled_from([1, 8]), seed=st.integers(0, 50),
       policy=st.sampled_from([OversizePolicy.SPLIT, OversizePolicy.TRUNCATE]))
def test_every_plan_is_valid(prop, batch, method, alignment, seed, policy):
    limit = _limit(prop, alignment)
    if limit < 1:
        return
    options = DispatchOptions(seed=seed, alignment=alignment, oversize=policy)
    plan = dispatch(prop, batch, method, options)
    check_plan(prop, plan, batch, alignment, policy, limit)
    again = dispatch(prop, batch, method, options)
    assert replace(again, planning_ms=0.0) == replace(plan, planning_ms=0.0), "same seed, same plan"


@settings_
@given(prop=proposals, batch=lengths, method=methods, seed=st.integers(0, 50))
def test_the_fastest_strategy_is_chosen(prop, batch, method, seed):
    """Pruning by lower bounds never changes the choice: the plan is as fast as the best
    strategy planned on its own."""
    if max(batch) > _limit(prop, 1):
        with pytest.raises(HydraulisError, match="exceeds the longest sequence"):
            dispatch(prop, batch, method, DispatchOptions(seed=seed))
        return
    plan = dispatch(prop, batch, method, DispatchOptions(seed=seed))
    alone = [dispatch(replace(prop, strategies=(s,)), batch, method, DispatchOptions(seed=seed)).predicted_ms
             for s in prop.strategies if s.strategy.max_seq_len >= max(batch)]
    assert plan.predicted_ms == pytest.approx(min(alone), rel=1e-12)
    assert plan.lower_bound_ms <= min(alone) * (1 + 1e-9)


@settings(max_examples=60, deadline=None)
@given(prop=proposals, batch=lengths)
def test_hydraulis_is_never_slower_than_its_fixed_packing(prop, batch):
    """Balanced packing keeps first-fit decreasing among its candidates on the same stage-1
    assignment; with equal capacities it is never slower."""
    prop = replace(prop, max_seq_len=max(s.strategy.max_seq_len for s in prop.strategies) * 2)
    options = DispatchOptions(oversize=OversizePolicy.SPLIT)
    balanced = dispatch(prop, batch, BatchingMethod.DISPATCH_BALANCED_PACKING, options)
    fixed = dispatch(prop, batch, BatchingMethod.DISPATCH_FIXED_PACKING, options)
    assert balanced.predicted_ms <= fixed.predicted_ms * (1 + 1e-9)

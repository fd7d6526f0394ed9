"""The planner's yardstick: every sequence placed once, within capacity, never below the bound."""

import heapq
import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import OptimizerLayout, PipelineGroup, PipelineModel, Scheme, Strategy, TimeCoefficients
from hydraulis.cost import lower_bound_ms, pipeline_times_1f1b, simulate_1f1b
from hydraulis.planner.evaluate import (
    CostContext,
    _balanced,
    _coarse_upper_bound,
    _dispatch,
    _first_fit,
    _lower_bound,
    _pack_first_fit,
    _Pipeline,
    _upper_bound,
    estimate_step,
    step_ms,
)

SMALL = PipelineGroup(Scheme(1, 2, 1), 3, 4000, TimeCoefficients(2e-6, 0.09, 10.0))
LARGE = PipelineGroup(Scheme(1, 4, 2), 1, 16000, TimeCoefficients(5e-7, 0.03, 8.0))
STRATEGY = Strategy((LARGE, SMALL))
CONTEXT = CostContext(params=10**9, layout=OptimizerLayout(14, 1, 1), reduce_gbps=0.0, pipeline_model=PipelineModel())

lengths = st.lists(st.integers(1, 16000), min_size=1, max_size=60)


@given(lengths)
@settings(max_examples=50, deadline=None)
def test_dispatch_places_every_sequence_once_within_capacity(values):
    order = np.sort(np.array(values))[::-1]
    shares = _dispatch(STRATEGY.pipelines, order)
    placed = sorted(s for group in shares for pipeline in group for s in pipeline)
    assert placed == sorted(values)
    for group, pipelines in zip(STRATEGY.pipelines, shares):
        assert all(s <= group.max_seq_len for pipeline in pipelines for s in pipeline)


@given(lengths)
@settings(max_examples=50, deadline=None)
def test_a_step_is_never_faster_than_the_lower_bound(values):
    estimate = estimate_step(STRATEGY, np.array(values), CONTEXT)
    triples = [(g.scheme, g.time, g.max_seq_len) for g in STRATEGY.pipelines]
    assert estimate.step_ms >= lower_bound_ms(values, triples, 14) * (1 - 1e-9)
    assert all(0 <= peak <= g.max_seq_len for peak, g in zip(estimate.peak_tokens, STRATEGY.pipelines))


def test_one_pipeline_without_stages_is_fixed_costs_plus_work():
    alone = Strategy((PipelineGroup(Scheme(1, 2, 1), 1, 4000, TimeCoefficients(2e-6, 0.09, 10.0)),))
    values = np.array([3000, 2500, 1000, 400])
    work = float((2e-6 * values**2 + 0.09 * values).sum())
    estimate = estimate_step(alone, values, CONTEXT)
    assert estimate.step_ms == pytest.approx(2 * 10.0 + work)  # first-fit: (3000, 1000), (2500, 400)
    assert estimate.peak_tokens == (4000,)


@given(lengths)
@settings(max_examples=40, deadline=None)
def test_a_many_stage_pipeline_takes_its_faster_packing_by_exact_simulation(values):
    """The packings of all pipelines are simulated together; each must get the time the
    event simulation gives its own faster packing (first-fit or time-balanced)."""
    alone = Strategy((replace(LARGE, count=1),))
    order = sorted(values, reverse=True)
    s = np.array(order, dtype=float)
    work = (LARGE.time.a * s * s + LARGE.time.b * s).tolist()
    packings = [_first_fit(order, LARGE.max_seq_len)]
    target = min(len(order), max(len(packings[0]), round(math.sqrt(sum(work) / LARGE.time.c))))
    if target != len(packings[0]):
        packings.append(_balanced(order, work, LARGE.max_seq_len, target))
    best = min(simulate_1f1b(sorted((LARGE.time.c + sum(work[i] for i in b) for b in bins), reverse=True), 2,
                             CONTEXT.pipeline_model).makespan_ms for bins in packings)
    assert estimate_step(alone, np.array(values), CONTEXT).step_ms == pytest.approx(best, rel=1e-12)


def test_reduction_is_added():
    context = CostContext(10**9, OptimizerLayout(14, 1, 1), 25.0, PipelineModel())
    plain = estimate_step(STRATEGY, np.array([1000, 2000]), CONTEXT).step_ms
    assert estimate_step(STRATEGY, np.array([1000, 2000]), context).step_ms == pytest.approx(plain + 4e9 / 2 / 25e6)


def test_a_sequence_nobody_holds_is_named():
    with pytest.raises(HydraulisError, match="lengths: 20000 exceeds every pipeline of strategy"):
        estimate_step(STRATEGY, np.array([20000]), CONTEXT)


STAGED = Strategy((PipelineGroup(Scheme(1, 2, 4), 3, 16000, TimeCoefficients(5e-7, 0.03, 8.0)),
                   PipelineGroup(Scheme(1, 1, 2), 4, 6000, TimeCoefficients(2e-6, 0.09, 4.0)),
                   PipelineGroup(Scheme(1, 8, 1), 2, 4000, TimeCoefficients(1e-6, 0.02, 6.0))))
models = st.builds(PipelineModel, st.floats(0.1, 0.9), st.sampled_from([0.0, 0.3, 5.0]))


@given(st.lists(st.integers(1, 16000), min_size=1, max_size=120), models)
@settings(max_examples=200, deadline=None)
def test_step_ms_is_the_full_estimate_s_float(values, model):
    """Oracle: leaving out the pipelines that cannot be the slowest gives the same float."""
    context = replace(CONTEXT, pipeline_model=model)
    for strategy in (STAGED, Strategy((STAGED.pipelines[0],)), Strategy(STAGED.pipelines[:2])):
        if max(values) <= strategy.max_seq_len:
            assert step_ms(strategy, np.array(values), context) == estimate_step(strategy, np.array(values),
                                                                                 context).step_ms


@given(st.lists(st.integers(1, 16000), min_size=1, max_size=80), st.integers(2, 8), models)
@settings(max_examples=80, deadline=None)
def test_a_pipeline_s_bounds_hold_its_simulated_packings(values, pp, model):
    """``_lower_bound`` ≤ the faster packing's time ≤ first-fit's ≤ ``_upper_bound`` ≤
    ``_coarse_upper_bound``."""
    group = PipelineGroup(Scheme(1, 2, pp), 1, 16000, TimeCoefficients(5e-7, 0.03, 8.0))
    held = sorted(values, reverse=True)
    pipeline = _Pipeline(0, held, group.time.work_ms(np.array(held, dtype=float)).tolist(), [])
    _pack_first_fit(pipeline, group)
    first_fit = float(pipeline_times_1f1b(np.array([pipeline.packings[0][0]]), pp, model)[0])
    fastest = estimate_step(Strategy((group,)), np.array(values), replace(CONTEXT, pipeline_model=model)).step_ms
    assert _lower_bound(pipeline, group, model) <= fastest * (1 + 1e-12)
    assert fastest <= first_fit <= _upper_bound(pipeline, group, model) * (1 + 1e-12)
    assert _upper_bound(pipeline, group, model) <= _coarse_upper_bound(pipeline, group, model) * (1 + 1e-12)


def _one_by_one(groups, order):
    """Stage 1 sequence by sequence, every group tested for capacity (the rule, unbatched)."""
    work = [g.time.work_ms(order.astype(float)).tolist() for g in groups]
    heaps = [[(0.0, i) for i in range(g.count)] for g in groups]
    shares = [[[] for _ in range(g.count)] for g in groups]
    for index, length in enumerate(order.tolist()):
        best, best_estimate = -1, math.inf
        for gi, g in enumerate(groups):
            if g.max_seq_len >= length:
                top, i = heaps[gi][0]
                w = work[gi][index]
                estimate = top + w if shares[gi][i] else w + g.scheme.pp * g.time.c + (g.scheme.pp - 1) * w
                if estimate < best_estimate:
                    best, best_estimate = gi, estimate
        i = heaps[best][0][1]
        shares[best][i].append(length)
        heapq.heapreplace(heaps[best], (best_estimate, i))
    return shares


groups = st.builds(PipelineGroup, st.builds(Scheme, st.just(1), st.just(1), st.integers(1, 4)), st.integers(1, 4),
                   st.sampled_from([2000, 4000, 16000]),
                   st.builds(TimeCoefficients, st.sampled_from([0.0, 1e-6]), st.sampled_from([0.0, 0.03]),
                             st.sampled_from([0.0, 5.0])))


@given(st.lists(groups, min_size=1, max_size=4), st.lists(st.integers(1, 2000), min_size=0, max_size=80),
       st.lists(st.integers(1, 16000), min_size=0, max_size=10))
@settings(max_examples=150, deadline=None)
def test_stage_one_in_runs_is_stage_one_sequence_by_sequence(strategy, short, long):
    """Oracle: dealing runs of sequences that the same groups can hold gives the same shares
    (equal lengths, equal capacities and zero costs included, where ties decide)."""
    order = np.sort(np.array(short + long, dtype=np.int64))[::-1]
    order = order[order <= max(g.max_seq_len for g in strategy)]
    assert _dispatch(tuple(strategy), order) == _one_by_one(strategy, order)

"""Oracle tests on tiny instances: exhaustive search over every assignment, packing and order."""

import itertools
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.base.types import BatchingMethod, PipelineModel
from hydraulis.cost import simulate_1f1b
from hydraulis.dispatch import DispatchOptions, PackingStatus, dispatch, strategy_bound
from hydraulis.dispatch.batch import prepare_batch
from hydraulis.dispatch.pipelines import PipelineTable
from tests.dispatch.helpers import group, proposal

ILP = DispatchOptions(ilp_nodes=100_000, ilp_time_limit_s=3600.0)
"""A node budget that closes every tiny instance; the safety stop never fires."""
PROVEN = {PackingStatus.ILP_OPTIMAL.value, PackingStatus.GREEDY_ILP_OPTIMAL.value}


def set_partitions(items):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for partition in set_partitions(rest):
        yield [[first]] + partition
        for i in range(len(partition)):
            yield partition[:i] + [[first] + partition[i]] + partition[i + 1:]


def best_pipeline_ms(lengths, g, model, parts=None):
    """The fastest packing and order of ``lengths`` on one pipeline of group ``g`` (``parts``
    micro-batches if given), by exhaustive search; ∞ if none fits."""
    best = np.inf
    for partition in set_partitions(list(lengths)):
        if parts is not None and len(partition) != parts:
            continue
        if any(sum(mb) > g.max_seq_len for mb in partition):
            continue
        times = [g.time.c + sum(g.time.a * s * s + g.time.b * s for s in mb) for mb in partition]
        orders = [times] if g.scheme.pp == 1 else itertools.permutations(times)
        for order in orders:
            best = min(best, simulate_1f1b(list(order), g.scheme.pp, model).makespan_ms)
    return best


def optimum_ms(prop, lengths):
    """The fastest compute time of any plan of ``lengths`` on the proposal's only strategy."""
    pipelines = prop.strategies[0].strategy.expanded()

    @lru_cache(maxsize=None)
    def alone(p, chosen):
        return best_pipeline_ms([lengths[i] for i in chosen], pipelines[p], prop.pipeline_model) if chosen else 0.0

    best = np.inf
    for owner in itertools.product(range(len(pipelines)), repeat=len(lengths)):
        best = min(best, max(alone(p, tuple(i for i, o in enumerate(owner) if o == p)) for p in range(len(pipelines))))
    return best


tiny_groups = st.builds(group, pp=st.integers(1, 3), count=st.integers(1, 2), capacity=st.integers(200, 1200),
                        a=st.floats(0.0, 1e-3), b=st.floats(0.01, 1.0), c=st.floats(0.0, 30.0))


@settings(max_examples=40, deadline=None)
@given(groups=st.lists(tiny_groups, min_size=1, max_size=2), lengths=st.lists(st.integers(1, 600), min_size=1, max_size=5))
def test_bound_and_plans_bracket_the_optimum(groups, lengths):
    """strategy bound ≤ exhaustive optimum ≤ every method's plan."""
    prop = proposal(tuple(groups))
    if max(lengths) > prop.strategies[0].strategy.max_seq_len or sum(g.count for g in groups) > 3:
        return
    best = optimum_ms(prop, lengths)
    batch = prepare_batch(lengths, prop.strategies[0].strategy.max_seq_len, DispatchOptions())
    table = PipelineTable.of(prop.strategies[0].strategy, prop.pipeline_model)
    assert strategy_bound(table, batch.tokens, table.work(batch.tokens)) <= best * (1 + 1e-9)
    for method in BatchingMethod:
        assert dispatch(prop, lengths, method).predicted_ms >= best * (1 - 1e-9)


def test_ilp_packs_one_stage_pipelines_into_the_fewest_micro_batches():
    """First-fit decreasing needs 3 micro-batches for (5, 4, 3, 3, 3, 2) in 10 tokens; 2 suffice."""
    prop = proposal((group(pp=1, count=1, capacity=10, a=0.0, b=1.0, c=5.0),))
    greedy = dispatch(prop, [5, 4, 3, 3, 3, 2])
    assert len(greedy.pipelines[0].micro_batches) == 3 and greedy.pipelines[0].solver_status == "greedy"
    assert any("ilp skipped: ilp_nodes 0" in note for note in greedy.notes)
    solved = dispatch(prop, [5, 4, 3, 3, 3, 2], options=ILP)
    assert len(solved.pipelines[0].micro_batches) == 2
    assert solved.pipelines[0].solver_status == PackingStatus.ILP_OPTIMAL.value
    assert solved.predicted_ms == pytest.approx(greedy.predicted_ms - 5.0)
    assert solved.pipelines[0].proven_ms == solved.pipelines[0].predicted_ms


@settings(max_examples=15, deadline=None)
@given(lengths=st.lists(st.integers(10, 400), min_size=2, max_size=5), c=st.floats(0.5, 20.0),
       pp=st.integers(2, 3), a=st.floats(0.0, 1e-3))
def test_ilp_finds_the_best_packing_and_order_for_its_micro_batch_count(lengths, c, pp, a):
    g = group(pp=pp, count=1, capacity=1000, a=a, b=0.1, c=c)
    prop = proposal((g,))
    greedy = dispatch(prop, lengths)
    solved = dispatch(prop, lengths, options=ILP)
    v = len(greedy.pipelines[0].micro_batches)
    model = PipelineModel()
    assert solved.pipelines[0].solver_status in PROVEN
    assert solved.predicted_ms <= greedy.predicted_ms * (1 + 1e-9)
    assert solved.predicted_ms <= best_pipeline_ms(lengths, g, model, parts=v) * (1 + 1e-6)
    assert solved.predicted_ms >= best_pipeline_ms(lengths, g, model) * (1 - 1e-9)
    assert solved.pipelines[0].proven_ms == solved.predicted_ms

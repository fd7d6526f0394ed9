import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import PipelineModel
from hydraulis.cost import pipeline_time_closed_form, pipeline_times_1f1b, simulate_1f1b
from hydraulis.cost.pipeline import Phase, schedule_graph

times = st.lists(st.floats(min_value=0.0, max_value=1e3, allow_nan=False), min_size=1, max_size=24)
stages = st.integers(min_value=1, max_value=8)
fractions = st.floats(min_value=0.05, max_value=0.95)


def test_worked_example():
    assert pipeline_time_closed_form([3, 3, 3], 2) == pytest.approx(12.0)
    assert simulate_1f1b([3, 3, 3], 2).makespan_ms == pytest.approx(12.0)


@settings(max_examples=200, deadline=None)
@given(t=st.floats(min_value=0.0, max_value=1e3), v=st.integers(1, 24), pp=stages, phi=fractions)
def test_simulation_equals_closed_form_for_equal_micro_batches(t, v, pp, phi):
    model = PipelineModel(forward_fraction=phi)
    expected = (v + pp - 1) * t
    assert simulate_1f1b([t] * v, pp, model).makespan_ms == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert pipeline_time_closed_form([t] * v, pp, model) == pytest.approx(expected, rel=1e-9, abs=1e-9)


@settings(max_examples=300, deadline=None)
@given(ts=times, pp=stages, phi=fractions, d=st.floats(min_value=0.0, max_value=5.0))
def test_simulation_is_never_below_closed_form(ts, pp, phi, d):
    model = PipelineModel(forward_fraction=phi, p2p_ms=d)
    simulated = simulate_1f1b(ts, pp, model).makespan_ms
    assert simulated >= pipeline_time_closed_form(ts, pp, model) - 1e-6 * (1 + simulated)


@settings(max_examples=200, deadline=None)
@given(ts=times, pp=stages, phi=fractions)
def test_simulation_is_never_above_the_reference_systems_max_form(ts, pp, phi):
    simulated = simulate_1f1b(ts, pp, PipelineModel(forward_fraction=phi)).makespan_ms
    assert simulated <= max(ts) * (pp - 1 + len(ts)) + 1e-6 * (1 + simulated)


def test_designs_max_form_is_not_a_bound():
    """design §6's Σt + (p−1)·max t overestimates this schedule (see :func:`pipeline_time_closed_form`)."""
    big, small = 30.0, 3.0
    simulated = simulate_1f1b([big, small], 2).makespan_ms
    assert simulated == pytest.approx(2 * big + 2 * small / 3)
    assert simulated < big + small + big


def test_recorded_schedule_respects_dependencies_and_stage_order():
    ts, pp = [5.0, 1.0, 7.0, 2.0, 4.0], 3
    timeline = simulate_1f1b(ts, pp, PipelineModel(p2p_ms=0.5), record=True)
    assert len(timeline.ops) == 2 * pp * len(ts)
    end = {(op.stage, op.micro_batch, op.phase): op.end for op in timeline.ops}
    for op in timeline.ops:
        if op.phase is Phase.FORWARD and op.stage > 0:
            assert op.start >= end[(op.stage - 1, op.micro_batch, Phase.FORWARD)] + 0.5 - 1e-9
        if op.phase is Phase.BACKWARD and op.stage < pp - 1:
            assert op.start >= end[(op.stage + 1, op.micro_batch, Phase.BACKWARD)] + 0.5 - 1e-9
    for stage in range(pp):
        ops = sorted((op for op in timeline.ops if op.stage == stage), key=lambda op: op.start)
        assert all(a.end <= b.start + 1e-9 for a, b in zip(ops, ops[1:]))
    assert timeline.makespan_ms == max(op.end for op in timeline.ops)


def test_single_stage_is_the_sum():
    assert simulate_1f1b([1.0, 2.0, 4.0], 1).makespan_ms == pytest.approx(7.0)


def test_empty_pipeline_is_rejected():
    with pytest.raises(HydraulisError, match="at least one micro-batch"):
        simulate_1f1b([], 2)


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.lists(st.floats(min_value=0.0, max_value=1e3, allow_nan=False), min_size=5, max_size=5),
                     min_size=1, max_size=4),
       v=st.integers(1, 5), pp=stages, phi=fractions, d=st.floats(min_value=0.0, max_value=5.0))
def test_batched_simulation_equals_one_at_a_time(rows, v, pp, phi, d):
    model = PipelineModel(forward_fraction=phi, p2p_ms=d)
    times = np.array([row[:v] for row in rows])
    expected = [simulate_1f1b(list(row), pp, model).makespan_ms for row in times]
    assert pipeline_times_1f1b(times, pp, model) == pytest.approx(expected, rel=1e-12, abs=1e-9)


def test_batched_simulation_rejects_bad_shapes():
    with pytest.raises(HydraulisError, match="rows, v"):
        pipeline_times_1f1b(np.zeros(3), 2)


def relaxed_depths(previous: np.ndarray, dependency: np.ndarray) -> np.ndarray:
    """Oracle: ``1 + max(depth(previous), depth(dependency))`` by repeated relaxation."""
    n = previous.size
    depth = np.full(n + 1, -1)
    depth[n] = 0
    while (depth[:n] < 0).any():
        known = (depth[previous] >= 0) & (depth[dependency] >= 0) & (depth[:n] < 0)
        assert known.any(), "the graph has a cycle"
        depth[:n][known] = 1 + np.maximum(depth[previous[known]], depth[dependency[known]])
    return depth[:n]


@given(st.integers(1, 24), st.integers(1, 60))
@settings(max_examples=80, deadline=None)
def test_the_closed_form_levels_are_the_graphs_depths(pp, v):
    graph = schedule_graph(pp, v)
    depth = relaxed_depths(graph.previous, graph.dependency)
    assert len(graph.levels) == depth.max()
    for level, ops in enumerate(graph.levels, start=1):
        assert ops.tolist() == np.flatnonzero(depth == level).tolist()

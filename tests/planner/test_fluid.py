"""The fluid model's pipeline times against the cost model's 1F1B schedule."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.base.types import PipelineModel
from hydraulis.cost import pipeline_time_closed_form, simulate_1f1b
from hydraulis.planner.fluid import (
    assignment_makespan,
    count_makespan,
    fluid_problem,
    homogeneous_incumbent,
    lower_bound_ms,
    pipeline_time_ms,
    reduction_levels,
    single_sequence_ms,
)
from tests.planner.instances import option, random_instance, workload

MODEL = PipelineModel(p2p_ms=0.05)


@given(pp=st.integers(1, 8), c=st.floats(0.5, 80.0), work=st.floats(1.0, 1e5))
@settings(max_examples=60, deadline=None)
def test_best_pipeline_time_bounds_every_integer_micro_batch_count(pp, c, work):
    """τ*(W) is the best real v, so no integer count of equal micro-batches beats it, and the
    integer next to the best real v is within one micro-batch overhead of it."""
    scheme = option(1, 1, pp, 1e-6, 0.05, c, 10_000, 0.0)
    best = float(pipeline_time_ms(scheme, work, MODEL))
    real = math.sqrt((pp - 1) * work / c)
    counts = set(range(1, 40)) | {max(1, math.floor(real)), max(1, math.ceil(real))}
    schedules = {v: pipeline_time_closed_form([c + work / v] * v, pp, MODEL) for v in counts}
    assert min(schedules.values()) >= best * (1 - 1e-9)
    assert min(schedules[max(1, math.floor(real))], schedules[max(1, math.ceil(real))]) <= best + c


def test_single_sequence_is_one_micro_batch_through_all_stages():
    scheme = option(1, 2, 4, 1e-6, 0.05, 9.0, 50_000, 0.0)
    per_stage = 9.0 + 1e-6 * 20_000**2 + 0.05 * 20_000
    expected = simulate_1f1b([per_stage], 4, MODEL).makespan_ms
    assert float(single_sequence_ms(scheme, 20_000, MODEL)) == pytest.approx(expected)


def test_homogeneous_incumbent_is_exact_for_one_scheme():
    """With one pipeline-free scheme the fluid makespan is ρ + max(W/n + c, h̄, ...)."""
    scheme = option(1, 4, 1, 1e-6, 0.05, 12.0, 20_000, 30.0)
    load = workload([500, 4000], [40.0, 2.0], [4000, 3900], 128)
    problem = fluid_problem([scheme], load, 4000, 8, MODEL, classes=8)
    counts, makespan = homogeneous_incumbent(problem)
    work = (1e-6 * (40 * 500**2 + 2 * 4000**2) + 0.05 * (40 * 500 + 2 * 4000)) / 2
    assert counts == (2,)
    assert makespan == pytest.approx(30.0 + max(work + 12.0, float(single_sequence_ms(scheme, 4000, MODEL))))


@pytest.mark.parametrize("seed", range(4))
def test_lower_bound_is_below_every_answer(seed):
    options, load, devices, longest = random_instance(seed)
    problem = fluid_problem(options, load, longest, devices, MODEL, classes=64)
    _, incumbent = homogeneous_incumbent(problem)
    assert lower_bound_ms(problem) <= incumbent


def test_count_makespan_is_the_least_makespan_with_room_for_the_tail():
    options, load, devices, longest = random_instance(2)
    problem = fluid_problem(options, load, longest, devices, MODEL, classes=64)
    counts = np.zeros(len(problem.origin))
    counts[-1] = 1
    found = count_makespan(problem, counts, 1.0)
    assert found >= 1.0
    assert count_makespan(problem, counts, found) == found
    assert count_makespan(problem, counts, found * 0.999) > found * 0.999
    fractions = np.zeros_like(problem.work)
    fractions[-1] = 1.0
    assert assignment_makespan(problem, counts, fractions) >= found


def test_reduction_levels_are_one_per_sharding_at_its_largest_exposed_reduction():
    options = [option(1, 8, 1, 0, 1, 0, 100, 30.0), option(2, 8, 1, 0, 1, 0, 100, 24.0),
               option(1, 4, 1, 0, 1, 0, 100, 31.0), option(1, 2, 1, 0, 1, 0, 100, 50.0)]
    levels = reduction_levels(options)
    assert levels.tolist() == [30.0, 30.0, 31.0, 50.0]
    assert all(level >= o.reduce_ms for level, o in zip(levels, options))

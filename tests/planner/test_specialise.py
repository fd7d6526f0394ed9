"""Serving ranges: a cover of (0, S], optimal for the proxy (brute force over partitions)."""

import itertools

import numpy as np
import pytest

from hydraulis.artifacts import read_lengths
from hydraulis.base.types import PipelineModel
from hydraulis.base.workload import sample_batches
from hydraulis.planner.distribution import step_statistics
from hydraulis.planner.layout import choose_optimizer_layout
from hydraulis.planner.options import planning_space, scheme_options
from hydraulis.planner.specialise import _candidate_points, homogeneous_step_ms, serving_ranges
from tests.planner.instances import LENGTHS, option

OPTIONS = [option(1, 2, 1, 2e-6, 0.09, 10.0, 6000, 20.0), option(1, 4, 1, 1e-6, 0.05, 12.0, 14000, 10.0),
           option(1, 8, 1, 5e-7, 0.03, 15.0, 30000, 5.0)]


def statistics(seed, steps=10):
    rng = np.random.default_rng(seed)
    batches = [np.minimum(rng.lognormal(6.5, 1.3, size=int(rng.integers(20, 60))).astype(int) + 1, 30000)
               for _ in range(steps)]
    return step_statistics(batches, 128, 30000)


def proxy_cost(stats, ranges):
    value = homogeneous_step_ms(stats, OPTIONS, 16, PipelineModel())
    capacity = np.array([o.capacity for o in OPTIONS])
    total = 0.0
    for lo, hi in ranges:
        steps = stats.serving(lo, hi)
        if steps.size == 0:
            return np.inf
        total += value[capacity >= hi][:, steps].sum(axis=1).min()
    return total


@pytest.mark.parametrize("seed", range(3))
def test_ranges_are_an_optimal_cover(seed):
    stats = statistics(seed)
    ranges = serving_ranges(stats, OPTIONS, 16, PipelineModel(), strategies=3, min_gain=0.0)
    assert ranges[0][0] == 0 and ranges[-1][1] == 30000
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert all(stats.serving(lo, hi).size > 0 for lo, hi in ranges)
    points = _candidate_points(stats, OPTIONS, 3).tolist()
    best = min(proxy_cost(stats, list(zip([0, *cuts], [*cuts, 30000])))
               for k in range(3) for cuts in itertools.combinations(points[:-1], k))
    assert proxy_cost(stats, ranges) == pytest.approx(best)


def test_min_gain_trades_ranges_for_proxy_cost():
    stats = statistics(4, steps=30)
    many = serving_ranges(stats, OPTIONS, 16, PipelineModel(), strategies=6, min_gain=0.0)
    few = serving_ranges(stats, OPTIONS, 16, PipelineModel(), strategies=6, min_gain=0.5)
    assert len(few) == 1 < len(many)
    assert proxy_cost(stats, many) < proxy_cost(stats, few)


def test_a_long_tail_is_split(space_7b):
    space = planning_space(space_7b, 32, 8)
    layout, _ = choose_optimizer_layout(space, 32768)
    options, _ = scheme_options(space, layout, 8)
    stats = step_statistics(sample_batches(read_lengths(LENGTHS), 65536, 32, 32768, 0), 128, 32768)
    ranges = serving_ranges(stats, options, 32, space.pipeline_model, strategies=8, min_gain=0.01)
    assert 1 < len(ranges) <= 8

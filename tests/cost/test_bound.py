"""The lower bounds never exceed a simulated plan (property tests on random instances)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import OptimizerLayout, PipelineModel, Scheme, TimeCoefficients
from hydraulis.cost import (
    BoundScheme,
    level_bounds,
    lower_bound_ms,
    reduce_ms,
    simulate_1f1b,
    step_bound,
    step_time_ms,
)

schemes = st.builds(
    lambda cp, tp, pp, a, b, c, cap: (Scheme(cp, tp, pp), TimeCoefficients(a, b, c), cap),
    st.sampled_from([1, 2]), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4]),
    st.floats(0, 1e-3), st.floats(0, 1.0), st.floats(0, 50.0), st.integers(64, 4096))


def random_plan(kinds, seed):
    """Random pipelines of ``kinds`` on enough devices and a random batch packed onto them:
    (pipelines, devices, lengths, micro-batches per pipeline)."""
    rng = np.random.default_rng(seed)
    pipelines = [kinds[i] for i in rng.integers(0, len(kinds), size=rng.integers(1, 6))]
    devices = sum(s.devices for s, _, _ in pipelines) + int(rng.integers(0, 4))
    longest = max(cap for _, _, cap in pipelines)
    lengths = rng.integers(1, longest + 1, size=int(rng.integers(1, 40)))
    queues: list[list[list[int]]] = [[] for _ in pipelines]
    for s in lengths:
        holders = [i for i, (_, _, cap) in enumerate(pipelines) if cap >= s]
        i = holders[int(rng.integers(0, len(holders)))]
        cap = pipelines[i][2]
        open_batches = [mb for mb in queues[i] if sum(mb) + s <= cap]
        if open_batches and rng.random() < 0.7:
            open_batches[int(rng.integers(0, len(open_batches)))].append(int(s))
        else:
            queues[i].append([int(s)])
    return pipelines, devices, lengths, queues


def compute_ms(pipelines, queues, model):
    return [simulate_1f1b([time.microbatch_ms(mb) for mb in queue], scheme.pp, model).makespan_ms
            if queue else 0.0 for (scheme, time, _), queue in zip(pipelines, queues)]


@settings(max_examples=150, deadline=None)
@given(kinds=st.lists(schemes, min_size=1, max_size=4), seed=st.integers(0, 2**31 - 1),
       phi=st.floats(0.1, 0.9), d=st.floats(0, 2))
def test_lower_bound_never_exceeds_a_simulated_plan(kinds, seed, phi, d):
    pipelines, devices, lengths, queues = random_plan(kinds, seed)
    pipe_ms = compute_ms(pipelines, queues, PipelineModel(forward_fraction=phi, p2p_ms=d))
    plan_ms = step_time_ms(pipe_ms, reduce_ms(10**9, [s for s, _, _ in pipelines], OptimizerLayout(1, 1, 1), 10.0))
    bound = lower_bound_ms(lengths, pipelines, devices)
    assert bound <= plan_ms * (1 + 1e-9) + 1e-9


@settings(max_examples=200, deadline=None)
@given(kinds=st.lists(schemes, min_size=1, max_size=4), seed=st.integers(0, 2**31 - 1),
       phi=st.floats(0.1, 0.9), d=st.floats(0, 2), dp=st.sampled_from([1, 2]), gbps=st.sampled_from([0.0, 10.0]),
       pool=st.lists(schemes, max_size=3))
def test_the_tight_bound_is_never_above_a_simulated_plan(kinds, seed, phi, d, dp, gbps, pool):
    """Any plan on any pipelines of the pool's schemes, step time = slowest 1F1B pipeline + the
    cost model's reduction, is at least the tight bound (which is at least design §6's)."""
    pipelines, devices, lengths, queues = random_plan(kinds, seed)
    layout = OptimizerLayout(dp, 1, 1)
    pipe_ms = compute_ms(pipelines, queues, PipelineModel(forward_fraction=phi, p2p_ms=d))
    plan_ms = step_time_ms(pipe_ms, reduce_ms(10**9, [s for s, _, _ in pipelines], layout, gbps))
    bound = step_bound(lengths, [BoundScheme(s, t, c, reduce_ms(10**9, (s, s), layout, gbps))
                                 for s, t, c in set(kinds + pool)], devices, d, solo_free=dp == 1)
    assert bound.pool_ms <= bound.tight_ms * (1 + 1e-9) + 1e-9
    assert bound.tight_ms <= plan_ms * (1 + 1e-9) + 1e-9


@settings(max_examples=200, deadline=None)
@given(kinds=st.lists(schemes, min_size=1, max_size=4), seed=st.integers(0, 2**31 - 1),
       phi=st.floats(0.1, 0.9), d=st.floats(0, 2), pool=st.lists(schemes, max_size=3))
def test_level_bounds_are_never_above_a_plan_at_its_level(kinds, seed, phi, d, pool):
    """A plan whose schemes' reductions are at most ``ρ``: its exact 1F1B compute part is at least
    the level's ``compute_ms`` and design §6's estimate ``max_p (Σt + (pp − 1)·max t)`` at least
    its ``estimate_ms``."""
    pipelines, devices, lengths, queues = random_plan(kinds, seed)
    layout = OptimizerLayout(2, 1, 1)
    exact = max(compute_ms(pipelines, queues, PipelineModel(forward_fraction=phi, p2p_ms=d)))
    times = [[time.microbatch_ms(mb) for mb in queue] for (_, time, _), queue in zip(pipelines, queues)]
    estimate = max(sum(t) + (scheme.pp - 1) * max(t) for (scheme, _, _), t in zip(pipelines, times) if t)
    level = max(reduce_ms(10**9, (s, s), layout, 10.0) for s, _, _ in pipelines)
    bounds = {b.reduce_ms: b for b in level_bounds(
        lengths, [BoundScheme(s, t, c, reduce_ms(10**9, (s, s), layout, 10.0)) for s, t, c in set(kinds + pool)],
        devices, d)}
    assert bounds[level].compute_ms <= exact * (1 + 1e-9) + 1e-9
    assert bounds[level].estimate_ms <= estimate * (1 + 1e-9) + 1e-9


def test_the_estimate_bound_sees_the_bubble():
    """Module docstring's example: sixteen 1-token pieces on one (1,1,4) pipeline (w(s) = s,
    c = 1): the bubble gives (√16 + √3)² = 32.86, the best plan (8 micro-batches of 2) 33."""
    scheme = BoundScheme(Scheme(1, 1, 4), TimeCoefficients(0.0, 1.0, 1.0), 1000)
    (level,) = level_bounds([1] * 16, [scheme], 4)
    assert level.estimate_ms == pytest.approx((4 + 3**0.5) ** 2, rel=1e-3)
    assert level.compute_ms == pytest.approx(20.0, rel=1e-3)
    assert level.estimate_ms <= 16 + 8 + 3 * 3


def test_tight_bound_worked_example():
    schemes = [BoundScheme(Scheme(1, 1, 2), TimeCoefficients(1.37e-6, 0.0946, 15.0), 11_000, 300.0),
               BoundScheme(Scheme(1, 2, 1), TimeCoefficients(2.05e-6, 0.0967, 65.0), 20_000, 300.0)]
    bound = step_bound([4096], schemes, 4)
    assert (bound.work_ms, bound.longest_ms, bound.tight_ms) == pytest.approx((205.2, 495.5, 795.5), abs=0.1)


def test_the_tight_bound_sees_that_fast_schemes_cost_devices():
    """Two 100-token sequences on 4 devices: a cheap slow scheme (1 device, 100 ms each) and a
    fast dear one (4 devices, 50 ms each). Below 100 ms only the fast one finishes a sequence,
    and both sequences on it take 100 ms of its 4 devices: no plan beats 100 ms, while
    work = longest = 50 ms."""
    schemes = [BoundScheme(Scheme(1, 1, 1), TimeCoefficients(0.0, 1.0, 0.0), 1000),
               BoundScheme(Scheme(1, 4, 1), TimeCoefficients(0.0, 0.5, 0.0), 1000)]
    bound = step_bound([100, 100], schemes, 4)
    assert (bound.work_ms, bound.longest_ms, bound.tight_ms) == pytest.approx((50.0, 50.0, 100.0), rel=1e-3)


def test_worked_example():
    schemes = [(Scheme(1, 1, 2), TimeCoefficients(1.37e-6, 0.0946, 15.0), 11_000),
               (Scheme(1, 2, 1), TimeCoefficients(2.05e-6, 0.0967, 65.0), 20_000)]
    assert lower_bound_ms([4096], schemes, 4) == pytest.approx(205.3, abs=0.1)


def test_only_schemes_that_hold_a_sequence_count():
    cheap_small = (Scheme(1, 1, 1), TimeCoefficients(0.0, 1.0, 0.0), 100)
    dear_large = (Scheme(1, 1, 1), TimeCoefficients(0.0, 10.0, 0.0), 1000)
    assert lower_bound_ms([50, 500], [cheap_small, dear_large], 1) == pytest.approx(50 + 5000)


def test_sequence_no_scheme_holds_is_named():
    with pytest.raises(HydraulisError, match=r"lengths\[1\]: 5000 exceeds the longest sequence any scheme can hold"):
        lower_bound_ms([10, 5000], [(Scheme(1, 1, 1), TimeCoefficients(0, 1, 0), 4096)], 1)

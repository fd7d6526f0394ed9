"""The devices-needed program never claims more devices than a plan uses (property test on
random plans), and sees that long sequences hold whole pipelines (a worked oracle)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.base.types import OptimizerLayout, PipelineModel, Scheme, TimeCoefficients
from hydraulis.cost import BoundScheme, level_bounds, reduce_ms
from hydraulis.dispatch.device_bound import ComputeForm, devices_needed, least_compute_ms
from tests.cost.test_bound import compute_ms, random_plan, schemes


@settings(max_examples=60, deadline=None)
@given(kinds=st.lists(schemes, min_size=1, max_size=3), seed=st.integers(0, 2**31 - 1),
       phi=st.floats(0.1, 0.9), pool=st.lists(schemes, max_size=2))
def test_no_plan_computes_in_time_on_fewer_devices(kinds, seed, phi, pool):
    """A plan at level ρ with exact compute part T (and design §6's estimate E) uses at least
    ``D(T)`` (``D(E)`` in the estimate's form) devices, and ``least_compute_ms`` is at most T (E)."""
    pipelines, _, lengths, queues = random_plan(kinds, seed)
    layout = OptimizerLayout(2, 1, 1)
    exact = max(compute_ms(pipelines, queues, PipelineModel(forward_fraction=phi)))
    times = [[time.microbatch_ms(mb) for mb in queue] for (_, time, _), queue in zip(pipelines, queues)]
    estimate = max(sum(t) + (scheme.pp - 1) * max(t) for (scheme, _, _), t in zip(pipelines, times) if t)
    used = sum(scheme.devices for scheme, _, _ in pipelines)
    level = max(reduce_ms(10**9, (s, s), layout, 10.0) for s, _, _ in pipelines)
    bound_schemes = [BoundScheme(s, t, c, reduce_ms(10**9, (s, s), layout, 10.0)) for s, t, c in set(kinds + pool)]
    if exact > 0:
        assert devices_needed(lengths, bound_schemes, exact * (1 + 1e-9), level) <= used * (1 + 1e-7) + 1e-7
        assert least_compute_ms(lengths, bound_schemes, used, level) <= exact * (1 + 1e-9) + 1e-9
    if estimate > 0:
        assert devices_needed(lengths, bound_schemes, estimate * (1 + 1e-9), level,
                              ComputeForm.ESTIMATE) <= used * (1 + 1e-7) + 1e-7


def test_long_sequences_hold_whole_pipelines():
    """Schemes A (1 device, 10 tokens, w = s) and B (4 devices, 100 tokens, w = s/2), 5 devices,
    two 60-token sequences (only B holds them, 30 ms each) and ten of 5 tokens. The closed form
    spreads the work: (2·4·30 + 10·5)/5 = 58 ms. Below 60 ms the two long ones cannot share a B
    pipeline (each takes more than half its room) and two B pipelines need 8 devices, so the
    program says 60 — the best plan (both on one B pipeline, the short ones on A: 60 and 50)."""
    pool = [BoundScheme(Scheme(1, 1, 1), TimeCoefficients(0.0, 1.0, 0.0), 10),
            BoundScheme(Scheme(1, 4, 1), TimeCoefficients(0.0, 0.5, 0.0), 100)]
    lengths = [60, 60] + [5] * 10
    (closed,) = level_bounds(lengths, pool, 5)
    assert closed.compute_ms == pytest.approx(58.0, rel=1e-3)
    assert least_compute_ms(lengths, pool, 5) == pytest.approx(60.0, rel=1e-3)
    assert devices_needed(lengths, pool, 59.0) == pytest.approx(8.0)
    assert math.isinf(devices_needed(lengths, pool, 29.0))

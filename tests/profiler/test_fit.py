"""Fitting: NNLS against brute force, exact recovery of known coefficients, held-out judging."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import Scheme
from hydraulis.profiler.fit import fit_block_time, fit_scheme, held_out_split, nnls
from hydraulis.profiler.measurement import Measurement, MeasureStatus
from hydraulis.profiler.sweep import PointRole, SweepPoint, length_mixes

SCHEME = Scheme(1, 1, 1)


def brute_force_nnls(a, y):
    """The best of the least-squares solutions on every support whose solution is >= 0."""
    best = None
    for size in range(a.shape[1] + 1):
        for support in itertools.combinations(range(a.shape[1]), size):
            x = np.zeros(a.shape[1])
            if support:
                x[list(support)] = np.linalg.lstsq(a[:, list(support)], y, rcond=None)[0]
            if (x >= 0).all():
                residual = np.linalg.norm(a @ x - y)
                best = residual if best is None else min(best, residual)
    return best


@settings(max_examples=60, deadline=None)
@given(st.integers(4, 12), st.integers(1, 5), st.integers(0, 2**31 - 1))
def test_nnls_reaches_the_brute_force_optimum(rows, columns, seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(rows, columns)) * rng.uniform(0.01, 100, size=columns)
    y = rng.normal(size=rows)
    x = nnls(a, y)
    assert (x >= 0).all()
    assert np.linalg.norm(a @ x - y) <= brute_force_nnls(a, y) * (1 + 1e-7) + 1e-9


def test_nnls_equals_least_squares_when_that_is_non_negative():
    a = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]])
    assert np.allclose(nnls(a, a @ np.array([2.0, 3.0])), [2.0, 3.0])


def _measurement(depth, lengths, time, role=PointRole.FIT, activation=1.0):
    return Measurement(SweepPoint(SCHEME, depth, tuple(lengths), role), MeasureStatus.OK, time_ms=time,
                       forward_ms=time / 3, activation_bytes=activation)


def _model(depth, lengths, ends=(0.0, 0.5, 4.0), unit=(1e-4, 0.02, 1.0)):
    s = np.asarray(lengths, dtype=float)
    a, b, c = (e + depth * u for e, u in zip(ends, unit))
    return c + a * (s * s).sum() + b * s.sum()


def test_worked_example_of_the_docstring():
    points = [_measurement(1, [s], 2 + 1e-4 * s * s + 0.01 * s) for s in (100, 200, 400)]
    time = fit_block_time(points).at(1)
    assert time.a == pytest.approx(1e-4) and time.b == pytest.approx(0.01) and time.c == pytest.approx(2)


def test_two_depths_recover_ends_and_unit_and_extrapolate_exactly():
    points = [_measurement(d, mix, _model(d, mix)) for d in (1, 2) for t in (64, 128, 256, 512)
              for mix in length_mixes(t)]
    block = fit_block_time(points)
    assert block.unit.a == pytest.approx(1e-4) and block.unit.b == pytest.approx(0.02)
    assert block.ends.b == pytest.approx(0.5) and block.ends.c == pytest.approx(4.0)
    assert block.predict(8, [1000, 24]) == pytest.approx(_model(8, [1000, 24]))


def test_held_out_split_rotates_the_mix_and_judges_every_token_count():
    points = [_measurement(1, mix, 1.0) for t in (64, 128, 256, 512, 1024) for mix in length_mixes(t)]
    fit, held = held_out_split(points)
    assert len(held) == 5 and len(fit) + len(held) == len(points)
    assert sorted(m.point.tokens for m in held) == [64, 128, 256, 512, 1024]
    assert len({m.point.lengths[-1] * 1024 // m.point.tokens for m in held}) == 4


def test_fit_scheme_with_noise_stays_close_and_reports_quality_and_extrapolation():
    rng = np.random.default_rng(3)
    points = [_measurement(d, mix, _model(d, mix) * rng.uniform(0.97, 1.03), activation=1000 + d * 50 * sum(mix))
              for d in (1, 2) for t in (64, 128, 256, 512) for mix in length_mixes(t)]
    checks = [_measurement(4, mix, _model(4, mix), PointRole.CHECK) for mix in length_mixes(256)]
    fit = fit_scheme(SCHEME, 4, points + checks)
    assert fit.quality.median_rel_error < 0.03 and fit.quality.r2 > 0.99
    assert fit.quality.points == 8 and fit.fitted_points == len(points) - 8
    assert fit.extrapolation.points == 4 and fit.extrapolation.max_rel_error < 0.06
    assert fit.activation_bytes_per_token == pytest.approx(200.0)
    assert fit.activation_fixed_bytes == pytest.approx(1000.0)
    assert fit.forward_fraction == pytest.approx(1 / 3)


def test_a_fit_is_never_negative_even_when_the_data_say_so():
    points = [_measurement(1, mix, 50.0 - 0.01 * sum(mix)) for t in (64, 128, 256) for mix in length_mixes(t)]
    time = fit_block_time(points).at(1)
    assert min(time.a, time.b, time.c) >= 0


def test_too_few_points_is_an_error_naming_the_scheme():
    with pytest.raises(HydraulisError, match=r"scheme \(1,1,1\)"):
        fit_scheme(SCHEME, 1, [_measurement(1, [64], 1.0)])

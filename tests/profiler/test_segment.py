"""Profiling the repeated segment: the plan of stage points, the blocks fitted back from a made-up
device (oracle: known blocks), held-out whole stages composed exactly, the time saved, and the
recipe with a stand-in for the measuring processes."""

import itertools
import json

import numpy as np
import pytest

from hydraulis.artifacts.measurements import MeasurementCache
from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import device_preset, model_preset
from hydraulis.base.segments import stage_block
from hydraulis.base.types import Recompute, Scheme
from hydraulis.io.profile_run import ProfileRequest, profile_segment_space
from hydraulis.profiler.measurement import (
    Environment,
    Measurement,
    MeasureSettings,
    MeasureStatus,
    ReductionMeasurement,
)
from hydraulis.profiler.segment import (
    BLOCKS,
    block_counts,
    composed_ms,
    fit_segments,
    held_out_errors,
    profiling_time,
    segment_plan,
    whole_stage_points,
)
from hydraulis.profiler.sweep import PointRole, SweepConfig, SweepPoint

TINY = model_preset("tiny")
ENVIRONMENT = Environment("cpu", "test cpu", "2.0", "fp32", 1, 4)

# A made-up device: (c, a, b) ms and kept bytes per token of each block, per tp (cp 1).
TRUE = {
    "first": ((2.0, 1e-6, 0.02), 300.0), "middle": ((1.0, 0.0, 0.01), 200.0),
    "last": ((4.0, 2e-6, 0.05), 500.0), "only": ((5.0, 3e-6, 0.06), 700.0),
    "none": ((0.5, 4e-5, 0.03), 4000.0), "selective": ((0.6, 6e-5, 0.03), 3000.0),
    "full": ((0.9, 8e-5, 0.045), 100.0),
}


def true_block(name, tp, sp):
    (c, a, b), kept = TRUE[name]
    share = tp * (1.25 if sp else 1.0)
    return c, a / share, b / share, kept / share


def true_time(point):
    s = np.asarray(point.lengths, dtype=float)
    total = 0.0
    for name, count in zip(BLOCKS, block_counts(point)):
        c, a, b, _ = true_block(name, point.scheme.tp, point.scheme.sp)
        total += count * (c + a * (s * s).sum() + b * s.sum())
    return total


def true_bytes(point):
    return sum(count * true_block(name, point.scheme.tp, point.scheme.sp)[3] * point.tokens
               for name, count in zip(BLOCKS, block_counts(point)))


def _config(tps=(1, 2), pps=(1, 2), counts=(64, 128, 256, 512), max_procs=4):
    return SweepConfig(TINY, (1,), tps, pps, counts, max_procs, repeats=1, warmup=0)


def _measured(point, wall_s=0.5):
    time = true_time(point)
    return Measurement(point, MeasureStatus.OK, time, time / 3, true_bytes(point), (time,), wall_s)


def test_the_plan_measures_seven_blocks_per_key_then_the_held_out_stages_of_every_scheme():
    plan = segment_plan(_config(tps=(1,), pps=(2,)))
    fits = [p for p in plan.points if p.role is PointRole.FIT]
    checks = [p for p in plan.points if p.role is PointRole.CHECK]
    assert plan.schemes == (Scheme(1, 1, 2),)
    assert len(fits) == 7 * 4 * 2 and all(p.stage is not None and p.rank_scheme == Scheme(1, 1, 1) for p in fits)
    assert {(p.scheme.recompute, p.stage_layers) for p in fits} == {
        (Recompute.NONE, (1, 1, 1)), (Recompute.SELECTIVE, (1, 1, 1)), (Recompute.FULL, (1, 1, 1)),
        (Recompute.NONE, (1, 2, 1)), (Recompute.NONE, (1, 1)), (Recompute.NONE, (1,))}
    assert {(p.scheme, p.stage, p.depth) for p in checks} == {
        (Scheme(1, 1, 2), 0, 2), (Scheme(1, 1, 2), 1, 2),
        (Scheme(1, 1, 2, recompute=Recompute.FULL, recompute_layers=(1,)), 0, 2),
        (Scheme(1, 1, 2, recompute=Recompute.FULL, recompute_layers=(1,)), 1, 2)}
    assert len({p.lengths for p in checks}) == 4
    roles = [role for role, _ in itertools.groupby(p.role for p in plan.points)]
    assert roles == [PointRole.FIT, PointRole.CHECK] * 4 + [PointRole.FIT]


def test_sp_is_a_key_of_its_own_and_schemes_beyond_the_devices_are_skipped():
    plan = segment_plan(_config(tps=(1, 2), pps=(1, 2), max_procs=2))
    keys = {(p.scheme.cp, p.scheme.tp, p.scheme.sp) for p in plan.points}
    assert keys == {(1, 1, False), (1, 2, False), (1, 2, True)}
    assert [str(s.scheme) for s in plan.skipped] == ["(1,2,2)", "(1,2,2)[sp]"]
    with pytest.raises(HydraulisError, match="all need more than the 1 local devices"):
        segment_plan(_config(tps=(2,), pps=(1,), max_procs=1))


@pytest.mark.parametrize("scheme, stage, depth, counts", [
    (Scheme(1, 1, 1), 0, 4, [0, 0, 0, 1, 4, 0, 0]),
    (Scheme(1, 1, 2, recompute=Recompute.FULL, recompute_layers=(1,)), 0, 2, [1, 0, 0, 0, 1, 0, 1]),
    (Scheme(1, 1, 3, recompute=Recompute.SELECTIVE), 1, 2, [0, 1, 0, 0, 0, 2, 0]),
    (Scheme(1, 1, 3, recompute=Recompute.FULL), 2, 1, [0, 0, 1, 0, 0, 0, 1]),
])
def test_block_counts(scheme, stage, depth, counts):
    assert block_counts(SweepPoint(scheme, depth, (64,), PointRole.FIT, stage, (depth,) * scheme.pp)) == counts


@pytest.mark.parametrize("tp, sp", [(1, False), (2, False), (2, True)])
def test_the_fit_recovers_the_made_up_blocks_and_composes_held_out_stages_exactly(tp, sp):
    plan = segment_plan(_config())
    fits = [_measured(p) for p in plan.points if p.role is PointRole.FIT and (p.scheme.tp, p.scheme.sp) == (tp, sp)]
    segments = fit_segments((1, tp, sp), fits)
    for name in BLOCKS:
        block = getattr(segments, {"none": "layer"}.get(name, name))
        c, a, b, kept = true_block(name, tp, sp)
        assert (block.time.c, block.time.a, block.time.b) == pytest.approx((c, a, b), rel=1e-6, abs=1e-9), name
        assert block.kept_bytes_per_token == pytest.approx(kept, rel=1e-6), name
    checks = [_measured(p) for p in plan.points if p.role is PointRole.CHECK and (p.scheme.tp, p.scheme.sp) == (tp, sp)]
    errors = held_out_errors([segments], checks)
    assert {e.scheme.pp for e in errors} == {1, 2}
    assert all(e.max_rel_error < 1e-6 and e.r2 > 0.999999 for e in errors)


def test_a_fit_saying_recomputation_is_cheaper_is_clamped_to_the_plain_layer():
    plan = segment_plan(_config(tps=(1,)))
    fits = []
    for point in plan.points:
        if point.role is PointRole.FIT:
            cheap = point.scheme.recompute is Recompute.FULL
            measured = _measured(point)
            fits.append(Measurement(point, MeasureStatus.OK, measured.time_ms * (0.5 if cheap else 1.0)))
    segments = fit_segments((1, 1, False), fits)
    assert segments.full.time.b >= segments.layer.time.b and segments.full.time.c >= segments.layer.time.c
    assert segments.full.kept_bytes_per_token <= segments.layer.kept_bytes_per_token


def test_too_few_points_is_an_error_naming_the_key():
    point = SweepPoint(Scheme(1, 2, 1, True), 1, (64,), PointRole.FIT, 0, (1,))
    with pytest.raises(HydraulisError, match=r"segments \(1,2,sp\).*too few"):
        fit_segments((1, 2, True), [_measured(point)])


def test_composed_time_is_the_stage_block_on_the_micro_batch():
    plan = segment_plan(_config(tps=(1,)))
    segments = fit_segments((1, 1, False), [_measured(p) for p in plan.points if p.role is PointRole.FIT])
    scheme = Scheme(1, 1, 2, recompute=Recompute.FULL, recompute_layers=(2, 0))
    point = SweepPoint(scheme, 2, (100, 50), PointRole.CHECK, 0, (2, 2))
    time = stage_block(segments, scheme, 0, 2).time
    assert composed_ms(segments, point) == pytest.approx(time.c + time.a * 12500 + time.b * 150)
    assert composed_ms(segments, point) == pytest.approx(true_time(point), rel=1e-6)


def test_whole_stage_points_of_the_docstring_example():
    assert whole_stage_points(_config(tps=(1,), pps=(2,)), [Scheme(1, 1, 2)]) == 160
    assert whole_stage_points(_config(tps=(1,), pps=(1,)), [Scheme(1, 1, 1)]) == (1 + 5) * 16


def test_profiling_time_from_the_recorded_wall_times():
    plan = segment_plan(_config(tps=(1,), pps=(2,)))
    fits = [_measured(p, 0.25) for p in plan.points if p.role is PointRole.FIT]
    checks = [_measured(p, 0.5) for p in plan.points if p.role is PointRole.CHECK]
    time = profiling_time(_config(tps=(1,), pps=(2,)), plan.schemes, fits, checks)
    assert (time.segment_points, time.segment_wall_s) == (56, 14.0)
    assert time.whole_stage_wall_s == 80.0 and time.saved_s == 66.0
    with pytest.raises(HydraulisError, match="recorded no wall time"):
        profiling_time(_config(tps=(1,), pps=(2,)), plan.schemes, fits, [_measured(p, 0.0) for p in plan.points])


class FakeRunner:
    """Appends every point of a job (the made-up device), then its reduction, to its cache."""

    def __init__(self):
        self.jobs = []

    def __call__(self, job, processes):
        self.jobs.append((job, processes))
        cache = MeasurementCache(job.cache)
        for point in job.points:
            cache.append(_measured(point), job.settings)
        if job.reduction:
            cache.append_reduction(ReductionMeasurement(job.reduction, 8.0, 3.0, 5.0, (8.0,)), job.settings)


def _request(cache_dir):
    return ProfileRequest(_config(), ENVIRONMENT, device_preset("cpu"), cache_dir, "2026-01-01T00:00:00+00:00",
                          "test", "hydraulis profile --model tiny --variants all")


def test_the_recipe_measures_in_one_job_composes_the_plain_schemes_and_a_rerun_measures_nothing(tmp_path):
    runner = FakeRunner()
    outcome = profile_segment_space(_request(str(tmp_path)), runner)
    assert len(runner.jobs) == 1 and runner.jobs[0][1] == 4 and runner.jobs[0][0].reduction == 4
    space = outcome.space
    assert {s.key for s in space.segments} == {(1, 1, False), (1, 2, False), (1, 2, True)}
    assert {p.scheme for p in space.profiles} == {Scheme(1, t, p) for t in (1, 2) for p in (1, 2)}
    assert all(p.fit is not None and p.fit.max_rel_error < 1e-6 for p in space.profiles)
    assert {e.scheme for e in outcome.held_out} == {Scheme(1, t, p, s) for t in (1, 2) for p in (1, 2)
                                                   for s in (False, True) if t > 1 or not s}
    assert outcome.time.saved_s > 0 and outcome.reused == 0 and outcome.measured == len(segment_plan(_config()).points)
    single = space.profile(Scheme(1, 1, 1)).time
    c, a, b = (sum(v) for v in zip(true_block("only", 1, False)[:3], *[true_block("none", 1, False)[:3]] * 4))
    assert (single.c, single.a, single.b) == pytest.approx((c, a, b), rel=1e-6)

    again = profile_segment_space(_request(str(tmp_path)), runner)
    assert len(runner.jobs) == 1 and again.measured == 0 and again.space.profiles == space.profiles


def test_a_stage_key_round_trips_through_the_cache_and_old_lines_have_no_wall_time(tmp_path):
    settings = MeasureSettings(TINY, ENVIRONMENT, 1, 0)
    point = SweepPoint(Scheme(1, 2, 3, True, Recompute.FULL), 1, (32, 32), PointRole.FIT, 1, (1, 1, 1))
    plain = SweepPoint(Scheme(1, 2, 3, True, Recompute.FULL), 1, (32, 32))
    cache = MeasurementCache(tmp_path)
    cache.append(_measured(point, 0.75), settings)
    cache.append(Measurement(plain, MeasureStatus.OK, 1.0, 0.5, 10.0, (1.0,)), settings)
    lines = cache.path.read_text().splitlines()
    old = json.loads(lines[1])
    del old["wall_s"]
    cache.path.write_text("\n".join([lines[0], json.dumps(old)]) + "\n")
    reread = MeasurementCache(tmp_path)
    assert reread.find(point, settings) == _measured(point, 0.75)
    assert reread.find(plain, settings).wall_s == 0.0

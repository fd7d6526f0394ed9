"""The profile recipe with a stand-in for the measuring processes: resume from the cache,
capacity limits from out-of-memory points, the assembled space."""

import numpy as np
import pytest

from hydraulis.artifacts.measurements import MeasurementCache
from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import device_preset, model_preset
from hydraulis.base.types import OptimizerLayout, Scheme, SpaceSource
from hydraulis.cost import scheme_capacities
from hydraulis.cost.step import implied_reduce_gbps
from hydraulis.io.profile_run import ProfileRequest, profile_scheme_space
from hydraulis.profiler.measurement import Environment, Measurement, MeasureStatus, ReductionMeasurement
from hydraulis.profiler.sweep import SweepConfig, sweep_plan

TINY = model_preset("tiny")
ENVIRONMENT = Environment("cpu", "test cpu", "2.0", "fp32", 1, 4)
REDUCTION_MS = 8.0
OVERLAP = 0.37
"""The made-up device's measured share of an exchange under compute."""
HANDOFF_MS = 2.0
"""The made-up device's pipeline hand-off at 64 tokens (growing with the tokens)."""


def true_time(point):
    """A made-up device: tp and cp halve the work, each layer costs the same, ends cost extra."""
    share = point.scheme.tp * point.scheme.cp
    s = np.asarray(point.lengths, dtype=float)
    return 3.0 + point.depth * (1.0 + (2e-4 * (s * s).sum() + 0.05 * s.sum()) / share) + 0.1 * s.sum()


class FakeRunner:
    """Appends every point of a job, then its reduction, to its cache like rank 0 does; can run
    out of memory, fail, or record nothing."""

    def __init__(self, out_of_memory_from=None, fail=False, silent=False):
        self.out_of_memory_from, self.fail, self.silent = out_of_memory_from, fail, silent
        self.jobs = []

    def __call__(self, job, processes):
        self.jobs.append((job, processes))
        cache = MeasurementCache(job.cache)
        if self.silent:
            return
        for point in job.points:
            if self.fail:
                raise RuntimeError("rank 1 exited with status 1")
            limit = self.out_of_memory_from
            if limit and point.scheme == limit[0] and point.tokens >= limit[1]:
                cache.append(Measurement(point, MeasureStatus.OUT_OF_MEMORY), job.settings)
                raise RuntimeError("rank 0 failed: out of memory")
            time = true_time(point)
            handoff = HANDOFF_MS * point.tokens / 64 if point.scheme.pp > 1 and point.stage is None else None
            cache.append(Measurement(point, MeasureStatus.OK, time, time / 3, 100.0 * point.depth * point.tokens,
                                     (time,), handoff_ms=handoff), job.settings)
        if job.reduction:
            cache.append_reduction(ReductionMeasurement(job.reduction, REDUCTION_MS, 3.0, 5.0, (REDUCTION_MS,), overlap=OVERLAP),
                                   job.settings)


def _request(cache_dir, tps=(1, 2), token_counts=(64, 128, 256), pps=(1, 2), environment=ENVIRONMENT):
    sweep = SweepConfig(TINY, (1,), tps, pps, token_counts, max_procs=4, repeats=1, warmup=0,
                        check_full_stage=True)
    return ProfileRequest(sweep, environment, device_preset("cpu"), cache_dir, "2026-01-01T00:00:00+00:00",
                          "test", "hydraulis profile --model tiny")


def test_a_profile_fits_the_made_up_device_and_a_rerun_measures_nothing(tmp_path):
    runner = FakeRunner()
    outcome = profile_scheme_space(_request(str(tmp_path)), runner)
    assert outcome.reused == 0 and outcome.measured > 0
    assert len(runner.jobs) == 1 and runner.jobs[0][1] == 4
    space = outcome.space
    assert space.provenance.source is SpaceSource.MEASURED and space.provenance.software
    assert {p.scheme for p in space.profiles} == {Scheme(1, t, p) for t in (1, 2) for p in (1, 2)}
    whole = space.profile(Scheme(1, 2, 1)).time
    assert whole.a == pytest.approx(4 * 1e-4, rel=1e-6) and whole.c == pytest.approx(7.0, rel=1e-6)
    assert space.profile(Scheme(1, 1, 1)).activation_bytes_per_token == pytest.approx(400.0)
    assert all(p.fit.median_rel_error < 1e-6 for p in space.profiles)
    extrapolated = [f for f in outcome.fits if f.extrapolation]
    assert extrapolated and all(f.extrapolation.max_rel_error < 1e-6 for f in extrapolated)
    assert all(c.max_seq_len > 0 for c in scheme_capacities(space, OptimizerLayout(4, 1, 1)))
    assert runner.jobs[0][0].reduction == 4 and outcome.reduction.devices == 4
    assert space.grad_reduce_bytes == 4
    assert space.reduce_gbps == pytest.approx(implied_reduce_gbps(TINY.params, [Scheme(1, 1, 1)], REDUCTION_MS, 4))
    assert space.reduce_overlap == OVERLAP

    again = profile_scheme_space(_request(str(tmp_path)), runner)
    assert len(runner.jobs) == 1 and again.reused == outcome.measured and again.measured == 0
    assert again.space.profiles == space.profiles


def test_out_of_memory_becomes_a_capacity_limit_and_the_rest_is_measured(tmp_path):
    runner = FakeRunner(out_of_memory_from=(Scheme(1, 1, 2), 256))
    outcome = profile_scheme_space(_request(str(tmp_path), token_counts=(64, 128, 256, 512)), runner)
    assert len(runner.jobs) == 2
    assert [(str(c.scheme), c.tokens) for c in outcome.capacity_limits] == [("(1,1,2)", 256)]
    assert Scheme(1, 1, 2) in {p.scheme for p in outcome.space.profiles}
    assert not [p for p in runner.jobs[1][0].points if p.scheme == Scheme(1, 1, 2)]
    assert {p.scheme for p in runner.jobs[1][0].points} == {Scheme(1, 2, 1), Scheme(1, 2, 2)}


def test_a_failure_that_is_not_out_of_memory_is_raised(tmp_path):
    with pytest.raises(RuntimeError, match="status 1"):
        profile_scheme_space(_request(str(tmp_path)), FakeRunner(fail=True))


def test_a_scheme_out_of_memory_from_the_start_is_skipped_with_the_reason(tmp_path):
    outcome = profile_scheme_space(_request(str(tmp_path)), FakeRunner(out_of_memory_from=(Scheme(1, 2, 1), 64)))
    skipped = {str(s.scheme): s.reason for s in outcome.skipped}
    assert "out of memory from 64 tokens" in skipped["(1,2,1)"]
    assert Scheme(1, 2, 1) not in {p.scheme for p in outcome.space.profiles}


def test_without_a_cache_folder_everything_is_measured(tmp_path):
    runner = FakeRunner()
    profile_scheme_space(_request(None), runner)
    assert profile_scheme_space(_request(None), runner).reused == 0


def test_no_scheme_left_to_fit_is_an_error(tmp_path):
    with pytest.raises(HydraulisError, match="none could be measured"):
        profile_scheme_space(_request(str(tmp_path), tps=(2,), pps=(1,)), FakeRunner(out_of_memory_from=(Scheme(1, 2, 1), 8)))


def test_filling_the_node_runs_replicas_and_is_cached_apart(tmp_path):
    filled = Environment("cpu", "test cpu", "2.0", "fp32", 1, 4, fill_node=True)
    assert [filled.replicas(Scheme(1, t, p)) for t, p in ((1, 1), (2, 1), (2, 2))] == [4, 2, 1]
    assert ENVIRONMENT.replicas(Scheme(1, 1, 1)) == 1
    runner = FakeRunner()
    profile_scheme_space(_request(str(tmp_path), tps=(1,), pps=(1,)), runner)
    outcome = profile_scheme_space(_request(str(tmp_path), tps=(1,), pps=(1,), environment=filled), runner)
    assert outcome.reused == 0 and outcome.measured > 0
    assert "node filled with replicas" in outcome.space.provenance.software


def test_a_single_device_measures_no_reduction_and_keeps_the_preset_bandwidth(tmp_path):
    single = Environment("cpu", "test cpu", "2.0", "fp32", 1, 1)
    runner = FakeRunner()
    outcome = profile_scheme_space(_request(str(tmp_path), tps=(1,), pps=(1,), environment=single), runner)
    assert runner.jobs[0][0].reduction == 0 and outcome.reduction is None
    assert outcome.space.reduce_gbps == device_preset("cpu").intra_node_gbps
    assert outcome.space.reduce_overlap == device_preset("cpu").reduce_overlap


def test_a_job_that_records_nothing_is_an_error_not_a_loop(tmp_path):
    with pytest.raises(HydraulisError, match="without recording"):
        profile_scheme_space(_request(str(tmp_path)), FakeRunner(silent=True))


def test_the_pipeline_handoff_is_the_median_of_the_pipeline_points_and_without_them_the_presets(tmp_path):
    outcome = profile_scheme_space(_request(str(tmp_path)), FakeRunner())
    points = sweep_plan(_request(str(tmp_path)).sweep).points
    handoffs = [HANDOFF_MS * p.tokens / 64 for p in points if p.scheme.pp > 1 and p.stage is None]
    assert outcome.space.pipeline_model.p2p_ms == pytest.approx(float(np.median(handoffs)))
    alone = profile_scheme_space(_request(str(tmp_path / "pp1"), pps=(1,)), FakeRunner())
    assert alone.space.pipeline_model.p2p_ms == device_preset("cpu").collective_latency_us / 1e3

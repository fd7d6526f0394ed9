"""``hydraulis profile``: measure every scheme that fits the local devices and fit a scheme space.

Recipe:

1. plan the points (:func:`~hydraulis.profiler.sweep.sweep_plan`): schemes needing more
   devices than are here are listed with the reason;
2. look every point, and the reduction on all local devices (when there are at least 2), up in
   the measurement cache (:mod:`hydraulis.artifacts.measurements`);
3. measure the rest on local processes (the runtime's ``profiling.measure``,
   the runtime's ``profiling.reduction``), each point on as many replicas of its scheme as fill
   the node when the environment says so (the runtime's ``profiling.device``); a point that runs
   out of memory ends that job — it is recorded as the scheme's capacity limit, its larger
   points are not tried, and a new job measures what is left;
4. fit each scheme (:mod:`hydraulis.profiler.fit`) and assemble the scheme space: measured
   time coefficients and activation memory, model-state memory from the analytic terms (22 bytes
   per parameter, :func:`~hydraulis.profiler.analytic.analytic_memory_model`: not measurable
   without the optimizer), the measured forward share of a micro-batch, the reduction's
   bandwidth fitted to the measured reduction (:func:`~hydraulis.cost.step.implied_reduce_gbps` of ``(1,1,1)``;
   the device preset's intra-node bandwidth on a single device), the measured time to create a
   communicator (the preset's ``communicator_ms`` on a single device or from an older cache
   line), and the device preset's runtime overhead, safety margin and link latency.

Without a cache folder the cache lives in a temporary folder for the one run.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from hydraulis.artifacts.measurements import MeasurementCache
from hydraulis.base.errors import HydraulisError
from hydraulis.base.segments import compose_profile
from hydraulis.base.types import (
    Cluster,
    DeviceSpec,
    FitQuality,
    PipelineModel,
    Provenance,
    Scheme,
    SchemeProfile,
    SchemeSpace,
    SpaceSource,
)
from hydraulis.cost.step import implied_reduce_gbps
from hydraulis.profiler.analytic import analytic_memory_model
from hydraulis.profiler.fit import SchemeFit, fit_scheme
from hydraulis.profiler.measurement import (
    Environment,
    MeasureJob,
    Measurement,
    MeasureSettings,
    ReductionMeasurement,
)
from hydraulis.profiler.segment import (
    HeldOutError,
    ProfilingTime,
    fit_segments,
    held_out_errors,
    profiling_time,
    segment_plan,
)
from hydraulis.profiler.sweep import (
    Interleave,
    PointRole,
    SkippedScheme,
    SweepConfig,
    SweepPlan,
    SweepPoint,
    stage_layers,
    sweep_plan,
)
from hydraulis.sharding.kinds import ReduceDtype

log = logging.getLogger(__name__)

Runner = Callable[[MeasureJob, int], None]
"""``runner(job, processes)`` runs the runtime's ``profiling.measure.measure_job`` on that many
local processes; raises when a rank fails."""


@dataclass(frozen=True)
class ProfileRequest:
    """A profile: the sweep, where it runs, the device preset for the facts not measured, the
    cache folder (None: a temporary one) and the provenance of the space."""

    sweep: SweepConfig
    environment: Environment
    device: DeviceSpec
    cache_dir: str | None
    created: str
    tool_version: str
    command: str = ""


@dataclass(frozen=True)
class CapacityLimit:
    """The smallest micro-batch of ``scheme`` that ran out of memory (at stage ``depth``)."""

    scheme: Scheme
    depth: int
    tokens: int


@dataclass(frozen=True)
class ProfileOutcome:
    space: SchemeSpace
    fits: tuple[SchemeFit, ...]
    skipped: tuple[SkippedScheme, ...]
    capacity_limits: tuple[CapacityLimit, ...]
    reused: int
    measured: int
    wall_s: float
    reduction: ReductionMeasurement | None = None


def profile_scheme_space(request: ProfileRequest, runner: Runner) -> ProfileOutcome:
    """Steps 1–4 of the module docstring."""
    started = time.perf_counter()
    plan = sweep_plan(request.sweep)
    found, reduction, reused = _measure_plan(request, plan, runner)
    limits = _capacity_limits(found.values())
    measured = sum(m is not None for m in found.values()) - reused
    fits, skipped = _fit_schemes(request, plan, found, limits)
    space = measured_space(request, fits, reduction, handoffs=_handoffs(found.values()))
    return ProfileOutcome(space, fits, plan.skipped + skipped, limits, reused, measured,
                          time.perf_counter() - started, reduction)


@dataclass(frozen=True)
class SegmentProfileOutcome:
    """A profile with variants: the space (plain schemes and their segments), how its composed
    stages predict whole stages held out, and the profiling time saved."""

    space: SchemeSpace
    held_out: tuple[HeldOutError, ...]
    time: ProfilingTime
    skipped: tuple[SkippedScheme, ...]
    reused: int
    measured: int
    wall_s: float
    reduction: ReductionMeasurement | None = None

    @property
    def median_error(self) -> float:
        """The median over schemes of each scheme's held-out median relative error."""
        return float(np.median([e.median_rel_error for e in self.held_out]))

    @property
    def worst_error(self) -> float:
        """The largest of the schemes' held-out median relative errors."""
        return max(e.median_rel_error for e in self.held_out)


def profile_segment_space(request: ProfileRequest, runner: Runner) -> SegmentProfileOutcome:
    """``hydraulis profile --variants all`` (:mod:`hydraulis.profiler.segment`): measure the
    segment points, the held-out whole stages and the reduction in one job (every point on the
    same processes: a rank idle in another point's job would load the cores differently), the
    held-out stages of a ``(cp, tp, sp)`` in the same rounds as its segment points; fit the segments of
    every ``(cp, tp, sp)``, compose the plain schemes, judge the composition on the held-out
    stages."""
    started = time.perf_counter()
    plan = segment_plan(request.sweep)
    found, reduction, reused = _measure_plan(request, plan, runner)
    measured = [m for m in found.values() if m is not None]
    fits = [m for m in measured if m.point.role is PointRole.FIT]
    checks = [m for m in measured if m.point.role is PointRole.CHECK]
    segments = tuple(fit_segments(key, [m for m in fits if (m.point.scheme.cp, m.point.scheme.tp, m.point.scheme.sp)
                                        == key])
                     for key in dict.fromkeys((s.cp, s.tp, s.sp) for s in plan.schemes))
    held_out = held_out_errors(segments, checks)
    quality = {e.scheme: FitQuality(e.r2, e.median_rel_error, e.max_rel_error, e.points) for e in held_out}
    env, device = request.environment, request.device
    profiles = tuple(replace(compose_profile(next(s for s in segments if s.key == (scheme.cp, scheme.tp, False)),
                                             request.sweep.model, scheme, env.devices,
                                             device.runtime_overhead_bytes + device.workspace_bytes),
                             fit=quality.get(scheme)) for scheme in plan.schemes if not scheme.sp)
    space = replace(measured_space(request, (), reduction, profiles, [m.forward_ms / m.time_ms for m in fits],
                                   _handoffs(found.values())), segments=segments)
    return SegmentProfileOutcome(space, held_out, profiling_time(request.sweep, plan.schemes, fits, checks),
                                 plan.skipped, reused, len(measured) - reused, time.perf_counter() - started, reduction)


def _measure_plan(request: ProfileRequest, plan: SweepPlan,
                  runner: Runner) -> tuple[dict[SweepPoint, Measurement | None], ReductionMeasurement | None, int]:
    """Steps 2–3: every point of ``plan`` found in the cache or measured, the reduction, and how
    many points the cache already held."""
    sweep = request.sweep
    settings = MeasureSettings(sweep.model, request.environment, sweep.repeats, sweep.warmup, sweep.statistic)
    devices = reduction_devices(request.environment)
    with tempfile.TemporaryDirectory(prefix="hydraulis-profile-") as scratch:
        cache = MeasurementCache(request.cache_dir or scratch)
        reused = sum(cache.find(p, settings) is not None for p in plan.points)
        log.info("%d of %d points found in %s", reused, len(plan.points), cache.path)
        cache = _measure_pending(plan, settings, devices, cache, runner, sweep.interleave)
        found = {p: cache.find(p, settings) for p in plan.points}
        reduction = cache.find_reduction(devices, settings) if devices else None
    return found, reduction, reused


def reduction_devices(environment: Environment) -> int:
    """The ranks the reduction is measured on: all local devices, or 0 (none) on a single one,
    where the cost model has nothing to reduce (one pipeline in the optimizer's layout)."""
    return environment.devices if environment.devices >= 2 else 0


def measured_space(request: ProfileRequest, fits: tuple[SchemeFit, ...],
                   reduction: ReductionMeasurement | None = None, profiles: tuple[SchemeProfile, ...] = (),
                   forward_fractions: Sequence[float] = (), handoffs: Sequence[float] = ()) -> SchemeSpace:
    """Step 4: the scheme space of the fitted schemes (or of ``profiles`` and the measured
    ``forward_fractions`` when given); the pipeline hand-off ``p2p_ms`` the median of the
    ``handoffs`` measured (:mod:`hydraulis.profiler.handoff`), else the device preset's latency."""
    env, device = request.environment, request.device
    gradient_bytes = ReduceDtype.AUTO.element_bytes(env.device_kind)
    profiles = profiles or tuple(
        SchemeProfile(
            scheme=fit.scheme,
            time=fit.time,
            activation_bytes_per_token=fit.activation_bytes_per_token,
            overhead_bytes=device.runtime_overhead_bytes + device.workspace_bytes + round(fit.activation_fixed_bytes),
            fit=fit.quality,
        )
        for fit in fits
    )
    forward_fractions = forward_fractions or [f.forward_fraction for f in fits]
    return SchemeSpace(
        model=request.sweep.model,
        cluster=Cluster(env.devices, env.devices, device.name),
        memory=analytic_memory_model(request.sweep.model, device, env.memory_bytes or None),
        profiles=profiles,
        provenance=Provenance(SpaceSource.MEASURED, env.description, request.created, request.tool_version,
                              request.command, env.software),
        pipeline_model=PipelineModel(forward_fraction=float(np.median(forward_fractions)),
                                     p2p_ms=float(np.median(handoffs)) if handoffs
                                     else device.collective_latency_us / 1e3),
        reduce_gbps=(implied_reduce_gbps(request.sweep.model.params, (Scheme(1, 1, 1),), reduction.time_ms,
                                         gradient_bytes) if reduction else device.intra_node_gbps),
        communicator_ms=(reduction.communicator_ms if reduction and reduction.communicator_ms is not None
                         else device.communicator_ms),
        reduce_overlap=reduction.overlap if reduction and reduction.overlap is not None else device.reduce_overlap,
        grad_reduce_bytes=gradient_bytes,
    )


def _measure_pending(plan: SweepPlan, settings: MeasureSettings, reduction: int, cache: MeasurementCache,
                     runner: Runner, interleave: Interleave) -> MeasurementCache:
    """Run jobs until every point is measured or beyond a capacity limit, and the reduction on
    ``reduction`` ranks (0: none) is measured (step 3); ``interleave`` says which of a job's
    points share the measuring rounds."""
    env = settings.environment
    while True:
        found = {p: cache.find(p, settings) for p in plan.points}
        limits = _capacity_limits(found.values())
        pending = tuple(p for p, m in found.items() if m is None and not _beyond(p, limits))
        missing = reduction if reduction and cache.find_reduction(reduction, settings) is None else 0
        if not pending and not missing:
            return cache
        job = MeasureJob(pending, settings, str(cache.path.parent), done=len(plan.points) - len(pending),
                         total=len(plan.points), reduction=missing, interleave=interleave)
        processes = max([missing] + [p.rank_scheme.devices * env.replicas(p.rank_scheme) for p in pending])
        try:
            runner(job, processes)
        except Exception:
            before = len(cache.entries)
            cache = MeasurementCache(cache.path.parent)
            if len(_capacity_limits(cache.find(p, settings) for p in plan.points)) > len(limits):
                log.warning("a point ran out of memory; measuring the remaining points in a new job")
                continue
            log.error("the measuring job failed after %d new points", len(cache.entries) - before)
            raise
        before = len(cache.entries)
        cache = MeasurementCache(cache.path.parent)
        if len(cache.entries) == before:
            raise HydraulisError("measuring job", f"{len(pending)} points, reduction on {missing} ranks",
                                 f"finished without recording any of them in {cache.path}")


def _handoffs(measurements) -> list[float]:
    """The hand-offs of the measured whole pipelines (``pp > 1``)."""
    return [m.handoff_ms for m in measurements if m is not None and m.ok and m.handoff_ms is not None]


def _capacity_limits(measurements) -> tuple[CapacityLimit, ...]:
    """Per scheme, the smallest micro-batch that ran out of memory."""
    smallest: dict[Scheme, CapacityLimit] = {}
    for m in measurements:
        if m is None or m.ok:
            continue
        limit = smallest.get(m.point.scheme)
        if limit is None or m.point.tokens < limit.tokens:
            smallest[m.point.scheme] = CapacityLimit(m.point.scheme, m.point.depth, m.point.tokens)
    return tuple(smallest.values())


def _beyond(point: SweepPoint, limits: tuple[CapacityLimit, ...]) -> bool:
    """Whether a capacity limit of ``point``'s scheme rules it out (as many tokens or more, at
    the same depth or deeper)."""
    return any(limit.scheme == point.scheme and point.tokens >= limit.tokens and point.depth >= limit.depth
               for limit in limits)


def _fit_schemes(request: ProfileRequest, plan: SweepPlan, found: dict[SweepPoint, Measurement | None],
                 limits: tuple[CapacityLimit, ...]) -> tuple[tuple[SchemeFit, ...], tuple[SkippedScheme, ...]]:
    fits, skipped = [], []
    limited = {limit.scheme: limit for limit in limits}
    for scheme in plan.schemes:
        measurements = [m for p, m in found.items() if p.scheme == scheme and m is not None]
        try:
            fits.append(fit_scheme(scheme, stage_layers(request.sweep.model, scheme), measurements))
        except HydraulisError as error:
            if scheme not in limited:
                raise
            limit = limited[scheme]
            skipped.append(SkippedScheme(scheme, f"out of memory from {limit.tokens} tokens at depth {limit.depth}: "
                                                 f"{error.problem}"))
    if not fits:
        raise HydraulisError("schemes", [str(s.scheme) for s in skipped], "none could be measured and fitted")
    return tuple(fits), tuple(skipped)

"""Profiling the repeated segment: one decoder layer per ``(cp, tp, sp, recompute)`` and the ends
of a stage, fitted, then composed into every stage of every scheme variant (no torch here).

The details: :func:`segment_plan`."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hydraulis.base.errors import HydraulisError, require
from hydraulis.base.segments import Block, Segments, stage_block
from hydraulis.base.stages import even_split
from hydraulis.base.types import ModelSpec, Recompute, Scheme, TimeCoefficients
from hydraulis.profiler.fit import relative_nnls
from hydraulis.profiler.measurement import Measurement
from hydraulis.profiler.sweep import (
    PointRole,
    SweepConfig,
    SweepPlan,
    SweepPoint,
    length_mixes,
    local_schemes,
    sweep_degrees,
)

ENDS = ("first", "middle", "last", "only")
MODES = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)
BLOCKS = ENDS + tuple(m.value for m in MODES)
"""The fitted blocks, in the order of the fit's columns."""


@dataclass(frozen=True)
class HeldOutError:
    """How the composed stages of ``scheme`` (degrees and sp) predict its stages measured whole."""

    scheme: Scheme
    r2: float
    median_rel_error: float
    max_rel_error: float
    points: int


@dataclass(frozen=True)
class ProfilingTime:
    """The segment points' wall time against measuring every scheme × variant as whole stages."""

    segment_points: int
    segment_wall_s: float
    whole_stage_points: int
    whole_stage_point_s: float

    @property
    def whole_stage_wall_s(self) -> float:
        return self.whole_stage_points * self.whole_stage_point_s

    @property
    def saved_s(self) -> float:
        return self.whole_stage_wall_s - self.segment_wall_s


def segment_plan(config: SweepConfig) -> SweepPlan:
    """Per ``(cp, tp, sp)`` the sweep's schemes use, its fit points and the held-out whole
    stages of its schemes (:func:`segment_plan`), a stage of one in turn with a stage of the other
    (the order of a round: the job measures a ``(cp, tp, sp)``'s points in rounds, so a load that
    drifts while they are measured weighs on all alike, the runtime's ``profiling.measure``).
    Schemes needing more than ``max_procs`` devices are skipped.

    ``hydraulis profile --variants all`` measures **stages alone** (:class:`~hydraulis.profiler.sweep.SweepPoint`
    with a ``stage``: ``cp·tp`` ranks, the neighbours' hand-offs stood in for), per ``(cp, tp, sp)``:

    ===================  ======================  ============  =====  =================================
    block measured       scheme                  stage_layers  stage  holds
    ===================  ======================  ============  =====  =================================
    middle, 1 layer      ``(cp,tp,3)`` [mode]    (1, 1, 1)     1      middle ends + one ``mode`` layer,
                                                                      for mode none, selective, full
    middle, 2 layers     ``(cp,tp,3)``           (1, 2, 1)     1      middle ends + two plain layers
    first                ``(cp,tp,2)``           (1, 1)        0      first ends + one layer
    last                 ``(cp,tp,2)``           (1, 1)        1      last ends + one layer
    only                 ``(cp,tp,1)``           (1,)          0      only ends + one layer
    ===================  ======================  ============  =====  =================================

    each at every token count in two mixes (one sequence; four quarters — the extremes of ``Σs²``
    at equal ``Σs``). Every point is a sum of the blocks of :mod:`hydraulis.base.segments` — ``n_E`` ends
    (one of first, middle, last, only) and ``n_m`` layers of each mode::

        t(point) = Σ_blocks n_block·(c_block + a_block·Σs² + b_block·Σs)
        m(point) = Σ_blocks n_block·(o_block + p_block·T)          (bytes one micro-batch keeps)

    and the 21 time and 14 memory unknowns of a ``(cp, tp, sp)`` are fitted together by
    non-negative least squares on relative residuals (:func:`~hydraulis.profiler.fit.relative_nnls`);
    ``p_block`` is the block's kept bytes per token. Recomputation adds work and keeps less: a fit
    saying otherwise (noise) is clamped to the plain layer's (:class:`~hydraulis.base.segments.Segments`).

    **Held out, whole stages.** For every scheme ``(cp, tp, pp)`` of the sweep and ``sp``, every
    stage of its even split is measured alone, plain and recomputing ``⌈L_σ/2⌉`` of its layers in
    full, at each token count in one mix in turn (``i mod #mixes``: halves and skewed mixes the fit
    never saw) — none of these points is in the fit. :func:`held_out_errors` reports per scheme the
    median and largest ``|t̂ − t|/t`` of the composed stage (:func:`~hydraulis.base.segments.stage_block`);
    the profile's figure is the median over schemes of these medians. Fit and held-out points alike
    take the sweep's statistic of their micro-batches (the minimum by default,
    :class:`~hydraulis.profiler.sweep.Statistic`), so the figure measures how well blocks add up to
    a stage, not how much the load on a shared machine moved between two points.

    **Profiling time saved** (:func:`profiling_time`). Measuring every scheme × variant as a whole
    stage would take, per ``(cp, tp, pp, sp)``, ``1 + Π_σ (L_σ + 1)`` variants (selective, and every
    count of full layers per stage) × the sweep's points per scheme (every mix of every count);
    its time is estimated at the measured wall time per held-out whole-stage point, against the
    wall time the segment points took. Worked example, ``tiny`` (4 layers), counts 64–512 (4
    counts, 16 points per scheme): scheme ``(1,1,2)`` alone has ``1 + 3·3 = 10`` variants, 160
    whole-stage points; its segments ``(1,1)`` take 7 blocks × 4 counts × 2 mixes = 56 points shared
    with every ``pp``.
    """
    schemes, skipped = local_schemes(config, (Scheme(cp, tp, pp, sp) for cp, tp, pp in sweep_degrees(config)
                                              for sp in ((False, True) if tp > 1 else (False,))))
    counts = sorted(set(config.token_counts))
    points = []
    for key in dict.fromkeys((s.cp, s.tp, s.sp) for s in schemes):
        fit = _by_stage(_fit_points(key, counts))
        check = _by_stage([p for s in schemes if (s.cp, s.tp, s.sp) == key for p in _check_points(config.model, s, counts)])
        for pair in itertools.zip_longest(fit, check, fillvalue=[]):
            points += [point for stage in pair for point in stage]
    return SweepPlan(tuple(points), tuple(schemes), tuple(skipped))


def _by_stage(points: Sequence[SweepPoint]) -> list[list[SweepPoint]]:
    """``points`` cut where the stage they run changes."""
    return [list(group) for _, group in itertools.groupby(points, key=lambda p: (p.scheme, p.stage_layers, p.stage))]


def _fit_points(key: tuple[int, int, bool], counts: Sequence[int]) -> list[SweepPoint]:
    cp, tp, sp = key
    stages = [(Scheme(cp, tp, 3, sp, mode), (1, 1, 1), 1) for mode in MODES]
    stages += [(Scheme(cp, tp, 3, sp), (1, 2, 1), 1), (Scheme(cp, tp, 2, sp), (1, 1), 0),
               (Scheme(cp, tp, 2, sp), (1, 1), 1), (Scheme(cp, tp, 1, sp), (1,), 0)]
    points = []
    for scheme, layers, stage in stages:
        for tokens in counts:
            mixes = length_mixes(tokens)
            for lengths in dict.fromkeys((mixes[0], mixes[-1])):
                points.append(SweepPoint(scheme, layers[stage], lengths, PointRole.FIT, stage, layers))
    return points


def _check_points(model: ModelSpec, scheme: Scheme, counts: Sequence[int]) -> list[SweepPoint]:
    split = even_split(model.layers, scheme.pp)
    half = tuple(math.ceil(n / 2) for n in split)
    variants = [scheme, Scheme(scheme.cp, scheme.tp, scheme.pp, scheme.sp, Recompute.FULL,
                               () if half == split else half)]
    points = []
    for variant in variants:
        for stage, layers in enumerate(split):
            for i, tokens in enumerate(counts):
                mixes = length_mixes(tokens)
                points.append(SweepPoint(variant, layers, mixes[i % len(mixes)], PointRole.CHECK, stage, split))
    return points


def fit_segments(key: tuple[int, int, bool], measurements: Sequence[Measurement]) -> Segments:
    """The blocks of ``(cp, tp, sp)`` fitted to its stage points (:func:`segment_plan`)."""
    cp, tp, sp = key
    points = [m for m in measurements if m.ok]
    require(len(points) >= 2 * len(BLOCKS), f"segments ({cp},{tp}{',sp' if sp else ''})", len(points),
            f"measured points are too few to fit {len(BLOCKS)} blocks (need >= {2 * len(BLOCKS)}; lower --seq-lens?)")
    counts = np.array([block_counts(m.point) for m in points])
    squares = np.array([sum(s * s for s in m.point.lengths) for m in points], dtype=np.float64)
    tokens = np.array([m.point.tokens for m in points], dtype=np.float64)
    time = relative_nnls(np.hstack([counts * column[:, None] for column in (np.ones_like(tokens), squares, tokens)]),
                         np.array([m.time_ms for m in points]))
    memory = relative_nnls(np.hstack([counts, counts * tokens[:, None]]),
                           np.array([max(m.activation_bytes, 1.0) for m in points]))
    size = len(BLOCKS)
    blocks = {name: Block(TimeCoefficients(time[size + i], time[2 * size + i], time[i]), memory[size + i])
              for i, name in enumerate(BLOCKS)}
    layer = blocks[Recompute.NONE.value]
    return Segments(cp, tp, sp, layer, _recomputing(blocks[Recompute.SELECTIVE.value], layer),
                    _recomputing(blocks[Recompute.FULL.value], layer),
                    **{name: blocks[name] for name in ENDS})


def block_counts(point: SweepPoint) -> list[int]:
    """How many of each block (:data:`BLOCKS`) the stage of ``point`` holds."""
    pp = point.scheme.pp
    ends = "only" if pp == 1 else "first" if point.stage == 0 else "last" if point.stage == pp - 1 else "middle"
    modes = Counter(point.scheme.stage_recompute(point.stage, point.depth))
    return [int(name == ends) for name in ENDS] + [modes[mode] for mode in MODES]


def _recomputing(block: Block, layer: Block) -> Block:
    """``block`` with every time coefficient at least the plain layer's and kept bytes at most."""
    time = TimeCoefficients(max(block.time.a, layer.time.a), max(block.time.b, layer.time.b),
                            max(block.time.c, layer.time.c))
    return Block(time, min(block.kept_bytes_per_token, layer.kept_bytes_per_token))


def composed_ms(segments: Segments, point: SweepPoint) -> float:
    """The composed time of ``point``'s stage on its micro-batch."""
    return stage_block(segments, point.scheme, point.stage, point.depth).time.microbatch_ms(point.lengths)


def held_out_errors(segments: Sequence[Segments], checks: Sequence[Measurement]) -> tuple[HeldOutError, ...]:
    """Per scheme (degrees and sp), the composed-vs-measured error of its held-out stages."""
    by_key = {s.key: s for s in segments}
    pairs: dict[Scheme, list[tuple[float, float]]] = {}
    for m in checks:
        scheme = m.point.scheme
        fitted = by_key.get((scheme.cp, scheme.tp, scheme.sp))
        if m.ok and fitted is not None:
            pairs.setdefault(Scheme(scheme.cp, scheme.tp, scheme.pp, scheme.sp), []).append(
                (composed_ms(fitted, m.point), m.time_ms))
    found = []
    for scheme, pair in pairs.items():
        predicted, measured = np.array(pair).T
        errors = np.abs(predicted - measured) / measured
        spread = ((measured - measured.mean()) ** 2).sum()
        r2 = 1.0 - ((measured - predicted) ** 2).sum() / spread if spread > 0 else 0.0
        found.append(HeldOutError(scheme, float(r2), float(np.median(errors)), float(errors.max()), len(errors)))
    return tuple(found)


def whole_stage_points(config: SweepConfig, schemes: Sequence[Scheme]) -> int:
    """Points to measure every scheme × variant as whole stages (:func:`segment_plan`)."""
    per_scheme = sum(len(length_mixes(tokens)) for tokens in set(config.token_counts))
    variants = sum(1 + math.prod(n + 1 for n in even_split(config.model.layers, s.pp)) for s in schemes)
    return variants * per_scheme


def profiling_time(config: SweepConfig, schemes: Sequence[Scheme], fits: Sequence[Measurement],
                   checks: Sequence[Measurement]) -> ProfilingTime:
    """:func:`segment_plan`'s comparison from the points' recorded wall times."""
    timed = [m.wall_s for m in checks if m.wall_s > 0]
    if not timed:
        raise HydraulisError("held-out points", len(checks), "recorded no wall time to estimate from")
    return ProfilingTime(len(fits), float(sum(m.wall_s for m in fits)), whole_stage_points(config, schemes),
                         float(np.mean(timed)))

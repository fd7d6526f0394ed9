"""Fitting measured points to the cost model (pure numpy).

**Time.** A stage of ``d`` decoder layers running a micro-batch of sequences ``s_1 … s_m``
takes (design §6, with the representative block of :mod:`hydraulis.profiler.sweep`)::

    t(d, mb) = (c_E + d·c_U) + (a_E + d·a_U)·Σ s_i² + (b_E + d·b_U)·Σ s_i

The details: :func:`fit_scheme`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hydraulis.base.errors import require
from hydraulis.base.types import FitQuality, Scheme, TimeCoefficients
from hydraulis.profiler.measurement import Measurement
from hydraulis.profiler.sweep import PointRole


def nnls(matrix: np.ndarray, target: np.ndarray, max_iterations: int = 0) -> np.ndarray:
    """``argmin_{x ≥ 0} ‖A·x − y‖₂`` by Lawson–Hanson (:func:`fit_scheme`)."""
    a = np.asarray(matrix, dtype=np.float64)
    y = np.asarray(target, dtype=np.float64)
    rows, columns = a.shape
    norms = np.linalg.norm(a, axis=0)
    norms[norms == 0] = 1.0
    a = a / norms
    tolerance = 10 * np.finfo(np.float64).eps * np.abs(a).sum(axis=0).max() * max(rows, columns)
    x = np.zeros(columns)
    passive = np.zeros(columns, dtype=bool)
    gradient = a.T @ (y - a @ x)
    for _ in range(max_iterations or 3 * columns):
        if passive.all() or gradient[~passive].max() <= tolerance:
            break
        passive[np.argmax(np.where(passive, -np.inf, gradient))] = True
        while passive.any():
            z = np.zeros(columns)
            z[passive] = np.linalg.lstsq(a[:, passive], y, rcond=None)[0]
            if (z[passive] > tolerance).all():
                x = z
                break
            shrinking = np.flatnonzero(passive & (z <= tolerance))
            ratios = x[shrinking] / np.maximum(x[shrinking] - z[shrinking], np.finfo(np.float64).tiny)
            first = int(np.argmin(ratios))
            x = x + ratios[first] * (z - x)
            x[shrinking[first]] = 0.0
            passive &= x > tolerance
            x[~passive] = 0.0
        gradient = a.T @ (y - a @ x)
    return x / norms


def relative_nnls(columns: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """``argmin_{x ≥ 0} Σ_i (A_i·x / t_i − 1)²``."""
    return nnls(columns / measured[:, None], np.ones_like(measured))


@dataclass(frozen=True)
class BlockTime:
    """``t(d) = ends + d·unit`` (:func:`fit_scheme`)."""

    ends: TimeCoefficients
    unit: TimeCoefficients

    def at(self, depth: int) -> TimeCoefficients:
        return TimeCoefficients(a=self.ends.a + depth * self.unit.a, b=self.ends.b + depth * self.unit.b,
                                c=self.ends.c + depth * self.unit.c)

    def predict(self, depth: int, lengths: Sequence[int]) -> float:
        return self.at(depth).microbatch_ms(lengths)


@dataclass(frozen=True)
class BlockMemory:
    """``m(d, T) = (o_E + d·o_U) + (p_E + d·p_U)·T``, bytes."""

    ends_fixed: float
    unit_fixed: float
    ends_per_token: float
    unit_per_token: float

    def per_token(self, depth: int) -> float:
        return self.ends_per_token + depth * self.unit_per_token

    def fixed(self, depth: int) -> float:
        return self.ends_fixed + depth * self.unit_fixed


@dataclass(frozen=True)
class Extrapolation:
    """How the block's prediction for the full stage compares with the full stage measured."""

    median_rel_error: float
    max_rel_error: float
    points: int


@dataclass(frozen=True)
class SchemeFit:
    """A scheme's fitted stage: time coefficients at ``L_s`` layers and their quality, memory,
    forward share of the time, and (representative block checked) the extrapolation error."""

    scheme: Scheme
    stage_layers: int
    time: TimeCoefficients
    quality: FitQuality
    fitted_points: int
    activation_bytes_per_token: float
    activation_fixed_bytes: float
    forward_fraction: float
    extrapolation: Extrapolation | None



def fit_scheme(scheme: Scheme, stage_layers: int, measurements: Sequence[Measurement]) -> SchemeFit:
    """Fit one scheme's successful points (:func:`fit_scheme`).

    ``E`` are the stage's ends (embedding, head, loss, fixed costs), ``U`` one decoder layer. The
    six unknowns are fitted **non-negative** (a negative attention or per-token cost has no
    meaning, and an unconstrained fit of noisy points readily returns one for the small ``a`` of
    short sequences) by least squares on the **relative** residuals ``r = (t̂ − t)/t`` — the rows
    are divided by the measured ``t``, so a 5 ms point counts as much as a 5 s one, matching how the
    fit is judged (:func:`relative_nnls`). (Least absolute deviations, tried on the same tiny-CPU
    measurements, gave about the same held-out median errors and larger largest ones.) The stage
    of ``L_s`` layers then has

        a = a_E + L_s·a_U,   b = b_E + L_s·b_U,   c = c_E + L_s·c_U.

    With one depth only (the stage itself was measured) the three columns ``1, Σs², Σs`` are fitted
    directly. Non-negative least squares is Lawson & Hanson's active-set method (*Solving Least
    Squares Problems*, 1974, ch. 23) on unit-norm columns: exact for these few unknowns, and it
    needs no scipy.

    **Quality** is judged on points held out of the fit (:func:`held_out_split`: for the ``i``-th
    token count of each depth, mix ``i mod #mixes``): ``R² = 1 − Σ(t − t̂)²/Σ(t − t̄)²`` and the
    median and largest ``|t̂ − t|/t`` over them. The full-stage points of a representative block
    give the extrapolation error the same way.

    **Memory.** The activation bytes of the most loaded rank grow with the micro-batch's tokens
    ``T``: ``m(d, T) = (o_E + d·o_U) + (p_E + d·p_U)·T``, fitted like the time (columns ``1, T``);
    at ``d = L_s``, ``p`` is the scheme's activation bytes per token and ``o`` its fixed part.

    Worked example: points ``t = 2 + 1e-4·s² + 0.01·s`` at one depth for ``s = 100, 200, 400``
    (3, 8 and 22 ms) give back ``a = 1e-4, b = 0.01, c = 2`` exactly.

    **Reduction.** The cost model's ``T_reduce = 4·P/(tp·pp) / (β·10⁶)`` ms
    (:mod:`hydraulis.cost.step`) for the least sharded pipelines ``(1,1,1)`` is ``4·P/(β·10⁶)``;
    the reduction measured under ``N × (1,1,1)`` (the runtime's ``profiling.reduction``, time
    ``t_r``) gives the **effective** bandwidth ``β = 4·P / (t_r·10⁶)`` GB/s (:func:`hydraulis.cost.step.implied_reduce_gbps` of ``(1,1,1)``),
    so that the cost model predicts the measured ``t_r`` for that strategy. It folds latency,
    the optimizer's update and the propagation into one figure: for a small model it is
    latency-bound and holds for that model only. Worked example, ``tiny`` (P = 315,968) with
    ``t_r`` = 8 ms: ``β = 1,263,872 / 8e6 ≈ 0.158`` GB/s.
    """
    fit_points = [m for m in measurements if m.ok and m.point.role is PointRole.FIT]
    checks = [m for m in measurements if m.ok and m.point.role is PointRole.CHECK]
    require(len(fit_points) >= 4, f"scheme {scheme}", len(fit_points),
            "measured points are too few to fit and judge a, b, c (need >= 4; lower --seq-lens?)")
    train, held = held_out_split(fit_points)
    block = fit_block_time(train)
    memory = fit_block_memory(fit_points)
    extrapolation = None
    if checks:
        measured = np.array([m.time_ms for m in checks])
        errors = np.abs(_predictions(block, checks) - measured) / measured
        extrapolation = Extrapolation(float(np.median(errors)), float(errors.max()), len(checks))
    return SchemeFit(
        scheme=scheme,
        stage_layers=stage_layers,
        time=block.at(stage_layers),
        quality=fit_quality(block, held),
        fitted_points=len(train),
        activation_bytes_per_token=memory.per_token(stage_layers),
        activation_fixed_bytes=memory.fixed(stage_layers),
        forward_fraction=float(np.median([m.forward_ms / m.time_ms for m in fit_points])),
        extrapolation=extrapolation,
    )


def held_out_split(measurements: Sequence[Measurement]) -> tuple[list[Measurement], list[Measurement]]:
    """``(fit, held out)``: per depth, of the ``i``-th token count's mixes the ``(i mod n)``-th
    is held out (``n`` mixes at that count), so every count and, in turn, every mix is judged."""
    fit, held = [], []
    for depth in sorted({m.point.depth for m in measurements}):
        at_depth = [m for m in measurements if m.point.depth == depth]
        for i, tokens in enumerate(sorted({m.point.tokens for m in at_depth})):
            mixes = [m for m in at_depth if m.point.tokens == tokens]
            for j, measurement in enumerate(mixes):
                (held if j == i % len(mixes) and len(mixes) > 1 else fit).append(measurement)
    return fit, held


def fit_block_time(measurements: Sequence[Measurement]) -> BlockTime:
    """Non-negative relative least squares of ``t(d, mb)`` (:func:`fit_scheme`)."""
    depths = np.array([m.point.depth for m in measurements], dtype=np.float64)
    squares = np.array([sum(s * s for s in m.point.lengths) for m in measurements], dtype=np.float64)
    tokens = np.array([m.point.tokens for m in measurements], dtype=np.float64)
    times = np.array([m.time_ms for m in measurements], dtype=np.float64)
    base = np.column_stack([np.ones_like(tokens), squares, tokens])
    if len(set(depths.tolist())) == 1:
        c, a, b = relative_nnls(base, times)
        depth = depths[0]
        return BlockTime(TimeCoefficients(0.0, 0.0, 0.0), TimeCoefficients(a / depth, b / depth, c / depth))
    columns = np.column_stack([base, base * depths[:, None]])
    c_e, a_e, b_e, c_u, a_u, b_u = relative_nnls(columns, times)
    return BlockTime(TimeCoefficients(a_e, b_e, c_e), TimeCoefficients(a_u, b_u, c_u))


def fit_block_memory(measurements: Sequence[Measurement]) -> BlockMemory:
    """Non-negative relative least squares of ``m(d, T)`` (:func:`fit_scheme`)."""
    depths = np.array([m.point.depth for m in measurements], dtype=np.float64)
    tokens = np.array([m.point.tokens for m in measurements], dtype=np.float64)
    used = np.array([m.activation_bytes for m in measurements], dtype=np.float64)
    require(bool((used > 0).all()), "activation_bytes", float(used.min()), "must be > 0 for every measured point")
    base = np.column_stack([np.ones_like(tokens), tokens])
    if len(set(depths.tolist())) == 1:
        fixed, per_token = relative_nnls(base, used)
        depth = depths[0]
        return BlockMemory(0.0, fixed / depth, 0.0, per_token / depth)
    fixed_e, per_token_e, fixed_u, per_token_u = relative_nnls(np.column_stack([base, base * depths[:, None]]), used)
    return BlockMemory(fixed_e, fixed_u, per_token_e, per_token_u)


def fit_quality(block: BlockTime, held: Sequence[Measurement]) -> FitQuality:
    """R², median and largest relative error of ``block``'s predictions of ``held``."""
    require(len(held) >= 2, "held_out", len(held), "must hold at least 2 points (list >= 2 --seq-lens)")
    measured = np.array([m.time_ms for m in held])
    predicted = _predictions(block, held)
    spread = ((measured - measured.mean()) ** 2).sum()
    r2 = 1.0 - ((measured - predicted) ** 2).sum() / spread if spread > 0 else 0.0
    errors = np.abs(predicted - measured) / measured
    return FitQuality(r2=float(r2), median_rel_error=float(np.median(errors)), max_rel_error=float(errors.max()),
                      points=len(held))


def _predictions(block: BlockTime, measurements: Sequence[Measurement]) -> np.ndarray:
    return np.array([block.predict(m.point.depth, m.point.lengths) for m in measurements])

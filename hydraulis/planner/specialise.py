"""Which steps each strategy serves: a partition of the longest-sequence range ``(0, S]``.

Every step is served by the strategy whose range holds its longest sequence ``m``. A strategy
for ``(u_{j−1}, u_j]`` must hold a sequence of ``u_j`` tokens and is one fixed layout for all
its steps: steps with a short ``m`` run on a layout provisioned for the long ones. Splitting
the range lets short-``m`` steps use layouts that are faster for them (more, smaller pipelines;
schemes that cannot hold ``u_j``); each extra strategy is one more layout to switch to.

The details: :func:`serving_ranges`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hydraulis.base.types import PipelineModel
from hydraulis.planner.distribution import StepStatistics
from hydraulis.planner.fluid import pipeline_time_ms, single_sequence_ms
from hydraulis.planner.options import SchemeOption

QUANTILES_PER_STRATEGY = 4


def serving_ranges(stats: StepStatistics, options: Sequence[SchemeOption], devices: int,
                   model: PipelineModel, strategies: int, min_gain: float) -> list[tuple[int, int]]:
    """At most ``strategies`` ranges ``(lo, hi]`` covering ``(0, S]`` (:func:`serving_ranges`).

    We choose the boundaries to minimise the expected step time under a proxy that is cheap and
    exact for one scheme in the fluid model (planner/fluid.py): the best *homogeneous* strategy
    for the range — ``⌊N/D_k⌋`` pipelines of one scheme ``k`` that holds ``u_j``, sharing each
    step's work ``W_k(i)`` — judged on the range's sampled steps:

        v_k(i) = r_k + max(τ*_k(W_k(i)/⌊N/D_k⌋), h_k(m_i))
        cost(u_{j−1}, u_j) = min_{k: S_k ≥ u_j} Σ_{i: m_i ∈ (u_{j−1}, u_j]} v_k(i)

    The best partition into ``j`` ranges is a 1-D segmentation, solved exactly by dynamic
    programming over candidate boundaries — quantiles of the sampled ``m`` (where the step mix
    changes) and the schemes' capacities below ``S`` (where the set of holders changes) — for
    every ``j ≤ K``; every range holds at least one sampled step and the last ends at ``S``. We take
    the fewest ranges whose cost is within ``min_gain`` of the best ``K``-range cost: a range that
    cannot pay for itself in the proxy is not worth a strategy. The integer programs then design
    each range's heterogeneous strategy, and pruning (planner/propose.py) merges ranges whose
    designed strategies gain too little.

    Worked example: maxima (2k, 3k, 30k); 8 pipelines of a 4-device scheme are fastest for the two
    short steps, 4 of an 8-device scheme for the long one: ranges (0, 3k] and (3k, 32k] beat one.
    """
    points = _candidate_points(stats, options, strategies)
    order = np.argsort(stats.maxima, kind="stable")
    value = homogeneous_step_ms(stats, options, devices, model)[:, order]
    cumulative = np.concatenate((np.zeros((len(options), 1)), np.cumsum(value, axis=1)), axis=1)
    starts = np.concatenate(([0], np.searchsorted(stats.maxima[order], points, side="right")))
    capacity = np.array([o.capacity for o in options])
    count = len(points)
    cost = np.full((count + 1, count + 1), np.inf)
    for end in range(1, count + 1):
        holders = cumulative[capacity >= points[end - 1]]
        sums = holders[:, starts[end]][:, None] - holders[:, starts[:end]]
        cost[:end, end] = np.where(starts[:end] < starts[end], sums.min(axis=0), np.inf)
    best = np.full((strategies + 1, count + 1), np.inf)
    choice = np.zeros((strategies + 1, count + 1), dtype=np.int64)
    best[0, 0] = 0.0
    for j in range(1, strategies + 1):
        for end in range(1, count + 1):
            totals = best[j - 1, :end] + cost[:end, end]
            choice[j, end] = int(np.argmin(totals))
            best[j, end] = totals[choice[j, end]]
    target = (1.0 + min_gain) * best[1:, count].min()
    used = next(j for j in range(1, strategies + 1) if best[j, count] <= target)
    bounds, end = [], count
    for j in range(used, 0, -1):
        start = choice[j, end]
        bounds.append((0 if start == 0 else int(points[start - 1]), int(points[end - 1])))
        end = start
    return bounds[::-1]


def homogeneous_step_ms(stats: StepStatistics, options: Sequence[SchemeOption], devices: int,
                        model: PipelineModel) -> np.ndarray:
    """``r_k + max(τ*_k(W_k(i)/⌊N/D_k⌋), h_k(m_i))`` for every option ``k`` (rows) and sampled
    step ``i`` (columns); ∞ where ``S_k < m_i``."""
    spread = spread_step_ms(stats, options, devices, model)
    rows = []
    for option, row in zip(options, spread):
        value = np.maximum(row, option.reduce_ms + single_sequence_ms(option, stats.maxima, model))
        rows.append(np.where(option.capacity >= stats.maxima, value, np.inf))
    return np.array(rows)


def spread_step_ms(stats: StepStatistics, options: Sequence[SchemeOption], devices: int,
                   model: PipelineModel) -> np.ndarray:
    """``r_k + τ*_k(W_k(i)/⌊N/D_k⌋)``: step ``i``'s work spread evenly over ``⌊N/D_k⌋`` pipelines of
    option ``k``, whatever their capacity — the throughput side of the proxy."""
    q1, q2 = stats.tokens.sum(axis=1), stats.squares.sum(axis=1)
    return np.array([option.reduce_ms + pipeline_time_ms(option, option.time.moments_ms(q2, q1, 0)
                                                         / (devices // option.devices), model)
                     for option in options])


def _candidate_points(stats: StepStatistics, options: Sequence[SchemeOption], strategies: int) -> np.ndarray:
    maxima, limit = stats.maxima, stats.max_seq_len
    levels = np.arange(1, QUANTILES_PER_STRATEGY * strategies + 1) / (QUANTILES_PER_STRATEGY * strategies)
    quantiles = np.quantile(maxima, levels, method="inverted_cdf")
    capacities = [o.capacity for o in options if maxima.min() <= o.capacity < limit]
    return np.unique(np.concatenate((quantiles, capacities, [limit])).astype(np.int64))

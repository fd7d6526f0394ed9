"""Lower bounds of a step's compute time: per strategy (to prune strategies and to report plan
quality) and design §6's work bound.

**Balance** (:func:`strategy_bound`). Pipeline ``p`` of group ``g`` takes at least
``T_p ≥ W_p + c_g·v_p ≥ Σ_{i∈p} w'_g(s_i)`` with ``w'_g(s) = a_g·s² + b_g·s + c_g·s/C_g``
(every stage runs every piece; ``v_p ≥ n_p/C_g`` micro-batches cost ``c_g`` each). For any
weights ``λ_g ≥ 0`` with ``Σ_g n_g·λ_g = 1`` (``n_g`` pipelines in group ``g``):

    max_p T_p ≥ Σ_g λ_g Σ_{p∈g} T_p ≥ Σ_i min_{g: C_g ≥ s_i} λ_g·w'_g(s_i)

The details: :func:`strategy_bound`."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from functools import lru_cache
from math import comb

import numpy as np

from hydraulis.base.types import Proposal
from hydraulis.cost import lower_bound_ms
from hydraulis.dispatch.pipelines import PipelineTable

GRID_POINTS = 64
"""At most this many weight vectors ``λ`` are tried per strategy."""


def strategy_bound(table: PipelineTable, tokens: np.ndarray, work: np.ndarray) -> float:
    """``max(balance, crossing)`` of :func:`strategy_bound` for pieces ``tokens`` (sorted
    descending; ``work`` from :meth:`PipelineTable.work`); ∞ when the strategy cannot hold
    the longest piece.

    (the first step: a weighted average never exceeds the maximum; the second: each piece runs on
    some group that can hold it). These are the dual solutions of the fractional assignment
    ``min T`` s.t. ``Σ_g y_ig = 1``, ``Σ_i w'_g(s_i)·y_ig ≤ n_g·T``; we take the best ``λ`` on a
    grid of the simplex, and ``λ_g = D_g/Σ_h n_h·D_h`` (``D_g`` devices per pipeline), which gives
    the perfectly spread work ``Σ_i min_g D_g·w'_g(s_i)/D``. With one group the bound is the mean
    load ``Σ_i w'(s_i)/n``.

    **Crossing.** The longest piece's micro-batch runs forward through all ``p_g`` stages and
    backward through them again, one after the other: ``p_g·(c_g + w_g(s_1)) + 2·(p_g − 1)·d``
    on the best pipeline that can hold it. Worked example (7B pool): a 32,768-token piece on
    (1,16,1) (``c = 65.2``, ``a = 3.02e-7``, ``b = 0.0292``) crosses in
    ``65.2 + 324.1 + 957.9 = 1347`` ms.

    Worked example of the balance bound: groups A (1 pipeline) and B (1 pipeline), two pieces
    costing (A, B) = (10, 20) and (10, 20): spread over equal devices gives ``(10 + 10)/2 = 10``;
    ``λ = (2/3, 1/3)`` gives ``min(6.7, 6.7)·2 = 13.3`` — indeed the best plan takes 20 (both on
    A) or 20 (one each), and the fractional optimum is 13.3.
    """
    if not (tokens[0] <= table.capacity).any():
        return float("inf")
    first, counts_of = _equal_runs(tokens)
    tokens = tokens[first]
    fits = tokens[None, :] <= table.capacity[:, None]  # a suffix of the pieces for every group
    cost = (work[:, first] + table.c[:, None] * tokens[None, :] / table.capacity[:, None]) * counts_of
    counts = np.bincount(table.group_of, minlength=table.groups)
    spread = table.devices / float(table.devices[table.group_of].sum())
    weights = np.vstack([_simplex_grid(table.groups) / counts, spread])
    cheapest = np.full((weights.shape[0], tokens.size), np.inf)
    for g, start in enumerate(np.argmax(fits, axis=1).tolist()):
        if fits[g, start]:
            np.minimum(cheapest[:, start:], weights[:, g, None] * cost[g, start:], out=cheapest[:, start:])
    balance = float(cheapest.sum(axis=1).max())
    crossing = table.pp * (table.c + work[:, 0]) + 2.0 * (table.pp - 1) * table.model.p2p_ms
    return max(balance, float(crossing[fits[:, 0]].min()))


def _equal_runs(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first position of every run of equal lengths in ``tokens`` (sorted) and the run's
    length: equal pieces cost the same, so the balance sums each length once, times its count."""
    first = np.flatnonzero(np.r_[True, tokens[1:] != tokens[:-1]])
    return first, np.diff(np.r_[first, tokens.size])


def work_lower_bound_ms(proposal: Proposal, lengths: Sequence[int] | np.ndarray, alignment: int = 1) -> float:
    """design §6's ``LB = Σ_i min_{k: S_k ≥ s_i} D_k·(a_k·s_i² + b_k·s_i) / N`` over the
    proposal's schemes and its ``N`` devices, for aligned lengths (no reduction, no bubbles)."""
    tokens = -(-np.asarray(lengths, dtype=np.int64) // alignment) * alignment
    schemes = {(g.scheme, g.time, g.max_seq_len) for s in proposal.strategies for g in s.strategy.pipelines}
    return lower_bound_ms(tokens, sorted(schemes, key=lambda t: (t[0], t[2], t[1].a, t[1].b, t[1].c)),
                          proposal.devices)


@lru_cache(maxsize=32)
def _simplex_grid(groups: int) -> np.ndarray:
    """Points ``μ`` with ``Σ μ_g = 1`` on the finest grid ``μ_g ∈ {0, 1/r, …, 1}`` of at most
    :data:`GRID_POINTS` points (``r ≥ 1``); ``λ_g = μ_g/n_g``."""
    steps = max([1] + [r for r in range(1, GRID_POINTS) if comb(r + groups - 1, groups - 1) <= GRID_POINTS])
    points = [c for c in itertools.product(range(steps + 1), repeat=groups) if sum(c) == steps]
    return np.array(points, dtype=np.float64) / steps

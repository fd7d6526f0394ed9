"""The fluid step time of strategies on one step's pieces: how per-step synthesis
(:mod:`hydraulis.dispatch.synthesis`) ranks the strategies it may plan without planning them.

Counts ``n`` over the menu (:mod:`hydraulis.dispatch.menu`) spread the pieces fractionally over
the ``n_k`` pipelines of scheme ``k``; piece ``i`` costs one ``u_k(s_i) = w_k(s_i) + c_k·s_i/C_k``
(work and its share of fixed costs), and ``pp_k`` stages wait ``β_k = (pp_k − 1)·c_k`` more.
That linear program's least makespan is, by its dual,

    F(n) = max_{λ ≥ 0, Σ_k λ_k·n_k = 1}  Σ_k λ_k·n_k·β_k + Σ_i min_{k: n_k > 0, s_i ≤ C_k} λ_k·u_k(s_i)

and the estimate ``E(n) = max(F(n), fastest crossing of the longest piece) + ρ(n)``:
:func:`fluid_step_ms`. Worked example: one scheme, ``u`` = 30 and 50 ms, ``β = 0``: ``n = 2``
gives ``λ = 1/2``, ``F = 40``, and ``E = 50`` (the 50 ms piece crosses alone).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hydraulis.dispatch.menu import MenuCosts

PIECE_GROUPS = 24
"""The pieces are cut into about this many groups of equal tokens (and at the menu's capacities)."""
ASCENT_STEPS = 30
"""Steps of the dual ascent per estimate."""
_NEVER = 1e300
"""A cost no scheme pays: a piece group a scheme does not hold, a scheme a strategy does not use."""


def piece_groups(costs: MenuCosts, tokens: np.ndarray) -> np.ndarray:
    """``U[k, g] = Σ_{i ∈ g} u_k(s_i)`` over the step's pieces (``tokens`` longest first) cut
    into :data:`PIECE_GROUPS` groups of about equal tokens, also cut where a menu capacity
    falls; :data:`_NEVER` where scheme ``k`` does not hold the group."""
    total = np.cumsum(tokens, dtype=np.float64)
    cuts = set(np.searchsorted(total, np.linspace(0.0, total[-1], PIECE_GROUPS + 1)[1:-1], side="right").tolist())
    cuts |= set(np.searchsorted(-tokens, -costs.capacity, side="left").tolist())
    group = np.zeros(tokens.size, dtype=np.int64)
    group[[c for c in cuts if 0 < c < tokens.size]] = 1
    group = np.cumsum(group)
    count = int(group[-1]) + 1
    u = np.where(costs.fits, costs.spread / costs.size[:, None], 0.0)
    sums = np.stack([np.bincount(group, weights=row, minlength=count) for row in u])
    held = np.stack([np.bincount(group, weights=row, minlength=count) for row in ~costs.fits]) == 0
    return np.where(held, sums, _NEVER)


def fluid_step_ms(costs: MenuCosts, groups: np.ndarray, counts: Sequence[Sequence[int]], solo_free: bool) -> np.ndarray:
    """``E(n)`` (module docstring) of every row of ``counts``; ``groups`` from
    :func:`piece_groups`; ``solo_free``: one pipeline needs no reduction.

    The dual is ascended by exponentiated gradient over ``w_k = λ_k·n_k`` for
    :data:`ASCENT_STEPS` steps, for all rows at once, from ``λ_k ∝ D_k`` — where ``F`` is the
    spread bound ``L(n)`` of synthesis, so ``E ≥ L`` — keeping the best value. A piece group
    goes whole to one scheme, so ``E`` ranks candidates; it is not a bound."""
    n = np.asarray(counts, dtype=np.float64)
    used = n > 0
    share = np.where(used, n, 1.0)
    beta = (costs.pp - 1.0) * costs.c
    cost = np.where(used[:, :, None], groups[None], _NEVER)
    w = np.where(used, n * costs.size, 0.0)
    w /= w.sum(axis=1, keepdims=True)
    best = np.full(n.shape[0], -np.inf)
    scale = None
    rows = np.arange(n.shape[0])[:, None] * n.shape[1]
    for step in range(ASCENT_STEPS):
        priced = np.where(used, w / share, 1.0)[:, :, None] * cost
        choice = priced.argmin(axis=1)
        best = np.maximum(best, priced.min(axis=1).sum(axis=1) + w @ beta)
        taken = np.take_along_axis(cost, choice[:, None, :], axis=1)[:, 0, :]
        load = np.bincount((choice + rows).ravel(), weights=taken.ravel(), minlength=n.size).reshape(n.shape)
        gradient = load / share + beta
        scale = gradient.max(axis=1, keepdims=True) if scale is None else scale
        w = np.where(used, w * np.exp(0.5 / np.sqrt(step + 1.0) * (gradient - (gradient * w).sum(axis=1, keepdims=True))
                                      / scale), 0.0)
        w /= w.sum(axis=1, keepdims=True)
    crossing = np.where(used, np.where(costs.fits[:, 0], costs.crossing[:, 0], np.inf)[None, :], np.inf).min(axis=1)
    reduce = np.where(used, costs.reduce[None, :], 0.0).max(axis=1)
    solo = (n.sum(axis=1) == 1) & solo_free
    return np.maximum(best, crossing) + np.where(solo, 0.0, reduce)

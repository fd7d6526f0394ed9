"""The menu of per-step synthesis (design §8.2; :mod:`hydraulis.dispatch.synthesis`): the pipeline
kinds a step's strategy may count — the proposal's, then the scheme space's in ``space`` mode —
what each costs on the step's pieces, and the *fluid answer* that starts the search from them.

Per menu scheme ``k`` (devices ``D_k``, ``pp_k`` stages, fixed cost ``c_k`` per micro-batch,
capacity ``C_k``) and piece ``i`` of ``s_i`` tokens: the per-stage work ``w_k(s_i) = a_k·s_i² +
b_k·s_i``; the *spread* ``D_k·(w_k(s_i) + c_k·s_i/C_k)`` (device time with its share of fixed
costs) and the *crossing* ``pp_k·(c_k + w_k(s_i)) + 2·(pp_k − 1)·d`` (the piece alone through the
pipeline, ``d`` the point-to-point latency).

**Fluid answer.** For each reduction level ``ρ`` (schemes with ``r_k ≤ ρ``) bisect the compute
time ``T``: a pipeline of scheme ``k`` can do per-stage work ``B_k(T) = (√T − √((pp_k − 1)·c_k))²``
(the 1F1B closed form with the best number of equal micro-batches, planner/fluid.py), or
``T/pp_k − c_k`` when that is more (one micro-batch through the stages; ``T − c_k`` for one
stage); every piece ``i`` goes to the scheme, among those holding it that finish it
alone in time (``crossing ≤ T``), with the least device share ``D_k·w_k(s_i)/B_k(T)``;
``n_k = max(⌈Σ_{i→k} w_k(s_i)/B_k(T)⌉, #{i→k: w_k(s_i) > B_k(T)/2})``; ``T`` is feasible when
``Σ_k n_k·D_k ≤ N``. The answer is the counts at the least feasible ``T``, for every level where
some ``T`` with ``T + ρ`` below the incumbent's ``T₀`` is feasible.

Worked example: one scheme (``D = 1``, ``pp = 1``, ``c = 10`` ms), pieces of work 30 and 50 ms,
``N = 2`` devices. ``B(T) = T − 10``. Below ``T = 60`` the 50 ms piece cannot cross alone
(``c + w = 60``); at ``T = 60``, ``B = 50`` and ``n = max(⌈80/50⌉, 2 pieces above 25) = 2 ≤ N``:
the answer is two pipelines at 60 ms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hydraulis.base.bisection import threshold_bracket
from hydraulis.base.scheme_profile import sequence_work_ms
from hydraulis.base.types import PipelineGroup, Proposal
from hydraulis.cost import exposed_reduce_ms, reduction_model

FLUID_BISECTIONS = 12
"""Halvings of the fluid answer's compute-time interval per reduction level."""


def menu(proposal: Proposal, schemes: Sequence[PipelineGroup] = ()) -> tuple[PipelineGroup, ...]:
    """The proposal's pipeline kinds, then ``schemes``', each once and on at most the proposal's
    devices, as one-pipeline groups."""
    kinds = [g for p in proposal.strategies for g in p.strategy.pipelines] + list(schemes)
    found: dict[tuple, PipelineGroup] = {}
    for g in kinds:
        if g.scheme.devices <= proposal.devices:
            found.setdefault((g.scheme, g.max_seq_len, g.time), PipelineGroup(g.scheme, 1, g.max_seq_len, g.time))
    return tuple(found.values())


def scheme_reduce_ms(proposal: Proposal, group: PipelineGroup) -> float:
    """``r_k``: the exposed reduction of a strategy of several pipelines whose least sharded runs
    ``group``'s scheme."""
    return exposed_reduce_ms(proposal.model.params, (group, group), proposal.optimizer_layout, reduction_model(proposal))


@dataclass(frozen=True, eq=False)
class MenuCosts:
    """The module docstring's per-scheme figures (rows: menu schemes; columns: the step's
    pieces): ``size`` ``D_k``, ``pp``, ``c``, ``capacity`` ``C_k``, ``reduce`` ``r_k``, and
    ``work``, ``fits`` (``s_i ≤ C_k``), ``spread`` (∞ where the piece does not fit),
    ``crossing``."""

    size: np.ndarray
    pp: np.ndarray
    c: np.ndarray
    capacity: np.ndarray
    reduce: np.ndarray
    work: np.ndarray
    fits: np.ndarray
    spread: np.ndarray
    crossing: np.ndarray

    @classmethod
    def of(cls, menu: Sequence[PipelineGroup], tokens: np.ndarray, reduce: np.ndarray, p2p_ms: float) -> MenuCosts:
        tokens = tokens.astype(np.float64)
        size = np.array([g.scheme.devices for g in menu])
        pp = np.array([g.scheme.pp for g in menu], dtype=np.float64)
        c = np.array([g.time.c for g in menu])
        capacity = np.array([g.max_seq_len for g in menu], dtype=np.float64)
        a = np.array([g.time.a for g in menu])[:, None]
        b = np.array([g.time.b for g in menu])[:, None]
        work = sequence_work_ms(a, b, tokens)
        fits = tokens[None, :] <= capacity[:, None]
        spread = np.where(fits, size[:, None] * (work + c[:, None] * tokens / capacity[:, None]), np.inf)
        crossing = pp[:, None] * (c[:, None] + work) + 2.0 * (pp[:, None] - 1.0) * p2p_ms
        return cls(size, pp, c, capacity, reduce, work, fits, spread, crossing)

    def floor_ms(self, devices: int) -> float:
        """No plan on any menu strategy computes the step faster: the least spread over
        ``devices``, or the longest piece's fastest crossing."""
        return max(float(self.spread.min(axis=0).sum()) / devices,
                   float(np.where(self.fits, self.crossing, np.inf).min(axis=0).max(initial=0.0)))


def fluid_answers(costs: MenuCosts, active: np.ndarray, floor_ms: float, incumbent_ms: float,
                  devices: int, repeats: np.ndarray | None = None) -> list[tuple[tuple[int, ...], str]]:
    """The fluid answer (module docstring) over the ``active`` schemes at every reduction level
    where some ``T`` in (``floor_ms``, ``incumbent_ms − ρ``) is feasible, with its origin;
    ``repeats``: how many pieces each column of ``costs`` stands for (default one each)."""
    answers = []
    for level in np.unique(costs.reduce[active]):
        use = active & (costs.reduce <= level)
        lo, hi = floor_ms, incumbent_ms - level
        if hi <= lo or fluid_counts(costs, use, hi, devices, repeats) is None:
            continue
        _, hi = threshold_bracket(lambda t, use=use: fluid_counts(costs, use, t, devices, repeats) is not None,
                                  lo, hi, FLUID_BISECTIONS)
        answers.append((fluid_counts(costs, use, hi, devices, repeats), f"fluid answer at reduction {level:.0f} ms"))
    return answers


def fluid_counts(costs: MenuCosts, use: np.ndarray, compute_ms: float, devices: int,
                 repeats: np.ndarray | None = None) -> tuple[int, ...] | None:
    """The counts ``n`` of the schemes in ``use`` at compute time ``T = compute_ms``, or None
    when ``T`` is not feasible (module docstring); ``repeats`` as in :func:`fluid_answers`."""
    stages = costs.pp - 1.0
    budget = np.where(costs.pp == 1, compute_ms - costs.c,
                      np.maximum((math.sqrt(compute_ms) - np.sqrt(stages * costs.c)) ** 2,
                                 compute_ms / costs.pp - costs.c))
    runs = costs.fits & (use & (budget > 0))[:, None] & (costs.crossing <= compute_ms)
    if not runs.any(axis=0).all():
        return None
    room = np.maximum(budget, 1e-12)[:, None]
    choice = np.where(runs, costs.size[:, None] * costs.work / room, np.inf).argmin(axis=0)
    taken = costs.work[choice, np.arange(choice.size)]
    pieces = np.ones(choice.size) if repeats is None else repeats
    load = np.bincount(choice, weights=taken * pieces, minlength=costs.size.size)
    alone = np.bincount(choice, weights=(taken > room[choice, 0] / 2) * pieces, minlength=costs.size.size)
    counts = np.maximum(np.ceil(load / room[:, 0] - 1e-9), alone).astype(np.int64)
    if int(counts @ costs.size) > devices:
        return None
    return tuple(int(n) for n in counts)

"""How many devices a step needs to compute within ``T``: a linear program that sees what the
closed-form bounds (:mod:`hydraulis.cost.bound`) cannot — a long sequence holds a whole
pipeline of a large scheme, and what else that pipeline runs pays that scheme's price.

The details: :func:`least_compute_ms`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import Enum

import numpy as np
import pulp

from hydraulis.base.bisection import threshold_bracket
from hydraulis.base.errors import require
from hydraulis.base.scheme_profile import sequence_work_ms
from hydraulis.base.solver import Outcome, SolverName, solve
from hydraulis.cost import BoundScheme
from hydraulis.cost.bound import bubble_room

GRID = 64
"""Lengths are rounded down to ``⌊(1 + 1/GRID)^j⌋`` (at most 1/GRID of a length is lost)."""
EXACT_LENGTHS = 256
"""Up to this many distinct lengths are kept as they are."""
SHARING = (1, 2, 3)
"""The ``q`` of :func:`least_compute_ms`'s fourth row."""
BISECTIONS = 12


class ComputeForm(str, Enum):
    """Which compute time the program bounds: the exact 1F1B or design §6's estimate."""

    EXACT = "exact"
    ESTIMATE = "estimate"


def devices_needed(lengths: Sequence[int] | np.ndarray, schemes: Sequence[BoundScheme], compute_ms: float,
                   reduce_at_most_ms: float = math.inf, form: ComputeForm = ComputeForm.EXACT,
                   solver: SolverName = SolverName.CBC) -> float:
    """``D(T)`` of :func:`least_compute_ms` at ``T = compute_ms`` over the schemes with
    ``reduce_ms ≤ reduce_at_most_ms`` (∞ when a piece has no scheme that finishes it in time)."""
    require(compute_ms > 0, "compute_ms", compute_ms, "must be > 0")
    s, count = _rounded(lengths)
    usable = [k for k in schemes if k.reduce_ms <= reduce_at_most_ms]
    if not usable:
        return math.inf
    size = np.array([k.scheme.devices for k in usable], dtype=np.float64)
    pp = np.array([k.scheme.pp for k in usable], dtype=np.float64)
    a, b, c = (np.array([getattr(k.time, name) for k in usable]) for name in ("a", "b", "c"))
    capacity = np.array([k.capacity for k in usable], dtype=np.float64)
    work = sequence_work_ms(a[:, None], b[:, None], s)
    room = bubble_room(compute_ms, pp, c) if form is ComputeForm.ESTIMATE else compute_ms - pp * c
    batched = compute_ms - (pp - 1.0) * c
    allowed = ((s[None, :] <= capacity[:, None]) & (pp[:, None] * (c[:, None] + work) <= compute_ms)
               & (room > 0)[:, None])
    if not allowed.any(axis=0).all():
        return math.inf
    return _solve(s, count, size, c, capacity, work, room, batched, allowed, solver)


def least_compute_ms(lengths: Sequence[int] | np.ndarray, schemes: Sequence[BoundScheme], devices: int,
                     reduce_at_most_ms: float = math.inf, form: ComputeForm = ComputeForm.EXACT,
                     start_ms: float = 0.0, solver: SolverName = SolverName.CBC) -> float:
    """The least ``T`` with ``D(T) ≤ devices``, by :data:`BISECTIONS` halvings from
    ``[start_ms, …]`` (``start_ms``: a known bound, e.g. :func:`hydraulis.cost.level_bounds`'),
    returning the interval's infeasible end: a lower bound still (``start_ms`` when the program
    already fits at a millisecond or at ``start_ms``).

    For pieces ``i`` (lengths ``s_i``), schemes ``k`` with reduction ``r_k ≤ ρ`` (the level), and a
    compute time ``T``, with ``w_k(s) = a_k·s² + b_k·s``, room ``R_k(T)`` per pipeline (``T −
    pp_k·c_k`` for the exact 1F1B; ``min(T − pp_k·c_k, (√T − √((pp_k − 1)·c_k))²)`` for design §6's
    estimate ``Σt + (pp − 1)·max t``, :mod:`hydraulis.cost.bound`)::

        D(T) = min Σ_k D_k·n_k   over y_ik ≥ 0, n_k ≥ 0
          Σ_k y_ik = 1                                           every piece placed
          Σ_i w_k(s_i)·y_ik ≤ R_k(T)·n_k                         stage work within the room
          Σ_i (w_k(s_i) + c_k·s_i/C_k)·y_ik ≤ (T − (pp_k − 1)·c_k)·n_k   micro-batches of ≤ C_k tokens
          Σ_{i: w_k(s_i) > R_k(T)/(q+1)} y_ik ≤ q·n_k, q = 1, 2, 3   at most q such pieces per pipeline
          Σ_{i: s_i > C_k/2, w_k(s_i) + c_k > (T − (pp_k − 1)·c_k)/(q+1)} y_ik ≤ q·n_k   the same, each
                                                                 piece in a micro-batch of its own
          y_ik = 0 unless C_k ≥ s_i and pp_k·(c_k + w_k(s_i)) ≤ T   it fits and finishes in time

    *Proof that no plan at level ρ computes within T on fewer than D(T) devices.* Take such a plan;
    let ``y_ik`` be 1 when piece ``i`` runs on a pipeline of scheme ``k`` and ``n_k`` its pipelines
    of scheme ``k``. Each pipeline meets the room and capacity inequalities
    (:mod:`hydraulis.cost.bound`, steps 2–3 and the estimate's bubble), summing them gives the
    second and third rows; pieces above ``R/(q+1)`` exceed the room when ``q + 1`` share a
    pipeline, which gives the fourth; pieces longer than half a micro-batch's capacity each need a
    micro-batch of their own, so ``q + 1`` of them in one pipeline take ``Σ (w + c) + (pp − 1)·c``,
    more than ``T`` for those of the fifth row. So the plan's devices ``Σ_k D_k·n_k ≥ D(T)``. ``D`` does not
    grow with ``T`` (rooms grow, more ``y`` are allowed), so :func:`least_compute_ms` bisects.

    Equal lengths are merged; a step of more than :data:`EXACT_LENGTHS` distinct lengths has them
    first rounded *down* to a geometric grid (ratio ``1 + 1/GRID``): any plan of the true lengths is
    a plan of the shorter ones that is no slower, so the program of the rounded lengths still
    bounds — and has a few hundred rows, not one per sequence.

    Worked example (LLaMA-32B analytic, 1,024 H100s, 1.6M tokens, a step with nine sequences above
    22,370 tokens, the most any scheme up to (4,8,1) holds): at the plans' level (325 ms) the
    closed-form estimate bound is 1.22× the pool bound, this program's 1.33×: the nine need
    (8,8,1) pipelines of 64 devices each, and their other pieces pay (8,8,1)'s 2.4× device time per
    token (design §6.5).
    """
    def fits(compute_ms: float) -> bool:
        return devices_needed(lengths, schemes, compute_ms, reduce_at_most_ms, form, solver) <= devices

    lo = max(start_ms, 1e-3)
    if fits(lo):
        return start_ms
    return threshold_bracket(fits, lo, halvings=BISECTIONS)[0]


def _rounded(lengths: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lengths merged, rounded down to the geometric grid first when they are too many:
    (lengths, how many)."""
    s = np.asarray(lengths, dtype=np.float64)
    values, count = np.unique(s, return_counts=True)
    if values.size <= EXACT_LENGTHS:
        return values, count.astype(np.float64)
    steps = np.floor(np.log(np.maximum(s, 1.0)) / math.log1p(1.0 / GRID) + 1e-9)
    grid = np.minimum(np.floor(np.exp(steps * math.log1p(1.0 / GRID))), s)
    values, count = np.unique(grid, return_counts=True)
    return values, count.astype(np.float64)


def _solve(lengths: np.ndarray, count: np.ndarray, size: np.ndarray, c: np.ndarray, capacity: np.ndarray,
           work: np.ndarray, room: np.ndarray, batched: np.ndarray, allowed: np.ndarray, solver: SolverName) -> float:
    batched_work = work + (c / capacity)[:, None] * lengths
    model = pulp.LpProblem("devices_needed", pulp.LpMinimize)
    n = [model.add_variable(f"n_{k}", lowBound=0) for k in range(len(size))]
    y = {(k, i): model.add_variable(f"y_{k}_{i}", lowBound=0) for k, i in zip(*np.nonzero(allowed))}
    model.setObjective(pulp.LpAffineExpression([(n[k], float(size[k])) for k in range(len(size))]))
    for i in range(allowed.shape[1]):
        _add(model, [(y[k, i], 1.0) for k in np.flatnonzero(allowed[:, i])], pulp.LpConstraintEQ, float(count[i]))
    for k in range(len(size)):
        mine = np.flatnonzero(allowed[k])
        if not mine.size:
            continue
        _add(model, [(y[k, i], float(work[k, i])) for i in mine] + [(n[k], -float(room[k]))])
        _add(model, [(y[k, i], float(batched_work[k, i])) for i in mine] + [(n[k], -float(batched[k]))])
        alone = lengths[mine] > capacity[k] / 2
        for q in SHARING:
            for large in (mine[work[k, mine] > room[k] / (q + 1)],
                          mine[alone & (work[k, mine] + c[k] > batched[k] / (q + 1))]):
                if large.size:
                    _add(model, [(y[k, i], 1.0) for i in large] + [(n[k], -float(q))])
    solved = solve(model, solver, nodes=1, time_limit_s=None)
    require(solved.outcome is Outcome.OPTIMAL, "devices_needed", solved.outcome.value, "the program must solve")
    return float(pulp.value(model.objective))


def _add(model: pulp.LpProblem, terms: list[tuple[pulp.LpVariable, float]], sense: int = pulp.LpConstraintLE,
         rhs: float = 0.0) -> None:
    """``Σ coefficient·variable (sense) rhs``, built without PuLP's slow operators."""
    model.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(terms), sense, rhs=rhs))

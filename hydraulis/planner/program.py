"""Pipeline counts of one strategy: bisection on the makespan over an integer program.

For a trial makespan ``C`` the fluid model (planner/fluid.py) is linear, so "can counts ``n``
reach ``C``?" is a mixed-integer feasibility program (:func:`feasible_at`: one per reduction
level ``ρ_l``, :func:`level_program`). A pipeline of scheme ``k`` counted at level ``l``
(``n_kl``) gets the per-stage work budget ``B_kl = (C − β_k − ρ_l)/γ_k``; among the constraints
(all of them in :func:`level_program`)::

    Σ_j f_kj·W_kj ≤ Σ_l B_kl·n_kl,   Σ_kl D_k·n_kl ≤ N,   maximise Σ_kl n_kl·B_kl / W_k

The bisection on ``C`` (:func:`optimise_counts`) stops when ``hi − lo ≤ tol·hi``; what its
answer is worth: :class:`BisectionStatus`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from enum import Enum

import numpy as np
import pulp

from hydraulis.base.solver import Outcome, Solved, SolverName, solve
from hydraulis.planner.fluid import (
    FluidProblem,
    assignment_makespan,
    homogeneous_incumbent,
    lower_bound_ms,
    sequences_per_pipeline,
)

HEURISTIC = "heuristic"


class BisectionStatus(str, Enum):
    """What the bisection's answer is worth (:func:`optimise_counts`)."""

    OPTIMAL = "optimal"
    NODE_LIMIT = "node_limit"
    TIME_LIMIT = "time_limit"


@dataclass(frozen=True)
class CountsAnswer:
    """Pipelines per scheme option; the fluid makespan their routing reaches (``≥ M(n)``, within
    the tolerance of the optimum when ``status`` is optimal); the proven lower bound; what the
    answer is worth (:class:`BisectionStatus`); what produced it (a solver's name or
    ``heuristic``); how many programs were solved; and every distinct answer found with its
    source, best first (the planner judges them all on sampled steps)."""

    counts: tuple[int, ...]
    makespan_ms: float
    lower_bound_ms: float
    status: BisectionStatus
    source: str
    solves: int
    found: tuple[tuple[tuple[int, ...], str], ...]


def optimise_counts(problem: FluidProblem, solver: SolverName, tolerance: float, nodes: int,
                    deadline: float = math.inf) -> CountsAnswer:
    """Bisection (below) from the homogeneous incumbent, each program within ``nodes`` nodes,
    stopped for safety at ``deadline`` (``time.monotonic``); the first trial, just below the
    incumbent, settles the common case where the incumbent is already optimal.

    Bisection keeps ``lo`` (the fluid lower bound, then every ``C`` without an answer) and ``hi``
    (the best answer: the homogeneous incumbent, then the makespan that a feasible answer's own
    routing reaches, which is ≤ its ``C``; any answer proves ``C`` feasible, optimal for its
    objective or not) and stops when ``hi − lo ≤ tol·hi``: at most about
    ``⌈log₂((hi₀ − lo₀)/(tol·lo₀))⌉ + 1`` trials, each program within ``nodes`` branch-and-bound
    nodes (hydraulis/base/solver.py). ``lo`` is a proven bound while every program without an answer was
    proven infeasible: the answer is then optimal within ``tol`` (:attr:`BisectionStatus.OPTIMAL`).
    A program stopped by its node budget without an answer proves nothing, so the reported bound
    stays at the last proven one (:attr:`BisectionStatus.NODE_LIMIT`); the wall-clock safety stop
    ends the bisection with the best answer so far (:attr:`BisectionStatus.TIME_LIMIT`). Nothing but
    the safety stop looks at the clock: the answer depends on the inputs and the budgets only.
    """
    best, hi = homogeneous_incumbent(problem)
    bound = lo = lower_bound_ms(problem)
    source, solves, stopped = HEURISTIC, 0, False
    found = [(problem.scheme_counts(best), HEURISTIC)]
    while hi - lo > tolerance * hi and not stopped:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            stopped = True
            break
        trial = (1.0 - tolerance) * hi if solves == 0 else 0.5 * (lo + hi)
        solved, counts, reached = feasible_at(problem, trial, solver, nodes, remaining)
        solves += 1
        stopped = solved.outcome.timed_out
        if solved.outcome.has_answer:
            best, hi, source = counts, min(reached, trial), solver.value
            found.insert(0, (problem.scheme_counts(counts), source))
        else:
            lo = trial
            bound = trial if solved.outcome is Outcome.INFEASIBLE else bound
    status = (BisectionStatus.TIME_LIMIT if stopped else
              BisectionStatus.OPTIMAL if hi - bound <= tolerance * hi else BisectionStatus.NODE_LIMIT)
    distinct: dict[tuple[int, ...], str] = {}
    for counts, origin in found:
        distinct.setdefault(counts, origin)
    return CountsAnswer(problem.scheme_counts(best), hi, bound, status, source, solves, tuple(distinct.items()))


def feasible_at(problem: FluidProblem, makespan: float, solver: SolverName, nodes: int,
                time_limit_s: float) -> tuple[Solved, tuple[int, ...], float]:
    """Solve the program of :func:`level_program` at ``C = makespan``: one program per reduction
    level ``ρ_l`` (``z_l = 1`` fixed, :func:`level_program`), each within ``nodes`` nodes, the
    answer of largest objective over the levels. How it ended (:func:`_combined`), the counts and
    the makespan their routing reaches (``inf`` without an answer).

    The one-hot ``z`` is the program's only choice between levels, so fixing it level by level
    splits the program exactly. Whole, it let the relaxation spread a pipeline over levels whose
    budgets differ by little once the reduction is mostly hidden (design §6.3: levels of 4–300 ms
    under makespans of ~660 ms): LLaMA-7B on 1,024 A800s needed ~4,000 simplex iterations per
    node, and one program ran past 300 s without an answer, while its seven levels alone each
    solve at the root.

    The one-hot ``z`` is settled by enumeration: at each trial ``C`` one program per level with
    ``z_l = 1`` fixed (no ``z``, ``n_k`` for the options the level admits), the answer of largest
    objective over the levels (:func:`feasible_at`).
    """
    started = time.monotonic()
    results: list[tuple[Solved, tuple[int, ...], float, float]] = []
    for rho in np.unique(problem.reduce):
        remaining = time_limit_s - (time.monotonic() - started)
        if remaining <= 0:
            results.append((Solved(Outcome.TIME_NO_ANSWER, None, None, 0.0), (), float("inf"), -math.inf))
            break
        results.append(level_program(problem, makespan, float(rho), solver, nodes, remaining))
    best = max(results, key=lambda result: result[3])
    return _combined([result[0] for result in results], best[0]), best[1], best[2]


def level_program(problem: FluidProblem, makespan: float, rho: float, solver: SolverName, nodes: int,
                  time_limit_s: float) -> tuple[Solved, tuple[int, ...], float, float]:
    """The program below at ``C = makespan`` with the reduction at level ``ρ`` (``z`` fixed to
    it): how it ended, the counts, the makespan their routing reaches and the objective (``inf``
    and ``−inf`` without an answer).

    For a trial makespan ``C`` the fluid model (planner/fluid.py) is linear, so "can counts ``n``
    reach ``C``?" is a mixed-integer feasibility program. The reduction ``ρ`` depends on the least
    sharded scheme used; it takes one of the few values ``ρ_l`` (one per sharding degree), chosen
    by a one-hot ``z_l``, and a pipeline of scheme ``k`` counted at level ``l`` (``n_kl``) gets the
    per-stage work budget ``B_kl = (C − β_k − ρ_l)/γ_k``:

        Σ_k f_kj = 1                                   every work class is served
        Σ_j f_kj·W_kj ≤ Σ_l B_kl·n_kl                  (f_kj = 0 unless S_k holds class j)
        f_kj ≤ Σ_{l: h_k(ℓ_j) + ρ_l ≤ C} z_l            one sequence of the class finishes in time (T_j ≥ 1)
        n_kl ≤ ⌊N/D_k⌋·z_l,   Σ_l z_l = 1,   n_kl = 0 unless r_k ≤ ρ_l and B_kl > 0
        Σ_kl D_k·n_kl ≤ N                              devices = node packing (options.py lemma)
        Σ_{k,l: S_k ≥ u, h̄_k + ρ_l ≤ C} n_kl ≥ 1      a pipeline finishes the longest sequences
        Σ_kl ⌊B_kl/w_k(ℓ_j)⌋·n_kl ≥ T_j                 room for the T_j sequences of class ≥ j
        maximise Σ_kl n_kl·B_kl / W_k                   spare throughput: use the idle devices
    """
    none = float("inf"), -math.inf
    model = pulp.LpProblem("pipeline_counts", pulp.LpMaximize)
    n, budget = {}, {}
    for k in range(len(problem.origin)):
        work_budget = (makespan - problem.beta[k] - rho) / problem.gamma[k]
        if problem.reduce[k] <= rho and work_budget > 0:
            n[k] = model.add_variable(f"n_{k}", 0, int(problem.limit[k]), cat=pulp.LpInteger)
            budget[k] = work_budget
    f = {(k, j): model.add_variable(f"f_{k}_{j}", 0, 1) for k in n for j in np.flatnonzero(problem.eligible[k])
         if problem.tail[j] < 1 or problem.single[k, j] + rho <= makespan}
    holders = [k for k in n if problem.holder[k] + rho <= makespan]
    classes = range(problem.work.shape[1])
    if not holders or any(not any((k, j) in f for k in n) for j in classes):
        return Solved(Outcome.INFEASIBLE, None, None, 0.0), (), *none
    total = problem.work.sum(axis=1)
    model.setObjective(pulp.LpAffineExpression([(var, budget[k] / max(total[k], 1e-12)) for k, var in n.items()]))
    for j in classes:
        _add(model, [(f[k, j], 1.0) for k in n if (k, j) in f], pulp.LpConstraintEQ, 1.0)
    for k, var in n.items():
        _add(model, [(f[k, j], problem.work[k, j]) for j in classes if (k, j) in f] + [(var, -budget[k])],
             pulp.LpConstraintLE, 0.0)
    _add(model, [(var, float(problem.sizes[k])) for k, var in n.items()], pulp.LpConstraintLE, float(problem.devices))
    _add(model, [(n[k], 1.0) for k in holders], pulp.LpConstraintGE, 1.0)
    per_pipeline = sequences_per_pipeline(problem, makespan, rho)
    for j in classes:
        _add(model, [(var, per_pipeline[k, j]) for k, var in n.items() if per_pipeline[k, j] > 0],
             pulp.LpConstraintGE, float(problem.tail[j]))
    solved = solve(model, solver, nodes, time_limit_s)
    if not solved.outcome.has_answer:
        return solved, (), *none
    counts = np.zeros(len(problem.origin), dtype=np.int64)
    for k, var in n.items():
        counts[k] = int(round(var.value()))
    fractions = np.zeros_like(problem.work)
    for (k, j), var in f.items():
        fractions[k, j] = max(0.0, var.value())
    return (solved, tuple(int(c) for c in counts), assignment_makespan(problem, counts, fractions),
            float(pulp.value(model.objective)))


def _combined(outcomes: list[Solved], best: Solved) -> Solved:
    """The levels' solves as one: the best level's answer — optimal only if every other level
    was solved to optimality or proven infeasible, timed out if any level was — or, without an
    answer, infeasible only if every level was proven so."""
    kinds = {solved.outcome for solved in outcomes}
    wall_s = sum(solved.wall_s for solved in outcomes)
    timed_out = any(outcome.timed_out for outcome in kinds)
    if best.outcome.has_answer:
        proven = kinds <= {Outcome.OPTIMAL, Outcome.INFEASIBLE}
        outcome = Outcome.TIME_FEASIBLE if timed_out else Outcome.OPTIMAL if proven else Outcome.FEASIBLE
        return Solved(outcome, best.bound, best.gap, wall_s)
    outcome = (Outcome.TIME_NO_ANSWER if timed_out else Outcome.INFEASIBLE if kinds == {Outcome.INFEASIBLE}
               else Outcome.NO_ANSWER)
    return Solved(outcome, None, None, wall_s)


def _add(model: pulp.LpProblem, terms: list[tuple[pulp.LpVariable, float]], sense: int, rhs: float) -> None:
    """``Σ coefficient·variable  (sense)  rhs`` — built directly, PuLP's operators are slow."""
    model.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(terms), sense, rhs=rhs))

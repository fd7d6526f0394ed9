"""The bisection over the counts program against exhaustive search on tiny instances (the
oracle), and the solver's real status."""

import itertools
import time

import numpy as np
import pulp
import pytest

from hydraulis.errors import HydraulisError
from hydraulis.planner.config import SolverName
from hydraulis.planner.fluid import FluidProblem, fluid_problem
from hydraulis.planner.program import HEURISTIC, optimise_counts
from hydraulis.planner.solvers import Outcome, solve
from hydraulis.types import PipelineModel
from tests.planner.instances import random_instance

TOLERANCE = 1e-6


def exhaustive_makespan(problem: FluidProblem) -> float:
    """min over every count vector of pipelines per role with Σ n·D ≤ N of M(n), each M(n) from
    first principles (fluid.py docstring): the least C meeting all conditions is the largest of
    the least C of each, as each holds for every larger C."""
    sizes, limits = problem.sizes, problem.limit
    best = np.inf
    for counts in itertools.product(*(range(int(u) + 1) for u in limits)):
        counts = np.array(counts)
        if counts.sum() == 0 or counts @ sizes > problem.devices:
            continue
        best = min(best, _makespan(problem, counts))
    return best


def _makespan(problem: FluidProblem, counts: np.ndarray) -> float:
    used = counts > 0
    rho = problem.reduce[used].max()
    holder = (problem.holder[used] + rho).min()
    if not np.isfinite(holder):
        return np.inf
    return max(holder, _routing_makespan(problem, counts, rho), _count_makespan(problem, counts, rho))


def _routing_makespan(problem: FluidProblem, counts: np.ndarray, rho: float) -> float:
    """Least C with a routing: scan the breakpoints where a class becomes 'in time' on a role."""
    used = np.flatnonzero(counts > 0)
    typical = problem.tail >= 1
    breaks = sorted({0.0} | {float(problem.single[r, j] + rho) for r in used for j in np.flatnonzero(typical)})
    for start, end in zip(breaks, breaks[1:] + [np.inf]):
        allowed = problem.eligible & (~typical[None, :] | (problem.single + rho <= start))
        allowed[counts == 0] = False
        if not allowed.any(axis=0).all():
            continue
        model = pulp.LpProblem("oracle", pulp.LpMinimize)
        c = model.add_variable("C", lowBound=start)
        f = {(r, j): model.add_variable(f"f_{r}_{j}", 0, 1) for r, j in zip(*np.nonzero(allowed))}
        model += c
        for j in range(problem.work.shape[1]):
            model += pulp.lpSum(v for (r, jj), v in f.items() if jj == j) == 1
        for r in used:
            load = pulp.lpSum(problem.work[r, j] * v for (rr, j), v in f.items() if rr == r)
            model += problem.gamma[r] * load <= int(counts[r]) * (c - problem.beta[r] - rho)
        assert solve(model, SolverName.HIGHS, None) is Outcome.OPTIMAL
        if c.value() < end:
            return c.value()
    return np.inf


def _count_makespan(problem: FluidProblem, counts: np.ndarray, rho: float) -> float:
    """Least C meeting every tail count, by trying every breakpoint in increasing order."""
    worst = 0.0
    for j in np.flatnonzero(problem.tail >= 1):
        need = problem.tail[j]
        roles = [r for r in np.flatnonzero(counts > 0) if problem.eligible[r, j]]
        candidates = sorted({problem.single[r, j] + rho for r in roles}
                            | {rho + problem.beta[r] + problem.gamma[r] * problem.sequence_work[r, j] * m
                               for r in roles for m in range(1, int(need) + 1)})
        for c in candidates + [np.inf]:
            room = sum(counts[r] * min(need, np.floor((c * (1 + 1e-12) - rho - problem.beta[r])
                                                      / (problem.gamma[r] * problem.sequence_work[r, j])))
                       for r in roles if problem.single[r, j] + rho <= c * (1 + 1e-12))
            if room >= need:
                worst = max(worst, c)
                break
    return worst


FEASIBILITY = 1e-6
"""Solvers accept constraints violated by about this much, relative."""


def test_bisection_matches_exhaustive_search():
    mixes = []
    for seed in range(12):
        options, load, devices, longest = random_instance(seed)
        problem = fluid_problem(options, load, longest, devices, PipelineModel(), classes=64)
        assert problem.work.shape[1] <= 6 and len(options) <= 4 and devices <= 16
        answer = optimise_counts(problem, SolverName.CBC, time.monotonic() + 60, TOLERANCE)
        expected = exhaustive_makespan(problem)
        assert answer.status == "optimal", seed
        assert expected * (1 - FEASIBILITY) <= answer.makespan_ms <= expected / (1 - TOLERANCE) * (1 + FEASIBILITY), seed
        if sum(n > 0 for n in answer.counts) > 1:
            mixes.append(seed)
    assert len(mixes) >= 3, f"too few instances with heterogeneous optima to test the oracle: {mixes}"


def test_highs_reaches_the_same_makespan():
    options, load, devices, longest = random_instance(3)
    problem = fluid_problem(options, load, longest, devices, PipelineModel(), classes=64)
    cbc = optimise_counts(problem, SolverName.CBC, time.monotonic() + 60, TOLERANCE)
    highs = optimise_counts(problem, SolverName.HIGHS, time.monotonic() + 60, TOLERANCE)
    assert highs.makespan_ms == pytest.approx(cbc.makespan_ms, rel=2 * TOLERANCE)


def test_a_passed_deadline_returns_the_incumbent_as_stopped():
    options, load, devices, longest = random_instance(1)
    problem = fluid_problem(options, load, longest, devices, PipelineModel(), classes=64)
    answer = optimise_counts(problem, SolverName.CBC, time.monotonic() - 1.0, TOLERANCE)
    assert (answer.status, answer.source, answer.solves) == ("time_limit", HEURISTIC, 0)
    assert answer.found == ((answer.counts, HEURISTIC),)


def _hard_knapsack() -> pulp.LpProblem:
    """A multi-dimensional 0-1 knapsack that CBC cannot close within a fraction of a second."""
    rng = np.random.default_rng(7)
    items, dimensions = 400, 30
    weights = rng.integers(10, 1000, size=(dimensions, items))
    model = pulp.LpProblem("knapsack", pulp.LpMaximize)
    x = [model.add_variable(f"x{i}", 0, 1, cat=pulp.LpInteger) for i in range(items)]
    model += pulp.lpSum(int(v) * xi for v, xi in zip(rng.integers(10, 1000, size=items), x))
    for row in weights:
        model += pulp.lpSum(int(w) * xi for w, xi in zip(row, x)) <= int(row.sum() // 2)
    return model


def test_a_time_limited_answer_is_not_called_optimal():
    model = _hard_knapsack()
    outcome = solve(model, SolverName.CBC, 0.2)
    assert model.status == pulp.LpStatusOptimal  # what PuLP's status alone would claim
    assert outcome is Outcome.FEASIBLE


def test_infeasible_and_optimal_outcomes():
    model = pulp.LpProblem("tiny", pulp.LpMinimize)
    x = model.add_variable("x", 0, 3, cat=pulp.LpInteger)
    model += x
    model += x >= 2
    assert solve(model, SolverName.CBC, 5.0) is Outcome.OPTIMAL and x.value() == 2
    model += x <= 1
    assert solve(model, SolverName.CBC, 5.0) is Outcome.INFEASIBLE


def test_highs_missing_is_named(monkeypatch):
    monkeypatch.setattr(pulp.HiGHS, "available", lambda self: False)
    model = pulp.LpProblem("tiny", pulp.LpMinimize)
    model += model.add_variable("x", 0, 1)
    with pytest.raises(HydraulisError, match="^solver: 'highs' needs the highspy package"):
        solve(model, SolverName.HIGHS, 1.0)

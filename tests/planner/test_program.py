"""The bisection over the counts program against exhaustive search on tiny instances (the
oracle), and what a node budget or the safety stop does to its answer."""

import itertools
import time

import numpy as np
import pulp
import pytest

from hydraulis.base.solver import Outcome, SolverName, solve
from hydraulis.base.types import PipelineModel
from hydraulis.planner.fluid import FluidProblem, fluid_problem
from hydraulis.planner.program import HEURISTIC, BisectionStatus, optimise_counts
from tests.planner.instances import random_instance

TOLERANCE = 1e-6
NODES = 100_000


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
        assert solve(model, SolverName.HIGHS, NODES, None).outcome is Outcome.OPTIMAL
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
        answer = optimise_counts(problem, SolverName.CBC, TOLERANCE, NODES)
        expected = exhaustive_makespan(problem)
        assert answer.status == "optimal", seed
        assert expected * (1 - FEASIBILITY) <= answer.makespan_ms <= expected / (1 - TOLERANCE) * (1 + FEASIBILITY), seed
        if sum(n > 0 for n in answer.counts) > 1:
            mixes.append(seed)
    assert len(mixes) >= 3, f"too few instances with heterogeneous optima to test the oracle: {mixes}"


def test_highs_reaches_the_same_makespan():
    options, load, devices, longest = random_instance(3)
    problem = fluid_problem(options, load, longest, devices, PipelineModel(), classes=64)
    cbc = optimise_counts(problem, SolverName.CBC, TOLERANCE, NODES)
    highs = optimise_counts(problem, SolverName.HIGHS, TOLERANCE, NODES)
    assert highs.makespan_ms == pytest.approx(cbc.makespan_ms, rel=2 * TOLERANCE)


def test_a_passed_safety_stop_returns_the_incumbent_as_time_limited():
    options, load, devices, longest = random_instance(1)
    problem = fluid_problem(options, load, longest, devices, PipelineModel(), classes=64)
    answer = optimise_counts(problem, SolverName.CBC, TOLERANCE, NODES, deadline=time.monotonic() - 1.0)
    assert (answer.status, answer.source, answer.solves) == (BisectionStatus.TIME_LIMIT, HEURISTIC, 0)
    assert answer.found == ((answer.counts, HEURISTIC),)


def test_the_answer_does_not_depend_on_a_safety_stop_that_does_not_fire():
    options, load, devices, longest = random_instance(5)
    problem = fluid_problem(options, load, longest, devices, PipelineModel(), classes=64)
    unlimited = optimise_counts(problem, SolverName.CBC, TOLERANCE, NODES)
    stopped_late = optimise_counts(problem, SolverName.CBC, TOLERANCE, NODES, deadline=time.monotonic() + 3600)
    assert unlimited == stopped_late and unlimited.solves > 2

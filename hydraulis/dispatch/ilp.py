"""The integer program that tries to speed up the slowest pipeline's packing (PuLP, CBC).

Only the slowest pipeline decides the step time, so only it is worth a solver (then the next
one, if it became the slowest, while time is left); a pipeline whose greedy packing is provably
optimal, or with more than ``ilp_max_sequences`` pieces, is left as it is. Binary ``x_ij`` puts piece ``i`` (``s_i`` tokens, work ``w_i``) in micro-batch ``j``:

* one stage (``T = W + v·c``): fewest micro-batches — ``min Σ_j y_j`` s.t. ``Σ_j x_ij = 1``,
  ``Σ_i s_i·x_ij ≤ C·y_j``, ``y_j ≥ y_{j+1}``, over the greedy's ``v`` micro-batches;
* several stages: the exact 1F1B time itself. With the greedy's ``v`` micro-batches, ``j`` is
  the execution position; micro-batch ``j`` takes ``t_j = c + Σ_i w_i·x_ij`` on every stage,
  each 1F1B operation ``o`` (forward or backward of position ``j(o)`` on a stage, see
  :class:`hydraulis.cost.pipeline.ScheduleGraph`) lasts ``δ_o = φ_o·t_{j(o)}`` and ends at
  ``E_o``:

      min M  s.t.  Σ_j x_ij = 1,   Σ_i s_i·x_ij ≤ C,   Σ_i x_ij ≥ 1,
                   E_o ≥ E_prev(o) + δ_o,   E_o ≥ E_dep(o) + d_o + δ_o,   M ≥ E_o

  For fixed ``x`` the smallest feasible ``M`` is the longest path through the schedule, i.e.
  exactly the simulated time, so the program chooses packing and order together.

Both start from the greedy answer (CBC warm start) and stop at the time limit. The answer is
timed by the exact 1F1B simulation and kept only if faster, so the result is never worse than
greedy; ``solver_status`` says what happened (:class:`PackingStatus`). CBC may report
"Optimal" after a time limit; the solution status (optimal vs. merely feasible) is what counts.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pulp

from hydraulis.cost.pipeline import schedule_graph
from hydraulis.dispatch.options import DispatchOptions
from hydraulis.dispatch.packing import Packing, PackingStatus
from hydraulis.dispatch.pipelines import PipelineTable, pipeline_makespans


def improve_slowest(table: PipelineTable, packings: list[Packing], tokens: np.ndarray, work: np.ndarray,
                    options: DispatchOptions) -> tuple[list[Packing], list[str]]:
    """``packings`` with the slowest pipeline's packing improved where the solver could, then
    the next slowest if it became the slowest, until the time limit; notes for the plan."""
    deadline = time.perf_counter() + options.ilp_time_limit_s
    result, notes, tried = list(packings), [], set()
    while True:
        p = max(range(len(result)), key=lambda q: (result[q].time_ms, -q))
        packing = result[p]
        if p in tried or packing.status is PackingStatus.OPTIMAL:
            return result, notes
        tried.add(p)
        pieces = np.concatenate(packing.micro_batches)
        if pieces.size > options.ilp_max_sequences:
            notes.append(f"ilp skipped for pipeline {p}: {pieces.size} sequences > ilp_max_sequences "
                         f"{options.ilp_max_sequences}")
            return result, notes
        left = deadline - time.perf_counter()
        if left <= 0:
            notes.append(f"ilp skipped for pipeline {p}: time limit used up")
            return result, notes
        g = int(table.group_of[p])
        result[p] = _solve(packing, tokens, work[g], table, g, left)


def _solve(packing: Packing, tokens: np.ndarray, work: np.ndarray, table: PipelineTable, g: int,
           seconds: float) -> Packing:
    c, pp, capacity = float(table.c[g]), int(table.pp[g]), int(table.capacity[g])
    greedy = packing.micro_batches
    pieces = np.concatenate(greedy)
    v = len(greedy)
    where = {int(k): j for j, mb in enumerate(greedy) for k in mb}
    problem = pulp.LpProblem("pipeline_packing", pulp.LpMinimize)
    x = {(i, j): problem.add_variable(f"x_{i}_{j}", cat=pulp.LpBinary) for i in range(pieces.size) for j in range(v)}
    s = tokens[pieces].tolist()
    w = work[pieces].tolist()
    for i in range(pieces.size):
        problem += pulp.lpSum(x[i, j] for j in range(v)) == 1
        for j in range(v):
            x[i, j].setInitialValue(1 if where[int(pieces[i])] == j else 0)
    if pp == 1:
        y = [problem.add_variable(f"y_{j}", cat=pulp.LpBinary) for j in range(v)]
        problem += pulp.lpSum(y)
        for j in range(v):
            problem += pulp.lpSum(s[i] * x[i, j] for i in range(pieces.size)) <= capacity * y[j]
            y[j].setInitialValue(1)
            if j + 1 < v:
                problem += y[j] >= y[j + 1]
    else:
        for j in range(v):
            problem += pulp.lpSum(s[i] * x[i, j] for i in range(pieces.size)) <= capacity
            problem += pulp.lpSum(x[i, j] for i in range(pieces.size)) >= 1
        _exact_1f1b_objective(problem, x, w, c, pp, v, table)
    try:
        problem.solve(_cbc(seconds))
    except pulp.PulpSolverError:
        return Packing(greedy, packing.time_ms, PackingStatus.GREEDY_ILP_NO_ANSWER)
    if problem.sol_status not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        return Packing(greedy, packing.time_ms, PackingStatus.GREEDY_ILP_NO_ANSWER)
    chosen = np.array([[round(x[i, j].value() or 0) for j in range(v)] for i in range(pieces.size)]).argmax(axis=1)
    answer = tuple(pieces[chosen == j] for j in range(v) if (chosen == j).any())
    times = np.array([c + work[mb].sum() for mb in answer])
    answer_ms = float(pipeline_makespans([times], [pp], table.model)[0])
    if answer_ms >= packing.time_ms * (1 - 1e-9):
        return Packing(greedy, packing.time_ms, PackingStatus.GREEDY_ILP_NOT_BETTER)
    optimal = problem.sol_status == pulp.LpSolutionOptimal
    return Packing(answer, answer_ms, PackingStatus.ILP_OPTIMAL if optimal else PackingStatus.ILP_FEASIBLE)


def _exact_1f1b_objective(problem: pulp.LpProblem, x: dict, w: list[float], c: float, pp: int, v: int,
                          table: PipelineTable) -> None:
    graph = schedule_graph(pp, v)
    phi, d = table.model.forward_fraction, table.model.p2p_ms
    pieces = len(w)
    t = [c + pulp.lpSum(w[i] * x[i, j] for i in range(pieces)) for j in range(v)]
    ops = graph.micro_batch.size
    end = [problem.add_variable(f"e_{o}", lowBound=0) for o in range(ops)]
    makespan = problem.add_variable("makespan", lowBound=0)
    problem += makespan
    followed = set(graph.previous.tolist())
    for o in range(ops):
        share = phi if graph.forward[o] else 1.0 - phi
        duration = share * t[int(graph.micro_batch[o])]
        before, needs = int(graph.previous[o]), int(graph.dependency[o])
        problem += end[o] >= (end[before] if before < ops else 0) + duration
        if needs < ops:
            problem += end[o] >= end[needs] + (d if graph.remote[o] else 0.0) + duration
        if o not in followed:
            problem += makespan >= end[o]


def _cbc(seconds: float) -> pulp.LpSolver:
    """The CBC bundled with PuLP (PuLP 3.3 deprecates it in favour of a separately installed
    CBC, which this environment does not have)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return pulp.PULP_CBC_CMD(msg=False, timeLimit=max(seconds, 0.01), warmStart=True)

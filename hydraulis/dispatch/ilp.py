"""The integer program that tries to speed up the slowest pipeline's packing (PuLP; CBC or HiGHS).

The details: :func:`improve_slowest`."""

from __future__ import annotations

import time

import numpy as np
import pulp

from hydraulis.base.solver import Outcome, Solved, solve
from hydraulis.cost.pipeline import schedule_graph
from hydraulis.dispatch.options import DispatchOptions
from hydraulis.dispatch.packing import Packing, PackingStatus
from hydraulis.dispatch.pipelines import PipelineTable, pipeline_makespans


def improve_slowest(table: PipelineTable, packings: list[Packing], tokens: np.ndarray, work: np.ndarray,
                    options: DispatchOptions) -> tuple[list[Packing], list[str]]:
    """``packings`` with the slowest pipeline's packing improved where the solver could, then
    the next slowest if it became the slowest; notes for the plan.

    Only the slowest pipeline decides the step time, so only it is worth a solver (then the next
    one, if it became the slowest: at most one program per pipeline); a pipeline whose greedy
    packing is provably optimal, or with more than ``ilp_max_sequences`` pieces, is left as it is. Binary ``x_ij`` puts piece ``i`` (``s_i`` tokens, work ``w_i``) in micro-batch ``j``:

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

    Both start from the greedy answer (CBC warm start) and run within ``ilp_nodes``
    branch-and-bound nodes (hydraulis/base/solver.py: a budget of work, so the plan does not depend on
    the machine's speed); ``ilp_time_limit_s`` is only a safety stop over the step's programs. The
    answer is timed by the exact 1F1B simulation and kept only if faster, so the result is never
    worse than greedy; ``solver_status`` says what happened (:class:`PackingStatus`) — a proven
    optimum, a better answer from a stopped program, the greedy packing proven optimal or merely
    kept — and the plan's notes add the program's outcome and, with HiGHS, its gap. A pipeline's
    ``proven_ms`` is a proven lower bound on its time for its micro-batch count: its time when
    proven optimal, the solver's bound when it reports one (HiGHS, several stages).
    """
    deadline = time.monotonic() + options.ilp_time_limit_s
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
        left = deadline - time.monotonic()
        if left <= 0:
            notes.append(f"ilp skipped for pipeline {p}: the safety time limit is used up")
            return result, notes
        g = int(table.group_of[p])
        result[p], note = _solve(packing, tokens, work[g], table, g, options, left)
        notes.append(f"ilp for pipeline {p}: {note}")


def _solve(packing: Packing, tokens: np.ndarray, work: np.ndarray, table: PipelineTable, g: int,
           options: DispatchOptions, seconds: float) -> tuple[Packing, str]:
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
        solved = solve(problem, options.ilp_solver, options.ilp_nodes, seconds, warm_start=True)
    except pulp.PulpSolverError as error:
        return Packing(greedy, packing.time_ms, PackingStatus.GREEDY_ILP_NO_ANSWER), f"the solver failed ({error})"
    proven = _proven_ms(solved, float(work[pieces].sum()), c, pp)
    if not solved.outcome.has_answer:
        status = PackingStatus.ILP_TIME_LIMIT if solved.outcome.timed_out else PackingStatus.GREEDY_ILP_NO_ANSWER
        return Packing(greedy, packing.time_ms, status, proven), f"{solved.describe()}; kept the greedy packing"
    chosen = np.array([[round(x[i, j].value() or 0) for j in range(v)] for i in range(pieces.size)]).argmax(axis=1)
    answer = tuple(pieces[chosen == j] for j in range(v) if (chosen == j).any())
    times = np.array([c + work[mb].sum() for mb in answer])
    answer_ms = float(pipeline_makespans([times], [pp], table.model)[0])
    better = answer_ms < packing.time_ms * (1 - 1e-9)
    if solved.outcome.timed_out:
        status = PackingStatus.ILP_TIME_LIMIT
    elif solved.outcome is Outcome.OPTIMAL:
        status = PackingStatus.ILP_OPTIMAL if better else PackingStatus.GREEDY_ILP_OPTIMAL
    else:
        status = PackingStatus.ILP_FEASIBLE if better else PackingStatus.GREEDY_ILP_NOT_BETTER
    kept_ms = answer_ms if better else packing.time_ms
    proven = None if proven is None else min(proven, kept_ms)
    kept = Packing(answer if better else greedy, kept_ms, status, proven)
    return kept, (f"{solved.describe()}; kept {'its' if better else 'the greedy'} packing, {kept_ms:.1f} ms"
                  + ("" if proven is None else f" (≥ {proven:.1f} ms proven)"))


def _proven_ms(solved: Solved, work: float, c: float, pp: int) -> float | None:
    """A lower bound on the pipeline's time from the program's bound: on several stages the
    objective is the time itself; on one stage it is the number of micro-batches ``v``, and the
    time ``W + v·c`` (:func:`improve_slowest`)."""
    if solved.bound is None:
        return None
    return solved.bound if pp > 1 else work + np.ceil(solved.bound - 1e-6) * c


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

"""Running a PuLP model and reading what really happened.

PuLP's ``LpProblem.status`` says "Optimal" for a CBC run stopped by its time limit with a
feasible answer; the *solution* status (``sol_status``) tells them apart: 1 = proven optimal,
2 = feasible only. A run stopped before any answer is neither feasible nor proven infeasible.
"""

from __future__ import annotations

import warnings
from enum import Enum

import pulp

from hydraulis.errors import HydraulisError
from hydraulis.planner.config import SolverName

SMALLEST_TIME_LIMIT_S = 0.05


class Outcome(str, Enum):
    OPTIMAL = "optimal"
    FEASIBLE = "feasible, stopped by the time limit"
    INFEASIBLE = "infeasible"
    STOPPED = "stopped by the time limit without an answer"

    @property
    def has_answer(self) -> bool:
        return self in (Outcome.OPTIMAL, Outcome.FEASIBLE)


def solve(model: pulp.LpProblem, name: SolverName, time_limit_s: float | None) -> Outcome:
    """Solve ``model`` in place with ``name`` within ``time_limit_s`` seconds (``None``: no limit)."""
    limit = None if time_limit_s is None else max(SMALLEST_TIME_LIMIT_S, time_limit_s)
    if name is SolverName.HIGHS:
        solver = pulp.HiGHS(msg=False, timeLimit=limit)
        if not solver.available():
            raise HydraulisError("solver", name.value, "needs the highspy package: pip install 'hydraulis[highs]'")
    else:
        with warnings.catch_warnings():
            # PuLP 3.x announces that 4.0 drops its bundled CBC; pyproject keeps PuLP < 4.
            warnings.filterwarnings("ignore", message="PULP_CBC_CMD is deprecated", category=DeprecationWarning)
            solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=limit)
    model.solve(solver)
    if model.sol_status == pulp.LpSolutionOptimal:
        return Outcome.OPTIMAL
    if model.sol_status == pulp.LpSolutionIntegerFeasible:
        return Outcome.FEASIBLE
    if model.status == pulp.LpStatusInfeasible:
        return Outcome.INFEASIBLE
    return Outcome.STOPPED

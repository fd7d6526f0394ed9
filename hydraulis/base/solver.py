"""Running an integer program under a work budget, and reading what really happened.

**Budgets, not clocks.** A solve is bounded by ``nodes`` branch-and-bound nodes (CBC's
``maxNodes``, HiGHS' ``mip_max_nodes``): a count of work, not of seconds. Both solvers run
single-threaded and deterministically, so the same model and budget give the same answer on an
idle machine and on a loaded one. ``time_limit_s`` is only a *safety stop* against a solve that
runs away; it should not fire in normal use, and when it does the outcome says so (that answer
then depends on the machine's speed).

**Statuses.** PuLP's ``LpProblem.status`` says "Optimal" for a CBC run stopped with a feasible
answer; the *solution* status tells a proven optimum from a mere answer. Which limit stopped a
run PuLP drops: CBC writes it on the first line of its solution file ("Stopped on nodes …",
"Stopped on time …") and HiGHS in its model status (``kSolutionLimit`` for the node budget,
which PuLP 3.3 does not map at all, ``kTimeLimit``); the two solver classes below read it there.

**Gap.** HiGHS reports the best bound ``z̲`` of a stopped run; the relative gap of an answer
``z`` is ``|z − z̲| / max(|z|, 1e-9)`` (0 when optimal, where ``z̲ = z``). CBC's bound does not
come back through PuLP, so its bound and gap are unknown (``None``) unless the answer is optimal.

Worked example: a 0-1 knapsack of 400 items and 30 constraints under a budget of one node: CBC
stops at its root with an answer, :attr:`Outcome.FEASIBLE`; HiGHS does too and also says how
far its answer may be from the optimum.
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import pulp

from hydraulis.base.errors import HydraulisError

SMALLEST_TIME_LIMIT_S = 0.05


class SolverName(str, Enum):
    """The integer-program solver PuLP drives: CBC (bundled with PuLP) or HiGHS (``highspy``)."""

    CBC = "cbc"
    HIGHS = "highs"


class Outcome(str, Enum):
    """How a solve ended."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible, stopped by the node budget"
    NO_ANSWER = "stopped by the node budget without an answer"
    TIME_FEASIBLE = "feasible, stopped by the safety time limit"
    TIME_NO_ANSWER = "stopped by the safety time limit without an answer"
    INFEASIBLE = "infeasible"

    @property
    def has_answer(self) -> bool:
        return self in (Outcome.OPTIMAL, Outcome.FEASIBLE, Outcome.TIME_FEASIBLE)

    @property
    def timed_out(self) -> bool:
        """Whether the safety stop, not the budget, ended the solve."""
        return self in (Outcome.TIME_FEASIBLE, Outcome.TIME_NO_ANSWER)


@dataclass(frozen=True)
class Solved:
    """The outcome of one solve; the solver's bound on the objective and the relative gap of its
    answer to it (``None`` when unknown or without an answer); the seconds it took (reported,
    never decided on)."""

    outcome: Outcome
    bound: float | None
    gap: float | None
    wall_s: float

    def describe(self) -> str:
        """``optimal``, ``feasible, stopped by the node budget, gap 2.1%``, …"""
        if self.outcome is Outcome.OPTIMAL or not self.outcome.has_answer:
            return self.outcome.value
        return f"{self.outcome.value}, gap {'unknown' if self.gap is None else f'{self.gap:.1%}'}"


def solve(model: pulp.LpProblem, name: SolverName, nodes: int, time_limit_s: float | None,
          warm_start: bool = False) -> Solved:
    """Solve ``model`` in place with ``name`` within ``nodes`` branch-and-bound nodes, stopped
    after ``time_limit_s`` seconds for safety (``None``: never); ``warm_start`` hands the
    variables' initial values to CBC as a first answer."""
    limit = None if time_limit_s is None else max(SMALLEST_TIME_LIMIT_S, time_limit_s)
    started = time.perf_counter()
    if name is SolverName.HIGHS:
        solver = _HiGHS(msg=False, timeLimit=limit, mip_max_nodes=nodes)
        if not solver.available():
            raise HydraulisError("solver", name.value, "needs the highspy package: pip install 'hydraulis[highs]'")
    else:
        with warnings.catch_warnings():
            # PuLP 3.x announces that 4.0 drops its bundled CBC; pyproject keeps PuLP < 4.
            warnings.filterwarnings("ignore", message="PULP_CBC_CMD is deprecated", category=DeprecationWarning)
            solver = _Cbc(msg=False, timeLimit=limit, maxNodes=nodes, warmStart=warm_start)
    try:
        model.solve(solver)
    except OSError as error:  # CBC's model and solution files could not be written: say where
        raise _unwritable(solver, error) from None
    wall_s = time.perf_counter() - started
    if model.sol_status == pulp.LpSolutionOptimal:
        return Solved(Outcome.OPTIMAL, pulp.value(model.objective), 0.0, wall_s)
    answered = model.sol_status == pulp.LpSolutionIntegerFeasible
    if not answered and model.status == pulp.LpStatusInfeasible:
        return Solved(Outcome.INFEASIBLE, None, None, wall_s)
    bound = solver.bound(model) if answered else None
    gap = None if bound is None else abs(pulp.value(model.objective) - bound) / max(abs(pulp.value(model.objective)),
                                                                                    1e-9)
    if solver.timed_out:
        return Solved(Outcome.TIME_FEASIBLE if answered else Outcome.TIME_NO_ANSWER, bound, gap, wall_s)
    return Solved(Outcome.FEASIBLE if answered else Outcome.NO_ANSWER, bound, gap, wall_s)


def _unwritable(solver: pulp.LpSolver, error: OSError) -> HydraulisError:
    """The error naming the folder CBC's files go to (``TMPDIR``), once the files begun are removed."""
    files = getattr(solver, "files", ())
    for file in files:
        Path(file).unlink(missing_ok=True)
    where = error.filename or (files[1] if len(files) > 1 else None)
    folder = str(Path(where).parent) if where else (getattr(solver, "tmpDir", "") or os.getcwd())
    return HydraulisError("TMPDIR", folder, f"cannot hold the solver's files ({error.strerror or error}"
                                            f"{f' writing {Path(where).name}' if where else ''}); free space "
                                            f"there or set TMPDIR to another folder")


class _Cbc(pulp.PULP_CBC_CMD):
    """PuLP's bundled CBC, keeping which limit stopped it (the solution file's first line) and
    the temporary files it names (removed when writing them fails)."""

    timed_out = False
    files: tuple[str, ...] = ()

    def create_tmp_files(self, name, *args):
        self.files = tuple(super().create_tmp_files(name, *args))
        return self.files

    def get_status(self, filename):
        with open(filename, encoding="utf-8") as handle:
            self.timed_out = handle.readline().startswith("Stopped on time")
        return super().get_status(filename)

    def bound(self, model: pulp.LpProblem) -> float | None:
        return None


class _HiGHS(pulp.HiGHS):
    """PuLP's HiGHS, mapping the node budget's ``kSolutionLimit`` (unknown to PuLP 3.3) and
    keeping which limit stopped it."""

    timed_out = False

    def findSolutionValues(self, lp):
        import highspy

        status = lp.solverModel.getModelStatus()
        self.timed_out = status == highspy.HighsModelStatus.kTimeLimit
        try:
            return super().findSolutionValues(lp)
        except KeyError:
            # PuLP has assigned the variables' values before looking the status up.
            if status != highspy.HighsModelStatus.kSolutionLimit:
                raise
            found = lp.solverModel.getInfo().primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible
            return ((pulp.LpStatusOptimal, pulp.LpSolutionIntegerFeasible) if found
                    else (pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound))

    def bound(self, model: pulp.LpProblem) -> float | None:
        # PuLP hands HiGHS a maximisation as the minimisation of −objective.
        flip = -1.0 if model.sense == pulp.LpMaximize else 1.0
        return flip * model.solverModel.getInfo().mip_dual_bound

"""Integer programs under a node budget: what really happened, told apart from what PuLP's
status alone would claim; the same budget gives the same answer."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pulp
import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.base.solver import Outcome, SolverName, solve


def knapsack(items: int, dimensions: int) -> pulp.LpProblem:
    """A multi-dimensional 0-1 knapsack; one node does not close it."""
    rng = np.random.default_rng(7)
    weights = rng.integers(10, 1000, size=(dimensions, items))
    model = pulp.LpProblem("knapsack", pulp.LpMaximize)
    x = [model.add_variable(f"x{i}", 0, 1, cat=pulp.LpInteger) for i in range(items)]
    model += pulp.lpSum(int(v) * xi for v, xi in zip(rng.integers(10, 1000, size=items), x))
    for row in weights:
        model += pulp.lpSum(int(w) * xi for w, xi in zip(row, x)) <= int(row.sum() // 2)
    return model


@pytest.mark.parametrize("name", list(SolverName))
def test_a_node_budget_stops_with_an_answer_that_is_not_called_optimal_and_is_repeatable(name):
    model = knapsack(60, 5)
    solved = solve(model, name, 1, None)
    assert model.status == pulp.LpStatusOptimal  # what PuLP's status alone would claim
    assert solved.outcome is Outcome.FEASIBLE and not solved.outcome.timed_out
    value = pulp.value(model.objective)
    again = knapsack(60, 5)
    assert solve(again, name, 1, None).outcome is Outcome.FEASIBLE and pulp.value(again.objective) == value
    if name is SolverName.HIGHS:
        assert 0 < solved.gap < 0.05 and solved.describe().startswith("feasible, stopped by the node budget, gap ")
    else:
        assert solved.gap is None and solved.describe().endswith("gap unknown")


def test_the_safety_stop_is_reported_as_such():
    """400 items × 30 constraints: CBC's root node alone outlasts the smallest time limit."""
    solved = solve(knapsack(400, 30), SolverName.CBC, 10**9, 0.01)
    assert solved.outcome.timed_out and solved.outcome is not Outcome.OPTIMAL


@pytest.mark.parametrize("name", list(SolverName))
def test_infeasible_and_optimal_outcomes(name):
    model = pulp.LpProblem("tiny", pulp.LpMinimize)
    x = model.add_variable("x", 0, 3, cat=pulp.LpInteger)
    model += x
    model += x >= 2
    solved = solve(model, name, 10, 5.0)
    assert solved.outcome is Outcome.OPTIMAL and solved.gap == 0 and x.value() == 2
    assert solved.describe() == "optimal"
    model += x <= 1
    assert solve(model, name, 10, 5.0).outcome is Outcome.INFEASIBLE


def test_highs_missing_is_named(monkeypatch):
    monkeypatch.setattr(pulp.HiGHS, "available", lambda self: False)
    model = pulp.LpProblem("tiny", pulp.LpMinimize)
    model += model.add_variable("x", 0, 1)
    with pytest.raises(HydraulisError, match="^solver: 'highs' needs the highspy package"):
        solve(model, SolverName.HIGHS, 10, 1.0)


WRITE_LIMITED = """
import resource
from tests.base.test_solver import knapsack
from hydraulis.base.solver import SolverName, solve
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
solve(knapsack(400, 30), SolverName.CBC, nodes=1, time_limit_s=60)
"""


def test_a_temporary_folder_that_cannot_hold_the_model_is_named_and_left_clean(tmp_path):
    """``ulimit -f`` (``File too large``) as a stand-in for a full disk: the error names TMPDIR
    and no half-written model file stays there."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", WRITE_LIMITED], capture_output=True, text=True, timeout=300,
                          cwd=root, env=dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=str(root)), check=False)
    assert done.returncode != 0
    assert f"HydraulisError: TMPDIR: '{tmp_path}' cannot hold the solver's files (File too large writing" in done.stderr
    assert list(tmp_path.iterdir()) == []

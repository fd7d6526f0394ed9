import json

import numpy as np
import pytest

from hydraulis.artifacts import write_scheme_space, write_step_plan
from hydraulis.artifacts.fused import read_fused_problem, read_fused_schedule, write_fused_problem
from hydraulis.base.types import OptimizerLayout, PipelineGroup, Proposal, ProposedStrategy, SolverReport, Strategy
from hydraulis.cli import main
from hydraulis.dispatch import dispatch
from hydraulis.fused import check_schedule
from tests.conftest import analytic_space
from tests.fused.helpers import two_models


def test_fuse_writes_a_valid_schedule_and_ends_with_the_summary_line(tmp_path, capsys):
    problem = two_models(4, 2, 3)
    write_fused_problem(tmp_path / "problem.json", problem)
    code = main(["fuse", "--problem", str(tmp_path / "problem.json"), "--workers", "1", "--evaluations", "2000",
                 "-o", str(tmp_path / "schedule.json"), "--gantt", str(tmp_path / "fused.png")])
    assert code == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    schedule = read_fused_schedule(tmp_path / "schedule.json")
    assert last == (f"makespan={schedule.makespan_ms:.6g} lower_bound={schedule.lower_bound_ms:.6g} "
                    f"sequential={schedule.sequential_ms:.6g}")
    assert check_schedule(problem, schedule.tasks) == []
    assert (tmp_path / "fused.png").stat().st_size > 0


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["models"][0].update(placement="diagonal"), "models[0].placement"),
    (lambda d: d["models"][1].update(stages=3), "models[1].replicas"),
    (lambda d: d["models"][0].update(micro_batches=-1), "models[0].micro_batches"),
    (lambda d: d["models"][1].update(forward_ms=0), "models[1].forward_ms"),
    (lambda d: d["models"][0].update(forward_ms=[1.0]), "models[0].forward_ms"),
])
def test_bad_problems_exit_2_naming_the_field(tmp_path, capsys, edit, field):
    write_fused_problem(tmp_path / "problem.json", two_models(4, 2, 3))
    document = json.loads((tmp_path / "problem.json").read_text())
    edit(document)
    (tmp_path / "problem.json").write_text(json.dumps(document))
    assert main(["fuse", "--problem", str(tmp_path / "problem.json"), "-o", str(tmp_path / "s.json")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"hydraulis: error: {field}") and "Traceback" not in error


def test_unreachable_memory_limit_exits_2(tmp_path, capsys):
    write_fused_problem(tmp_path / "problem.json", two_models(4, 2, 3))
    assert main(["fuse", "--problem", str(tmp_path / "problem.json"), "--memory-limit", "0.5",
                 "-o", str(tmp_path / "s.json")]) == 2
    assert "memory_limit" in capsys.readouterr().err


def _plan(space, pp: int, count: int, lengths):
    layout = OptimizerLayout(8 // pp, 1, pp)
    profile = space.profile(next(p.scheme for p in space.profiles if p.scheme.pp == pp and p.scheme.tp == 1
                                 and p.scheme.cp == 1))
    group = PipelineGroup(profile.scheme, count, 4096, profile.time)
    proposal = Proposal(space.model, 8, 8, layout, (ProposedStrategy(Strategy((group,)), 0, 4096, 0.0, 0.0, (0,)),),
                        8192, 4096, space.pipeline_model, SolverReport("fixed", "fixed", 0.0))
    return dispatch(proposal, lengths)


def test_from_step_plans_fuses_variable_length_micro_batches(tmp_path, capsys):
    space = analytic_space("llama-7b", devices=8)
    rng = np.random.default_rng(0)
    plans = [_plan(space, 8, 1, rng.integers(64, 2048, 12)), _plan(space, 4, 2, rng.integers(64, 2048, 12))]
    for i, plan in enumerate(plans):
        write_step_plan(tmp_path / f"plan{i}.json", plan)
    write_scheme_space(tmp_path / "space.json", space)
    code = main(["fuse", "--from-step-plans", str(tmp_path / "plan0.json"), str(tmp_path / "plan1.json"),
                 "--spaces", str(tmp_path / "space.json"), str(tmp_path / "space.json"), "--workers", "1",
                 "--evaluations", "2000", "--problem-out", str(tmp_path / "problem.json"),
                 "-o", str(tmp_path / "schedule.json")])
    assert code == 0, capsys.readouterr().err
    problem = read_fused_problem(tmp_path / "problem.json")
    assert problem.models[1].replicas == 2 and problem.models[1].placement.value == "reverse"
    schedule = read_fused_schedule(tmp_path / "schedule.json")
    assert check_schedule(problem, schedule.tasks) == []
    assert schedule.makespan_ms < schedule.sequential_ms
    assert main(["fuse", "--from-step-plans", str(tmp_path / "plan0.json"), str(tmp_path / "plan1.json"),
                 "-o", str(tmp_path / "s.json")]) == 2

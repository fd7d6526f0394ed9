"""The same ``propose`` and ``plan-step`` commands give identical strategies and plans on an idle
machine and with every core busy: their answers depend on the inputs, the seed and work budgets
(integer-program nodes, local-search evaluations), never on elapsed time.

The instance exercises every budgeted search: integer programs and local searches in two
serving ranges, and a packing integer program stopped by its node budget (``ilp_feasible``),
which a wall-clock limit would stop at a machine-dependent point."""

import json
import os
import subprocess
import sys

import pytest

from hydraulis.artifacts import read_lengths
from tests.cli.helpers import Completed
from tests.cli.helpers import hydraulis as run_cli
from tests.dispatch.helpers import EXAMPLES

POOL = EXAMPLES / "data" / "longtail.txt"
BUSY_LOOP = "while True:\n    pass\n"


def hydraulis(*args: object) -> Completed:
    run = run_cli(*args)
    assert run.returncode == 0, run.stderr[-2000:]
    return run


def plan(space, batch, folder) -> tuple[dict, dict]:
    """Proposal and step plan made by the commands, without their wall-clock fields."""
    proposal, step_plan = folder / "proposal.json", folder / "plan.json"
    hydraulis("propose", "--space", space, "--devices", 32, "--token-budget", 131072, "--max-seq-len", 32768,
              "--lengths", POOL, "--strategies", 4, "--steps", 16, "-o", proposal)
    hydraulis("plan-step", "--proposal", proposal, "--lengths", batch, "--ilp-nodes", 20, "-o", step_plan)
    made, planned = json.loads(proposal.read_text()), json.loads(step_plan.read_text())
    del made["solver"]["wall_ms"], planned["planning_ms"]
    return made, planned


@pytest.mark.slow
def test_propose_and_plan_step_give_the_same_answers_with_every_core_busy(tmp_path):
    space, batch = tmp_path / "space.json", tmp_path / "batch.txt"
    hydraulis("space", "analytic", "--model", "llama-7b", "--device", "h100-80g", "--devices", 32, "--cp", "1,2",
              "--tp", "2,4,8", "--pp", "2,4", "-o", space)
    batch.write_text("".join(f"{n}\n" for n in read_lengths(POOL)[300:330]))
    (tmp_path / "idle").mkdir()
    (tmp_path / "busy").mkdir()
    idle = plan(space, batch, tmp_path / "idle")
    loops = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(max(2, os.cpu_count() or 2))]
    try:
        busy = plan(space, batch, tmp_path / "busy")
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    proposal, step_plan = idle
    assert proposal["solver"]["status"] == "optimal"
    assert "the local search judged" in json.dumps(proposal["strategies"], ensure_ascii=False)
    assert any(p["solver_status"] == "ilp_feasible" for p in step_plan["pipelines"])
    assert busy == idle

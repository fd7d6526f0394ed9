"""``hydraulis simulate --cluster`` and ``propose --cluster``: the comparison, the proposal plan-step runs; bad input exits 2."""

import json

from tests.cli.helpers import hydraulis


def test_simulate_cluster_writes_the_comparison(tmp_path):
    run = hydraulis("simulate", "--cluster", "examples/clusters/a100_h100.json", "--lengths",
                    "examples/data/longtail.txt", "--token-budget", "200000", "--steps", "2", "--planner-steps", "2",
                    "--cluster-evaluations", "20", "-o", str(tmp_path))
    assert run.returncode == 0, run.stderr
    document = json.loads((tmp_path / "mixed_simulation.json").read_text())
    assert document["kind"] == "mixed_simulation"
    assert [c["name"] for c in document["contenders"]] == ["mixed_planner", "type_segregated", "flashflex",
                                                           "homogeneous_fastest"]
    assert all(c["ratio"] >= 1.0 for c in document["contenders"])
    assert "homogeneous_fastest" in run.stdout and "lower bound" in run.stdout


def test_a_space_with_a_cluster_exits_2(tmp_path):
    run = hydraulis("simulate", "--cluster", "examples/clusters/a100_h100.json", "--device", "h100-80g",
                    "-o", str(tmp_path))
    assert run.returncode == 2 and "--device" in run.stderr


def test_propose_cluster_writes_a_proposal_plan_step_runs(tmp_path):
    proposal = tmp_path / "p.json"
    run = hydraulis("propose", "--cluster", "examples/clusters/a100_h100.json", "--lengths",
                    "examples/data/longtail.txt", "--token-budget", "200000", "--max-seq-len", "32768", "--steps", "2",
                    "--search-evaluations", "20", "-o", str(proposal))
    assert run.returncode == 0, run.stderr
    assert "@h100" in run.stdout and "@a100" in run.stdout
    lengths = tmp_path / "step.txt"
    lengths.write_text("32768\n16000\n" + "2000\n" * 70)
    planned = hydraulis("plan-step", "--proposal", str(proposal), "--lengths", str(lengths), "-o",
                        str(tmp_path / "plan.json"))
    assert planned.returncode == 0, planned.stderr


def test_propose_without_space_or_cluster_exits_2(tmp_path):
    run = hydraulis("propose", "--lengths", "examples/data/longtail.txt", "--token-budget", "200000",
                    "--max-seq-len", "32768", "-o", str(tmp_path / "p.json"))
    assert run.returncode == 2 and "--space" in run.stderr

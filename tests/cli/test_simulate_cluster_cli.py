"""``hydraulis simulate --cluster``: the table and the artifact; bad input exits 2."""

import json
import subprocess
import sys


def hydraulis(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hydraulis", *args], capture_output=True, text=True)


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

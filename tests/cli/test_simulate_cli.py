"""``hydraulis simulate``: a tiny run end to end, and bad input (exit 2, one line, no traceback)."""

import json

import pytest

from tests.cli.helpers import hydraulis
from tests.dispatch.helpers import EXAMPLES

LENGTHS = str(EXAMPLES / "data" / "longtail.txt")
SMALL = ("--space", "bundled:7b", "--devices", "16", "--token-budget", "40000", "--max-seq-len", "16384",
         "--strategies", "2", "--time-limit", "2", "--planner-steps", "8", "--no-progress")


def test_a_small_simulation_prints_the_summary_and_writes_its_artifacts(tmp_path):
    run = hydraulis("simulate", *SMALL, "--steps", "2", "--lengths", LENGTHS, "-o", str(tmp_path))
    assert run.returncode == 0, run.stderr
    assert "median planning latency" in run.stdout
    assert "fixed packing (Megatron-LM style):" in run.stdout and "static" in run.stdout
    document = json.loads((tmp_path / "simulation.json").read_text())
    assert document["kind"] == "simulation" and document["schema_version"] == 1
    assert document["config"]["steps"] == 2 and document["config"]["space"]["source"] == "bundled:7b"
    assert document["config"]["workload"] == {"source": "lengths", "path": LENGTHS}
    for name in ("step_times.png", "planning_latency.png", "strategy_usage.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "baselines" / "homogeneous_fixed_packing.json").is_file()


def test_a_synthetic_workload_without_plots_synthesising_from_the_space(tmp_path):
    run = hydraulis("simulate", *SMALL, "--steps", "1", "--synthetic-docs", "3000", "--no-plots",
                    "--synthesise", "space", "--synthesis-evaluations", "4", "-o", str(tmp_path))
    assert run.returncode == 0, run.stderr
    assert "synthesis (space, 4 evaluations per step)" in run.stdout and "distinct communicators" in run.stdout
    assert "Hydraulis' gap (median ms over steps): work" in run.stdout
    assert json.loads((tmp_path / "simulation.json").read_text())["config"]["workload"]["source"] == "synthetic"
    assert not (tmp_path / "step_times.png").exists()


@pytest.mark.parametrize("args, start", [
    (("--steps", "0"), "hydraulis simulate: error: argument --steps: '0' must be between 1 and 100000"),
    (("--space", "bundled:7b", "--devices", "1"), "hydraulis: error: devices:"),
    (("--lengths", "/nonexistent/lengths.txt"), "hydraulis: error: lengths:"),
    (("--space", "bundled:7b", "--model", "llama-7b"), "hydraulis: error: --model:"),
    (("--token-budget", "1000"), "hydraulis: error: token_budget:"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, args, start):
    run = hydraulis("simulate", *args, "-o", str(tmp_path / "out"))
    assert run.returncode == 2
    assert run.stderr.startswith(start) and run.stderr.count("\n") == 1, run.stderr
    assert not (tmp_path / "out").exists()


def test_an_unknown_model_is_refused_by_name(tmp_path):
    run = hydraulis("simulate", "--model", "gpt-5", "-o", str(tmp_path))
    assert run.returncode == 2
    assert "gpt-5" in run.stderr and "llama-32b" in run.stderr

"""``hydraulis train`` and ``hydraulis check-equivalence`` on the command line."""

import json
import subprocess
import sys

import pytest


def hydraulis(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hydraulis", *args], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("args, words", [
    (("check-equivalence", "--steps", "2"), "--strategy: None is required"),
    (("check-equivalence", "--strategy", "1,3,1"), "does not divide model.heads"),
    (("check-equivalence", "--strategy", "1,2"), "pipeline 1 ('1,2') must be cp,tp,pp"),
    (("train", "--strategy", "1,1,1", "--steps", "2"), "--model: None is required"),
    (("train", "--config", "missing.json"), "does not exist"),
    (("train", "--model", "tiny", "--strategy", "1,1,1", "--steps", "0"), "steps: 0 must be >= 1"),
])
def test_bad_input_exits_2_with_one_line(args, words):
    result = hydraulis(*args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and words in result.stderr


@pytest.mark.distributed
def test_check_equivalence_cycles_strategies_and_ends_with_max_rel_diff():
    result = hydraulis("check-equivalence", "--model", "tiny", "--strategy", "1,2,1", "--strategy", "1,1,2",
                       "--steps", "2", "--token-budget", "160", "--device", "cpu")
    assert result.returncode == 0, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("max_rel_diff=") and float(last.split("=")[1]) <= 1e-5
    assert "1,1,2" in result.stdout
    assert "strategy 1,2,1 " in result.stderr and "ms measured/predicted" in result.stderr


@pytest.mark.distributed
def test_train_spawns_processes_and_saves_its_resolved_config(tmp_path):
    config = tmp_path / "train.json"
    config.write_text(json.dumps({"schema_version": 1, "kind": "train_config", "model": "tiny",
                                  "strategies": ["1,1,1"], "steps": 2, "token_budget": 128,
                                  "runtime": {"device": "cpu"}}))
    result = hydraulis("train", "--config", str(config), "--steps", "3", "--output-dir", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    steps = [line for line in result.stderr.splitlines() if "rank 0 INFO" in line and " step " in line]
    assert len(steps) == 3 and all("strategy 1,1,1 " in line for line in steps)
    saved = json.loads((tmp_path / "out" / "train_config.json").read_text())
    assert saved["steps"] == 3 and saved["token_budget"] == 128 and saved["runtime"]["optimizer"] == "adam"

"""A real Hugging Face ``Trainer`` (2 processes, gloo, tiny Llama) trains through BalancedBatchSampler."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate", reason="the Trainer needs accelerate (the dev extra installs it)")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trainer_balanced.py"


def run_ranks(tmp_path: Path, sampler: str, world: int = 2, steps: int = 4) -> dict:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = tmp_path / f"{sampler}.json"
    ranks = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                   LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
        ranks.append(subprocess.Popen([sys.executable, str(EXAMPLE), "--sampler", sampler, "--steps", str(steps),
                                       "--out", str(out), "--workdir", str(tmp_path / "work")],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [r.communicate(timeout=300)[0] for r in ranks]
    assert all(r.returncode == 0 for r in ranks), outputs[0][-3000:] + outputs[1][-3000:]
    return json.loads(out.read_text())


@pytest.mark.distributed
@pytest.mark.slow
def test_trainer_trains_with_the_balanced_sampler(tmp_path):
    result = run_ranks(tmp_path, "balanced")
    assert result["sampler"] == "balanced"
    assert len(result["losses"]) == 4 and len(result["step_ms"]) == 4
    assert all(loss == loss and 0 < loss < 10 for loss in result["losses"])

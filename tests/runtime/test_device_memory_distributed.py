"""A step whose measured peak exceeds the device memory budget fails with one clear error, on every rank."""

import pytest

from hydraulis.cli import main

pytestmark = [pytest.mark.distributed]

ARGS = ["train", "--model", "tiny", "--strategy", "1,1,1x2", "--steps", "2", "--nproc", "2", "--device", "cpu",
        "--token-budget", "128", "--max-seq-len", "64"]


def test_a_step_above_the_budget_fails_and_one_within_it_runs(capsys):
    with pytest.raises(SystemExit) as failed:
        main([*ARGS, "--device-memory", "1000000"])
    assert failed.value.code == 1
    error = capsys.readouterr().err
    assert "device_memory: 1000000 is exceeded at step 0 by rank" in error
    peak = int(error.split("peak ")[1].split(" bytes")[0])
    assert main([*ARGS, "--device-memory", str(4 * peak)]) == 0

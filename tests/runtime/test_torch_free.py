"""Configs resolve and the CLI starts without torch: bad input fails fast, before any rank."""

import subprocess
import sys

from tests.test_imports import BLOCKER


def test_config_resolution_and_cli_import_without_torch():
    code = BLOCKER + ("import hydraulis.cli, hydraulis.runtime.run\n"
                      "from hydraulis.job.config import TrainConfig\n"
                      "run = hydraulis.runtime.run.resolve_run(TrainConfig('tiny', ('1,2,1+1,1,2',), 2))\n"
                      "print(run.devices)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "4"

"""examples/thesis.sh reduced (one repeat of two steps), and its table on hand-made train logs."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from hydraulis.artifacts import read_proposal
from hydraulis.artifacts.train_log import read_train_log, write_train_log
from hydraulis.job.records import StepRecord

ROOT = Path(__file__).resolve().parents[2]
LAST = re.compile(r"^measured_speedup_vs_homogeneous=(\d+\.\d+) measured_speedup_vs_fixed=(\d+\.\d+) "
                  r"predicted_speedup_vs_homogeneous=(\d+\.\d+)$")


def record(step: int, strategy: str, step_ms: float, predicted_ms: float) -> StepRecord:
    return StepRecord(step, strategy, 1000, 6.0, (step_ms,), (predicted_ms,), 0.0, 0.0, step_ms, predicted_ms, 0.0)


def test_the_table_compares_the_common_warm_steps(tmp_path):
    a, b = "2,1,2", "2,2,1"
    runs = {"hydraulis": [record(0, a, 900, 100), record(1, b, 900, 100), record(2, a, 100, 100),
                          record(3, b, 200, 100)],
            "homogeneous": [record(s, b, 900 if s == 0 else 300, 150) for s in range(4)],
            "fixed": [record(s, b, 900 if s == 0 else 600, 150) for s in range(4)]}
    for repeat in ("1", "2"):
        for name, records in runs.items():
            (tmp_path / repeat / name).mkdir(parents=True)
            write_train_log(tmp_path / repeat / name / "train_log.json", tuple(records))
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "thesis_table.py"), str(tmp_path)],
                         capture_output=True, text=True, check=True).stdout
    assert "2 repeats, 2 common warm steps of 4 per run" in out
    # steps 2 and 3: hydraulis 2000 tokens in 0.3 s, homogeneous in 0.6 s, fixed in 1.2 s; predicted 0.2 s and 0.3 s
    assert LAST.match(out.splitlines()[-1]).groups() == ("2.000", "4.000", "1.500")


@pytest.mark.distributed
@pytest.mark.slow
def test_the_reduced_miniature_runs_the_three_contenders(tmp_path):
    done = subprocess.run(["bash", str(ROOT / "examples" / "thesis.sh"), "--out", str(tmp_path), "--repeats", "1",
                           "--steps", "5", "--check-memory", "no"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert LAST.match(lines[-1]), lines[-1]
    proposal = read_proposal(tmp_path / "proposal.json")
    assert len({group.scheme for s in proposal.strategies for group in s.strategy.pipelines}) >= 2
    switched = read_train_log(tmp_path / "runs" / "1" / "hydraulis" / "train_log.json")
    assert len({record.strategy for record in switched}) >= 2
    for name in ("homogeneous", "fixed"):
        assert len(read_train_log(tmp_path / "runs" / "1" / name / "train_log.json")) == 5

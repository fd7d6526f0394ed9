"""A burst of concurrent mixed requests against a real ``hydraulis serve``: no 5xx but 503 with
Retry-After, every admitted valid step plan succeeds, healthy afterwards (the benchmark script
checks all of it and exits 1 otherwise)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_burst_sheds_load_without_failing():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "service_burst.py"), "--requests", "40",
                           "--workers", "1", "--queue", "4"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "503:" in done.stdout and "valid step plan    200:" in done.stdout, done.stdout

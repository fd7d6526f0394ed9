"""What a checkpoint costs the step it follows, on the CPU example (tiny model, strategy 1,1,2 on
2 gloo processes): checkpoints are snapshotted to host memory and written in the background, so
a step after which a checkpoint is taken should cost at most 1.3 × a normal step.

Runs ``hydraulis train`` twice — with ``--checkpoint-every E`` and without checkpoints — and
takes each step's wall time as the interval between rank 0's consecutive step lines (so the
checkpoint's snapshot, and any wait for the previous write, falls in the interval of the step
that follows it). Prints the mean interval of the steps with and without a checkpoint before
them, their ratio, and the run without checkpoints for comparison; exits 1 when the ratio
exceeds ``--limit``. The first ``--skip`` steps (warm-up) are left out.

    python benchmarks/checkpoint_cost.py [--steps 40] [--every 2] [--limit 1.3]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

STEP_LINE = re.compile(r"^(\S+ \S+) rank 0 INFO hydraulis\.runtime\.trainer: step (\d+) ", re.M)


def step_intervals(steps: int, every: int, root: Path | None) -> dict[int, float]:
    """Seconds between rank 0's line of step ``k - 1`` and step ``k``, by ``k``."""
    command = [sys.executable, "-m", "hydraulis", "--log-level", "info", "train", "--model", "tiny", "--strategy",
               "1,1,2", "--steps", str(steps), "--device", "cpu"]
    if root is not None:
        command += ["--checkpoint-dir", str(root), "--checkpoint-every", str(every)]
    run = subprocess.run(command, capture_output=True, text=True, check=True)
    times = {int(step): datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
             for stamp, step in STEP_LINE.findall(run.stderr)}
    return {k: times[k] - times[k - 1] for k in sorted(times) if k - 1 in times}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40, help="training steps of each run (default 40)")
    parser.add_argument("--every", type=int, default=2, help="a checkpoint every E steps in the checkpointing run (default 2)")
    parser.add_argument("--skip", type=int, default=4, help="warm-up steps left out")
    parser.add_argument("--limit", type=float, default=1.3, help="exit 1 when the checkpointing steps cost more than this × a normal step (default 1.3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="checkpoint-cost-") as scratch:
        with_checkpoints = step_intervals(args.steps, args.every, Path(scratch) / "checkpoints")
    without = step_intervals(args.steps, args.every, None)
    after = [s for k, s in with_checkpoints.items() if k > args.skip and k % args.every == 0]
    normal = [s for k, s in with_checkpoints.items() if k > args.skip and k % args.every != 0]
    plain = [s for k, s in without.items() if k > args.skip]
    ratio = statistics.mean(after) / statistics.mean(normal)
    print(f"steps after a checkpoint: mean {statistics.mean(after) * 1e3:.1f} ms (median "
          f"{statistics.median(after) * 1e3:.1f}, n {len(after)}); other steps: mean "
          f"{statistics.mean(normal) * 1e3:.1f} ms (median {statistics.median(normal) * 1e3:.1f}, n {len(normal)}); "
          f"without checkpoints: mean {statistics.mean(plain) * 1e3:.1f} ms")
    print(f"checkpointing step / normal step = {ratio:.2f} (limit {args.limit})")
    sys.exit(0 if ratio <= args.limit else 1)


if __name__ == "__main__":
    main()

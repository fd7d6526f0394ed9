"""Interleaved A/B of two source trees of the runtime on one training job: this checkout against a
baseline (e.g. the commit before a change to the tensor-parallel layers), run after run, so that
both see the same machine.

    git archive main | tar -x -C /tmp/base      # once: the baseline's sources
    .venv/bin/python benchmarks/tensor_parallel_ab.py --baseline /tmp/base --strategy 1,2,1x2 [--repeats 3]

Each repeat runs ``hydraulis train`` (tiny, synthetic documents, CPU) with each tree first on
``PYTHONPATH`` — this checkout first in even repeats, the baseline first in odd ones. Over every
step after the first it prints the median measured step time of each arm (pooled over the
repeats), each repeat's medians and ratio, a 90 % bootstrap interval of the pooled ratio (on a
shared machine one run's median moves by ±15 %: the interval says whether a difference is
resolved at all), and as the last line::

    candidate_over_baseline=<median step of this checkout / median step of the baseline>
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from hydraulis.artifacts.train_log import read_train_log
from hydraulis.cli.output import table

CANDIDATE = Path(__file__).resolve().parents[1]
BOOTSTRAP_DRAWS = 2000
"""Resamples behind the ratio's interval (seeded: the same steps give the same interval)."""


def run_arm(source: Path, out: Path, args: argparse.Namespace) -> tuple[list[float], list[float]]:
    """The measured step and slowest-pipeline compute ms of every step after the first, with the
    runtime of ``source``."""
    command = [sys.executable, "-m", "hydraulis", "train", "--model", "tiny", "--strategy", args.strategy,
               "--steps", str(args.steps), "--nproc", str(args.nproc), "--device", "cpu",
               "--token-budget", str(args.token_budget), "--max-seq-len", str(args.max_seq_len),
               "--output-dir", str(out)]
    environment = {**os.environ, "PYTHONPATH": str(source)}
    subprocess.run(command, capture_output=True, text=True, check=True, cwd=source, env=environment)
    records = read_train_log(out / "train_log.json")[1:]
    return [r.step_ms for r in records], [max(r.measured_ms) for r in records]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, required=True, help="a source tree of the baseline runtime")
    parser.add_argument("--strategy", default="1,2,1x2", help="the job's SPEC (default 1,2,1x2)")
    parser.add_argument("--nproc", type=int, default=4, help="processes (default 4)")
    parser.add_argument("--repeats", type=int, default=3, help="A/B pairs (default 3)")
    parser.add_argument("--steps", type=int, default=8, help="training steps per run (default 8)")
    parser.add_argument("--token-budget", type=int, default=4096, help="tokens per global batch (default 4096)")
    parser.add_argument("--max-seq-len", type=int, default=1024, help="longest document (default 1024)")
    args = parser.parse_args()
    arms = {"candidate": CANDIDATE, "baseline": args.baseline.resolve()}
    runs = {arm: [] for arm in arms}
    rows = []
    with tempfile.TemporaryDirectory(prefix="tensor-parallel-ab-") as folder:
        for repeat in range(args.repeats):
            order = list(arms) if repeat % 2 == 0 else list(reversed(arms))
            for arm in order:
                steps, compute = run_arm(arms[arm], Path(folder) / f"{arm}-{repeat}", args)
                runs[arm].append(steps)
                rows.append([repeat, arm, len(steps), round(statistics.median(steps), 1),
                             round(statistics.median(compute), 1)])
    report(("repeat", "arm", "steps", "median_step_ms", "median_compute_ms"), rows, runs)


def report(headers: tuple[str, ...], rows: list[list], runs: dict[str, list[list[float]]]) -> None:
    """The repeats' table, each arm's median step pooled over them, each repeat's ratio, the
    pooled ratio's bootstrap interval and, as the last line, ``<first arm>_over_<second arm>=``
    the ratio of the two pooled medians (``runs``: per arm, each repeat's steps)."""
    print(table(headers, rows))
    first, second = runs
    medians = {arm: statistics.median(_pooled(repeats)) for arm, repeats in runs.items()}
    print("pooled median step: " + ", ".join(f"{arm} {median:.1f} ms" for arm, median in medians.items()))
    pairs = list(zip(runs[first], runs[second]))
    print("per repeat: " + ", ".join(f"{statistics.median(a) / statistics.median(b):.3f}" for a, b in pairs))
    low, high = bootstrap_interval(pairs)
    print(f"90% interval of the ratio: {low:.3f}-{high:.3f}")
    print(f"{first}_over_{second}={medians[first] / medians[second]:.3f}")


def bootstrap_interval(pairs: list[tuple[list[float], list[float]]], draws: int = BOOTSTRAP_DRAWS) -> tuple[float, float]:
    """The 5th and 95th percentiles of the ratio of pooled medians over ``draws`` resamples: the
    repeats drawn with replacement (an arm's runs stay paired with the other's), then the steps
    of each run."""
    rng = random.Random(0)
    ratios = []
    for _ in range(draws):
        chosen = [rng.choice(pairs) for _ in pairs]
        a = [rng.choice(run) for run, _ in chosen for _ in run]
        b = [rng.choice(run) for _, run in chosen for _ in run]
        ratios.append(statistics.median(a) / statistics.median(b))
    ratios.sort()
    return ratios[int(0.05 * draws)], ratios[int(0.95 * draws) - 1]


def _pooled(repeats: list[list[float]]) -> list[float]:
    return [step for steps in repeats for step in steps]


if __name__ == "__main__":
    main()

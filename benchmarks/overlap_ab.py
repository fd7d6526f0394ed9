"""Interleaved A/B of the overlapped reduction (design §9.4): the end-to-end example's job with
the overlap on and off, run after run, so that both see the same machine.

    bash examples/e2e_train.sh --out OUT        # once: corpus, tokenizer cache, proposal
    .venv/bin/python benchmarks/overlap_ab.py --example OUT [--repeats 3] [--steps 8]

Each repeat runs ``hydraulis train`` on the example's proposal, corpus and settings (tiny, 4 CPU
processes) with ``--record-operations``, with the overlap and with ``--no-overlap-reduction``
(the overlap first in even repeats, second in odd ones). Over every step after each strategy's
first, it prints the median measured step time of each arm (pooled over the repeats), each
repeat's medians, the overlap arm's ``reduction_hidden_fraction``, each repeat's ratio, a 90 %
bootstrap interval of the pooled ratio (repeats drawn with replacement, then steps within each:
on a shared 2-core machine one run's median moves by ±15 %, so the interval says whether a
difference is resolved at all), where each arm's step went — the slowest pipeline's compute and
the rest (propagation, the exposed reduction, the update), pooled medians: what the overlap
takes out of the rest and what it adds to the compute (on a CPU whose cores the ranks fill, the
two cancel: the exchange's work only moves) — and as the last line::

    overlap_over_no_overlap=<median step with the overlap / median step without>
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

from hydraulis.artifacts.train_log import read_train_log
from hydraulis.cli.output import table

ARMS = {"overlap": [], "no_overlap": ["--no-overlap-reduction"]}
BOOTSTRAP_DRAWS = 2000
"""Resamples behind the ratio's interval (seeded: the same steps give the same interval)."""


def run_arm(example: Path, out: Path, extra: list[str], steps: int) -> tuple[list[float], list[float], float | None]:
    """The warm steps' measured ms, their slowest pipeline's compute ms and the summary's hidden
    fraction of one training run."""
    command = [sys.executable, "-m", "hydraulis", "train", "--model", "tiny", "--proposal", str(example / "proposal.json"),
               "--corpus", str(example / "corpus.jsonl"), "--cache-dir", str(example / "cache"), "--steps", str(steps),
               "--nproc", "4", "--device", "cpu", "--token-budget", "2048", "--max-seq-len", "512",
               "--record-operations", "--output-dir", str(out), *extra]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    records = read_train_log(out / "train_log.json")
    seen, warm, compute = set(), [], []
    for record in records:
        if record.strategy in seen:
            warm.append(record.step_ms)
            compute.append(max(record.measured_ms))
        seen.add(record.strategy)
    fraction = next((line.split("reduction_hidden_fraction=")[1].split()[0] for line in done.stdout.splitlines()
                     + done.stderr.splitlines() if "reduction_hidden_fraction=" in line), None)
    return warm, compute, float(fraction) if fraction else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--example", type=Path, required=True, help="OUT of a finished examples/e2e_train.sh run")
    parser.add_argument("--repeats", type=int, default=3, help="A/B pairs (default 3)")
    parser.add_argument("--steps", type=int, default=8, help="training steps per run (default 8)")
    args = parser.parse_args()
    runs = {arm: [] for arm in ARMS}
    computes = {arm: [] for arm in ARMS}
    rows, load = [], os.getloadavg()[0]
    for repeat in range(args.repeats):
        for arm in list(ARMS) if repeat % 2 == 0 else list(reversed(ARMS)):
            steps, compute, fraction = run_arm(args.example, args.example / "ab" / f"{arm}-{repeat}", ARMS[arm],
                                               args.steps)
            runs[arm].append(steps)
            computes[arm].extend(compute)
            rows.append([repeat, arm, len(steps), round(statistics.median(steps), 1),
                         round(statistics.median(compute), 1), "" if fraction is None else round(fraction, 2)])
    print(f"1-minute load average {load:.2f} before, {os.getloadavg()[0]:.2f} after ({os.cpu_count()} cores)")
    print(where_the_step_went(runs, computes))
    report(("repeat", "arm", "warm_steps", "median_step_ms", "median_compute_ms", "reduction_hidden_fraction"),
           rows, runs)


def where_the_step_went(runs: dict[str, list[list[float]]], computes: dict[str, list[float]]) -> str:
    """Per arm, the pooled medians of the slowest pipeline's compute and of the rest of the step
    (step − compute, step by step), and what the overlap moved between them."""
    parts = {arm: (statistics.median(computes[arm]),
                   statistics.median(s - c for s, c in zip(_pooled(runs[arm]), computes[arm]))) for arm in runs}
    (on_compute, on_rest), (off_compute, off_rest) = parts["overlap"], parts["no_overlap"]
    return ("where the step went (pooled medians): "
            + ", ".join(f"{arm} compute {c:.1f} + rest {r:.1f} ms" for arm, (c, r) in parts.items())
            + f"; the overlap took {off_rest - on_rest:.1f} ms out of the rest and added {on_compute - off_compute:.1f} "
              "ms to the compute")


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

"""How close the cost model's predictions are to what the runtime measures, per operation and per step.

Runs the end-to-end example (``examples/e2e_train.sh --record-operations yes``: the tiny model
on 4 CPU processes, trained under a proposal and under a homogeneous baseline, both predicted
with the measured ``examples/spaces/tiny_cpu.json``) and compares, over every step after each
strategy's first (which also builds process groups and warms allocators:
``hydraulis/runtime/records.py``):

* **per operation** — each forward's and backward's measured duration (the stage's compute
  alone; waits for neighbours fall between operations) against ``φ·t_j`` and ``(1 − φ)·t_j``,
  ``t_j`` the plan's per-stage time of micro-batch ``j``;
* **per pipeline** — the measured compute time of each pipeline (slowest rank) against the
  plan's exact 1F1B prediction;
* **per step** — the measured step time against the plan's predicted step time.

For each: the median and the 90th percentile (nearest rank) of the measured time, the
predicted time and their ratio measured / predicted. The figures are measured on this machine
now; on a loaded machine the measured times are inflated.

    python benchmarks/fidelity.py [--out out/fidelity] [--steps 8] [--reuse]
"""
from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import numpy as np

from hydraulis.artifacts import read_proposal
from hydraulis.artifacts.train_log import read_train_log
from hydraulis.cli.output import table
from hydraulis.cost.pipeline import Phase
from hydraulis.runtime.records import StepRecord

ROOT = Path(__file__).resolve().parents[1]
RUNS = (("proposal", "hydraulis"), ("baseline", "baseline"))
"""(label, folder of the train log under the example's output)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "out" / "fidelity"), help="the example's output folder")
    parser.add_argument("--steps", type=int, default=8, help="training steps of each run (default 8)")
    parser.add_argument("--reuse", action="store_true", help="read the train logs already in --out, run nothing")
    args = parser.parse_args()
    out = Path(args.out)
    if not args.reuse:
        subprocess.run(["bash", str(ROOT / "examples" / "e2e_train.sh"), "--out", str(out), "--steps", str(args.steps),
                        "--record-operations", "yes"], check=True)
    phi = read_proposal(out / "proposal.json").pipeline_model.forward_fraction
    rows = []
    for label, folder in RUNS:
        steps = warm_steps(read_train_log(out / folder / "train_log.json"))
        for level, pairs in (("forward", operation_pairs(steps, Phase.FORWARD, phi)),
                             ("backward", operation_pairs(steps, Phase.BACKWARD, phi)),
                             ("pipeline", [(m, p) for r in steps for m, p in zip(r.measured_ms, r.predicted_ms)]),
                             ("step", [(r.step_ms, r.predicted_step_ms) for r in steps])):
            rows.append([label, level, len(pairs), *figures(pairs)])
    print(f"measured vs predicted (φ = {phi:.3f}), steps after each strategy's first; {out}")
    print(table(("run", "level", "count", "measured_med", "measured_p90", "predicted_med", "predicted_p90",
                 "ratio_med", "ratio_p90"), rows))


def warm_steps(records: tuple[StepRecord, ...]) -> list[StepRecord]:
    """The steps that are not the first of their strategy in the run."""
    seen, warm = set(), []
    for record in records:
        if record.strategy in seen:
            warm.append(record)
        seen.add(record.strategy)
    return warm


def operation_pairs(records: list[StepRecord], phase: Phase, phi: float) -> list[tuple[float, float]]:
    """(measured, predicted) duration of every recorded operation of ``phase``."""
    share = phi if phase is Phase.FORWARD else 1.0 - phi
    return [(op.end - op.start, share * pipeline.micro_batch_ms[op.micro_batch])
            for record in records for pipeline in record.operations for op in pipeline.ops if op.phase is phase]


def figures(pairs: list[tuple[float, float]]) -> list[float | str]:
    """Median and p90 of measured, predicted and measured / predicted."""
    if not pairs:
        return ["n/a"] * 6
    measured, predicted = np.array(pairs).T
    return [value for series in (measured, predicted, measured / predicted)
            for value in (round(float(np.median(series)), 3), round(_p90(series), 3))]


def _p90(values: np.ndarray) -> float:
    return float(np.percentile(values, 90, method="inverted_cdf"))


if __name__ == "__main__":
    main()

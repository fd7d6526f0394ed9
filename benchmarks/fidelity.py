"""How close the cost model's predictions are to what the runtime measures, per operation,
per pipeline and per step (issue 17's fidelity figure, issue 22's executed = simulated).

Runs the end-to-end example (``examples/e2e_train.sh --record-operations yes``: the tiny model
on 4 CPU processes, trained under a proposal and under a homogeneous baseline, both predicted
with the measured ``examples/spaces/tiny_cpu.json``) and, on the example's corpus, a run cycling
``--cycle`` strategies step by step; it compares, over every step after each strategy's first
(which also builds process groups and warms allocators: ``hydraulis/job/records.py``):

* **per operation** — each forward's and backward's measured duration (the stage's compute
  alone; waits for neighbours fall between operations) against ``φ·t_j`` and ``(1 − φ)·t_j``,
  ``t_j`` the plan's per-stage time of micro-batch ``j``;
* **per pipeline** — the measured compute time of each pipeline (slowest rank) against the
  plan's exact 1F1B prediction, also per scheme;
* **per step** — the measured step time against the plan's predicted step time.

For each: the median and the 90th percentile (nearest rank) of the measured time, the
predicted time, their ratio measured / predicted and the error |measured − predicted| /
measured. The figures are measured on this machine now; on a loaded machine the measured
times are inflated (the header prints the load average before and after). On a shared machine one run's figure is one draw: ``--repeats R`` runs the
example and the cycle ``R`` times (each into ``OUT/repeat-K``), pools every repeat's steps in
the tables and adds each repeat's median step error per run.

The committed space was measured on one machine; ``--profile DIR`` first measures
this one (``examples/profile_all_parallel_schemes.sh tiny DIR --statistic median``, ~4 minutes
on 2 cores) and predicts with it. The median of a point's micro-batches, not the profiler's
default minimum: the minimum is the right statistic for composing stages under interference
(design §5) but training runs its micro-batches with the node's jitter, and on a 2-core CPU
with 4 processes the minimum predicts steps 20–40 % short.

    python benchmarks/fidelity.py [--out out/fidelity] [--steps 8] [--cycle-steps 20] [--repeats 1]
                                  [--cycle '1,1,1x4;1,2,1x2;1,1,2+1,1,1x2'] [--space S | --profile DIR] [--reuse]
"""
from __future__ import annotations

import argparse
import os
import subprocess
from collections import defaultdict
from pathlib import Path

import numpy as np

from hydraulis.artifacts import read_proposal
from hydraulis.artifacts.train_log import read_train_log
from hydraulis.cli.output import table
from hydraulis.cost.pipeline import Phase
from hydraulis.job.records import StepRecord, pipeline_schemes

ROOT = Path(__file__).resolve().parents[1]
RUNS = (("proposal", "hydraulis"), ("baseline", "baseline"), ("cycle", "cycle"))
"""(label, folder of the train log under --out)."""
CYCLE = "1,1,1x4;1,2,1x2;1,1,2+1,1,1x2"
HEADER = ("run", "level", "count", "measured_med", "measured_p90", "predicted_med", "predicted_p90",
          "ratio_med", "ratio_p90", "error_med", "error_p90")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "out" / "fidelity"), help="the example's output folder")
    parser.add_argument("--steps", type=int, default=8, help="training steps of the example's runs (default 8)")
    parser.add_argument("--cycle-steps", type=int, default=20, help="steps of the cycling run (default 20; 0: none)")
    parser.add_argument("--cycle", default=CYCLE, help=f"strategies the cycling run cycles, ';'-separated ({CYCLE})")
    parser.add_argument("--space", default=str(ROOT / "examples" / "spaces" / "tiny_cpu.json"),
                        help="scheme space predicting every run (default: examples/spaces/tiny_cpu.json)")
    parser.add_argument("--profile", metavar="DIR", help="first profile this machine into DIR (median statistic) "
                        "and predict with DIR/space.json instead of --space")
    parser.add_argument("--repeats", type=int, default=1,
                        help="run the example and the cycle this many times, each into OUT/repeat-K, and pool "
                             "their steps (default 1: once, into OUT)")
    parser.add_argument("--reuse", action="store_true", help="read the train logs already in --out, run nothing")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats: {args.repeats} must be >= 1")
    out = Path(args.out)
    folders = [out] if args.repeats == 1 else [out / f"repeat-{k}" for k in range(1, args.repeats + 1)]
    if args.profile and not args.reuse:
        args.space = profile(Path(args.profile))
    load = os.getloadavg()[0]
    if not args.reuse:
        for folder in folders:
            run_example(folder, args.steps, args.space)
            if args.cycle_steps:
                run_cycle(folder, args.cycle_steps, args.cycle.split(";"), args.space)
    phi = read_proposal(folders[0] / "proposal.json").pipeline_model.forward_fraction
    rows, schemes, repeats = [], [], []
    for label, name in RUNS:
        logs = [folder / name / "train_log.json" for folder in folders]
        if not all(log.exists() for log in logs) or (label == "cycle" and not args.reuse and not args.cycle_steps):
            continue
        runs = [warm_steps(read_train_log(log)) for log in logs]
        repeats += [[label, k, len(run), *step_errors(run)] for k, run in enumerate(runs, start=1)]
        steps = [record for run in runs for record in run]
        for level, pairs in (("forward", operation_pairs(steps, Phase.FORWARD, phi)),
                             ("backward", operation_pairs(steps, Phase.BACKWARD, phi)),
                             ("pipeline", [(m, p) for r in steps for m, p in zip(r.measured_ms, r.predicted_ms)]),
                             ("step", [(r.step_ms, r.predicted_step_ms) for r in steps])):
            rows.append([label, level, len(pairs), *figures(pairs)])
        schemes += [[label, scheme, len(pairs), *figures(pairs)] for scheme, pairs in pipeline_pairs(steps).items()]
    print(f"measured vs predicted (φ = {phi:.3f}), steps after each strategy's first; {out}"
          + (f", {len(folders)} repeats pooled" if len(folders) > 1 else "")
          + f"; 1-minute load average {load:.2f} before, {os.getloadavg()[0]:.2f} after ({os.cpu_count()} cores)")
    print(table(HEADER, rows))
    print("\nper pipeline, by scheme")
    print(table(("run", "scheme", *HEADER[2:]), schemes))
    if len(folders) > 1:
        print("\nstep error per repeat")
        print(table(("run", "repeat", "steps", "error_med", "error_p90"), repeats))


def profile(folder: Path) -> str:
    """This machine's space of the tiny model, each point the median of its micro-batches."""
    subprocess.run(["bash", str(ROOT / "examples" / "profile_all_parallel_schemes.sh"), "tiny", str(folder),
                    "--statistic", "median"], check=True)
    return str(folder / "space.json")


def run_example(out: Path, steps: int, space: str) -> None:
    """``examples/e2e_train.sh`` with operations recorded."""
    subprocess.run(["bash", str(ROOT / "examples" / "e2e_train.sh"), "--out", str(out), "--steps", str(steps),
                    "--space", space, "--record-operations", "yes"], check=True)


def run_cycle(out: Path, steps: int, strategies: list[str], space: str) -> None:
    """``hydraulis train`` cycling ``strategies`` on the example's corpus, batches packed by the
    dispatcher for each strategy as the example packs its proposal's."""
    proposal = read_proposal(out / "proposal.json")
    command = [str(ROOT / ".venv" / "bin" / "hydraulis"), "train", "--model", "tiny", "--corpus", str(out / "corpus.jsonl"),
               "--cache-dir", str(out / "cache"), "--steps", str(steps), "--nproc", str(proposal.devices),
               "--device", "cpu", "--token-budget", str(proposal.token_budget),
               "--max-seq-len", str(proposal.max_seq_len), "--space", space, "--record-operations",
               "--method", "dispatch_balanced_packing", "--output-dir", str(out / "cycle")]
    for strategy in strategies:
        command += ["--strategy", strategy]
    subprocess.run(command, check=True)


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


def pipeline_pairs(records: list[StepRecord]) -> dict[str, list[tuple[float, float]]]:
    """(measured, predicted) compute time of every pipeline, by its scheme."""
    pairs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for record in records:
        for scheme, measured, predicted in zip(pipeline_schemes(record.strategy), record.measured_ms,
                                               record.predicted_ms):
            pairs[str(scheme)].append((measured, predicted))
    return dict(sorted(pairs.items()))


def step_errors(records: list[StepRecord]) -> list[float | str]:
    """Median and p90 of |measured − predicted| / measured over the steps (the last two of :func:`figures`)."""
    return figures([(r.step_ms, r.predicted_step_ms) for r in records])[-2:]


def figures(pairs: list[tuple[float, float]]) -> list[float | str]:
    """Median and p90 of measured, predicted, measured / predicted and |measured − predicted| / measured."""
    if not pairs:
        return ["n/a"] * 8
    measured, predicted = np.array(pairs).T
    return [value for series in (measured, predicted, measured / predicted, np.abs(measured - predicted) / measured)
            for value in (round(float(np.median(series)), 3), round(_p90(series), 3))]


def _p90(values: np.ndarray) -> float:
    return float(np.percentile(values, 90, method="inverted_cdf"))


if __name__ == "__main__":
    main()

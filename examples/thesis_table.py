"""The table and the last line of ``examples/thesis.sh``: contenders trained on the same batches,
repeated, measured against each other and against the cost model.

Reads ``RUNS/<repeat>/<contender>/train_log.json`` (``hydraulis train --output-dir``). Figures
are taken over the **common warm steps**: the steps that are not the first of their strategy in
any contender's run of that repeat (a strategy's first step also creates its process groups and
lays out its weights: hundreds of ms on a CPU that no cost model charges; the same steps for
every contender, so the rates compare the same batches). Per contender and repeat ``r``::

    measured tokens/s   M_r = Σ n_t / Σ m_t        (m_t: the step's measured time, slowest rank)
    predicted tokens/s  P_r = Σ n_t / Σ p_t        (p_t: the plan's predicted step time)

and, over the repeats, the medians of ``M_r``, of the step times (median and p90 of all of them)
and of ``M_r / P_r``. The speed-ups are medians over the repeats of the paired ratios
``M_r(hydraulis) / M_r(other)`` (the contenders of a repeat ran one after the other, so they met
the same load), the predicted one ``P(hydraulis) / P(homogeneous)``.

    python examples/thesis_table.py RUNS --contenders hydraulis homogeneous fixed
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np

from hydraulis.artifacts.train_log import read_train_log
from hydraulis.cli.output import table
from hydraulis.job.records import StepRecord


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, help="folder of the repeats (RUNS/<repeat>/<contender>/train_log.json)")
    parser.add_argument("--contenders", nargs=3, default=("hydraulis", "homogeneous", "fixed"),
                        help="folder names: Hydraulis, the homogeneous strategy, the same with fixed packing")
    args = parser.parse_args()
    repeats = sorted(p for p in args.runs.iterdir() if p.is_dir())
    logs = [{name: read_train_log(r / name / "train_log.json") for name in args.contenders} for r in repeats]
    warm = [common_warm_steps(run) for run in logs]
    rows, measured, predicted = [], {}, {}
    for name in args.contenders:
        chosen = [[rec for rec in run[name] if rec.step in steps] for run, steps in zip(logs, warm)]
        measured[name] = [rate(records, "step_ms") for records in chosen]
        predicted[name] = [rate(records, "predicted_step_ms") for records in chosen]
        times = np.array([rec.step_ms for records in chosen for rec in records])
        used = sorted({rec.strategy for rec in logs[0][name]})
        rows.append([name, f"{statistics.median(measured[name]):.0f}", f"{np.median(times):.0f}",
                     f"{np.percentile(times, 90, method='inverted_cdf'):.0f}",
                     f"{statistics.median(predicted[name]):.0f}",
                     f"{statistics.median(m / p for m, p in zip(measured[name], predicted[name])):.2f}",
                     " ".join(used)])
    print(f"{len(repeats)} repeats, {len(warm[0])} common warm steps of {len(logs[0][args.contenders[0]])} per run")
    print(table(("contender", "tokens/s", "step ms median", "step ms p90", "predicted tokens/s",
                 "measured/predicted tokens/s", "strategies"), rows))
    hydraulis, homogeneous, fixed = args.contenders
    print(f"measured_speedup_vs_homogeneous={paired(measured, hydraulis, homogeneous):.3f} "
          f"measured_speedup_vs_fixed={paired(measured, hydraulis, fixed):.3f} "
          f"predicted_speedup_vs_homogeneous={paired(predicted, hydraulis, homogeneous):.3f}")


def common_warm_steps(run: dict[str, tuple[StepRecord, ...]]) -> set[int]:
    """The steps that are not the first of their strategy in any contender's run."""
    steps = set.intersection(*({rec.step for rec in records} for records in run.values()))
    for records in run.values():
        seen: set[str] = set()
        for rec in records:
            if rec.strategy not in seen:
                steps.discard(rec.step)
            seen.add(rec.strategy)
    return steps


def rate(records: list[StepRecord], field: str) -> float:
    return sum(rec.tokens for rec in records) / (sum(getattr(rec, field) for rec in records) / 1e3)


def paired(rates: dict[str, list[float]], a: str, b: str) -> float:
    return statistics.median(x / y for x, y in zip(rates[a], rates[b]))


if __name__ == "__main__":
    main()

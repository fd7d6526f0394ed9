"""The mixed-cluster experiment (design §7.4): 16 A100-80G + 16 H100 (2 + 2 nodes of 8), LLaMA-13B,
200K tokens per step, 32K maximum, the long-tailed web-like workload — four contenders on the
same cost model and the same 100 held-out steps.

    .venv/bin/python paper_exp/mixed/run.py [--steps 100]

Runs ``hydraulis simulate --cluster examples/clusters/a100_h100.json …`` (its output in
``out/paper_exp/mixed/``, not committed) and writes ``paper_exp/mixed/results/``:
``table.md``/``table.csv`` (per contender: strategy, mean predicted step, ratio to the lower
bound, speed-up of the mixed planner over it), ``mixed_simulation.json`` (every step) and
``steps.png`` (mean step per contender against the bound; per-step ratios).
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = ROOT / "out" / "paper_exp" / "mixed"
RESULTS = HERE / "results"
CLUSTER = ROOT / "examples" / "clusters" / "a100_h100.json"
WORKLOAD = ROOT / "examples" / "data" / "longtail.txt"
SHORT = {"mixed_planner": "mixed planner", "type_segregated": "type-segregated", "flashflex": "FlashFlex-style",
         "homogeneous_fastest": "H100s alone"}
LABELS = {
    "mixed_planner": "mixed planner (Hydraulis dispatch)",
    "type_segregated": "type-segregated pipelines (Hydraulis dispatch)",
    "flashflex": "FlashFlex-style: cross-type staged pipelines, fixed packing",
    "homogeneous_fastest": "best homogeneous strategy on the H100s alone",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100, help="held-out steps (default 100)")
    args = parser.parse_args()
    started = time.perf_counter()
    command = [sys.executable, "-m", "hydraulis", "simulate", "--cluster", str(CLUSTER.relative_to(ROOT)),
               "--model", "llama-13b", "--lengths", str(WORKLOAD.relative_to(ROOT)), "--token-budget", "200000",
               "--max-seq-len", "32768", "--steps", str(args.steps), "--planner-steps", "16",
               "-o", str(OUT.relative_to(ROOT))]
    subprocess.run(command, check=True, cwd=ROOT)
    RESULTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(OUT / "mixed_simulation.json", RESULTS / "mixed_simulation.json")
    document = json.loads((RESULTS / "mixed_simulation.json").read_text())
    write_table(document)
    draw(document)
    print(f"wrote {RESULTS}/table.md, table.csv, steps.png, mixed_simulation.json in "
          f"{time.perf_counter() - started:.0f} s wall")


def write_table(document: dict) -> None:
    contenders = document["contenders"]
    planner = next(c for c in contenders if c["name"] == "mixed_planner")
    bound = document["bound"]
    rows = [[c["name"], c["strategy"].replace("|", "\\|"), f"{c['mean_ms']:.1f}", f"{c['ratio']:.3f}",
             f"{c['mean_ms'] / planner['mean_ms']:.3f}", f"{c['exact_mean_ms']:.1f}", f"{c['exact_ratio']:.3f}",
             f"{c['exact_mean_ms'] / planner['exact_mean_ms']:.3f}"] for c in contenders]
    headers = ["contender", "strategy", "mean step (ms)", "ratio to bound", "mixed planner's speed-up",
               "exact staged step (ms)", "exact ratio", "exact speed-up"]
    with open(RESULTS / "table.csv", "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([headers, *([r[0], r[1].replace("\\|", "|"), *r[2:]] for r in rows)])
    config = document["config"]
    lines = [
        f"# Mixed cluster: 16 A100-80G + 16 H100, LLaMA-13B, {config['planner']['token_budget']} tokens per step, "
        f"{config['planner']['max_seq_len']} maximum, {config['steps']} held-out steps",
        "",
        "Predicted by the cost model (design §7.4; analytic scheme spaces of both device types). Mean step: the "
        "dispatcher's prediction, every stage of a pipeline charged its bottleneck stage's time; exact staged step: "
        "the same plans on the exact 1F1B schedule with each stage at its own time. Lower bound per "
        "step = max(work over the cluster's aggregate speed, longest sequence on its fastest pipeline) "
        f"(`hydraulis/cost/mixed_bound.py`): mean {bound['mean_ms']:.1f} ms; work term "
        f"{np.mean(bound['work_ms']):.1f} ms, longest-sequence term {np.mean(bound['longest_ms']):.1f} ms.",
        "",
        "| " + " | ".join(headers) + " |",
        "|" + "---|" * len(headers),
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
        f"Planning: {document['planning_ms'] / 1e3:.1f} s (both planners, 16 sampled steps). Regenerate: "
        "`.venv/bin/python paper_exp/mixed/run.py`.",
    ]
    (RESULTS / "table.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def draw(document: dict) -> None:
    contenders = document["contenders"]
    bound = np.array(document["bound"]["work_ms"])
    bound = np.maximum(bound, np.array(document["bound"]["longest_ms"]))
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    names = [c["name"] for c in contenders]
    left.bar(range(len(names)), [c["mean_ms"] for c in contenders], color=["tab:blue", "tab:orange", "tab:green",
                                                                            "tab:red"][:len(names)])
    left.axhline(bound.mean(), color="black", linestyle="--", label=f"lower bound (mean) {bound.mean():.0f} ms")
    left.set_xticks(range(len(names)), [SHORT[n] for n in names])
    left.set_ylabel("mean predicted step (ms)")
    left.legend()
    for c in contenders:
        ratios = np.sort(np.array(c["step_ms"]) / bound)
        right.plot(ratios, np.linspace(0, 1, ratios.size), label=LABELS[c["name"]])
    right.set_xlabel("predicted step / lower bound")
    right.set_ylabel("share of steps")
    right.legend(fontsize=8)
    figure.suptitle("16 A100-80G + 16 H100, LLaMA-13B, 200K tokens, 32K max, long-tailed workload")
    figure.tight_layout()
    figure.savefig(RESULTS / "steps.png", dpi=90)
    plt.close(figure)


if __name__ == "__main__":
    main()

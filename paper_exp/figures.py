"""Figures from ``paper_exp/results/runs.csv`` into paper_exp/results/:

* ``speedup_megatron.png`` — Hydraulis' speed-up over the best homogeneous strategy with fixed
  packing (Megatron-LM style) per model, cluster and workload, against the paper's 1.32–2.66×;
* ``speedup_heatmap.png`` — the speed-up over every contender in every setting;
* ``planning_latency.png`` — per-step dispatch latency (median, p90) and proposal wall time
  against the number of devices.

    .venv/bin/python paper_exp/figures.py
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from tables import BASELINES, PAPER_RANGE, RESULTS, load_runs  # noqa: E402

DPI = 90


def main() -> None:
    runs = load_runs()
    speedup_megatron(runs)
    speedup_heatmap(runs)
    planning_latency(runs)
    print(f"wrote {RESULTS / 'speedup_megatron.png'}, {RESULTS / 'speedup_heatmap.png'}, "
          f"{RESULTS / 'planning_latency.png'}")


def speedup_megatron(runs) -> None:
    rows = [c["homogeneous_fixed_packing"] for c in runs.values()]
    workloads = sorted({r["workload"] for r in rows})
    labels = list(dict.fromkeys(f"{r['model'].removeprefix('llama-')}\n{r['devices']}" for r in rows))
    figure, axes = plt.subplots(figsize=(max(8, 0.6 * len(labels) + 2), 4.5))
    axes.axhspan(*PAPER_RANGE, color="tab:green", alpha=0.12, label=f"paper: {PAPER_RANGE[0]}–{PAPER_RANGE[1]}×")
    axes.axhline(1.0, color="black", linewidth=0.8)
    width = 0.8 / len(workloads)
    for j, workload in enumerate(workloads):
        values = {f"{r['model'].removeprefix('llama-')}\n{r['devices']}": float(r["speedup"])
                  for r in rows if r["workload"] == workload}
        x = np.arange(len(labels)) + (j - (len(workloads) - 1) / 2) * width
        axes.bar(x, [values.get(label, np.nan) for label in labels], width, label=f"{workload} workload")
    axes.set_xticks(np.arange(len(labels)), labels, fontsize=8)
    axes.set_xlabel("model (LLaMA, B parameters) and devices")
    axes.set_ylabel("speed-up (ratio of mean step times)")
    axes.set_title("Hydraulis over the best homogeneous strategy with fixed packing (Megatron-LM style), simulated")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(RESULTS / "speedup_megatron.png", dpi=DPI)
    plt.close(figure)


def speedup_heatmap(runs) -> None:
    settings = list(runs)
    values = np.array([[float(runs[s][b]["speedup"]) for b in BASELINES] for s in settings])
    figure, axes = plt.subplots(figsize=(10, 0.32 * len(settings) + 2.5))
    image = axes.imshow(np.log(values), cmap="viridis", aspect="auto")
    for i in range(len(settings)):
        for j in range(len(BASELINES)):
            axes.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=7,
                      color="white" if np.log(values[i, j]) < np.log(values).max() * 0.6 else "black")
    axes.set_xticks(range(len(BASELINES)), list(BASELINES), rotation=30, ha="right", fontsize=8)
    axes.set_yticks(range(len(settings)), settings, fontsize=7)
    axes.set_title("Hydraulis' speed-up over each contender (simulated)")
    figure.colorbar(image, ax=axes, label="log speed-up")
    figure.tight_layout()
    figure.savefig(RESULTS / "speedup_heatmap.png", dpi=DPI)
    plt.close(figure)


def planning_latency(runs) -> None:
    rows = [c["hydraulis"] for c in runs.values()]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for (model, workload), marker in zip(sorted({(r["model"], r["workload"]) for r in rows}), "os^vD<>ph"):
        mine = sorted((r for r in rows if (r["model"], r["workload"]) == (model, workload)), key=lambda r: int(r["devices"]))
        devices = [int(r["devices"]) for r in mine]
        left.plot(devices, [float(r["planning_median_ms"]) for r in mine], marker=marker, label=f"{model} {workload}")
        left.plot(devices, [float(r["planning_p90_ms"]) for r in mine], marker=marker, linestyle=":", color=left.lines[-1].get_color())
        right.plot(devices, [float(r["proposal_wall_s"]) for r in mine], marker=marker, label=f"{model} {workload}")
    for axes in (left, right):
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set_xlabel("devices")
    left.set_ylabel("dispatch per step (ms): median solid, p90 dotted")
    left.set_title("per-step planning (reference system: 20–40 s on 64 GPUs)", fontsize=9)
    right.set_ylabel("proposal wall time (s)")
    right.set_title("proposal (reference system: 169–634 s)", fontsize=9)
    left.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(RESULTS / "planning_latency.png", dpi=DPI)
    plt.close(figure)


if __name__ == "__main__":
    main()

"""Pictures of a simulation: predicted step time of every contender over the steps, the
distribution of Hydraulis' per-step planning time, and how often each proposal strategy ran."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from hydraulis.base.files import atomic_path  # noqa: E402
from hydraulis.simulation import Contender, ContenderSummary, Family, Simulation  # noqa: E402

DPI = 100


def draw_simulation(simulation: Simulation, summaries: tuple[ContenderSummary, ...],
                    directory: str | Path) -> tuple[Path, ...]:
    """Write ``step_times.png``, ``planning_latency.png`` and ``strategy_usage.png``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = (directory / "step_times.png", directory / "planning_latency.png", directory / "strategy_usage.png")
    draw_step_times(simulation, summaries, paths[0])
    draw_planning_latency(simulation, paths[1])
    draw_strategy_usage(simulation, paths[2])
    return paths


def draw_step_times(simulation: Simulation, summaries: tuple[ContenderSummary, ...], path: Path) -> None:
    """One line per contender: predicted step time per simulated step (log scale)."""
    figure, axes = plt.subplots(figsize=(11, 5.5))
    steps = np.arange(len(simulation.steps))
    for run, summary in zip(simulation.runs, summaries):
        hydraulis = run.contender is Contender.HYDRAULIS
        axes.plot(steps, run.predicted_ms / 1e3, linewidth=2.2 if hydraulis else 1.0,
                  color="black" if hydraulis else None, linestyle="-" if run.contender.family is not Family.PROPOSAL
                  or hydraulis else ":",
                  label=f"{run.contender.value} ({summary.figures.mean_ms / 1e3:.2f} s mean, ×{summary.speedup:.2f})")
    axes.plot(steps, [s.work_bound_ms / 1e3 for s in simulation.steps], color="grey", linewidth=0.8,
              linestyle="--", label="work bound (design §6)")
    axes.set_yscale("log")
    axes.set_xlabel("simulated step")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_ylabel("predicted step time (s)")
    _suptitle(figure, _title(simulation) + " — ×: Hydraulis' speed-up over it")
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=DPI)
    plt.close(figure)


def draw_planning_latency(simulation: Simulation, path: Path) -> None:
    """Histogram of Hydraulis' per-step planning time, and every contender's median and spread."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    planning = simulation.run(Contender.HYDRAULIS).planning_ms
    left.hist(planning, bins=min(40, max(5, planning.size // 3)), color="tab:blue")
    median = float(np.median(planning))
    left.axvline(median, color="black", linestyle="--", label=f"median {median:.1f} ms")
    left.set_xlabel("planning time per step (ms)")
    left.set_ylabel("steps")
    left.yaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_title("Hydraulis dispatch, per step")
    left.legend()
    for y, run in enumerate(simulation.runs):
        low, middle, high = np.percentile(run.planning_ms, (10, 50, 90))
        right.errorbar([middle], [y], xerr=[[middle - low], [high - middle]], fmt="o", capsize=4)
    right.set_yticks(range(len(simulation.runs)), [run.contender.value for run in simulation.runs], fontsize=7)
    right.set_xlabel("planning time per step (ms): median, 10th–90th percentile")
    right.set_title("every contender")
    _suptitle(figure, _title(simulation))
    figure.tight_layout()
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=DPI)
    plt.close(figure)


def draw_strategy_usage(simulation: Simulation, path: Path) -> None:
    """Steps that ran each proposal strategy, or one synthesised for them, per contender that
    plans with the proposal."""
    strategies = simulation.proposal.strategies
    runs = [run for run in simulation.runs if run.contender.family is Family.PROPOSAL]
    figure, axes = plt.subplots(figsize=(11, 4.0 + 0.25 * len(strategies)))
    width = 0.8 / len(runs)
    bars = len(strategies) + 1
    for j, run in enumerate(runs):
        counts = np.bincount([o.strategy_index % bars for o in run.outcomes], minlength=bars)
        axes.bar(np.arange(bars) + j * width, counts, width, label=run.contender.value)
    axes.set_xticks(np.arange(bars) + 0.4 - width / 2,
                    [f"strategy {i}" for i in range(len(strategies))] + ["synthesised"])
    axes.set_ylabel("steps")
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.legend(fontsize=8)
    names = "\n".join(textwrap.shorten(f"{i}: {p.strategy}  (serves ({p.serves_from}, {p.serves_to}])", 150)
                      for i, p in enumerate(strategies))
    _suptitle(figure, _title(simulation) + " — strategy chosen per step")
    figure.text(0.01, 0.01, names, fontsize=7, va="bottom", family="monospace")
    figure.tight_layout(rect=(0, 0.03 + 0.03 * len(strategies), 1, 1))
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=DPI)
    plt.close(figure)


def _suptitle(figure, text: str) -> None:
    """``text`` as the figure's title, wrapped to the figure's width so that no part is cut."""
    figure.suptitle(textwrap.fill(text, width=int(figure.get_figwidth() * 11)), fontsize=11)


def _title(simulation: Simulation) -> str:
    proposal = simulation.proposal
    return (f"{proposal.model.name}, {proposal.devices} devices, {proposal.token_budget} tokens/step, "
            f"max {proposal.max_seq_len}, {len(simulation.steps)} steps")

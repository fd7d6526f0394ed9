"""The Gantt chart of a fused schedule: one row per device, one bar per task, coloured by model
(forward light, backward dark), idle time hatched grey; the dashed line is the lower bound."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from hydraulis.base.files import atomic_path  # noqa: E402
from hydraulis.cost.order import Phase  # noqa: E402
from hydraulis.fused.problem import FusedProblem  # noqa: E402
from hydraulis.fused.schedule import FusedSchedule  # noqa: E402

MODEL_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red")


def draw_fused_gantt(problem: FusedProblem, schedule: FusedSchedule, path: str | Path, title: str = "") -> None:
    """Write the chart of ``schedule`` to ``path`` (PNG)."""
    rows: dict[int, list] = {d: [] for d in range(problem.devices)}
    for task in schedule.tasks:
        rows[task.device].append(task)
    figure, axes = plt.subplots(figsize=(14, max(3.0, 0.35 * problem.devices + 1.5)))
    for device, tasks in rows.items():
        tasks.sort(key=lambda t: t.start_ms)
        idle, cursor = [], 0.0
        for task in tasks:
            if task.start_ms > cursor:
                idle.append((cursor, task.start_ms - cursor))
            cursor = max(cursor, task.end_ms)
        if schedule.makespan_ms > cursor:
            idle.append((cursor, schedule.makespan_ms - cursor))
        axes.broken_barh(idle, (device - 0.4, 0.8), facecolors="whitesmoke", edgecolor="grey", hatch="///",
                         linewidth=0.2)
        for model in range(len(problem.models)):
            colour = MODEL_COLOURS[model % len(MODEL_COLOURS)]
            for phase, alpha in ((Phase.FORWARD, 0.45), (Phase.BACKWARD, 1.0)):
                bars = [(t.start_ms, t.end_ms - t.start_ms) for t in tasks if t.model == model and t.phase is phase]
                axes.broken_barh(bars, (device - 0.4, 0.8), facecolors=colour, alpha=alpha, edgecolor="black",
                                 linewidth=0.15)
    axes.axvline(schedule.lower_bound_ms, color="black", linestyle="--", linewidth=1.0)
    axes.set_yticks(range(problem.devices))
    axes.set_yticklabels([f"device {d}" for d in range(problem.devices)], fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel("ms (forward light, backward dark; hatched: idle; dashed: lower bound)")
    handles = [Patch(color=MODEL_COLOURS[k % len(MODEL_COLOURS)], label=f"{m.name}, {m.placement.value} placement")
               for k, m in enumerate(problem.models)] + [Patch(facecolor="whitesmoke", hatch="///", label="idle")]
    axes.legend(handles=handles, loc="upper right", fontsize=7)
    axes.set_title(title or f"fused makespan {schedule.makespan_ms:.1f} ms, lower bound {schedule.lower_bound_ms:.1f}, "
                            f"sequential {schedule.sequential_ms:.1f} (×{schedule.sequential_ms / schedule.makespan_ms:.2f}),"
                            f" peak memory {schedule.peak_memory:g}")
    figure.tight_layout()
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=100)
    plt.close(figure)

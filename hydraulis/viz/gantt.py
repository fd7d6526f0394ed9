"""The exact 1F1B timeline of a step plan: one row per pipeline stage, one bar per forward
(light) and backward (dark) of each micro-batch, coloured by micro-batch, as
:func:`hydraulis.dispatch.pipeline_timelines` schedules them; the step's slowest pipeline ends at the
dashed line (the gradient reduction that follows is not drawn)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from hydraulis.base.files import atomic_path  # noqa: E402
from hydraulis.base.types import Proposal, StepPlan  # noqa: E402
from hydraulis.cost.pipeline import Phase  # noqa: E402
from hydraulis.dispatch import pipeline_timelines  # noqa: E402

ROW_INCHES = 0.28
MAX_INCHES = 60.0


def draw_gantt(plan: StepPlan, proposal: Proposal, path: str | Path) -> None:
    """Write the timeline of every pipeline and stage of ``plan`` to ``path`` (PNG)."""
    rows, labels = [], []
    for p, (pipeline, timeline) in enumerate(zip(plan.pipelines, pipeline_timelines(plan, proposal))):
        for stage in range(pipeline.scheme.pp):
            rows.append([op for op in timeline.ops if op.stage == stage])
            labels.append(f"p{p} {pipeline.scheme} s{stage}")
    height = min(MAX_INCHES, max(3.0, ROW_INCHES * len(rows) + 1.5))
    figure, axes = plt.subplots(figsize=(14, height))
    colours = plt.get_cmap("tab10")
    for y, ops in enumerate(rows):
        for op in ops:
            forward = op.phase is Phase.FORWARD
            axes.broken_barh([(op.start, op.end - op.start)], (y - 0.4, 0.8), facecolors=colours(op.micro_batch % 10),
                             alpha=0.45 if forward else 1.0, edgecolor="black", linewidth=0.2)
    slowest = max((p.predicted_ms for p in plan.pipelines), default=0.0)
    axes.axvline(slowest, color="black", linestyle="--", linewidth=1.0)
    axes.set_yticks(range(len(rows)))
    axes.set_yticklabels(labels, fontsize=7 if len(rows) < 80 else 4)
    axes.invert_yaxis()
    axes.set_xlabel("ms (forward light, backward dark; colour = micro-batch)")
    which = "synthesised strategy" if plan.synthesis else f"strategy {plan.strategy_index}"
    axes.set_title(f"{which}: {plan.strategy(proposal)} — {plan.method.value}, "
                   f"predicted {plan.predicted_ms:.1f} ms (pipelines {slowest:.1f} ms)")
    figure.tight_layout()
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=100)
    plt.close(figure)

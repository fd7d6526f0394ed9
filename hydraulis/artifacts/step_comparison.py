"""The step-comparison document (``POST /v1/step-comparisons``, the plan explorer's sampled step).

Layout (``schema_version`` 1)::

    {"schema_version": 1, "kind": "step_comparison", "seed", "lengths": [...], "tokens",
     "work_bound_ms", "plan": {<step plan, :mod:`.step_plan`>},
     "timelines": [{"makespan_ms", "micro_batch_ms": [...],
                    "ops": {"stage": [...], "micro_batch": [...], "phase": ["F" | "B", ...],
                            "start_ms": [...], "end_ms": [...]}}],
     "contenders": [{"name", "label", "family", "method", "strategy", "predicted_ms",
                     "lower_bound_ms", "speedup"}]}

``timelines[p]`` is pipeline ``p`` of ``plan.pipelines``: its micro-batches' per-stage times
and every forward (``F``) and backward (``B``) of its exact 1F1B schedule, one column per
field (index ``i`` of every column is operation ``i``; ``micro_batch`` indexes the pipeline's
``micro_batches``); ``speedup`` is Hydraulis' over the contender on this step.
"""

from __future__ import annotations

from hydraulis.artifacts.step_plan import step_plan_to_dict
from hydraulis.cost import PipelineTimeline
from hydraulis.simulation import ContenderStep, StepComparison

KIND = "step_comparison"
SCHEMA_VERSION = 1


def step_comparison_to_dict(comparison: StepComparison) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "seed": comparison.seed,
        "lengths": list(comparison.lengths),
        "tokens": sum(comparison.lengths),
        "work_bound_ms": comparison.work_bound_ms,
        "plan": step_plan_to_dict(comparison.plan),
        "timelines": [_timeline_to_dict(t, times) for t, times in zip(comparison.timelines, comparison.micro_batch_ms)],
        "contenders": [_contender_to_dict(c) for c in comparison.contenders],
    }


def _timeline_to_dict(timeline: PipelineTimeline, micro_batch_ms: tuple[float, ...]) -> dict:
    ops = timeline.ops
    return {
        "makespan_ms": timeline.makespan_ms,
        "micro_batch_ms": list(micro_batch_ms),
        "ops": {"stage": [op.stage for op in ops], "micro_batch": [op.micro_batch for op in ops],
                "phase": [op.phase.value for op in ops], "start_ms": [op.start for op in ops],
                "end_ms": [op.end for op in ops]},
    }


def _contender_to_dict(step: ContenderStep) -> dict:
    contender = step.contender
    return {"name": contender.value, "label": contender.label, "family": contender.family.value,
            "method": contender.method.value, "strategy": step.strategy, "predicted_ms": step.predicted_ms,
            "lower_bound_ms": step.lower_bound_ms, "speedup": step.speedup}

"""A fused problem from two models' step plans: variable-length micro-batches.

Each step plan's pipelines become the replicas of one model (``S`` = their ``pp``, which must
agree; every pipeline stage is one fused "device", a group of ``cp·tp`` devices). Micro-batch
``j`` of pipeline ``r`` costs ``t = c + Σ_i (a·s_i² + b·s_i)`` per stage (design §6, the scheme
space's coefficients for the pipeline's scheme, lengths rounded up to the plan's alignment);
its forward takes ``φ·t`` and its backward ``(1 − φ)·t`` with the space's forward fraction φ.
It holds ``α·tokens / pp`` bytes on a stage (``α`` the scheme's activation bytes per token,
which covers the whole model). Both plans must use the same number of stages in total.

Worked example: a pipeline of scheme (1,1,2) with ``a = 0``, ``b = 0.01``, ``c = 1`` and
φ = 1/3 running a micro-batch of 300 tokens: ``t = 4`` ms, forward 1.33 ms, backward 2.67 ms.
"""

from __future__ import annotations

from collections.abc import Sequence

from hydraulis.base.errors import require
from hydraulis.base.types import SchemeSpace, StepPlan
from hydraulis.fused.problem import FusedModel, FusedProblem, Placement, fused_model


def problem_from_step_plans(plans: Sequence[StepPlan], spaces: Sequence[SchemeSpace],
                            placements: Sequence[Placement] = (Placement.FORWARD, Placement.REVERSE),
                            names: Sequence[str] = ("model_a", "model_b")) -> FusedProblem:
    """The fused problem of ``plans[i]`` timed with ``spaces[i]`` and placed by ``placements[i]``."""
    require(len(plans) == len(spaces) == len(placements) == len(names), "step_plans", len(plans),
            f"needs one scheme space, placement and name each ({len(spaces)}, {len(placements)}, {len(names)})")
    models = tuple(_model(i, plan, space, placement, name)
                   for i, (plan, space, placement, name) in enumerate(zip(plans, spaces, placements, names)))
    devices = {m.stages * m.replicas for m in models}
    require(len(devices) == 1, "step_plans", [m.stages * m.replicas for m in models],
            "must use the same number of pipeline stages in total")
    return FusedProblem(devices.pop(), models)


def _model(index: int, plan: StepPlan, space: SchemeSpace, placement: Placement, name: str) -> FusedModel:
    field = f"step_plans[{index}]"
    stages = {p.scheme.pp for p in plan.pipelines}
    require(len(stages) == 1, f"{field}.pipelines", sorted(stages), "must all have the same pp to be fused")
    pp = stages.pop()
    phi = space.pipeline_model.forward_fraction
    forward, backward, memory = [], [], []
    for r, pipeline in enumerate(plan.pipelines):
        require(len(pipeline.micro_batches) > 0, f"{field}.pipelines[{r}].micro_batches", 0, "must not be empty")
        profile = space.profile(pipeline.scheme)
        lengths = [[-(-s // plan.alignment) * plan.alignment for s in mb.lengths] for mb in pipeline.micro_batches]
        times = [profile.time.microbatch_ms(mb) for mb in lengths]
        forward.append([phi * t for t in times])
        backward.append([(1.0 - phi) * t for t in times])
        memory.append([profile.activation_bytes_per_token * sum(mb) / pp for mb in lengths])
    return fused_model(name, pp, len(plan.pipelines), placement, [len(row) for row in forward], forward, backward,
                       memory)

"""Steps assigned for any runtime: per rank its micro-batches as the user's sample ids, the
strategy that runs the step, the predicted times and each stage's decoder layers (the
``step_assignments`` artifact, ``hydraulis/resources/step_assignments.schema.json``).

Stage ``σ`` of a pipeline of scheme ``(cp, tp, pp)`` runs layers ``[L_σ, L_σ + l_σ)``, ``l`` the
scheme's split of the model's ``L`` layers (:meth:`~hydraulis.base.scheme.Scheme.stage_layers`),
``L_σ = Σ_{σ'<σ} l_σ'``; e.g. 32 layers on ``pp = 2``: ``[0, 16)`` and ``[16, 32)``. A rank's
predicted time is its pipeline's (every rank of a pipeline runs its micro-batches), the
step's is the plan's (the slowest pipeline and the exposed reduction). With ``single_strategy``
every step runs one strategy of the proposal — the one whose summed predicted time over the
steps is least — and none is synthesised: for runtimes that cannot switch strategies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import accumulate, pairwise

import numpy as np

from hydraulis.base.errors import HydraulisError, require, require_int
from hydraulis.base.step_plan import StepPlan
from hydraulis.base.strategy import Proposal
from hydraulis.base.types import BatchingMethod
from hydraulis.dispatch.assignments import StepAssignments, step_assignments
from hydraulis.dispatch.options import DispatchOptions
from hydraulis.dispatch.synthesis import Synthesise, SynthesisOptions, plan_step

SampleId = str | int
"""A sample's id as the user gave it (a line's text before the tab, a JSONL ``id``), or its position."""


@dataclass(frozen=True)
class Samples:
    """One step's samples: ``ids[i]`` has ``lengths[i]`` tokens; ids are unique."""

    ids: tuple[SampleId, ...]
    lengths: tuple[int, ...]

    def __post_init__(self) -> None:
        require(len(self.ids) == len(self.lengths) and len(self.ids) > 0, "samples", len(self.ids),
                f"must be at least one, with as many lengths ({len(self.lengths)})")
        for i, length in enumerate(self.lengths):
            require_int(length, f"samples[{i}].length", minimum=1)
        seen: set[SampleId] = set()
        for i, sample in enumerate(self.ids):
            require(isinstance(sample, (str, int)) and not isinstance(sample, bool), f"samples[{i}].id", sample,
                    "must be a string or an integer")
            require(sample not in seen, f"samples[{i}].id", sample, "repeats an id of this step")
            seen.add(sample)


@dataclass(frozen=True)
class AssignedStep:
    """Step ``step``'s assignments (indices into ``ids``), the strategy (``strategy_index`` the
    proposal's, ``None`` when synthesised), predicted times, and ``stage_layers[p][σ] = (first, end)``."""

    step: int
    ids: tuple[SampleId, ...]
    assignments: StepAssignments
    strategy_index: int | None
    strategy: str
    predicted_ms: float
    pipeline_ms: tuple[float, ...]
    stage_layers: tuple[tuple[tuple[int, int], ...], ...]

    def __post_init__(self) -> None:
        require_int(self.step, "step", minimum=0)
        require(len(self.ids) == len(self.assignments.lengths), "ids", len(self.ids),
                f"must name the {len(self.assignments.lengths)} sequences")
        pipelines = len(self.assignments.schemes)
        require(len(self.pipeline_ms) == pipelines and len(self.stage_layers) == pipelines, "pipelines",
                len(self.pipeline_ms), f"must give a time and layers for each of the {pipelines} pipelines")
        for p, (scheme, layers) in enumerate(zip(self.assignments.schemes, self.stage_layers)):
            require(len(layers) == scheme.pp, f"pipelines[{p}].stages", len(layers), f"must be the {scheme.pp} stages")
        require(math.isfinite(self.predicted_ms) and self.predicted_ms >= 0, "predicted_ms", self.predicted_ms,
                "must be a finite time")


def assign_steps(proposal: Proposal, steps: Sequence[Samples], method: BatchingMethod, options: DispatchOptions,
                 synthesis: SynthesisOptions, single_strategy: bool = False) -> tuple[AssignedStep, ...]:
    """Every step of ``steps`` planned and assigned (module docstring)."""
    require(len(steps) > 0, "steps", 0, "must hold at least one step")
    if not single_strategy:
        return tuple(_assigned(k, s, plan_step(proposal, _lengths(s), method, options, synthesis), proposal, None)
                     for k, s in enumerate(steps))
    require(synthesis.mode is Synthesise.OFF, "synthesise", synthesis.mode.value,
            "makes a strategy per step; a single strategy needs synthesis off")
    best: tuple[float, int, list[StepPlan]] | None = None
    for index in range(len(proposal.strategies)):
        only = replace(proposal, strategies=(proposal.strategies[index],))
        try:
            plans = [plan_step(only, _lengths(s), method, options, synthesis) for s in steps]
        except HydraulisError:
            continue
        total = sum(p.predicted_ms for p in plans)
        if best is None or total < best[0]:
            best = (total, index, plans)
    if best is None:
        raise HydraulisError("single_strategy", True, "no strategy of the proposal holds every step's sequences")
    _, index, plans = best
    return tuple(_assigned(k, s, plan, proposal, index) for k, (s, plan) in enumerate(zip(steps, plans)))


def _lengths(samples: Samples) -> np.ndarray:
    return np.asarray(samples.lengths, dtype=np.int64)


def _assigned(step: int, samples: Samples, plan: StepPlan, proposal: Proposal, fixed: int | None) -> AssignedStep:
    if fixed is not None:
        index, name = fixed, str(proposal.strategies[fixed].strategy)
    elif plan.synthesis is not None:
        index, name = None, str(plan.synthesis.strategy)
    else:
        index, name = plan.strategy_index, str(proposal.strategies[plan.strategy_index].strategy)
    assignments = step_assignments(plan, samples.lengths, proposal.devices)
    layers = []
    for scheme in assignments.schemes:
        counts = scheme.stage_layers(proposal.model.layers)
        starts = [0, *accumulate(counts)]
        layers.append(tuple(pairwise(starts)))
    return AssignedStep(step, samples.ids, assignments, index, name, float(plan.predicted_ms),
                        tuple(float(p.predicted_ms) for p in plan.pipelines), tuple(layers))
